/* SPDX-License-Identifier: MIT */
/*
 * ram_layer.c - the RAM cache of ranges read (-o block_cache=).
 *
 * The image reads each compressed block, metadata block and table as one
 * exact range, so ranges are kept by their offset in a sharded LRU with
 * single flight (src/cache/block_cache.c): a repeated read never goes
 * below again, and readers of a range in flight wait for the one load.
 * A copy keeps what its load said of it: checked (a signed image's unit
 * passed its digest in the store layer below), and whether a prefetch or
 * background fetch stored it (their hits are counted).
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cache/block_cache.h"
#include "common/bufpool.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "source/layer.h"

/* lsq_block.aux bits, set before the block is published and never after */
#define PREFETCHED 1u  /* stored by a profile's prefetch */
#define CHECKED 2u     /* a unit that passed its check */
#define BACKGROUND 4u  /* stored by background fetch */

struct ram_layer {
	struct lsq_source base;
	struct lsq_block_cache *cache;

	atomic_uint_least64_t pf_requests, pf_bytes, pf_failures, pf_blocks,
		pf_hits, pf_hit_bytes;
	atomic_uint_least64_t bg_requests, bg_bytes, bg_failures, bg_blocks,
		bg_hits, bg_hit_bytes;
};

/* A load of the range a read wants, on the reader's thread. */
struct ram_load {
	struct ram_layer *rl;
	struct lsq_read *rq;
};

static int ram_loader(void *ctx, uint64_t key, struct lsq_block **out)
{
	struct ram_load *ld = ctx;
	size_t len = ld->rq->len;
	struct lsq_block *blk = lsq_block_alloc(len);
	struct lsq_read sub;
	int ret;

	if (!blk)
		return LSQ_ERR_NOMEM;
	sub = lsq_read_below(ld->rq, blk->data, len, key);
	ret = lsq_source_read(ld->rl->base.inner, &sub);
	ld->rq->origin = sub.origin;
	if (ret) {
		lsq_block_put(blk);
		return ret;
	}
	blk->size = len;
	blk->aux = sub.checked ? CHECKED : 0;
	*out = blk;
	return LSQ_OK;
}

static void count_hit(struct ram_layer *rl, const struct lsq_block *blk,
		      size_t len)
{
	if (blk->aux & BACKGROUND) {
		atomic_fetch_add_explicit(&rl->bg_hits, 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&rl->bg_hit_bytes, len,
					  memory_order_relaxed);
	} else if (blk->aux & PREFETCHED) {
		atomic_fetch_add_explicit(&rl->pf_hits, 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&rl->pf_hit_bytes, len,
					  memory_order_relaxed);
	}
}

static int ram_read(struct lsq_source *src, struct lsq_read *rq)
{
	struct ram_layer *rl = (struct ram_layer *)src;
	struct ram_load ld = { rl, rq };
	struct lsq_block *blk;
	int ret;

	if (rq->one_off || rq->nunits || rq->len > LSQ_LAYER_MAX_UNIT)
		return lsq_source_read(src->inner, rq);
	/* a load for this read notes its own origin instead */
	rq->origin = "block_cache";
	ret = lsq_block_cache_get_with(rl->cache, rq->offset, ram_loader, &ld,
				       &blk);
	if (ret)
		return ret;
	count_hit(rl, blk, rq->len);
	if (blk->size == rq->len) {
		memcpy(rq->buf, blk->data, rq->len);
		rq->checked = (blk->aux & CHECKED) != 0;
		lsq_block_put(blk);
		return LSQ_OK;
	}
	/* Another length at this offset (only a hostile image does that):
	 * serve it uncached rather than evict the first. */
	lsq_block_put(blk);
	return lsq_source_read(src->inner, rq);
}

/* Past the RAM copy: what comes back is kept below where a layer can
 * keep it, and the RAM copy is dropped (the next read loads the good
 * one). */
static int ram_refetch(struct lsq_source *src, struct lsq_read *rq)
{
	struct ram_layer *rl = (struct ram_layer *)src;
	int ret = lsq_source_refetch(src->inner, rq);

	if (ret == LSQ_OK)
		lsq_block_cache_drop(rl->cache, rq->offset);
	return ret;
}

/* A block for an extent, copied from a span's bytes. */
static struct lsq_block *extent_block(const uint8_t *data, size_t len,
				      unsigned aux)
{
	struct lsq_block *blk = lsq_block_alloc(len);

	if (blk) {
		memcpy(blk->data, data, len);
		blk->size = len;
		blk->aux = aux;
	}
	return blk;
}

/* A profile's prefetch: reserve each extent, so readers of it wait for
 * this fetch; those kept below (the persistent cache) are read from
 * there at once, the rest with one span. */
