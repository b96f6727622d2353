/* SPDX-License-Identifier: MIT */
/*
 * test_block_cache.c - accounting, budget, LRU order, lifetime of held
 * blocks, uncached errors, single-flight loads and a multi-threaded stress
 * run whose every returned block is checked against a key-derived pattern.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/block_cache.h"
#include "common/bufpool.h"
#include "lsq/error.h"
#include "../harness/check.h"

#define NKEYS_TRACKED 1024

enum fail_mode {
	FAIL_NONE,
	FAIL_RETURN_NULL,   /* LSQ_OK without a block */
	FAIL_OVERSIZE,      /* size > capacity */
	FAIL_POSITIVE,      /* a positive return value */
};

struct test_loader {
	atomic_uint calls;
	atomic_uint key_calls[NKEYS_TRACKED];
	size_t capacity;        /* 0: derived from the key */
	unsigned delay_ms;
	atomic_int fail_next;   /* fail this many upcoming calls */
	int fail_err;
	unsigned fail_every;    /* fail every n-th call (0: never) */
	enum fail_mode mode;
	/* single-flight: hold the load until this many gets wait on it */
	struct lsq_block_cache *cache;
	unsigned want_waits;
	bool recurse;           /* key k > 0 also gets key k - 1 */
};

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000L };

	while (nanosleep(&ts, &ts))
		;
}

static size_t size_for_key(uint64_t key)
{
	return 64 + (size_t)(key % 13) * 100;
}

static uint8_t pattern(uint64_t key, size_t i)
{
	return (uint8_t)(key * 131u + (key >> 8) + i * 7u + (i >> 8));
}

static void check_block(const struct lsq_block *blk, uint64_t key)
{
	size_t i, want;

	CHECK(blk);
	want = size_for_key(key);
	if (want > blk->capacity)       /* the loader clamps to a fixed cap */
		want = blk->capacity;
	CHECK_EQ_INT(blk->key, key);
	CHECK_EQ_INT(blk->size, want);
	CHECK(blk->size <= blk->capacity);
	CHECK_EQ_INT(blk->aux, key ^ 0x5a5a);
	for (i = 0; i < blk->size; i++)
		if (blk->data[i] != pattern(key, i))
			CHECK(!"block content does not match its key");
}

static int test_load(void *ctx, uint64_t key, struct lsq_block **out)
{
	struct test_loader *tl = ctx;
	unsigned n = atomic_fetch_add(&tl->calls, 1) + 1;
	struct lsq_block *blk;
	size_t size = size_for_key(key), cap, i;

	if (key < NKEYS_TRACKED)
		atomic_fetch_add(&tl->key_calls[key], 1);

	if (tl->want_waits) {
		struct lsq_block_cache_stats st;
		int spins = 0;

		do {
			lsq_block_cache_get_stats(tl->cache, &st);
			if (st.waits >= tl->want_waits)
				break;
			sleep_ms(1);
		} while (++spins < 20000);
		CHECK(st.waits >= tl->want_waits);
	}
	if (tl->delay_ms)
		sleep_ms(tl->delay_ms);
	else if (tl->fail_every && key % 7 == 0)
		sleep_us(50 + (unsigned)(key % 5) * 40);  /* provoke waits */

	if (atomic_load(&tl->fail_next) > 0) {
		atomic_fetch_sub(&tl->fail_next, 1);
		return tl->fail_err;
	}
	if (tl->fail_every && n % tl->fail_every == 0)
		return tl->fail_err;
	if (tl->mode == FAIL_RETURN_NULL)
		return LSQ_OK;
	if (tl->mode == FAIL_POSITIVE)
		return 5;

	if (tl->recurse && key > 0) {
		struct lsq_block *prev = NULL;
		int err = lsq_block_cache_get(tl->cache, key - 1, &prev);

		if (err)
			return err;
		check_block(prev, key - 1);
		lsq_block_put(prev);
	}

	cap = tl->capacity ? tl->capacity : size + (size_t)(key % 3);
	if (size > cap)
		size = cap;
	blk = lsq_block_alloc(cap);
	if (!blk)
		return LSQ_ERR_NOMEM;
	for (i = 0; i < size; i++)
		blk->data[i] = pattern(key, i);
	blk->size = tl->mode == FAIL_OVERSIZE ? cap + 1 : size;
	blk->aux = key ^ 0x5a5a;
	*out = blk;
	return LSQ_OK;
}

