/* SPDX-License-Identifier: MIT */
/* clock_shard.c - see clock_shard.h. */
#include "cache/clock_shard.h"

#include <stdlib.h>

uint64_t lsq_clock_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static size_t bucket_of(const struct lsq_clock_shard *sh, uint64_t key)
{
	return (size_t)(lsq_clock_mix(key ^ 0x9e3779b97f4a7c15ull) &
			(sh->nbuckets - 1));
}

struct lsq_clock_node *lsq_clock_find(const struct lsq_clock_shard *sh,
				      uint64_t key)
{
	if (!sh->nbuckets)
		return NULL;
	for (struct lsq_clock_node *n = sh->buckets[bucket_of(sh, key)]; n;
	     n = n->hnext)
		if (n->key == key)
			return n;
	return NULL;
}

static bool grow(struct lsq_clock_shard *sh)
{
	size_t size = sh->nbuckets ? sh->nbuckets * 2 : 64;
	struct lsq_clock_node **b = calloc(size, sizeof(*b));
	struct lsq_clock_node **old = sh->buckets;
	size_t oldn = sh->nbuckets;

	if (!b)
		return false;
	sh->buckets = b;
	sh->nbuckets = size;
	for (size_t i = 0; i < oldn; i++) {
		struct lsq_clock_node *n = old[i], *next;

		for (; n; n = next) {
			size_t k = bucket_of(sh, n->key);

			next = n->hnext;
			n->hnext = b[k];
			b[k] = n;
		}
	}
	free(old);
	return true;
}

bool lsq_clock_insert(struct lsq_clock_shard *sh, struct lsq_clock_node *n)
{
	size_t k;

	if (sh->count >= sh->nbuckets && !grow(sh) && !sh->nbuckets)
		return false;
	k = bucket_of(sh, n->key);
	n->hnext = sh->buckets[k];
	sh->buckets[k] = n;
	if (sh->hand) {
		n->next = sh->hand;
		n->prev = sh->hand->prev;
		n->prev->next = n;
		sh->hand->prev = n;
	} else {
		n->prev = n->next = n;
		sh->hand = n;
	}
	sh->count++;
	sh->bytes += n->charge;
	return true;
}

void lsq_clock_remove(struct lsq_clock_shard *sh, struct lsq_clock_node *n)
{
	struct lsq_clock_node **pp = &sh->buckets[bucket_of(sh, n->key)];

	while (*pp != n)
		pp = &(*pp)->hnext;
	*pp = n->hnext;
	if (n->next == n) {
		sh->hand = NULL;
	} else {
		n->prev->next = n->next;
		n->next->prev = n->prev;
		if (sh->hand == n)
			sh->hand = n->next;
	}
	sh->count--;
	sh->bytes -= n->charge;
}

struct lsq_clock_node *lsq_clock_evict_one(struct lsq_clock_shard *sh)
{
	struct lsq_clock_node *victim;

	while (sh->hand->referenced) {
		sh->hand->referenced = false;
		sh->hand = sh->hand->next;
	}
	victim = sh->hand;
	lsq_clock_remove(sh, victim);
	return victim;
}
