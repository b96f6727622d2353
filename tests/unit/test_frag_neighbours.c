/* SPDX-License-Identifier: MIT */
/*
 * test_frag_neighbours.c - the table of listed small files by fragment
 * block (src/fuse/frag_neighbours.c): a read of one hands out the others
 * once, a file listed after that is handed out by the next read, a later
 * block that maps to the same slot replaces it, and a block with nothing
 * left hands out nothing.
 */
#include "fuse/frag_neighbours.h"
#include "harness/check.h"

int main(void)
{
	struct lsq_frag_neighbours *nb = lsq_frag_neighbours_new();
	struct lsq_frag_neighbour out[LSQ_NB_PER_SLOT];
	uint32_t far = 5 + LSQ_NB_SLOTS;  /* the slot of block 5 */

	CHECK(nb != NULL);
	CHECK(lsq_frag_neighbours_take(nb, 5, 100, out, 64) == 0);
	for (uint64_t ino = 100; ino < 103; ino++)
		lsq_frag_neighbours_note(nb, 5, ino, ino * 10);
	lsq_frag_neighbours_note(nb, 5, 101, 1010);  /* listed again */
	lsq_frag_neighbours_note(nb, UINT32_MAX, 7, 70);  /* no fragment */

	/* the read of 101 hands out 100 and 102, in listed order */
	CHECK(lsq_frag_neighbours_take(nb, 5, 101, out, 64) == 2);
	CHECK(out[0].ino == 100 && out[0].ref == 1000);
	CHECK(out[1].ino == 102 && out[1].ref == 1020);
	/* nothing left: the others' own reads get nothing */
	CHECK(lsq_frag_neighbours_take(nb, 5, 100, out, 64) == 0);
	CHECK(lsq_frag_neighbours_take(nb, 5, 102, out, 64) == 0);
	/* another block of the same slot is not this one */
	CHECK(lsq_frag_neighbours_take(nb, far, 1, out, 64) == 0);

	/* one listed later is handed out by the next read */
	lsq_frag_neighbours_note(nb, 5, 103, 1030);
	CHECK(lsq_frag_neighbours_take(nb, 5, 100, out, 64) == 1);
	CHECK(out[0].ino == 103);

	/* at most max at a time; the rest by the next reads */
	for (uint64_t ino = 200; ino < 200 + LSQ_NB_PER_SLOT; ino++)
		lsq_frag_neighbours_note(nb, far, ino, ino);
	lsq_frag_neighbours_note(nb, far, 999, 999);  /* past the slot's 64 */
	CHECK(lsq_frag_neighbours_take(nb, 5, 100, out, 64) == 0);
	CHECK(lsq_frag_neighbours_take(nb, far, 200, out, 10) == 10);
	CHECK(out[0].ino == 201 && out[9].ino == 210);
	CHECK(lsq_frag_neighbours_take(nb, far, 200, out, 64) ==
	      LSQ_NB_PER_SLOT - 11);
	CHECK(out[LSQ_NB_PER_SLOT - 12].ino == 200 + LSQ_NB_PER_SLOT - 1);
	CHECK(lsq_frag_neighbours_take(nb, far, 300, out, 64) == 0);

	lsq_frag_neighbours_free(nb);
	lsq_frag_neighbours_free(NULL);
	return 0;
}
