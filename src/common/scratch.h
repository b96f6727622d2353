/* SPDX-License-Identifier: MIT */
/*
 * scratch.h - per-thread buffers reused from one request to the next.
 *
 * The read path needs a reply buffer and a compressed-block buffer per
 * request, each up to a block or a read in size. malloc'ing and freeing
 * those every time cost about 3% of a sequential read's CPU (glibc hands
 * such sizes back to the kernel and faults them in again). Each request
 * thread keeps one buffer per slot instead, freed when the thread exits.
 */
#ifndef LSQ_COMMON_SCRATCH_H
#define LSQ_COMMON_SCRATCH_H

#include <stddef.h>

enum lsq_scratch_slot {
	LSQ_SCRATCH_REPLY,  /* a FUSE reply being assembled */
	LSQ_SCRATCH_RAW,    /* a compressed block on its way to the codec */
	LSQ_SCRATCH_SLOTS
};

/* Largest buffer kept per slot: above it lsq_scratch() returns NULL and
 * the caller allocates for itself, so threads x slots bounds the memory. */
#define LSQ_SCRATCH_KEEP_MAX (1024u * 1024u)

/* This thread's buffer for slot, at least len bytes; valid until the
 * thread's next call for the same slot. NULL when len is over
 * LSQ_SCRATCH_KEEP_MAX or memory is short. */
void *lsq_scratch(enum lsq_scratch_slot slot, size_t len);

/* Lend this thread a buffer of cap bytes for slot: lsq_scratch() returns
 * it for any len up to cap (NULL ends the loan). FUSE ring threads lend
 * their ring entry's payload for replies, so a read decompresses straight
 * into the buffer the kernel copies the reply from. */
void lsq_scratch_lend(enum lsq_scratch_slot slot, void *buf, size_t cap);

#endif
