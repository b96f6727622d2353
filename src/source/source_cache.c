/* SPDX-License-Identifier: MIT */
/*
 * source_cache.c - a caching layer in front of any byte source.
 *
 * The image reads each compressed block, metadata block and table as one
 * exact range, so ranges are cached by their offset:
 *  1. pin: the region the image advises (every metadata table sits between
 *     the inode table and the end) is fetched whole on the first read in
 *     it and kept: one round trip instead of one per block, and every later
 *     lookup is free (-o prefetch_metadata).
 *  2. RAM: a sharded LRU of ranges (-o block_cache=), single-flight, so a
 *     repeated read never goes back to the network.
 *  3. disk: the persistent cache (-o cache_dir=, src/cache/disk_cache.c);
 *     for a signed image, the units its manifest lists go to cache_dir's
 *     content-addressed store instead (src/cache/cas_store.c), shared
 *     with every other image and version mounted with that cache_dir.
 *  4. inner: the source itself; what it returns is stored in 3 and 2.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/block_cache.h"
#include "cache/cas_store.h"
#include "cache/disk_cache.h"
#include "common/bufpool.h"
#include "common/checked_math.h"
#include "lsq/error.h"
#include "lsq/source.h"

/* Larger reads bypass the RAM cache: no data or metadata block is this
 * big, so they are one-off reads (or a hostile image's). */
#define CACHE_MAX_RANGE (2u * 1024u * 1024u)

/* lsq_block.aux bits: a range a prefetch stored (its hits are counted);
 * a unit that passed the check (lsq_source_cache_check_units), set before
 * the block is published and never after. */
#define PREFETCHED 1u
#define CHECKED 2u
#define BACKGROUND 4u  /* stored by lsq_source_cache_fetch_behind */

enum pin_state { PIN_NONE, PIN_WANTED, PIN_LOADING, PIN_READY };

struct cache_source {
	struct lsq_source base;
	struct lsq_source *inner;
	struct lsq_block_cache *ram;   /* NULL: block_cache=0 */
	struct lsq_disk_cache *disk;   /* NULL: no cache_dir */
	char *dir;                     /* cache_dir (NULL: none), its bound */
	uint64_t dir_bytes;
	char *disk_origin, *cas_origin;  /* lsq_source_note_origin() */
	struct lsq_cas_store *cas;     /* NULL: not a signed image */
	lsq_unit_digest_fn digest_of;  /* set with cas */
	void *digest_ctx;
	lsq_unit_check_fn check;       /* NULL: units are not checked here */
	void *check_ctx;
	bool pin_metadata;

	pthread_mutex_t pin_mu;
	pthread_cond_t pin_cv;
	enum pin_state pin_state;
	uint64_t pin_off, pin_len;
	_Atomic(struct lsq_block *) pin;  /* set once, when READY */

	atomic_uint_least64_t pf_requests, pf_bytes, pf_failures, pf_blocks,
		pf_hits, pf_hit_bytes;
	atomic_uint_least64_t bg_requests, bg_bytes, bg_failures, bg_blocks,
		bg_hits, bg_hit_bytes;
};

static const struct lsq_source_ops cache_ops;

/* The digest of a unit the content-addressed store keeps, or NULL. */
static const uint8_t *unit_digest(const struct cache_source *cs, size_t len,
				  uint64_t off)
{
	return cs->cas ? cs->digest_of(cs->digest_ctx, off, len) : NULL;
}

/* Whether buf is the unit the image's manifest lists at off. */
static bool unit_good(const struct cache_source *cs, const void *buf,
		      size_t len, uint64_t off)
{
	return cs->check && cs->check(cs->check_ctx, buf, len, off);
}

/* The persistent copy of a range: the store of its digest d (unit_digest),
 * else the image's own cache file. */