/* What a block of capacity is charged: its memory (common/bufpool.h),
 * at least the block itself. */
static size_t charge_of(size_t capacity)
{
	struct lsq_block *blk = lsq_block_alloc(capacity);
	size_t charge;

	CHECK(blk);
	charge = lsq_bufpool_footprint(blk);
	CHECK(charge >= sizeof(struct lsq_block) + capacity);
	lsq_block_put(blk);
	return charge;
}

static unsigned refs(struct lsq_block *blk)
{
	return atomic_load(&blk->refcount);
}

static struct lsq_block_cache *make_cache(size_t budget, unsigned shards,
					  struct test_loader *tl)
{
	struct lsq_block_cache *cache = NULL;

	CHECK_EQ_INT(lsq_block_cache_create(budget, shards, test_load, tl,
					    &cache), LSQ_OK);
	CHECK(cache);
	tl->cache = cache;
	return cache;
}

static struct lsq_block_cache_stats stats(struct lsq_block_cache *cache)
{
	struct lsq_block_cache_stats st;

	memset(&st, 0xff, sizeof(st));
	lsq_block_cache_get_stats(cache, &st);
	return st;
}

static struct lsq_block *get_ok(struct lsq_block_cache *cache, uint64_t key)
{
	struct lsq_block *blk = NULL;

	CHECK_EQ_INT(lsq_block_cache_get(cache, key, &blk), LSQ_OK);
	check_block(blk, key);
	return blk;
}

static void test_alloc(void)
{
	struct lsq_block *blk;

	CHECK(!lsq_block_alloc(SIZE_MAX));
	CHECK(!lsq_block_alloc(SIZE_MAX - sizeof(struct lsq_block) + 1));
	blk = lsq_block_alloc(100);
	CHECK(blk);
	CHECK_EQ_INT(refs(blk), 1);
	CHECK_EQ_INT(blk->size, 0);
	CHECK_EQ_INT(blk->capacity, 100);
	CHECK_EQ_INT(blk->key, 0);
	CHECK_EQ_INT(blk->aux, 0);
	memset(blk->data, 0xab, 100);
	lsq_block_get(blk);
	CHECK_EQ_INT(refs(blk), 2);
	lsq_block_put(blk);
	CHECK_EQ_INT(refs(blk), 1);
	lsq_block_put(blk);
	lsq_block_put(NULL);
	lsq_block_get(NULL);

	blk = lsq_block_alloc(0);
	CHECK(blk);
	lsq_block_put(blk);
}

static void test_create_args(void)
{
	struct test_loader tl = { 0 };
	struct lsq_block_cache *cache = NULL;
	struct lsq_block *blk;
	unsigned shards[] = { 0, 1, 3, 16, 5000, 1u << 31 };
	size_t i;

	/* No default loader: only get_with may be used. */
	CHECK_EQ_INT(lsq_block_cache_create(1 << 20, 0, NULL, NULL, &cache),
		     LSQ_OK);
	CHECK_EQ_INT(lsq_block_cache_get(cache, 1, &blk), LSQ_ERR_INVALID);
	CHECK_EQ_INT(lsq_block_cache_get_with(cache, 1, test_load, &tl, &blk),
		     LSQ_OK);
	CHECK_EQ_INT(blk->key, 1);
	lsq_block_put(blk);
	lsq_block_cache_destroy(cache);
	cache = NULL;
	CHECK_EQ_INT(lsq_block_cache_create(1 << 20, 0, test_load, &tl, NULL),
		     LSQ_ERR_INVALID);
	lsq_block_cache_destroy(NULL);

	/* Odd shard counts are rounded, huge ones capped; all must work. */
	for (i = 0; i < sizeof(shards) / sizeof(shards[0]); i++) {
		cache = make_cache(64 << 20, shards[i], &tl);
		blk = get_ok(cache, 42);
		lsq_block_put(blk);
		blk = get_ok(cache, 42);
		lsq_block_put(blk);
		CHECK_EQ_INT(stats(cache).hits, 1);
		lsq_block_cache_destroy(cache);
	}
}

