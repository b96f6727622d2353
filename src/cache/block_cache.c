/* SPDX-License-Identifier: MIT */
/*
 * block_cache.c - sharded LRU of refcounted blocks with single-flight loads.
 *
 * Layout: the key's 64-bit mix picks a shard (bits 32 and up) and a bucket
 * inside it (low bits). Each shard is independent: a mutex, a chained hash
 * table that doubles when it holds more entries than buckets, an LRU list
 * of resident entries, its counters and its share of the budget. Nothing is
 * global on the get path.
 *
 * An entry is either resident (blk set, on the LRU list, charged) or
 * loading (flight set, not on the LRU list, not charged, not evictable).
 * A loading entry's struct flight is where getters of the same key wait;
 * it outlives the entry when the result is not kept, so it carries its own
 * lifetime: the publisher frees it if nobody waits, else the last waiter to
 * leave does.
 *
 * Reference counting at publish time: the loader hands over one reference.
 * Under the shard lock the publisher adds one for the cache (if kept) and
 * one per waiter, so every waiter owns its reference before it wakes and
 * the loading getter keeps the loader's reference. No waiter ever touches
 * a block whose refcount might already have reached zero.
 *
 * Locks are never held across the loader, and evicted blocks are freed
 * after the shard lock is dropped (freeing a large block may unmap).
 */
#include "cache/block_cache.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "lsq/error.h"

#define DEFAULT_SHARDS 16u
#define MAX_SHARDS 4096u
#define MIN_DEFAULT_SHARE ((size_t)4 << 20)
#define INITIAL_BUCKETS 16u

/* Where getters of a key being loaded wait for the one load. */
struct flight {
	pthread_cond_t done_cond;
	bool done;             /* protected by shard->lock */
	int err;               /* protected by shard->lock; valid once done */
	struct lsq_block *blk; /* protected by shard->lock; valid once done */
	unsigned waiters;      /* protected by shard->lock */
	bool retry;            /* a reservation failed: waiters load */
};

struct entry {
	uint64_t key;
	uint64_t hash;
	struct entry *chain;          /* bucket chain; protected by shard->lock */
	struct entry *prev, *next;    /* LRU links, resident entries only */
	struct lsq_block *blk;        /* the cache's reference; NULL if loading */
	struct flight *flight;        /* non-NULL while loading */
	size_t charge;                /* bytes counted against the shard */
};

struct shard {
	/* Own cache line: shards are hammered by different threads. */
	_Alignas(64) pthread_mutex_t lock;
	struct entry **buckets;       /* protected by lock */
	size_t nbuckets;              /* power of two; protected by lock */
	size_t nentries;              /* resident + loading; protected by lock */
	struct entry lru;             /* sentinel: next = most recently used */
	size_t bytes;                 /* charged bytes; protected by lock */
	size_t nblocks;               /* resident blocks; protected by lock */
	uint64_t hits, misses, evictions, waits, reserved; /* protected by lock */
};

struct lsq_block_cache {
	lsq_block_loader_fn loader;
	void *loader_ctx;
	size_t share;                 /* budget of each shard */
	unsigned nshards;             /* power of two */
	unsigned stripe_shift;        /* 0: shards by hash */
	struct shard *shards;
};

/* ---- blocks ---- */

struct lsq_block *lsq_block_alloc(size_t capacity)
{
	struct lsq_block *blk;

	if (capacity > SIZE_MAX - sizeof(*blk))
		return NULL;
	blk = lsq_bufpool_alloc(sizeof(*blk) + capacity);
	if (!blk)
		return NULL;
	atomic_init(&blk->refcount, 1);
	blk->key = 0;
	blk->aux = 0;
	blk->size = 0;
	blk->capacity = capacity;
	return blk;
}

void lsq_block_get(struct lsq_block *blk)
{
	/* Relaxed: a new reference is always derived from one the caller
	 * already holds, which orders it before any final put. */
	if (blk)
		atomic_fetch_add_explicit(&blk->refcount, 1,
					  memory_order_relaxed);
}

void lsq_block_put(struct lsq_block *blk)
{
	unsigned old;

	if (!blk)
		return;
	/* acq_rel: our writes happen before the free, and the freeing thread
	 * sees everyone else's. */
	old = atomic_fetch_sub_explicit(&blk->refcount, 1,
					memory_order_acq_rel);
	assert(old != 0);
	if (old == 1)
		lsq_bufpool_free(blk);
}