static int persisted_read(struct cache_source *cs, const uint8_t *d,
			  void *buf, size_t len, uint64_t off)
{
	int ret = LSQ_ERR_NOT_FOUND;

	if (d)
		ret = lsq_cas_read(cs->cas, d, buf, len);
	else if (cs->disk)
		ret = lsq_disk_cache_read(cs->disk, buf, len, off);
	if (ret == LSQ_OK)
		lsq_source_note_origin(d ? cs->cas_origin : cs->disk_origin);
	return ret;
}

/* d: as for persisted_read. replace: the stored copy failed its digest
 * (a refetch). */
static void persist(struct cache_source *cs, const uint8_t *d,
		    const void *buf, size_t len, uint64_t off, bool replace)
{
	if (d)
		lsq_cas_write(cs->cas, d, buf, len, replace);
	else if (cs->disk)
		lsq_disk_cache_write(cs->disk, buf, len, off);
}

/* Fresh bytes of a range (from inner, a prefetch or a refetch) go to the
 * persistent cache; a unit of the shared store only once it passed its
 * check (when units are checked here), so the store never keeps bytes
 * known to be bad. d, replace: as for persist. Returns unit_good(). */
static bool keep_fetched(struct cache_source *cs, const uint8_t *d,
			 const void *buf, size_t len, uint64_t off,
			 bool replace)
{
	bool good = unit_good(cs, buf, len, off);

	if (good || !d || !cs->check)
		persist(cs, d, buf, len, off, replace);
	return good;
}

/* Persistent cache, then inner; what inner returns is stored. *good: the
 * bytes passed the unit check. */
static int load_range(struct cache_source *cs, void *buf, size_t len,
		      uint64_t off, bool *good)
{
	const uint8_t *d = unit_digest(cs, len, off);
	int ret;

	if (persisted_read(cs, d, buf, len, off) == LSQ_OK) {
		*good = unit_good(cs, buf, len, off);
		return LSQ_OK;
	}
	*good = false;
	ret = lsq_source_read_at(cs->inner, buf, len, off);
	if (ret == LSQ_OK)
		*good = keep_fetched(cs, d, buf, len, off, false);
	return ret;
}

struct ram_load {
	struct cache_source *cs;
	size_t len;
};

static int ram_loader(void *ctx, uint64_t key, struct lsq_block **out)
{
	struct ram_load *rl = ctx;
	struct lsq_block *blk = lsq_block_alloc(rl->len);
	bool good;
	int ret;

	if (!blk)
		return LSQ_ERR_NOMEM;
	ret = load_range(rl->cs, blk->data, rl->len, key, &good);
	if (ret) {
		lsq_block_put(blk);
		return ret;
	}
	blk->size = rl->len;
	blk->aux = good ? CHECKED : 0;
	*out = blk;
	return LSQ_OK;
}

/* Single flight without holding the mutex across the fetch. */
static int load_pin(struct cache_source *cs)
{
	struct lsq_block *blk;
	bool good;
	int ret;

	pthread_mutex_lock(&cs->pin_mu);
	while (cs->pin_state == PIN_LOADING)
		pthread_cond_wait(&cs->pin_cv, &cs->pin_mu);
	if (cs->pin_state != PIN_WANTED) {
		pthread_mutex_unlock(&cs->pin_mu);
		return LSQ_OK;
	}
	cs->pin_state = PIN_LOADING;
	pthread_mutex_unlock(&cs->pin_mu);

	blk = lsq_block_alloc((size_t)cs->pin_len);
	ret = blk ? load_range(cs, blk->data, (size_t)cs->pin_len, cs->pin_off,
			       &good)
		  : LSQ_ERR_NOMEM;

	pthread_mutex_lock(&cs->pin_mu);
	if (ret == LSQ_OK) {
		blk->size = (size_t)cs->pin_len;
		atomic_store_explicit(&cs->pin, blk, memory_order_release);
		cs->pin_state = PIN_READY;
	} else {
		lsq_block_put(blk);
		cs->pin_state = PIN_WANTED;  /* the next read tries again */
	}
	pthread_cond_broadcast(&cs->pin_cv);
	pthread_mutex_unlock(&cs->pin_mu);
	return ret;
}