static void test_hit_miss(void)
{
	struct test_loader tl = { 0 };
	struct lsq_block_cache *cache = make_cache(1 << 20, 1, &tl);
	struct lsq_block_cache_stats st;
	struct lsq_block *a, *b, *c;

	st = stats(cache);
	CHECK_EQ_INT(st.hits + st.misses + st.waits + st.evictions, 0);
	CHECK_EQ_INT(st.bytes + st.blocks, 0);

	a = get_ok(cache, 1);
	CHECK_EQ_INT(refs(a), 2);       /* ours + the cache's */
	b = get_ok(cache, 1);
	CHECK(a == b);
	CHECK_EQ_INT(refs(a), 3);
	c = get_ok(cache, 2);
	CHECK(c != a);

	st = stats(cache);
	CHECK_EQ_INT(st.hits, 1);
	CHECK_EQ_INT(st.misses, 2);
	CHECK_EQ_INT(st.waits, 0);
	CHECK_EQ_INT(st.evictions, 0);
	CHECK_EQ_INT(st.blocks, 2);
	CHECK_EQ_INT(st.bytes, charge_of(a->capacity) + charge_of(c->capacity));
	CHECK_EQ_INT(atomic_load(&tl.calls), 2);

	lsq_block_put(a);
	lsq_block_put(b);
	lsq_block_put(c);
	/* The cache still holds both. */
	lsq_block_put(get_ok(cache, 2));
	CHECK_EQ_INT(stats(cache).hits, 2);
	CHECK_EQ_INT(atomic_load(&tl.calls), 2);
	lsq_block_cache_destroy(cache);
}

/* lookup never loads: absent is NOT_FOUND and counts nothing; present is
 * a hit. */
static void test_lookup(void)
{
	struct test_loader tl = { 0 };
	struct lsq_block_cache *cache = make_cache(1 << 20, 1, &tl);
	struct lsq_block_cache_stats st;
	struct lsq_block *a, *b = NULL;

	CHECK_EQ_INT(lsq_block_cache_lookup(cache, 7, &b), LSQ_ERR_NOT_FOUND);
	CHECK(b == NULL);
	st = stats(cache);
	CHECK_EQ_INT(st.hits + st.misses + st.waits + st.blocks, 0);
	CHECK_EQ_INT(atomic_load(&tl.calls), 0);

	a = get_ok(cache, 7);
	CHECK_EQ_INT(lsq_block_cache_lookup(cache, 7, &b), LSQ_OK);
	CHECK(a == b);
	CHECK_EQ_INT(refs(a), 3);
	check_block(b, 7);
	st = stats(cache);
	CHECK_EQ_INT(st.hits, 1);
	CHECK_EQ_INT(st.misses, 1);
	CHECK_EQ_INT(atomic_load(&tl.calls), 1);
	CHECK_EQ_INT(lsq_block_cache_lookup(NULL, 7, &b), LSQ_ERR_INVALID);
	lsq_block_put(a);
	lsq_block_put(b);
	lsq_block_cache_destroy(cache);
}

/* drop forgets a resident block (the next get loads it again) while a
 * holder keeps its reference; an absent key is a no-op. */
static void test_drop(void)
{
	struct test_loader tl = { 0 };
	struct lsq_block_cache *cache = make_cache(1 << 20, 1, &tl);
	struct lsq_block *a, *b;

	a = get_ok(cache, 5);
	lsq_block_cache_drop(cache, 5);
	lsq_block_cache_drop(cache, 6);
	CHECK_EQ_INT(refs(a), 1);       /* ours only */
	CHECK_EQ_INT(stats(cache).blocks, 0);
	CHECK_EQ_INT(stats(cache).bytes, 0);
	check_block(a, 5);
	b = get_ok(cache, 5);
	CHECK(b != a);
	CHECK_EQ_INT(atomic_load(&tl.calls), 2);
	lsq_block_put(a);
	lsq_block_put(b);
	lsq_block_cache_destroy(cache);
}

/* Bytes held never exceed the budget, whatever is inserted. */
static void test_budget(void)
{
	const size_t cap = 1000, charge = charge_of(cap);
	const size_t budget = 4 * 10 * charge + 3;
	struct test_loader tl = { .capacity = cap };
	struct lsq_block_cache *cache = make_cache(budget, 4, &tl);
	struct lsq_block_cache_stats st;
	struct lsq_block *blk;
	uint64_t key;
	uint32_t rnd = 12345;

	for (key = 0; key < 2000; key++) {
		blk = get_ok(cache, key * 4096);
		lsq_block_put(blk);
		st = stats(cache);
		CHECK(st.bytes <= budget);
		CHECK_EQ_INT(st.bytes, st.blocks * charge);
		CHECK_EQ_INT(st.blocks + st.evictions, key + 1);
	}
	st = stats(cache);
	CHECK(st.blocks <= 40);
	CHECK(st.blocks >= 30);     /* the shards are roughly full */
	CHECK(st.evictions > 1900);
	lsq_block_cache_destroy(cache);

	/* Mixed capacities: the bound holds for any mix. */
	tl.capacity = 0;
	cache = make_cache(50000, 8, &tl);
	for (key = 0; key < 3000; key++) {
		rnd = rnd * 1103515245u + 12345u;
		tl.capacity = 1 + (rnd >> 8) % 5000;
		blk = get_ok(cache, rnd % 700);
		lsq_block_put(blk);
		st = stats(cache);
		CHECK(st.bytes <= 50000);
	}
	CHECK(st.evictions > 0);
	CHECK(st.hits > 0);
	lsq_block_cache_destroy(cache);
}

