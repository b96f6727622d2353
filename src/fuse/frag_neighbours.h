/* SPDX-License-Identifier: MIT */
/*
 * frag_neighbours.h - which listed small files share a fragment block.
 *
 * Packers write a directory's small files into fragment blocks one after
 * another, and tree walkers (grep -r, tar, a module loader) read them in
 * that order, one FUSE READ each: a round trip between two processes,
 * 86-109 us across the CPUs of a small VM (docs/status.md). A listing
 * (READDIRPLUS) shows which files lie wholly in fragment block F; a READ
 * of one of them decompresses F; the page store then pushes the others'
 * bytes into their page caches, so their reads never reach the daemon.
 *
 * Bounded: LSQ_NB_SLOTS fragment blocks, direct-mapped by index (a later
 * block takes the slot of an earlier one), LSQ_NB_PER_SLOT files each;
 * locks striped by slot, and none taken by a read whose block has no
 * file left to hand out. Each file is handed out once per slot's life.
 */
#ifndef LSQ_FUSE_FRAG_NEIGHBOURS_H
#define LSQ_FUSE_FRAG_NEIGHBOURS_H

#include <stddef.h>
#include <stdint.h>

#include "lsq/image.h"

#define LSQ_NB_SLOTS 1024u
#define LSQ_NB_PER_SLOT 64u

struct lsq_frag_neighbour {
	uint64_t ino;         /* the FUSE node id */
	lsq_inode_ref ref;
};

struct lsq_frag_neighbours;

/* NULL when out of memory (then nothing is noted). */
struct lsq_frag_neighbours *lsq_frag_neighbours_new(void);
void lsq_frag_neighbours_free(struct lsq_frag_neighbours *nb);

/* A listed file lies wholly in fragment block frag. */
void lsq_frag_neighbours_note(struct lsq_frag_neighbours *nb, uint32_t frag,
			      uint64_t ino, lsq_inode_ref ref);

/* The files noted in frag and not handed out yet, but for `read` (which
 * counts as handed out): up to max into out; returns how many. */
size_t lsq_frag_neighbours_take(struct lsq_frag_neighbours *nb,
				uint32_t frag, uint64_t read,
				struct lsq_frag_neighbour *out, size_t max);

#endif