static bool in_pin(const struct cache_source *cs, size_t len, uint64_t off)
{
	return off >= cs->pin_off && len <= cs->pin_len &&
	       off - cs->pin_off <= cs->pin_len - len;
}

static int cache_read_at(struct lsq_source *src, void *buf, size_t len,
			 uint64_t offset)
{
	struct cache_source *cs = (struct cache_source *)src;
	struct lsq_block *blk;
	struct ram_load rl = { cs, len };
	bool good;
	int ret;

	if (cs->pin_metadata) {
		blk = atomic_load_explicit(&cs->pin, memory_order_acquire);
		if (!blk && cs->pin_len && in_pin(cs, len, offset)) {
			ret = load_pin(cs);
			if (ret)
				return ret;
			blk = atomic_load_explicit(&cs->pin,
						   memory_order_acquire);
		}
		if (blk && in_pin(cs, len, offset)) {
			memcpy(buf, blk->data + (offset - cs->pin_off), len);
			lsq_source_note_origin("the pinned metadata region");
			return LSQ_OK;
		}
	}
	if (!cs->ram || len > CACHE_MAX_RANGE) {
		ret = load_range(cs, buf, len, offset, &good);
		lsq_source_note_checked(ret == LSQ_OK && good);
		return ret;
	}
	/* a load on this thread notes its own origin instead */
	lsq_source_note_origin("block_cache");
	ret = lsq_block_cache_get_with(cs->ram, offset, ram_loader, &rl, &blk);
	if (ret)
		return ret;
	if (blk->aux & BACKGROUND) {
		atomic_fetch_add_explicit(&cs->bg_hits, 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&cs->bg_hit_bytes, len,
					  memory_order_relaxed);
	} else if (blk->aux & PREFETCHED) {
		atomic_fetch_add_explicit(&cs->pf_hits, 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&cs->pf_hit_bytes, len,
					  memory_order_relaxed);
	}
	if (blk->size == len) {
		memcpy(buf, blk->data, len);
		lsq_source_note_checked((blk->aux & CHECKED) != 0);
		lsq_block_put(blk);
		return LSQ_OK;
	}
	/* Another length at this offset (only a hostile image does that):
	 * serve it uncached rather than evict the first. */
	lsq_block_put(blk);
	ret = load_range(cs, buf, len, offset, &good);
	lsq_source_note_checked(ret == LSQ_OK && good);
	return ret;
}

/* Past the pin, RAM and disk to inner; what comes back replaces the disk
 * copy (a unit of the shared store: only if it passes its check), and
 * the RAM copy is dropped (the next read loads the good one).
 * The pinned copy stays (readers hold no reference to the pin): a bad
 * one costs a refetch per read of it, never bad bytes, and the image's
 * decompressed caches keep such reads rare. */
static int cache_refetch(struct lsq_source *src, void *buf, size_t len,
			 uint64_t offset)
{
	struct cache_source *cs = (struct cache_source *)src;
	int ret = lsq_source_refetch(cs->inner, buf, len, offset);

	if (ret == LSQ_OK) {
		keep_fetched(cs, unit_digest(cs, len, offset), buf, len, offset,
			     true);
		if (cs->ram)
			lsq_block_cache_drop(cs->ram, offset);
	}
	return ret;
}

/* A block for a prefetched extent, copied from the span's bytes. */
static struct lsq_block *prefetched_block(const uint8_t *data, size_t len,
					  bool good)
{
	struct lsq_block *blk = lsq_block_alloc(len);

	if (blk) {
		memcpy(blk->data, data, len);
		blk->size = len;
		blk->aux = PREFETCHED | (good ? CHECKED : 0);
	}
	return blk;
}

/* Reserve the extents worth fetching; those the persistent cache holds
 * are fulfilled from it at once. Returns how many reservations are left
 * for the network. */
static size_t reserve_extents(struct cache_source *cs,
			      const struct lsq_extent *ext, size_t n,
			      struct lsq_block_reservation **res)
{
	size_t left = 0;

