/* SPDX-License-Identifier: MIT */
/*
 * uring.h - FUSE over io_uring: the kernel hands each request to a queue
 * of the CPU its caller runs on, and our threads for that queue, bound to
 * that CPU, answer it there. See uring.c for why and how.
 */
#ifndef LSQ_FUSE_URING_H
#define LSQ_FUSE_URING_H

#include <stdbool.h>
#include <stdint.h>

#include "lsq/source.h"

struct fuse_session;
struct lsq_uring;

/* For -o io_uring (on by default). Installs the reply hook on se (through
 * fuse_session_custom_io) and starts, for every CPU the daemon may run on
 * (its affinity), threads / those CPUs threads (at least 2, so one
 * waiting for the network leaves its CPU's callers another), and one for
 * each other possible CPU (the kernel wants every queue registered), which
 * register with the kernel once the session is initialised. Call after
 * fuse_session_mount() and any fork, before the /dev/fuse loop runs: that
 * loop still answers INIT, FORGET and INTERRUPT, and every request until
 * all queues are up. Returns NULL when the kernel does not offer FUSE over
 * io_uring (fuse module parameter enable_uring) or this build lacks
 * liburing, having said so if 'asked' (at debug level otherwise); the
 * mount then works over /dev/fuse, as it does when the kernel refuses the
 * rings' registration. Should the kernel refuse a ring command once the
 * rings carry requests (root switched enable_uring off under the mount),
 * no answer can reach their callers: a ring thread then logs one error
 * and ends the process (_exit), which aborts the connection. */
struct lsq_uring *lsq_uring_start(struct fuse_session *se, unsigned threads,
				  bool asked);

/* Whether lsq_uring_start() would find FUSE over io_uring: this build has
 * liburing and the kernel offers it (fuse module parameter enable_uring). */
bool lsq_uring_offered(void);

/* Call once the connection is gone (after fuse_session_unmount()): the
 * kernel then ends every pending fetch and the threads exit. Joins and
 * frees them. NULL is fine. */
void lsq_uring_stop(struct lsq_uring *u);

/* The listener for the long work of reads this thread answers
 * (lsq_long_work_fn): a ring thread in a sequential stream floats off its
 * CPU for it, so the stream's blocks decompress in parallel. NULL off the
 * ring threads. */
lsq_long_work_fn lsq_uring_long_work(void);

/* Ring threads the kernel holds an entry of, and requests they answered
 * (both 0 for NULL). Lock-free. */
void lsq_uring_get_stats(const struct lsq_uring *u, uint64_t *threads,
			 uint64_t *requests);

#endif
