/* SPDX-License-Identifier: MIT */
/*
 * long_work.h - lets a thread hear that it is about to do work that takes
 * a while (reading from the source, decompressing a block).
 *
 * Why: a FUSE ring thread answers quick requests (a readdir from memory)
 * as SCHED_IDLE, so that its reply hands the CPU straight back to the
 * caller (fuse/uring.c, "Same-CPU handoff"). Decompression at that policy
 * would get almost no CPU next to a busy task on the same CPU, so the
 * thread raises itself back to SCHED_OTHER first, and only when needed:
 * the switch is a system call, and most requests of a metadata walk
 * read and decompress nothing. A read from the source counts too: a fetch
 * may wait for the network, and the thread should not wake from it at
 * SCHED_IDLE.
 */
#ifndef LSQ_COMMON_LONG_WORK_H
#define LSQ_COMMON_LONG_WORK_H

#include <stdbool.h>

/* Called on this thread before work that takes a while (done false) and
 * after it (done true); NULL: nobody listens. Set by the thread itself. */
extern _Thread_local void (*lsq_long_work_hook)(bool done);

static inline void lsq_long_work_ahead(void)
{
	if (lsq_long_work_hook)
		lsq_long_work_hook(false);
}

static inline void lsq_long_work_done(void)
{
	if (lsq_long_work_hook)
		lsq_long_work_hook(true);
}

#endif