/* The least recently used block goes first; a touched one survives. */
static void test_lru_order(void)
{
	const size_t cap = 500;
	struct test_loader tl = { .capacity = cap };
	struct lsq_block_cache *cache = make_cache(4 * charge_of(cap), 1, &tl);
	uint64_t key;

	for (key = 0; key < 4; key++)
		lsq_block_put(get_ok(cache, key));
	CHECK_EQ_INT(stats(cache).blocks, 4);
	CHECK_EQ_INT(stats(cache).evictions, 0);

	lsq_block_put(get_ok(cache, 0));        /* 0 is now most recent */
	lsq_block_put(get_ok(cache, 4));        /* evicts 1 */
	CHECK_EQ_INT(stats(cache).evictions, 1);
	lsq_block_put(get_ok(cache, 0));
	CHECK_EQ_INT(atomic_load(&tl.key_calls[0]), 1);
	lsq_block_put(get_ok(cache, 3));
	CHECK_EQ_INT(atomic_load(&tl.key_calls[3]), 1);
	lsq_block_put(get_ok(cache, 1));        /* reloaded, evicts 2 */
	CHECK_EQ_INT(atomic_load(&tl.key_calls[1]), 2);
	CHECK_EQ_INT(stats(cache).evictions, 2);
	lsq_block_put(get_ok(cache, 2));        /* evicts 4 */
	CHECK_EQ_INT(atomic_load(&tl.key_calls[2]), 2);
	lsq_block_put(get_ok(cache, 0));
	lsq_block_put(get_ok(cache, 3));
	CHECK_EQ_INT(atomic_load(&tl.key_calls[0]), 1);
	CHECK_EQ_INT(atomic_load(&tl.key_calls[3]), 1);
	lsq_block_put(get_ok(cache, 4));
	CHECK_EQ_INT(atomic_load(&tl.key_calls[4]), 2);
	CHECK_EQ_INT(stats(cache).blocks, 4);
	lsq_block_cache_destroy(cache);
}

/* Eviction drops only the cache's reference. */
static void test_held_block_survives(void)
{
	const size_t cap = 300;
	struct test_loader tl = { .capacity = cap };
	struct lsq_block_cache *cache = make_cache(2 * charge_of(cap), 1, &tl);
	struct lsq_block *held, *again;
	uint64_t key;

	held = get_ok(cache, 0);
	for (key = 1; key < 50; key++)
		lsq_block_put(get_ok(cache, key));
	CHECK(stats(cache).evictions >= 48);
	CHECK_EQ_INT(refs(held), 1);            /* only ours is left */
	check_block(held, 0);

	again = get_ok(cache, 0);               /* evicted, so reloaded */
	CHECK_EQ_INT(atomic_load(&tl.key_calls[0]), 2);
	CHECK(again != held);
	lsq_block_put(again);

	/* And it outlives the cache itself. */
	lsq_block_cache_destroy(cache);
	check_block(held, 0);
	lsq_block_put(held);
}