static int prefetch_reserved(struct ram_layer *rl,
			     const struct lsq_extent *ext, size_t n,
			     uint64_t *fetched)
{
	struct lsq_extent *units = malloc(n * sizeof(*units));
	struct lsq_block_reservation **unit_res = calloc(n, sizeof(*unit_res));
	bool *checked = calloc(n, sizeof(*checked));
	uint64_t lo = 0, span = 0;
	uint8_t *buf = NULL;
	size_t nunits = 0;
	int ret = LSQ_OK;

	if (!units || !unit_res || !checked) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct lsq_block_reservation *res = NULL;
		struct lsq_block *blk;
		struct lsq_read rq;

		if (!lsq_extent_fits(&rl->base, &ext[i]) ||
		    lsq_block_cache_reserve(rl->cache, ext[i].offset, &res) ||
		    !res)
			continue;
		if (lsq_source_held(rl->base.inner, ext[i].offset, ext[i].len,
				    LSQ_HELD_DISK | LSQ_HELD_SHARED) &&
		    (blk = lsq_block_alloc(ext[i].len)) != NULL) {
			rq = lsq_read_of(blk->data, ext[i].len, ext[i].offset);
			rq.speculative = true;
			if (lsq_source_read(rl->base.inner, &rq) == LSQ_OK) {
				blk->size = ext[i].len;
				blk->aux = PREFETCHED |
					   (rq.checked ? CHECKED : 0);
				lsq_block_cache_fulfil(rl->cache, res, blk);
				continue;
			}
			lsq_block_put(blk);
		}
		unit_res[nunits] = res;
		units[nunits++] = ext[i];
	}
	if (nunits == 0)
		goto out;
	ret = lsq_layer_read_units(rl->base.inner, units, nunits, checked, &buf,
				   &lo, &span);
	atomic_fetch_add_explicit(&rl->pf_requests, 1, memory_order_relaxed);
	if (ret == LSQ_OK) {
		*fetched = span;
		atomic_fetch_add_explicit(&rl->pf_bytes, *fetched,
					  memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&rl->pf_failures, 1,
					  memory_order_relaxed);
	}
	for (size_t i = 0; i < nunits; i++) {
		struct lsq_block *blk = NULL;

		if (ret == LSQ_OK)
			blk = extent_block(buf + (units[i].offset - lo),
					   units[i].len,
					   PREFETCHED |
						   (checked[i] ? CHECKED : 0));
		if (blk)
			atomic_fetch_add_explicit(&rl->pf_blocks, 1,
						  memory_order_relaxed);
		/* a NULL block lets the waiting readers fetch for
		 * themselves */
		lsq_block_cache_fulfil(rl->cache, unit_res[i], blk);
	}
out:
	lsq_bufpool_free(buf);
	free(units);
	free(unit_res);
	free(checked);
	return ret;
}

/* Background fetch kept here: no layer below keeps copies, so the units
 * RAM has no copy of go to RAM where no reader stored them meanwhile. */
static int background_to_ram(struct ram_layer *rl, struct lsq_extent *units,
			     size_t n, uint64_t *fetched)
{
	bool *checked = calloc(n, sizeof(*checked));
	uint8_t *buf = NULL;
	uint64_t lo, span;
	int ret;

	if (!checked)
		return LSQ_ERR_NOMEM;
	ret = lsq_layer_read_units(rl->base.inner, units, n, checked, &buf, &lo,
				   &span);
	if (ret == LSQ_ERR_NOMEM)
		goto out;
	atomic_fetch_add_explicit(&rl->bg_requests, 1, memory_order_relaxed);
	if (ret) {
		atomic_fetch_add_explicit(&rl->bg_failures, 1,
					  memory_order_relaxed);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct lsq_block_reservation *res = NULL;

		atomic_fetch_add_explicit(&rl->bg_blocks, 1,
					  memory_order_relaxed);
		if (lsq_block_cache_reserve(rl->cache, units[i].offset, &res) ||
		    !res)
			continue;
		lsq_block_cache_fulfil(
			rl->cache, res,
			extent_block(buf + (units[i].offset - lo),
				     units[i].len,
				     PREFETCHED | BACKGROUND |
					     (checked[i] ? CHECKED : 0)));
	}
	*fetched = span;
	atomic_fetch_add_explicit(&rl->bg_bytes, span, memory_order_relaxed);
out:
	lsq_bufpool_free(buf);
	free(checked);
	return ret;
}

