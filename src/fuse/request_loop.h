/* SPDX-License-Identifier: MIT */
/*
 * request_loop.h - the daemon's FUSE request loop: one leader thread reads
 * /dev/fuse and busy-polls it briefly before sleeping; quick requests are
 * answered by the leader itself; for a slow one it lets another thread read
 * on (a free reader already waiting, else a woken follower) and answers it.
 * See request_loop.c for why.
 */
#ifndef LSQ_FUSE_REQUEST_LOOP_H
#define LSQ_FUSE_REQUEST_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct fuse_session;

struct lsq_request_loop_options {
	unsigned max_threads;     /* >= 1 */
	unsigned busy_poll_us;    /* longest spin before sleeping, 0: none */
	/* Keep idle CPUs polling (CPU latency PM QoS) while requests come. */
	bool idle_poll;
	/* The leader answers quick requests on the caller's CPU as
	 * SCHED_IDLE (where allowed and more than one CPU is ours). */
	bool same_cpu;
	/* May the leader answer this opcode itself, without waking a
	 * follower? True only for requests answered from memory. NULL: no. */
	bool (*answer_inline)(void *ctx, uint32_t opcode);
	void *ctx;
};

/* Runs until the session exits (unmount, or a signal through libfuse's
 * handlers, which must be installed). Returns 0 on a clean stop, or a
 * negative errno when reading /dev/fuse failed. */
int lsq_request_loop_run(struct fuse_session *se,
			 const struct lsq_request_loop_options *opt);

#endif