static void test_errors_not_cached(void)
{
	struct test_loader tl = { .fail_err = LSQ_ERR_IO };
	struct lsq_block_cache *cache = make_cache(1 << 20, 2, &tl);
	struct lsq_block *sentinel = (struct lsq_block *)&tl, *blk = sentinel;
	struct lsq_block_cache_stats st;

	atomic_store(&tl.fail_next, 1);
	CHECK_EQ_INT(lsq_block_cache_get(cache, 7, &blk), LSQ_ERR_IO);
	CHECK(blk == sentinel);
	st = stats(cache);
	CHECK_EQ_INT(st.misses, 1);
	CHECK_EQ_INT(st.blocks, 0);
	CHECK_EQ_INT(st.bytes, 0);

	blk = get_ok(cache, 7);                 /* loads again */
	CHECK_EQ_INT(atomic_load(&tl.key_calls[7]), 2);
	lsq_block_put(blk);
	lsq_block_put(get_ok(cache, 7));        /* now a hit */
	CHECK_EQ_INT(atomic_load(&tl.key_calls[7]), 2);
	st = stats(cache);
	CHECK_EQ_INT(st.hits, 1);
	CHECK_EQ_INT(st.misses, 2);

	/* Loaders that break their contract are reported, not trusted. */
	tl.mode = FAIL_RETURN_NULL;
	blk = sentinel;
	CHECK_EQ_INT(lsq_block_cache_get(cache, 8, &blk), LSQ_ERR_INVALID);
	CHECK(blk == sentinel);
	tl.mode = FAIL_OVERSIZE;                /* the block must be freed */
	CHECK_EQ_INT(lsq_block_cache_get(cache, 8, &blk), LSQ_ERR_INVALID);
	tl.mode = FAIL_POSITIVE;
	CHECK_EQ_INT(lsq_block_cache_get(cache, 8, &blk), LSQ_ERR_INVALID);
	CHECK(blk == sentinel);
	tl.mode = FAIL_NONE;
	lsq_block_put(get_ok(cache, 8));
	CHECK_EQ_INT(atomic_load(&tl.key_calls[8]), 4);
	CHECK_EQ_INT(stats(cache).blocks, 2);
	lsq_block_cache_destroy(cache);
}

/* A block whose charge exceeds a shard's share is returned, not kept. */
static void test_oversized_not_kept(void)
{
	struct test_loader tl = { .capacity = 100 };
	struct lsq_block_cache *cache = make_cache(2 * charge_of(100), 2, &tl);
	struct lsq_block *blk;

	lsq_block_put(get_ok(cache, 1));
	CHECK_EQ_INT(stats(cache).blocks, 1);   /* exactly a share: kept */

	tl.capacity = 101;
	blk = get_ok(cache, 2);
	CHECK_EQ_INT(refs(blk), 1);
	lsq_block_put(blk);
	lsq_block_put(get_ok(cache, 2));
	CHECK_EQ_INT(atomic_load(&tl.key_calls[2]), 2);
	CHECK_EQ_INT(stats(cache).blocks, 1);
	CHECK_EQ_INT(stats(cache).bytes, charge_of(100));
	lsq_block_cache_destroy(cache);
}

static void test_budget_zero(void)
{
	struct test_loader tl = { 0 };
	struct lsq_block_cache *cache = make_cache(0, 0, &tl);
	struct lsq_block_cache_stats st;
	struct lsq_block *a, *b;

	a = get_ok(cache, 5);
	b = get_ok(cache, 5);
	CHECK(a != b);
	CHECK_EQ_INT(refs(a), 1);
	CHECK_EQ_INT(refs(b), 1);
	st = stats(cache);
	CHECK_EQ_INT(st.misses, 2);
	CHECK_EQ_INT(st.hits, 0);
	CHECK_EQ_INT(st.blocks, 0);
	CHECK_EQ_INT(st.bytes, 0);
	CHECK_EQ_INT(st.evictions, 0);
	lsq_block_put(a);
	lsq_block_put(b);
	lsq_block_cache_destroy(cache);
}

/* A loader may use the same cache for other keys: no lock is held. */
static void test_reentrant_loader(void)
{
	struct test_loader tl = { .recurse = true };
	struct lsq_block_cache *cache = make_cache(1 << 20, 1, &tl);

	lsq_block_put(get_ok(cache, 20));
	CHECK_EQ_INT(atomic_load(&tl.calls), 21);
	CHECK_EQ_INT(stats(cache).blocks, 21);
	lsq_block_cache_destroy(cache);
}

/* ---- single-flight ---- */

#define SF_THREADS 16

struct sf_arg {
	struct lsq_block_cache *cache;
	pthread_barrier_t *barrier;
	struct lsq_block *blk;
	int err;
};

static void *sf_thread(void *p)
{
	struct sf_arg *a = p;

	pthread_barrier_wait(a->barrier);
	a->blk = NULL;
	a->err = lsq_block_cache_get(a->cache, 99, &a->blk);
	return NULL;
}