	for (size_t i = 0; i < n; i++) {
		struct lsq_block *blk;

		res[i] = NULL;
		if (ext[i].len == 0 || ext[i].len > CACHE_MAX_RANGE ||
		    lsq_range_outside(ext[i].offset, ext[i].len,
				      cs->base.size) ||
		    (cs->pin_len && in_pin(cs, ext[i].len, ext[i].offset)) ||
		    lsq_block_cache_reserve(cs->ram, ext[i].offset, &res[i]) ||
		    !res[i])
			continue;
		if ((cs->disk || cs->cas) &&
		    (blk = lsq_block_alloc(ext[i].len)) != NULL) {
			if (persisted_read(cs, unit_digest(cs, ext[i].len,
							       ext[i].offset),
					   blk->data, ext[i].len,
					   ext[i].offset) == LSQ_OK) {
				blk->size = ext[i].len;
				blk->aux = PREFETCHED |
					   (unit_good(cs, blk->data,
						      ext[i].len,
						      ext[i].offset) ?
						    CHECKED : 0);
				lsq_block_cache_fulfil(cs->ram, res[i], blk);
				res[i] = NULL;
				continue;
			}
			lsq_block_put(blk);
		}
		left++;
	}
	return left;
}

int lsq_source_cache_prefetch(struct lsq_source *src,
			      const struct lsq_extent *ext, size_t n)
{
	struct cache_source *cs = (struct cache_source *)src;
	struct lsq_block_reservation **res;
	uint64_t lo = UINT64_MAX, hi = 0;
	uint8_t *buf = NULL;
	int ret = LSQ_OK;

	if (n == 0)
		return LSQ_OK;
	if (src->ops != &cache_ops || !cs->ram) {
		/* no RAM to keep it in: let the source read it ahead (a
		 * local file's page cache) */
		for (size_t i = 0; i < n; i++) {
			if (ext[i].offset < lo)
				lo = ext[i].offset;
			if (ext[i].offset + ext[i].len > hi)
				hi = ext[i].offset + ext[i].len;
		}
		lsq_source_advise(src->ops == &cache_ops ? cs->inner : src, lo,
				  hi - lo);
		return LSQ_OK;
	}
	res = malloc(n * sizeof(*res));
	if (!res)
		return LSQ_ERR_NOMEM;
	if (reserve_extents(cs, ext, n, res) == 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (!res[i])
			continue;
		if (ext[i].offset < lo)
			lo = ext[i].offset;
		if (ext[i].offset + ext[i].len > hi)
			hi = ext[i].offset + ext[i].len;
	}
	/* the caller keeps spans short; this bounds a mistake */
	buf = hi - lo <= 16 * CACHE_MAX_RANGE ?
		lsq_bufpool_alloc((size_t)(hi - lo)) : NULL;
	if (!buf) {
		ret = LSQ_ERR_NOMEM;
	} else {
		lsq_source_hint_speculative(true);
		ret = lsq_source_read_at(cs->inner, buf, (size_t)(hi - lo), lo);
		lsq_source_hint_speculative(false);
		atomic_fetch_add_explicit(&cs->pf_requests, 1,
					  memory_order_relaxed);
	}
	if (ret == LSQ_OK)
		atomic_fetch_add_explicit(&cs->pf_bytes, hi - lo,
					  memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&cs->pf_failures, 1,
					  memory_order_relaxed);
	for (size_t i = 0; i < n; i++) {
		struct lsq_block *blk = NULL;
		const uint8_t *data;

		if (!res[i])
			continue;
		data = buf + (ext[i].offset - lo);
		if (ret == LSQ_OK) {
			const uint8_t *d = unit_digest(cs, ext[i].len,
						       ext[i].offset);
			bool good = keep_fetched(cs, d, data, ext[i].len,
						 ext[i].offset, false);

			blk = prefetched_block(data, ext[i].len, good);
		}
		if (blk)
			atomic_fetch_add_explicit(&cs->pf_blocks, 1,
						  memory_order_relaxed);
		lsq_block_cache_fulfil(cs->ram, res[i], blk);
	}
out:
	lsq_bufpool_free(buf);
	free(res);
	return ret;
}

