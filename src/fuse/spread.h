/* SPDX-License-Identifier: MIT */
/*
 * spread.h - decompressions of /dev/fuse workers go to a CPU where none
 * of ours runs.
 *
 * Why: the scheduler wakes a worker next to its waker (the reader, or the
 * thread that finished a fetch), so two readers' blocks often decompress
 * one after the other on one CPU while the other idles. A worker about to
 * decompress where another of ours already does binds itself, for that
 * decompression only, to an allowed CPU where none does. xz 4 KiB random
 * reads with 2 jobs, first second: 605-625 -> 653-678 IOPS locally,
 * 522-551 -> 556-614 over HTTP (2026-11-24, in the request loop that
 * libfuse's replaced); see docs/decisions.md for the figures since.
 */
#ifndef LSQ_FUSE_SPREAD_H
#define LSQ_FUSE_SPREAD_H

#include "lsq/source.h"

/* The listener for the long work of a libfuse worker's reads
 * (lsq_long_work_fn); NULL where the daemon may use only one CPU. */
lsq_long_work_fn lsq_spread_long_work(void);

#endif