static void run_single_flight(size_t budget, bool fail)
{
	struct test_loader tl = {
		.delay_ms = 100,
		.want_waits = SF_THREADS - 1,
		.fail_err = LSQ_ERR_TIMEOUT,
	};
	struct lsq_block_cache *cache = make_cache(budget, 0, &tl);
	pthread_t th[SF_THREADS];
	struct sf_arg args[SF_THREADS];
	pthread_barrier_t barrier;
	struct lsq_block_cache_stats st;
	struct lsq_block *blk;
	int i;

	if (fail)
		atomic_store(&tl.fail_next, 1);
	CHECK_EQ_INT(pthread_barrier_init(&barrier, NULL, SF_THREADS), 0);
	for (i = 0; i < SF_THREADS; i++) {
		args[i] = (struct sf_arg){ .cache = cache, .barrier = &barrier };
		CHECK_EQ_INT(pthread_create(&th[i], NULL, sf_thread, &args[i]),
			     0);
	}
	for (i = 0; i < SF_THREADS; i++)
		CHECK_EQ_INT(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&barrier);

	CHECK_EQ_INT(atomic_load(&tl.calls), 1);
	st = stats(cache);
	CHECK_EQ_INT(st.misses, 1);
	CHECK_EQ_INT(st.waits, SF_THREADS - 1);
	CHECK_EQ_INT(st.hits, 0);
	if (fail) {
		for (i = 0; i < SF_THREADS; i++) {
			CHECK_EQ_INT(args[i].err, LSQ_ERR_TIMEOUT);
			CHECK(!args[i].blk);
		}
		CHECK_EQ_INT(st.blocks, 0);
		/* Not cached: the next get loads again. */
		tl.want_waits = 0;
		tl.delay_ms = 0;
		lsq_block_put(get_ok(cache, 99));
		CHECK_EQ_INT(atomic_load(&tl.calls), 2);
		lsq_block_cache_destroy(cache);
		return;
	}

	blk = args[0].blk;
	for (i = 0; i < SF_THREADS; i++) {
		CHECK_EQ_INT(args[i].err, LSQ_OK);
		CHECK(args[i].blk == blk);
	}
	check_block(blk, 99);
	/* One reference per getter, plus the cache's if it kept the block. */
	CHECK_EQ_INT(refs(blk), SF_THREADS + (budget ? 1 : 0));
	CHECK_EQ_INT(st.blocks, budget ? 1 : 0);
	for (i = 0; i < SF_THREADS; i++)
		lsq_block_put(args[i].blk);
	if (budget) {
		CHECK_EQ_INT(refs(blk), 1);
		lsq_block_put(get_ok(cache, 99));
		CHECK_EQ_INT(stats(cache).hits, 1);
	}
	lsq_block_cache_destroy(cache);
}

static void test_single_flight(void)
{
	run_single_flight(1 << 20, false);
	run_single_flight(0, false);            /* coalesces, keeps nothing */
	run_single_flight(1 << 20, true);       /* everyone sees the error */
}

/* ---- stress ---- */

#define ST_THREADS 8
#define ST_GETS 20000
#define ST_KEYS 512
#define ST_HELD 4

struct st_arg {
	struct lsq_block_cache *cache;
	unsigned seed;
	unsigned long failures;
};

