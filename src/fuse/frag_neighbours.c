/* SPDX-License-Identifier: MIT */
#include "fuse/frag_neighbours.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#define STRIPES 16u

struct slot {
	/* frag_plus_one while some file is left to hand out, else 0: read
	 * without the lock, so a read of a file whose block has nothing
	 * left (most reads, once a directory's first was) takes none */
	atomic_uint_least32_t left_plus_one;
	uint32_t frag_plus_one;  /* 0: empty */
	uint32_t n;
	uint64_t handed;         /* bit i: files[i] handed out */
	struct lsq_frag_neighbour files[LSQ_NB_PER_SLOT];
};

struct lsq_frag_neighbours {
	pthread_mutex_t locks[STRIPES];
	struct slot slots[LSQ_NB_SLOTS];
};

_Static_assert(LSQ_NB_PER_SLOT <= 64, "handed is a 64-bit mask");

struct lsq_frag_neighbours *lsq_frag_neighbours_new(void)
{
	struct lsq_frag_neighbours *nb = calloc(1, sizeof(*nb));

	if (!nb)
		return NULL;
	for (unsigned i = 0; i < STRIPES; i++)
		pthread_mutex_init(&nb->locks[i], NULL);
	return nb;
}

void lsq_frag_neighbours_free(struct lsq_frag_neighbours *nb)
{
	if (!nb)
		return;
	for (unsigned i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&nb->locks[i]);
	free(nb);
}

static bool all_handed(const struct slot *s)
{
	return s->handed == (s->n >= 64 ? UINT64_MAX
					: (UINT64_C(1) << s->n) - 1);
}

/* The slot of frag in *s, its stripe's lock taken (returned). */
static pthread_mutex_t *lock_slot(struct lsq_frag_neighbours *nb,
				  uint32_t frag, struct slot **s)
{
	uint32_t i = frag % LSQ_NB_SLOTS;
	pthread_mutex_t *mu = &nb->locks[i % STRIPES];

	pthread_mutex_lock(mu);
	*s = &nb->slots[i];
	return mu;
}

void lsq_frag_neighbours_note(struct lsq_frag_neighbours *nb, uint32_t frag,
			      uint64_t ino, lsq_inode_ref ref)
{
	struct slot *s;
	pthread_mutex_t *mu;

	if (!nb || frag == UINT32_MAX)
		return;
	mu = lock_slot(nb, frag, &s);
	if (s->frag_plus_one != frag + 1) {
		s->frag_plus_one = frag + 1;
		s->n = 0;
		s->handed = 0;
	}
	for (uint32_t i = 0; i < s->n; i++) {
		if (s->files[i].ino == ino)  /* listed again */
			goto out;
	}
	if (s->n < LSQ_NB_PER_SLOT) {
		s->files[s->n++] = (struct lsq_frag_neighbour){ ino, ref };
		atomic_store_explicit(&s->left_plus_one, frag + 1,
				      memory_order_relaxed);
	}
out:
	pthread_mutex_unlock(mu);
}

size_t lsq_frag_neighbours_take(struct lsq_frag_neighbours *nb,
				uint32_t frag, uint64_t read,
				struct lsq_frag_neighbour *out, size_t max)
{
	struct slot *s;
	pthread_mutex_t *mu;
	size_t got = 0;

	if (!nb || frag == UINT32_MAX ||
	    atomic_load_explicit(&nb->slots[frag % LSQ_NB_SLOTS].left_plus_one,
				 memory_order_relaxed) != frag + 1)
		return 0;
	mu = lock_slot(nb, frag, &s);
	if (s->frag_plus_one == frag + 1) {
		for (uint32_t i = 0; i < s->n; i++) {
			uint64_t bit = UINT64_C(1) << i;

			if (s->handed & bit)
				continue;
			if (s->files[i].ino == read) {
				s->handed |= bit;
			} else if (got < max) {
				out[got++] = s->files[i];
				s->handed |= bit;
			}
		}
		if (all_handed(s))
			atomic_store_explicit(&s->left_plus_one, 0,
					      memory_order_relaxed);
	}
	pthread_mutex_unlock(mu);
	return got;
}