/* Whether a copy of the extent is kept or coming: RAM (or a load in
 * flight), the pin, the persistent cache or the shared store. */
static bool extent_held(struct cache_source *cs, const struct lsq_extent *e)
{
	const uint8_t *d;

	if (cs->pin_len && in_pin(cs, e->len, e->offset))
		return true;
	if (lsq_block_cache_has(cs->ram, e->offset))
		return true;
	d = unit_digest(cs, e->len, e->offset);
	if (d)
		return lsq_cas_holds(cs->cas, d);
	return cs->disk && lsq_disk_cache_has(cs->disk, e->len, e->offset);
}

int lsq_source_cache_fetch_behind(struct lsq_source *src,
				  const struct lsq_extent *ext, size_t n,
				  uint64_t *fetched)
{
	struct cache_source *cs = (struct cache_source *)src;
	bool *want, to_disk;
	uint64_t lo = UINT64_MAX, hi = 0;
	uint8_t *buf = NULL;
	int ret;

	*fetched = 0;
	if (n == 0 || src->ops != &cache_ops)
		return LSQ_OK;
	to_disk = cs->disk || cs->cas;
	if (!to_disk && !cs->ram)
		return LSQ_OK;  /* nowhere to keep it */
	want = calloc(n, sizeof(*want));
	if (!want)
		return LSQ_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		if (ext[i].len == 0 || ext[i].len > CACHE_MAX_RANGE ||
		    lsq_range_outside(ext[i].offset, ext[i].len,
				      src->size) ||
		    extent_held(cs, &ext[i]))
			continue;
		want[i] = true;
		if (ext[i].offset < lo)
			lo = ext[i].offset;
		if (ext[i].offset + ext[i].len > hi)
			hi = ext[i].offset + ext[i].len;
	}
	ret = LSQ_OK;
	if (hi <= lo)
		goto out;
	buf = hi - lo <= 16 * CACHE_MAX_RANGE ?
		lsq_bufpool_alloc((size_t)(hi - lo)) : NULL;
	if (!buf) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	lsq_source_hint_speculative(true);
	ret = lsq_source_read_at(cs->inner, buf, (size_t)(hi - lo), lo);
	lsq_source_hint_speculative(false);
	atomic_fetch_add_explicit(&cs->bg_requests, 1, memory_order_relaxed);
	if (ret) {
		atomic_fetch_add_explicit(&cs->bg_failures, 1,
					  memory_order_relaxed);
		goto out;
	}
	*fetched = hi - lo;
	atomic_fetch_add_explicit(&cs->bg_bytes, hi - lo,
				  memory_order_relaxed);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *data = buf + (ext[i].offset - lo);
		const uint8_t *d;
		struct lsq_block_reservation *res = NULL;
		struct lsq_block *blk;
		bool good;

		if (!want[i])
			continue;
		d = unit_digest(cs, ext[i].len, ext[i].offset);
		good = keep_fetched(cs, d, data, ext[i].len, ext[i].offset,
				    false);
		atomic_fetch_add_explicit(&cs->bg_blocks, 1,
					  memory_order_relaxed);
		/* with a persistent cache, RAM stays for what readers
		 * fetch; without, keep it there unless a reader got it
		 * meanwhile (reserve says NULL) */
		if (to_disk || lsq_block_cache_reserve(cs->ram, ext[i].offset,
						       &res) || !res)
			continue;
		blk = prefetched_block(data, ext[i].len, good);
		if (blk)
			blk->aux |= BACKGROUND;
		lsq_block_cache_fulfil(cs->ram, res, blk);
	}
out:
	lsq_bufpool_free(buf);
	free(want);
	return ret;
}

/* The image advises its metadata region once, right after the superblock.
 * Pinning is lazy (advise must not block); the image's next reads are in
 * that region, so it is in memory before the mount answers. */
