/* SPDX-License-Identifier: MIT */
/*
 * long_work.h - lets a thread hear that it is about to do work that takes
 * a while (reading from the source, decompressing a block), and when that
 * work is done.
 *
 * Why: where a request thread runs matters only for such work. A FUSE
 * ring thread is bound to its queue's CPU, next to its callers; a READ
 * that goes on with a sequential stream lets it float to any CPU so that
 * the stream's blocks decompress in parallel (fuse/uring.c,
 * float_for_read). A worker of libfuse's /dev/fuse loop moves to a CPU
 * where none of ours decompresses (fuse/spread.h). Both act only here:
 * cached answers cost no system call.
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