/* ---- locking: misuse is a bug, not an error to propagate ---- */

static void lock_shard(struct shard *s)
{
	if (pthread_mutex_lock(&s->lock))
		abort();
}

static void unlock_shard(struct shard *s)
{
	if (pthread_mutex_unlock(&s->lock))
		abort();
}

/* ---- hashing and the per-shard table ---- */

/* splitmix64's finalizer: every key bit reaches every hash bit, so
 * block-aligned offsets (low bits all zero) still spread well. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

/* The key's hash: its high half picks the shard, its low half the
 * bucket. A striped cache takes the shard from the key's stripe instead
 * (lsq_block_cache_stripe). */
static uint64_t hash_of(const struct lsq_block_cache *cache, uint64_t key)
{
	uint64_t h = mix64(key);

	/* NULL: the caller refuses it after hashing */
	if (cache && cache->stripe_shift)
		h = (h & UINT64_C(0xffffffff)) |
		    ((key >> cache->stripe_shift) << 32);
	return h;
}

static struct shard *shard_of(struct lsq_block_cache *cache, uint64_t hash)
{
	return &cache->shards[(hash >> 32) & (cache->nshards - 1)];
}

static struct entry **bucket_of(struct shard *s, uint64_t hash)
{
	return &s->buckets[hash & (s->nbuckets - 1)];
}

static struct entry *table_find(struct shard *s, uint64_t hash, uint64_t key)
{
	struct entry *e;

	for (e = *bucket_of(s, hash); e; e = e->chain)
		if (e->key == key)
			return e;
	return NULL;
}

/* Double the bucket array; on allocation failure keep the old one (longer
 * chains are slower, not wrong). */