static void cache_advise(struct lsq_source *src, uint64_t offset,
			 uint64_t len)
{
	struct cache_source *cs = (struct cache_source *)src;

	if (!cs->pin_metadata || len == 0 || len > LSQ_CACHE_PIN_MAX ||
	    offset >= src->size || len > src->size - offset) {
		lsq_source_advise(cs->inner, offset, len);
		return;
	}
	pthread_mutex_lock(&cs->pin_mu);
	if (cs->pin_state == PIN_NONE) {
		cs->pin_off = offset;
		cs->pin_len = len;
		cs->pin_state = PIN_WANTED;
	}
	pthread_mutex_unlock(&cs->pin_mu);
}

static void cache_destroy(struct lsq_source *src)
{
	struct cache_source *cs = (struct cache_source *)src;

	lsq_block_cache_destroy(cs->ram);
	lsq_disk_cache_close(cs->disk);
	lsq_cas_close(cs->cas);
	free(cs->dir);
	free(cs->disk_origin);
	free(cs->cas_origin);
	lsq_block_put(atomic_load(&cs->pin));
	lsq_source_destroy(cs->inner);
	pthread_mutex_destroy(&cs->pin_mu);
	pthread_cond_destroy(&cs->pin_cv);
	free(src->name);
	free(cs);
}

static const struct lsq_source_ops cache_ops = {
	.read_at = cache_read_at,
	.refetch = cache_refetch,
	.advise = cache_advise,
	.destroy = cache_destroy,
};

/* Only read through the per-call loader (lsq_block_cache_get_with). */
static int no_loader(void *ctx, uint64_t key, struct lsq_block **out)
{
	return LSQ_ERR_INVALID;
}

int lsq_source_cache_wrap(struct lsq_source *inner,
			  const struct lsq_cache_options *opt,
			  struct lsq_source **out, char *warn, size_t warnlen)
{
	struct cache_source *cs;
	int ret;

	if (warnlen)
		warn[0] = '\0';
	cs = calloc(1, sizeof(*cs));
	if (!cs)
		return LSQ_ERR_NOMEM;
	cs->base.ops = &cache_ops;
	cs->base.size = inner->size;
	cs->base.reads_ahead = inner->reads_ahead;
	cs->base.name = strdup(inner->name ? inner->name : "");
	if (!cs->base.name) {
		free(cs);
		return LSQ_ERR_NOMEM;
	}
	cs->pin_metadata = opt->pin_metadata != 0;
	pthread_mutex_init(&cs->pin_mu, NULL);
	pthread_cond_init(&cs->pin_cv, NULL);
	if (opt->block_cache_bytes) {
		ret = lsq_block_cache_create((size_t)opt->block_cache_bytes, 0,
					     no_loader, cs, &cs->ram);
		if (ret) {
			cs->inner = NULL;
			cache_destroy(&cs->base);
			return ret;
		}
	}
	if (opt->dir && opt->dir_bytes) {
		cs->dir = strdup(opt->dir);
		cs->dir_bytes = opt->dir_bytes;
		if (asprintf(&cs->disk_origin, "cache_dir %s", opt->dir) < 0)
			cs->disk_origin = NULL;
		if (asprintf(&cs->cas_origin, "cache_dir %s/cas", opt->dir) < 0)
			cs->cas_origin = NULL;
		if (!inner->identity)
			snprintf(warn, warnlen,
				 "cache_dir: %s has no ETag or Last-Modified, so a changed image could not be told apart; running without the persistent cache",
				 inner->name);
		else if (lsq_disk_cache_open(opt->dir, inner->identity,
					     inner->size, opt->dir_bytes,
					     &cs->disk, warn, warnlen) != LSQ_OK)
			cs->disk = NULL;
	}
	cs->inner = inner;
	*out = &cs->base;
	return LSQ_OK;
}

int lsq_source_cache_get_stats(const struct lsq_source *src,
			       struct lsq_cache_stats *out)
{
	struct cache_source *cs = (struct cache_source *)src;
	struct lsq_block *pin;

