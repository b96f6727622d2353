/* SPDX-License-Identifier: MIT */
/*
 * bufpool.h - the daemon's data buffers (cache blocks, HTTP chunks,
 * per-thread scratch), mapped outside malloc and recycled through a small
 * bounded pool.
 *
 * Why: with glibc's malloc, a buffer freed by one request thread goes back
 * to the arena that allocated it, and each of up to 8 x CPUs arenas keeps
 * what it once held, in holes between live blocks: reading everything
 * over HTTP with 16 threads, the daemon held 54-57 MiB more than its
 * configured caches, 76 MiB of it in 11 arenas. Mapping each buffer by
 * itself returns it to the kernel when freed, and charging the caches its
 * whole mapping keeps them within their budgets in real memory. Mapping
 * afresh every time costs a page fault per page (about 1.2 ms per MiB on
 * the bench VM), so a freed buffer waits in the pool for the next request
 * of about its size. The pool holds at most LSQ_BUFPOOL_CAP bytes, split
 * into per-CPU shards so that no lock is shared by every thread.
 */
#ifndef LSQ_COMMON_BUFPOOL_H
#define LSQ_COMMON_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

/* Buffers from this size up get a mapping of their own; smaller ones
 * (metadata blocks) come from malloc. Compressed blocks of 16-64 KiB are
 * common and fragmented the arenas most: with 64 KiB here the same run
 * was still 39-48 MiB over. */
#define LSQ_BUFPOOL_MIN ((size_t)16 << 10)

/* The most the pool keeps for reuse, over all shards. */
#define LSQ_BUFPOOL_CAP ((size_t)8 << 20)

/* At least len bytes, aligned to 64; NULL when memory is short. */
void *lsq_bufpool_alloc(size_t len);

/* Returns a buffer of lsq_bufpool_alloc(); NULL is fine. */
void lsq_bufpool_free(void *p);

/* What the buffer costs in memory: its mapping, header included. */
size_t lsq_bufpool_footprint(const void *p);

/* Bytes waiting in the pool now (takes each shard's lock: for stats). */
uint64_t lsq_bufpool_pooled_bytes(void);

#endif