static uint32_t xorshift(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static void *st_thread(void *p)
{
	struct st_arg *a = p;
	struct lsq_block *held[ST_HELD] = { 0 };
	uint64_t held_key[ST_HELD] = { 0 };
	uint32_t rnd = a->seed;
	struct lsq_block *blk;
	uint64_t key;
	int i, err, slot;

	for (i = 0; i < ST_GETS; i++) {
		/* Half the gets go to 32 hot keys, so loads collide. */
		if (xorshift(&rnd) & 1)
			key = xorshift(&rnd) % 32;
		else
			key = xorshift(&rnd) % ST_KEYS;
		key *= 8192;
		blk = NULL;
		err = lsq_block_cache_get(a->cache, key, &blk);
		if (err) {
			CHECK_EQ_INT(err, LSQ_ERR_IO);
			CHECK(!blk);
			a->failures++;
			continue;
		}
		check_block(blk, key);
		/* Keep a few references across later gets and evictions. */
		slot = i % ST_HELD;
		if (held[slot]) {
			check_block(held[slot], held_key[slot]);
			lsq_block_put(held[slot]);
		}
		held[slot] = blk;
		held_key[slot] = key;
	}
	for (slot = 0; slot < ST_HELD; slot++) {
		if (held[slot]) {
			check_block(held[slot], held_key[slot]);
			lsq_block_put(held[slot]);
		}
	}
	return NULL;
}

static void run_stress(size_t budget, unsigned shards)
{
	struct test_loader tl = { .fail_every = 53, .fail_err = LSQ_ERR_IO };
	struct lsq_block_cache *cache = make_cache(budget, shards, &tl);
	pthread_t th[ST_THREADS];
	struct st_arg args[ST_THREADS];
	struct lsq_block_cache_stats st;
	unsigned long failures = 0;
	int i;

	for (i = 0; i < ST_THREADS; i++) {
		args[i] = (struct st_arg){ .cache = cache,
					   .seed = 0x9e3779b9u * (unsigned)(i + 1) };
		CHECK_EQ_INT(pthread_create(&th[i], NULL, st_thread, &args[i]),
			     0);
	}
	/* Watch the bound while the workers run. */
	for (i = 0; i < 50; i++) {
		st = stats(cache);
		CHECK(st.bytes <= budget);
		sleep_ms(1);
	}
	for (i = 0; i < ST_THREADS; i++) {
		CHECK_EQ_INT(pthread_join(th[i], NULL), 0);
		failures += args[i].failures;
	}

	st = stats(cache);
	CHECK(st.bytes <= budget);
	CHECK_EQ_INT(st.hits + st.misses + st.waits,
		     (uint64_t)ST_THREADS * ST_GETS);
	CHECK_EQ_INT(st.misses, atomic_load(&tl.calls));
	CHECK(failures > 0);
	CHECK(st.misses > ST_KEYS / 2);
	if (budget)
		CHECK(st.hits > 0 && st.evictions > 0);
	printf("stress budget=%zu shards=%u: hits=%llu misses=%llu "
	       "waits=%llu evictions=%llu blocks=%llu bytes=%llu "
	       "failures=%lu\n",
	       budget, shards, (unsigned long long)st.hits,
	       (unsigned long long)st.misses, (unsigned long long)st.waits,
	       (unsigned long long)st.evictions,
	       (unsigned long long)st.blocks, (unsigned long long)st.bytes,
	       failures);
	lsq_block_cache_destroy(cache);
}

static void test_stress(void)
{
	/* The working set is ~512 blocks of ~700 bytes: cache a quarter. */
	run_stress(100000, 8);
	run_stress(100000, 1);
	run_stress(0, 0);
}


/* Reservations: a getter of a reserved key waits for fulfil; a failed
 * reservation makes it load the key itself instead of taking the error. */
struct res_arg {
	struct lsq_block_cache *cache;
	uint64_t key;
	bool lookup;
	struct lsq_block *blk;
	int err;
};

static void *res_thread(void *p)
{
	struct res_arg *a = p;

	a->blk = NULL;
	a->err = a->lookup ? lsq_block_cache_lookup(a->cache, a->key, &a->blk)
			   : lsq_block_cache_get(a->cache, a->key, &a->blk);
	return NULL;
}

static void wait_for_waits(struct lsq_block_cache *cache, uint64_t n)
{
	for (int spins = 0; stats(cache).waits < n; spins++) {
		CHECK(spins < 20000);
		sleep_ms(1);
	}
}

static struct lsq_block *made_block(uint64_t key)
{
	size_t size = size_for_key(key);
	struct lsq_block *blk = lsq_block_alloc(size);

	CHECK(blk);
	for (size_t i = 0; i < size; i++)
		blk->data[i] = pattern(key, i);
	blk->size = size;
	blk->aux = key ^ 0x5a5a;
	return blk;
}

static void test_reservations(void)
{
	struct test_loader tl = { 0 };
	struct lsq_block_cache *cache = make_cache(1 << 20, 1, &tl);
	struct lsq_block_reservation *res, *again;
	struct res_arg a = { .cache = cache, .key = 7 };
	struct lsq_block *blk;
	pthread_t th;

	/* fulfilled: the waiter gets the reserved block, the loader never
	 * runs, the block stays cached */
	CHECK_EQ_INT(lsq_block_cache_reserve(cache, 7, &res), LSQ_OK);
	CHECK(res);
	CHECK_EQ_INT(lsq_block_cache_reserve(cache, 7, &again), LSQ_OK);
	CHECK(again == NULL);       /* loading: nothing to do */
	CHECK_EQ_INT(pthread_create(&th, NULL, res_thread, &a), 0);
	wait_for_waits(cache, 1);
	lsq_block_cache_fulfil(cache, res, made_block(7));
	CHECK_EQ_INT(pthread_join(th, NULL), 0);
	CHECK_EQ_INT(a.err, LSQ_OK);
	check_block(a.blk, 7);
	CHECK_EQ_INT(refs(a.blk), 2);   /* the waiter's and the cache's */
	lsq_block_put(a.blk);
	CHECK_EQ_INT(atomic_load(&tl.calls), 0);
	CHECK_EQ_INT(lsq_block_cache_reserve(cache, 7, &again), LSQ_OK);
	CHECK(again == NULL);       /* cached: nothing to do */
	CHECK_EQ_INT(stats(cache).reserved, 1);

	/* failed: the waiter loads the key itself and succeeds */
	CHECK_EQ_INT(lsq_block_cache_reserve(cache, 8, &res), LSQ_OK);
	a = (struct res_arg){ .cache = cache, .key = 8 };
	CHECK_EQ_INT(pthread_create(&th, NULL, res_thread, &a), 0);
	wait_for_waits(cache, 2);
	lsq_block_cache_fulfil(cache, res, NULL);
	CHECK_EQ_INT(pthread_join(th, NULL), 0);
	CHECK_EQ_INT(a.err, LSQ_OK);
	check_block(a.blk, 8);
	lsq_block_put(a.blk);
	CHECK_EQ_INT(atomic_load(&tl.key_calls[8]), 1);

	/* failed, seen by lookup: not found, so the caller reads elsewhere */
	CHECK_EQ_INT(lsq_block_cache_reserve(cache, 9, &res), LSQ_OK);
	a = (struct res_arg){ .cache = cache, .key = 9, .lookup = true };
	CHECK_EQ_INT(pthread_create(&th, NULL, res_thread, &a), 0);
	wait_for_waits(cache, 3);
	lsq_block_cache_fulfil(cache, res, NULL);
	CHECK_EQ_INT(pthread_join(th, NULL), 0);
	CHECK_EQ_INT(a.err, LSQ_ERR_NOT_FOUND);
	CHECK_EQ_INT(lsq_block_cache_lookup(cache, 9, &blk),
		     LSQ_ERR_NOT_FOUND);

	/* fulfilled with nobody waiting: cached with one reference */
	CHECK_EQ_INT(lsq_block_cache_reserve(cache, 10, &res), LSQ_OK);
	lsq_block_cache_fulfil(cache, res, made_block(10));
	CHECK_EQ_INT(lsq_block_cache_lookup(cache, 10, &blk), LSQ_OK);
	check_block(blk, 10);
	CHECK_EQ_INT(refs(blk), 2);
	lsq_block_put(blk);
	lsq_block_cache_fulfil(cache, NULL, NULL);  /* no-op */
	lsq_block_cache_destroy(cache);
}

/* A whole image's blocks fill every shard of a striped cache alike:
 * 1,850 blocks of 16 KiB side by side in 16 shards of 128 blocks (90%
 * full) and nothing is evicted; shards by hash fill unevenly, and the
 * fullest evict. */
static unsigned fill_with_image(bool striped)
{
	const size_t cap = 16384, charge = charge_of(cap);
	struct test_loader tl = { .capacity = cap };
	struct lsq_block_cache *cache = make_cache(16 * 128 * charge, 16, &tl);
	struct lsq_block_cache_stats st;

	if (striped)  /* 128 KiB stripes: 8 blocks each */
		lsq_block_cache_stripe(cache, 17);
	for (uint64_t i = 0; i < 1850; i++)
		lsq_block_put(get_ok(cache, 96 + i * cap));
	st = stats(cache);
	CHECK_EQ_INT(st.blocks + st.evictions, 1850);
	lsq_block_cache_destroy(cache);
	return (unsigned)st.evictions;
}

static void test_striped_fill(void)
{
	CHECK_EQ_INT(fill_with_image(true), 0);
	CHECK(fill_with_image(false) > 0);
}

int main(void)
{
	test_alloc();
	test_create_args();
	test_hit_miss();
	test_lookup();
	test_drop();
	test_budget();
	test_striped_fill();
	test_lru_order();
	test_held_block_survives();
	test_errors_not_cached();
	test_oversized_not_kept();
	test_budget_zero();
	test_reservations();
	test_reentrant_loader();
	test_single_flight();
	test_stress();
	printf("block_cache: all tests passed\n");
	return 0;
}