	if (src->ops != &cache_ops)
		return LSQ_ERR_INVALID;
	memset(out, 0, sizeof(*out));
	if (cs->ram) {
		struct lsq_block_cache_stats st;

		lsq_block_cache_get_stats(cs->ram, &st);
		out->ram_hits = st.hits;
		out->ram_misses = st.misses + st.waits;
		out->ram_evictions = st.evictions;
		out->ram_bytes = st.bytes;
	}
	if (cs->disk) {
		struct lsq_disk_cache_stats st;

		lsq_disk_cache_get_stats(cs->disk, &st);
		out->disk_hits = st.hits;
		out->disk_misses = st.misses;
		out->disk_writes = st.writes;
		out->disk_corrupt = st.corrupt;
		out->disk_evictions = st.evictions;
		out->disk_bytes = st.bytes;
	}
	if (cs->cas) {
		struct lsq_cas_stats st;

		lsq_cas_get_stats(cs->cas, &st);
		out->cas_hits = st.hits;
		out->cas_misses = st.misses;
		out->cas_writes = st.writes;
		out->cas_evictions = st.evictions;
		out->cas_bytes = st.bytes;
	}
	pin = atomic_load_explicit(&cs->pin, memory_order_acquire);
	out->pinned_bytes = pin ? pin->size : 0;
	out->prefetch_requests = atomic_load(&cs->pf_requests);
	out->prefetch_bytes = atomic_load(&cs->pf_bytes);
	out->prefetch_failures = atomic_load(&cs->pf_failures);
	out->prefetch_blocks = atomic_load(&cs->pf_blocks);
	out->prefetch_hits = atomic_load(&cs->pf_hits);
	out->prefetch_hit_bytes = atomic_load(&cs->pf_hit_bytes);
	out->background_requests = atomic_load(&cs->bg_requests);
	out->background_bytes = atomic_load(&cs->bg_bytes);
	out->background_failures = atomic_load(&cs->bg_failures);
	out->background_blocks = atomic_load(&cs->bg_blocks);
	out->background_hits = atomic_load(&cs->bg_hits);
	out->background_hit_bytes = atomic_load(&cs->bg_hit_bytes);
	return LSQ_OK;
}

int lsq_source_cache_use_digests(struct lsq_source *src,
				 lsq_unit_digest_fn digest_of, void *ctx,
				 char *warn, size_t warnlen)
{
	struct cache_source *cs = (struct cache_source *)src;
	struct lsq_cas_store *cas;
	int ret;

	if (warnlen)
		warn[0] = '\0';
	if (src->ops != &cache_ops || !cs->dir || cs->cas)
		return LSQ_OK;
	ret = lsq_cas_open(cs->dir, cs->dir_bytes, &cas, warn, warnlen);
	if (ret != LSQ_OK)
		return ret;
	cs->digest_of = digest_of;
	cs->digest_ctx = ctx;
	cs->cas = cas;  /* last: unit_digest() takes cas as the sign */
	return LSQ_OK;
}

void lsq_source_cache_check_units(struct lsq_source *src,
				  lsq_unit_check_fn check, void *ctx)
{
	struct cache_source *cs = (struct cache_source *)src;

	if (src->ops != &cache_ops)
		return;
	cs->check_ctx = ctx;
	cs->check = check;
}

bool lsq_source_cache_holds(struct lsq_source *src, uint64_t offset,
			    size_t len)
{
	struct cache_source *cs = (struct cache_source *)src;
	const uint8_t *d;

	if (src->ops != &cache_ops || !cs->cas)
		return false;
	d = unit_digest(cs, len, offset);
	return d && lsq_cas_holds(cs->cas, d);
}

bool lsq_source_cache_shares_units(const struct lsq_source *src)
{
	return src->ops == &cache_ops &&
	       ((const struct cache_source *)src)->cas != NULL;
}

const struct lsq_source *lsq_source_unwrap(const struct lsq_source *src)
{
	if (src->ops == &cache_ops)
		return ((const struct cache_source *)src)->inner;
	return src;
}
