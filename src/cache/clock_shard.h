/* SPDX-License-Identifier: MIT */
/*
 * clock_shard.h - one shard of a persistent cache's in-memory index: a hash
 * table of nodes by a 64-bit key plus a CLOCK ring for eviction, charged
 * in bytes against a budget. The disk cache (keyed by image offset) and
 * the content-addressed store (keyed by digest) both index their files
 * with it. Nodes are embedded as the first member of the caller's entry.
 *
 * Not thread-safe by itself: the caller holds mu around every call.
 */
#ifndef LSQ_CLOCK_SHARD_H
#define LSQ_CLOCK_SHARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lsq_clock_node {
	uint64_t key;
	uint32_t charge;                     /* bytes it holds on disk */
	bool referenced;                     /* CLOCK's second chance */
	struct lsq_clock_node *hnext;        /* hash chain; free for the
					      * caller's use once removed */
	struct lsq_clock_node *prev, *next;  /* CLOCK ring */
};

struct lsq_clock_shard {
	pthread_mutex_t mu;
	struct lsq_clock_node **buckets;
	size_t nbuckets;                     /* power of two */
	size_t count;
	struct lsq_clock_node *hand;         /* NULL when the ring is empty */
	uint64_t bytes;                      /* charges of nodes, and of the
					      * caller's reservations */
	uint64_t budget;
};

/* The first node with key, or NULL. */
struct lsq_clock_node *lsq_clock_find(const struct lsq_clock_shard *sh,
				      uint64_t key);

/* Add n (key and charge set) just behind the hand: the last the hand
 * reaches. false when the table cannot grow (out of memory). */
bool lsq_clock_insert(struct lsq_clock_shard *sh, struct lsq_clock_node *n);

void lsq_clock_remove(struct lsq_clock_shard *sh, struct lsq_clock_node *n);

/* Remove and return the node CLOCK picks; the ring must not be empty. */
struct lsq_clock_node *lsq_clock_evict_one(struct lsq_clock_shard *sh);

/* Any key to a well-spread 64-bit value (shard and bucket choice). */
uint64_t lsq_clock_mix(uint64_t x);

#endif
