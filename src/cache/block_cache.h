/* SPDX-License-Identifier: MIT */
/*
 * block_cache.h - a bounded cache of immutable, reference-counted blocks
 * keyed by a 64-bit key (an image offset), with single-flight loading.
 *
 * Sharded: each shard is a mutex, a hash table and an LRU list. A miss
 * inserts an in-flight entry, drops the shard lock and calls the loader;
 * concurrent getters of the same key wait for that one load and share its
 * result (block or error). No lock is held across the loader.
 *
 * The byte budget is a hard bound on the bytes of blocks held by the cache
 * itself; blocks still referenced by callers stay alive until put even when
 * evicted (they no longer count against the cache).
 *
 * Errors are not cached: the next get of a key whose load failed loads
 * again.
 */
#ifndef LSQ_BLOCK_CACHE_H
#define LSQ_BLOCK_CACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One allocation per block. Immutable once published. */
struct lsq_block {
	atomic_uint refcount;
	uint64_t key;
	uint64_t aux;    /* loader-defined (e.g. offset of the next block) */
	size_t size;     /* valid bytes in data */
	size_t capacity; /* bytes allocated for data; set by lsq_block_alloc */
	uint8_t data[];
};

/* Allocate a block with room for capacity bytes; refcount 1, size 0,
 * key and aux 0. NULL on allocation failure or if the total size would
 * overflow. Blocks must come from here (common/bufpool.h; put releases
 * them there).
 *
 * A cached block is charged what it costs in memory (its bufpool
 * footprint: header, capacity and the rest of its last page) against the
 * budget, so a loader that allocates generously pays for it. */
struct lsq_block *lsq_block_alloc(size_t capacity);

/* Take / drop a reference. put frees at zero; NULL is ignored. */
void lsq_block_get(struct lsq_block *blk);
void lsq_block_put(struct lsq_block *blk);

/* Loader: produce the block for key into *out (refcount 1, owned by the
 * cache from then on) or return an lsq_err. Runs without any cache lock
 * held, possibly on several threads for different keys. The cache sets
 * the block's key field; size must not exceed capacity. The loader may
 * get other keys from the same cache, but never the key it is loading nor
 * one whose load leads back to it (that load would wait on itself). */
typedef int (*lsq_block_loader_fn)(void *ctx, uint64_t key,
				   struct lsq_block **out);

struct lsq_block_cache;

/* Every get counts exactly once as a hit (served from the cache), a miss
 * (this get ran the loader) or a wait (joined another get's load).
 * evictions counts blocks dropped to make room; bytes and blocks are what
 * the cache holds now (bytes in the charge unit described above). */
struct lsq_block_cache_stats {
	uint64_t hits, misses, evictions, waits, bytes, blocks;
	uint64_t budget;    /* the bound on bytes */
	uint64_t reserved;  /* reservations made (lsq_block_cache_reserve) */
};

/* budget_bytes: hard bound on bytes held (a budget of 0 caches nothing but
 * still coalesces concurrent loads). The budget is split evenly across the
 * shards; a block whose charge exceeds one shard's share is returned to its
 * getters but not kept.
 *
 * shards: 0 = a default: 16, halved while a nonzero budget would leave a
 * share under 4 MiB (a few of the largest, 1 MiB, SquashFS blocks). Other
 * values are rounded up to a power of two, at most 4096. Pick shards so
 * that budget / shards holds several of the blocks this cache will see.
 *
 * LSQ_ERR_INVALID without a loader, LSQ_ERR_NOMEM on allocation failure. */
int lsq_block_cache_create(size_t budget_bytes, unsigned shards,
			   lsq_block_loader_fn loader, void *loader_ctx,
			   struct lsq_block_cache **out);

/* Shards by the key's stripe of 2^shift instead of its hash, for keys
 * that are offsets in an image: consecutive stripes go to consecutive
 * shards, so a cache filled with a whole image holds the same bytes in
 * every shard, where hashed keys fill some shards ahead of others (16
 * shards of 1,605 blocks of 128 KiB differ by about a tenth, and the
 * fullest evict while the cache is four fifths full). Call before use. */
void lsq_block_cache_stripe(struct lsq_block_cache *cache, unsigned shift);

/* NULL is ignored. No get may be in progress. */
void lsq_block_cache_destroy(struct lsq_block_cache *cache);

/* Get a referenced block for key, loading it on a miss. The caller must
 * lsq_block_put() it. On failure returns the loader's error (or
 * LSQ_ERR_NOMEM, or LSQ_ERR_INVALID if the loader broke its contract) and
 * leaves *out untouched. Thread-safe. */
int lsq_block_cache_get(struct lsq_block_cache *cache, uint64_t key,
			struct lsq_block **out);

/* As lsq_block_cache_get, but a miss is loaded by loader(loader_ctx, key)
 * instead of the cache's own loader: for loads that need per-call
 * arguments (e.g. a data block's on-disk size). Waiters on the same key
 * share whichever load is in flight. */
int lsq_block_cache_get_with(struct lsq_block_cache *cache, uint64_t key,
			     lsq_block_loader_fn loader, void *loader_ctx,
			     struct lsq_block **out);

/* The block for key if the cache holds it, or once the load in flight for
 * it ends (a hit or a wait); LSQ_ERR_NOT_FOUND, counting nothing, when
 * neither: for a caller that can produce the bytes elsewhere. */
int lsq_block_cache_lookup(struct lsq_block_cache *cache, uint64_t key,
			   struct lsq_block **out);

/* Whether key is cached or loading, without waiting, touching the LRU or
 * counting anything: for a speculative fetch deciding what to skip. */
bool lsq_block_cache_has(struct lsq_block_cache *cache, uint64_t key);

/*
 * Reservations: loads run by the caller outside any get, for a loader
 * that produces many keys at once (a prefetch fetching the blocks of one
 * range in one request). reserve() inserts a loading entry for key, so
 * getters of key wait for it, and sets *out; when key is already cached or
 * loading it sets *out to NULL (nothing to do). Every reservation must be
 * ended by fulfil(), with the block (its reference handed to the cache;
 * key set by the cache) or with NULL when the load failed. A failed
 * reservation is speculative work gone wrong, not the getters' error:
 * each getter that waited for it loads the key itself (lookup() answers
 * LSQ_ERR_NOT_FOUND). LSQ_ERR_NOMEM, LSQ_ERR_INVALID. Thread-safe.
 */
struct lsq_block_reservation;
int lsq_block_cache_reserve(struct lsq_block_cache *cache, uint64_t key,
			    struct lsq_block_reservation **out);
/* NULL res only drops blk. */
void lsq_block_cache_fulfil(struct lsq_block_cache *cache,
			    struct lsq_block_reservation *res,
			    struct lsq_block *blk);

/* Forget key's block, if resident (a load in flight is left alone):
 * its bytes turned out bad. Readers holding it keep their reference.
 * Thread-safe. */
void lsq_block_cache_drop(struct lsq_block_cache *cache, uint64_t key);

void lsq_block_cache_get_stats(struct lsq_block_cache *cache,
			       struct lsq_block_cache_stats *out);

#endif