static int ram_prefetch(struct lsq_source *src, const struct lsq_extent *ext,
			size_t n, enum lsq_prefetch_mode mode,
			uint64_t *fetched)
{
	struct ram_layer *rl = (struct ram_layer *)src;
	struct lsq_extent *want;
	size_t nwant = 0;
	int ret;

	if (mode == LSQ_PREFETCH_RESERVE)
		return prefetch_reserved(rl, ext, n, fetched);
	/* background: leave out what RAM has or is loading */
	want = malloc(n * sizeof(*want));
	if (!want)
		return LSQ_ERR_NOMEM;
	for (size_t i = 0; i < n; i++)
		if (!lsq_block_cache_has(rl->cache, ext[i].offset))
			want[nwant++] = ext[i];
	if (nwant == 0)
		ret = LSQ_OK;
	else if (lsq_source_keeps(src->inner) &
		 (LSQ_HELD_DISK | LSQ_HELD_SHARED))
		/* RAM stays for what readers fetch */
		ret = lsq_source_prefetch(src->inner, want, nwant, mode,
					  fetched);
	else {
		size_t k = 0;

		for (size_t i = 0; i < nwant; i++)
			if (lsq_extent_fits(src, &want[i]))
				want[k++] = want[i];
		ret = k ? background_to_ram(rl, want, k, fetched) : LSQ_OK;
	}
	free(want);
	return ret;
}

static unsigned ram_held(struct lsq_source *src, uint64_t offset, size_t len)
{
	struct ram_layer *rl = (struct ram_layer *)src;

	return lsq_block_cache_has(rl->cache, offset) ? LSQ_HELD_RAM : 0;
}

static unsigned ram_keeps(const struct lsq_source *src)
{
	return LSQ_HELD_RAM;
}

static void ram_counters(const struct lsq_source *src, lsq_counter_fn fn,
			 void *ctx)
{
	const struct ram_layer *rl = (const struct ram_layer *)src;
	struct lsq_block_cache_stats s;

	lsq_block_cache_get_stats(rl->cache, &s);
	fn(ctx, "block_cache_hits", s.hits, LSQ_COUNTER_TOTAL);
	fn(ctx, "block_cache_misses", s.misses + s.waits, LSQ_COUNTER_TOTAL);
	fn(ctx, "block_cache_evictions", s.evictions, LSQ_COUNTER_TOTAL);
	fn(ctx, "block_cache_bytes", s.bytes, LSQ_COUNTER_GAUGE);
	fn(ctx, "block_cache_limit_bytes", s.budget, LSQ_COUNTER_GAUGE);
	fn(ctx, "prefetch_requests", atomic_load(&rl->pf_requests),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "prefetch_bytes", atomic_load(&rl->pf_bytes),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "prefetch_failures", atomic_load(&rl->pf_failures),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "prefetch_blocks", atomic_load(&rl->pf_blocks),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "prefetch_hits", atomic_load(&rl->pf_hits), LSQ_COUNTER_TOTAL);
	fn(ctx, "prefetch_hit_bytes", atomic_load(&rl->pf_hit_bytes),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_requests", atomic_load(&rl->bg_requests),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_bytes", atomic_load(&rl->bg_bytes),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_failures", atomic_load(&rl->bg_failures),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_blocks", atomic_load(&rl->bg_blocks),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_hits", atomic_load(&rl->bg_hits),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_hit_bytes", atomic_load(&rl->bg_hit_bytes),
	   LSQ_COUNTER_TOTAL);
}

static void ram_destroy(struct lsq_source *src)
{
	struct ram_layer *rl = (struct ram_layer *)src;

	lsq_block_cache_destroy(rl->cache);
	lsq_layer_fini(src);
	free(rl);
}

static const struct lsq_source_ops ram_ops = {
	.read = ram_read,
	.destroy = ram_destroy,
	.refetch = ram_refetch,
	.prefetch = ram_prefetch,
	.held = ram_held,
	.keeps = ram_keeps,
	.counters = ram_counters,
};

/* Only read through the per-call loader (lsq_block_cache_get_with). */
static int no_loader(void *ctx, uint64_t key, struct lsq_block **out)
{
	return LSQ_ERR_INVALID;
}

int lsq_ram_layer_create(struct lsq_source *inner, uint64_t bytes,
			 struct lsq_source **out)
{
	struct ram_layer *rl = calloc(1, sizeof(*rl));
	int ret;

	if (!rl)
		return LSQ_ERR_NOMEM;
	ret = lsq_block_cache_create((size_t)bytes, 0, no_loader, rl,
				     &rl->cache);
	/* keys are image offsets; background fetch may fill the cache
	 * with the whole image: shards by 1 MiB stripes (the largest
	 * block) hold it evenly, within a stripe each */
	lsq_block_cache_stripe(rl->cache, 20);
	if (ret == LSQ_OK)
		ret = lsq_layer_init(&rl->base, &ram_ops, inner);
	if (ret) {
		lsq_block_cache_destroy(rl->cache);
		free(rl);
		return ret;
	}
	*out = &rl->base;
	return LSQ_OK;
}