static void table_grow(struct shard *s)
{
	size_t n = s->nbuckets * 2, i;
	struct entry **nb, *e, *next;

	if (n < s->nbuckets)
		return;
	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (i = 0; i < s->nbuckets; i++) {
		for (e = s->buckets[i]; e; e = next) {
			next = e->chain;
			e->chain = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = nb;
	s->nbuckets = n;
}

static void table_insert(struct shard *s, struct entry *e)
{
	struct entry **b;

	if (s->nentries >= s->nbuckets)
		table_grow(s);
	b = bucket_of(s, e->hash);
	e->chain = *b;
	*b = e;
	s->nentries++;
}

static void table_remove(struct shard *s, struct entry *e)
{
	struct entry **p = bucket_of(s, e->hash);

	while (*p != e)
		p = &(*p)->chain;
	*p = e->chain;
	s->nentries--;
}

/* ---- LRU list ---- */

static void lru_unlink(struct entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void lru_push_front(struct shard *s, struct entry *e)
{
	e->prev = &s->lru;
	e->next = s->lru.next;
	s->lru.next->prev = e;
	s->lru.next = e;
}

/*
 * Evict least recently used entries until need more bytes fit in the
 * share. Caller guarantees need <= share. Victims are chained on *dead
 * through ->chain and released by release_dead() once the lock is dropped.
 */
static void make_room(struct lsq_block_cache *cache, struct shard *s,
		      size_t need, struct entry **dead)
{
	struct entry *victim;

	while (s->bytes > cache->share - need) {
		victim = s->lru.prev;
		assert(victim != &s->lru);
		lru_unlink(victim);
		table_remove(s, victim);
		s->bytes -= victim->charge;
		s->nblocks--;
		s->evictions++;
		victim->chain = *dead;
		*dead = victim;
	}
}

static void release_dead(struct entry *dead)
{
	struct entry *next;

	for (; dead; dead = next) {
		next = dead->chain;
		lsq_block_put(dead->blk);
		free(dead);
	}
}

static void flight_free(struct flight *f)
{
	pthread_cond_destroy(&f->done_cond);
	free(f);
}

/* ---- get ---- */

/* wait_for_load()'s answer when the load it waited for was a reservation
 * that failed: the getter loads the key itself. Never an lsq_err. */
#define RETRY 1

/* Called with s->lock held on a loading entry's flight; returns unlocked. */
static int wait_for_load(struct shard *s, struct flight *f,
			 struct lsq_block **out)
{
	struct lsq_block *blk;
	bool last;
	int err;

	f->waiters++;
	s->waits++;
	while (!f->done)
		if (pthread_cond_wait(&f->done_cond, &s->lock))
			abort();
	err = f->retry ? RETRY : f->err;
	blk = f->blk;   /* the publisher took our reference */
	last = --f->waiters == 0;
	unlock_shard(s);

	if (last)
		flight_free(f);
	if (err)
		return err;
	*out = blk;
	return LSQ_OK;
}

/* Called with s->lock held on a miss: insert a loading entry for key and
 * return it, the lock still held; NULL (lock dropped) without memory. */
static struct entry *begin_load(struct shard *s, uint64_t hash, uint64_t key)
{
	struct entry *e = calloc(1, sizeof(*e));
	struct flight *f = calloc(1, sizeof(*f));

	if (!e || !f || pthread_cond_init(&f->done_cond, NULL)) {
		unlock_shard(s);
		free(e);
		free(f);
		return NULL;
	}
	e->key = key;
	e->hash = hash;
	e->flight = f;
	table_insert(s, e);
	return e;
}

/*
 * End the load of a loading entry: keep blk (one reference handed over;
 * NULL with err on failure) if it fits, hand every waiter its reference
 * and wake them. caller_keeps: the caller keeps the reference it handed
 * over (a get), else it gives it up (a reservation). retry: a failure
 * makes waiters load the key themselves rather than take err. Takes and
 * drops the shard lock.
 */
static void publish(struct lsq_block_cache *cache, struct shard *s,
		    struct entry *e, struct lsq_block *blk, int err,
		    bool caller_keeps, bool retry)
{
	struct flight *f = e->flight;
	struct entry *dead = NULL;
	unsigned waiters, refs;
	size_t charge = blk ? lsq_bufpool_footprint(blk) : 0;
	bool keep = false;

	lock_shard(s);
	e->flight = NULL;
	if (blk && charge <= cache->share) {
		make_room(cache, s, charge, &dead);
		e->blk = blk;
		e->charge = charge;
		lru_push_front(s, e);
		s->bytes += charge;
		s->nblocks++;
		keep = true;
	} else {
		table_remove(s, e);
	}
	waiters = f->waiters;
	refs = waiters + (keep ? 1u : 0u) + (caller_keeps ? 1u : 0u);
	if (blk && refs > 1)
		atomic_fetch_add_explicit(&blk->refcount, refs - 1,
					  memory_order_relaxed);
	f->err = err;
	f->retry = retry && !blk;
	f->blk = blk;
	f->done = true;
	if (waiters)
		pthread_cond_broadcast(&f->done_cond);
	unlock_shard(s);

	/* From here f belongs to its waiters, if any. */
	if (!waiters)
		flight_free(f);
	if (!keep)
		free(e);
	if (blk && refs == 0)
		lsq_block_put(blk);
	release_dead(dead);
}

/* Called with s->lock held on a miss; returns unlocked. */
static int load(struct lsq_block_cache *cache, struct shard *s,
		uint64_t hash, uint64_t key, lsq_block_loader_fn loader,
		void *loader_ctx, struct lsq_block **out)
{
	struct lsq_block *blk = NULL;
	struct entry *e = begin_load(s, hash, key);
	int err;

	if (!e)
		return LSQ_ERR_NOMEM;
	s->misses++;
	unlock_shard(s);

	err = loader(loader_ctx, key, &blk);
	if (err != LSQ_OK) {
		blk = NULL;     /* *out is not ours on failure */
		if (err > 0)
			err = LSQ_ERR_INVALID;
	} else if (!blk || blk->size > blk->capacity) {
		lsq_block_put(blk);
		blk = NULL;
		err = LSQ_ERR_INVALID;
	} else {
		blk->key = key;
	}
	publish(cache, s, e, blk, err, true, false);
	if (err)
		return err;
	*out = blk;
	return LSQ_OK;
}

int lsq_block_cache_get(struct lsq_block_cache *cache, uint64_t key,
			struct lsq_block **out)
{
	if (!cache)
		return LSQ_ERR_INVALID;
	return lsq_block_cache_get_with(cache, key, cache->loader,
					cache->loader_ctx, out);
}

/* Called with s->lock held on a loaded entry; returns unlocked, with a
 * reference for the caller. */
static struct lsq_block *take_hit(struct shard *s, struct entry *e)
{
	struct lsq_block *blk = e->blk;

	lsq_block_get(blk);
	if (s->lru.next != e) {
		lru_unlink(e);
		lru_push_front(s, e);
	}
	s->hits++;
	unlock_shard(s);
	return blk;
}

int lsq_block_cache_get_with(struct lsq_block_cache *cache, uint64_t key,
			     lsq_block_loader_fn loader, void *loader_ctx,
			     struct lsq_block **out)
{
	uint64_t hash = hash_of(cache, key);
	struct shard *s;
	struct entry *e;

	if (!cache || !out || !loader)
		return LSQ_ERR_INVALID;
	s = shard_of(cache, hash);

	for (;;) {
		int ret;

		lock_shard(s);
		e = table_find(s, hash, key);
		if (!e)
			return load(cache, s, hash, key, loader, loader_ctx,
				    out);
		if (e->blk)
			break;
		ret = wait_for_load(s, e->flight, out);
		if (ret != RETRY)
			return ret;
	}
	*out = take_hit(s, e);
	return LSQ_OK;
}

int lsq_block_cache_lookup(struct lsq_block_cache *cache, uint64_t key,
			   struct lsq_block **out)
{
	uint64_t hash = hash_of(cache, key);
	struct shard *s;
	struct entry *e;

	if (!cache || !out)
		return LSQ_ERR_INVALID;
	s = shard_of(cache, hash);

	lock_shard(s);
	e = table_find(s, hash, key);
	if (!e) {
		unlock_shard(s);
		return LSQ_ERR_NOT_FOUND;
	}
	if (!e->blk) {
		int ret = wait_for_load(s, e->flight, out);

		return ret == RETRY ? LSQ_ERR_NOT_FOUND : ret;
	}
	*out = take_hit(s, e);
	return LSQ_OK;
}

bool lsq_block_cache_has(struct lsq_block_cache *cache, uint64_t key)
{
	uint64_t hash = hash_of(cache, key);
	struct shard *s;
	bool found;

	if (!cache)
		return false;
	s = shard_of(cache, hash);
	lock_shard(s);
	found = table_find(s, hash, key) != NULL;
	unlock_shard(s);
	return found;
}

/* ---- reservations ---- */

int lsq_block_cache_reserve(struct lsq_block_cache *cache, uint64_t key,
			    struct lsq_block_reservation **out)
{
	uint64_t hash = hash_of(cache, key);
	struct shard *s;
	struct entry *e;

	if (!cache || !out)
		return LSQ_ERR_INVALID;
	s = shard_of(cache, hash);
	lock_shard(s);
	if (table_find(s, hash, key)) {
		unlock_shard(s);
		*out = NULL;
		return LSQ_OK;
	}
	e = begin_load(s, hash, key);
	if (!e)
		return LSQ_ERR_NOMEM;
	s->reserved++;
	unlock_shard(s);
	*out = (struct lsq_block_reservation *)e;
	return LSQ_OK;
}

void lsq_block_cache_fulfil(struct lsq_block_cache *cache,
			    struct lsq_block_reservation *res,
			    struct lsq_block *blk)
{
	struct entry *e = (struct entry *)res;

	if (!res) {
		lsq_block_put(blk);
		return;
	}
	if (blk && blk->size > blk->capacity) {
		lsq_block_put(blk);
		blk = NULL;
	}
	if (blk)
		blk->key = e->key;
	publish(cache, shard_of(cache, e->hash), e, blk,
		blk ? LSQ_OK : LSQ_ERR_IO, false, true);
}

/* ---- create / destroy / stats ---- */

void lsq_block_cache_drop(struct lsq_block_cache *cache, uint64_t key)
{
	uint64_t hash = hash_of(cache, key);
	struct shard *s = shard_of(cache, hash);
	struct entry *e;

	lock_shard(s);
	e = table_find(s, hash, key);
	if (e && e->blk) {  /* resident; a load in flight is left alone */
		lru_unlink(e);
		table_remove(s, e);
		s->bytes -= e->charge;
		s->nblocks--;
		e->chain = NULL;
	} else {
		e = NULL;
	}
	unlock_shard(s);
	release_dead(e);
}

static unsigned pick_shards(size_t budget, unsigned want)
{
	unsigned n = 1;

	if (want == 0) {
		n = DEFAULT_SHARDS;
		while (budget && n > 1 && budget / n < MIN_DEFAULT_SHARE)
			n /= 2;
		return n;
	}
	if (want > MAX_SHARDS)
		want = MAX_SHARDS;
	while (n < want)
		n <<= 1;
	return n;
}

static int shard_init(struct shard *s)
{
	memset(s, 0, sizeof(*s));
	s->buckets = calloc(INITIAL_BUCKETS, sizeof(*s->buckets));
	if (!s->buckets)
		return LSQ_ERR_NOMEM;
	if (pthread_mutex_init(&s->lock, NULL)) {
		free(s->buckets);
		return LSQ_ERR_NOMEM;
	}
	s->nbuckets = INITIAL_BUCKETS;
	s->lru.next = &s->lru;
	s->lru.prev = &s->lru;
	return LSQ_OK;
}

static void shard_fini(struct shard *s)
{
	struct entry *e, *next;
	size_t i;

	for (i = 0; i < s->nbuckets; i++) {
		for (e = s->buckets[i]; e; e = next) {
			next = e->chain;
			/* No get in progress, so no loading entries. */
			assert(!e->flight);
			lsq_block_put(e->blk);
			free(e);
		}
	}
	free(s->buckets);
	pthread_mutex_destroy(&s->lock);
}

void lsq_block_cache_stripe(struct lsq_block_cache *cache, unsigned shift)
{
	if (cache && shift > 0 && shift < 64)
		cache->stripe_shift = shift;
}

int lsq_block_cache_create(size_t budget_bytes, unsigned shards,
			   lsq_block_loader_fn loader, void *loader_ctx,
			   struct lsq_block_cache **out)
{
	struct lsq_block_cache *cache;
	unsigned i, n = pick_shards(budget_bytes, shards);
	int err = LSQ_ERR_NOMEM;

	/* A NULL loader is allowed: such a cache is used only through
	 * lsq_block_cache_get_with(). */
	if (!out)
		return LSQ_ERR_INVALID;
	cache = calloc(1, sizeof(*cache));
	if (!cache)
		return LSQ_ERR_NOMEM;
	/* n * sizeof is a multiple of the 64-byte alignment, as
	 * aligned_alloc wants; n <= MAX_SHARDS keeps it small. */
	cache->shards = aligned_alloc(_Alignof(struct shard),
				      n * sizeof(*cache->shards));
	if (!cache->shards)
		goto fail_cache;
	for (i = 0; i < n; i++) {
		err = shard_init(&cache->shards[i]);
		if (err)
			goto fail_shards;
	}
	cache->loader = loader;
	cache->loader_ctx = loader_ctx;
	cache->nshards = n;
	cache->share = budget_bytes / n;
	*out = cache;
	return LSQ_OK;

fail_shards:
	while (i--)
		shard_fini(&cache->shards[i]);
	free(cache->shards);
fail_cache:
	free(cache);
	return err;
}

void lsq_block_cache_destroy(struct lsq_block_cache *cache)
{
	unsigned i;

	if (!cache)
		return;
	for (i = 0; i < cache->nshards; i++)
		shard_fini(&cache->shards[i]);
	free(cache->shards);
	free(cache);
}

void lsq_block_cache_get_stats(struct lsq_block_cache *cache,
			       struct lsq_block_cache_stats *out)
{
	struct lsq_block_cache_stats st = { 0 };
	struct shard *s;
	unsigned i;

	for (i = 0; i < cache->nshards; i++) {
		s = &cache->shards[i];
		lock_shard(s);
		st.hits += s->hits;
		st.misses += s->misses;
		st.evictions += s->evictions;
		st.waits += s->waits;
		st.reserved += s->reserved;
		st.bytes += s->bytes;
		st.blocks += s->nblocks;
		unlock_shard(s);
	}
	st.budget = (uint64_t)cache->share * cache->nshards;
	*out = st;
}
