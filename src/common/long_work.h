/* SPDX-License-Identifier: MIT */
/*
 * long_work.h - lets a thread hear that it is about to do work that takes
 * a while (reading from the source, decompressing a block), and when that
 * work is done.
 *
 * Why: FUSE ring threads answer quick requests (a readdir from memory)
 * on the caller's CPU as SCHED_IDLE, so that the reply hands the CPU
 * straight back to the caller (fuse/sched_idle.h). Decompression at that
 * policy would get almost no CPU next to a busy task on the same CPU, so
 * the thread raises itself back to SCHED_OTHER first, and only when
 * needed: the switch is a system call, and most requests of a metadata
 * walk read and decompress nothing. A read from the source counts too: a
 * fetch may wait for the network, and the thread should not wake from it
 * at SCHED_IDLE. A ring thread goes SCHED_IDLE again at its commit
 * (fuse/uring.c). Threads of libfuse's /dev/fuse loop set no hook.
 */
#ifndef LSQ_COMMON_LONG_WORK_H
#define LSQ_COMMON_LONG_WORK_H

#include <stdbool.h>

/* A read from the source may wait for the network; a decompression
 * wants a CPU of its own. */
enum lsq_long_work { LSQ_WORK_READ, LSQ_WORK_DECOMPRESS };

/* Called on this thread before work that takes a while (done false) and
 * after it (done true); NULL: nobody listens. Set by the thread itself. */
extern _Thread_local void (*lsq_long_work_hook)(enum lsq_long_work what,
						bool done);

static inline void lsq_long_work_ahead(enum lsq_long_work what)
{
	if (lsq_long_work_hook)
		lsq_long_work_hook(what, false);
}

static inline void lsq_long_work_done(enum lsq_long_work what)
{
	if (lsq_long_work_hook)
		lsq_long_work_hook(what, true);
}

#endif
