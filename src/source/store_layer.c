/* SPDX-License-Identifier: MIT */
/*
 * store_layer.c - the layer where units are loaded: checked and kept.
 *
 * Every range the layers above cannot serve is loaded here, once: from
 * the persistent cache (-o cache_dir=, src/cache/disk_cache.c) or, for a
 * signed image, from cache_dir's content-addressed store of the units
 * its manifest lists (src/cache/cas_store.c, shared with every image and
 * version mounted with that cache_dir), else from the layer below, and
 * what comes from below is written back.
 *
 * A signed image's units are checked here as they load (lsq_read.checked
 * says so, and the RAM layer above keeps the answer with its copy), so
 * each is hashed once per load. The check and the store are one layer
 * because the store must not keep a unit that failed its check, and a
 * check in a layer of its own would hash every unit twice.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cas_store.h"
#include "cache/disk_cache.h"
#include "common/bufpool.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "source/layer.h"

struct store_layer {
	struct lsq_source base;
	struct lsq_disk_cache *disk;   /* NULL: no cache_dir */
	char *dir;                     /* cache_dir (NULL: none), its bound */
	uint64_t dir_bytes;
	char *disk_origin, *cas_origin;  /* lsq_read.origin */
	struct lsq_cas_store *cas;     /* NULL: not a signed image */
	struct lsq_unit_checks units;  /* digest_of set with cas; check
					* NULL: units are not checked */

	/* background fetch kept here (LSQ_PREFETCH_BACKGROUND) */
	atomic_uint_least64_t bg_requests, bg_bytes, bg_failures, bg_blocks;
};

/* The digest of a unit the content-addressed store keeps, or NULL. */
static const uint8_t *unit_digest(const struct store_layer *st, size_t len,
				  uint64_t off)
{
	return st->cas ? st->units.digest_of(st->units.ctx, off, len) : NULL;
}

/* Whether buf is the unit the image's manifest lists at off. */
static bool unit_good(const struct store_layer *st, const void *buf,
		      size_t len, uint64_t off)
{
	return st->units.check &&
	       st->units.check(st->units.ctx, buf, len, off);
}

/* The persistent copy of a range: the store of its digest d (unit_digest),
 * else the image's own cache file. *origin: which. */
static int persisted_read(struct store_layer *st, const uint8_t *d,
			  void *buf, size_t len, uint64_t off,
			  const char **origin)
{
	int ret = LSQ_ERR_NOT_FOUND;

	if (d)
		ret = lsq_cas_read(st->cas, d, buf, len);
	else if (st->disk)
		ret = lsq_disk_cache_read(st->disk, buf, len, off);
	if (ret == LSQ_OK)
		*origin = d ? st->cas_origin : st->disk_origin;
	return ret;
}

/* Fresh bytes of a unit (from below, or a refetch) go to the persistent
 * cache; a unit of the shared store only once it passed its check (when
 * units are checked), so the store never keeps bytes known to be bad.
 * replace: the stored copy failed its digest (a refetch). Returns
 * unit_good(). */
static bool keep_fetched(struct store_layer *st, const void *buf, size_t len,
			 uint64_t off, bool replace)
{
	const uint8_t *d = unit_digest(st, len, off);
	bool good = unit_good(st, buf, len, off);

	if (!good && d && st->units.check)
		return false;
	if (d)
		lsq_cas_write(st->cas, d, buf, len, replace);
	else if (st->disk)
		lsq_disk_cache_write(st->disk, buf, len, off);
	return good;
}

/* A span of several units (a prefetch's): one read below, then each unit
 * kept on its own. */
static int read_units(struct store_layer *st, struct lsq_read *rq)
{
	int ret = lsq_source_read(st->base.inner, rq);

	if (ret)
		return ret;
	for (size_t i = 0; i < rq->nunits; i++) {
		const struct lsq_extent *u = &rq->units[i];
		bool good = keep_fetched(st,
					 (uint8_t *)rq->buf +
						 (u->offset - rq->offset),
					 u->len, u->offset, false);

		if (rq->units_checked)
			rq->units_checked[i] = good;
	}
	return LSQ_OK;
}

static int store_read(struct lsq_source *src, struct lsq_read *rq)
{
	struct store_layer *st = (struct store_layer *)src;
	int ret;

	if (rq->nunits)
		return read_units(st, rq);
	if (rq->one_off)
		return lsq_source_read(src->inner, rq);
	if (persisted_read(st, unit_digest(st, rq->len, rq->offset), rq->buf,
			   rq->len, rq->offset, &rq->origin) == LSQ_OK) {
		rq->checked = unit_good(st, rq->buf, rq->len, rq->offset);
		return LSQ_OK;
	}
	ret = lsq_source_read(src->inner, rq);
	if (ret == LSQ_OK)
		rq->checked = keep_fetched(st, rq->buf, rq->len, rq->offset,
					   false);
	return ret;
}

/* Past the persistent copy to the layers below; what comes back replaces
 * it (a unit of the shared store: only if it passes its check). */
static int store_refetch(struct lsq_source *src, struct lsq_read *rq)
{
	struct store_layer *st = (struct store_layer *)src;
	int ret = lsq_source_refetch(src->inner, rq);

	if (ret == LSQ_OK)
		keep_fetched(st, rq->buf, rq->len, rq->offset, true);
	return ret;
}

static unsigned store_held(struct lsq_source *src, uint64_t offset,
			   size_t len)
{
	struct store_layer *st = (struct store_layer *)src;
	const uint8_t *d = unit_digest(st, len, offset);

	if (d)
		return lsq_cas_holds(st->cas, d) ? LSQ_HELD_SHARED : 0;
	return st->disk && lsq_disk_cache_has(st->disk, len, offset)
		       ? LSQ_HELD_DISK : 0;
}

static unsigned store_keeps(const struct lsq_source *src)
{
	const struct store_layer *st = (const struct store_layer *)src;

	return (st->disk ? LSQ_HELD_DISK : 0) |
	       (st->cas ? LSQ_HELD_SHARED : 0);
}

/* Background fetch into the persistent cache: the extents it holds no
 * copy of, in one speculative read (the layers above left out theirs). */
static int store_prefetch(struct lsq_source *src, const struct lsq_extent *ext,
			  size_t n, enum lsq_prefetch_mode mode,
			  uint64_t *fetched)
{
	struct store_layer *st = (struct store_layer *)src;
	struct lsq_extent *want;
	uint64_t lo, span;
	uint8_t *buf = NULL;
	size_t nwant = 0;
	int ret = LSQ_OK;

	if (mode != LSQ_PREFETCH_BACKGROUND || (!st->disk && !st->cas))
		return lsq_source_prefetch(src->inner, ext, n, mode, fetched);
	want = malloc(n * sizeof(*want));
	if (!want)
		return LSQ_ERR_NOMEM;
	for (size_t i = 0; i < n; i++)
		if (lsq_extent_fits(src, &ext[i]) &&
		    !store_held(src, ext[i].offset, ext[i].len))
			want[nwant++] = ext[i];
	if (nwant == 0)
		goto out;
	/* through this layer's own read, which keeps each unit */
	ret = lsq_layer_read_units(src, want, nwant, NULL, &buf, &lo, &span);
	if (ret == LSQ_ERR_NOMEM)
		goto out;
	atomic_fetch_add_explicit(&st->bg_requests, 1, memory_order_relaxed);
	if (ret) {
		atomic_fetch_add_explicit(&st->bg_failures, 1,
					  memory_order_relaxed);
		goto out;
	}
	*fetched = span;
	atomic_fetch_add_explicit(&st->bg_bytes, span, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->bg_blocks, nwant, memory_order_relaxed);
out:
	lsq_bufpool_free(buf);
	free(want);
	return ret;
}

static void store_counters(const struct lsq_source *src, lsq_counter_fn fn,
			   void *ctx)
{
	const struct store_layer *st = (const struct store_layer *)src;

	if (st->disk) {
		struct lsq_disk_cache_stats s;

		lsq_disk_cache_get_stats(st->disk, &s);
		fn(ctx, "disk_cache_hits", s.hits, LSQ_COUNTER_TOTAL);
		fn(ctx, "disk_cache_misses", s.misses, LSQ_COUNTER_TOTAL);
		fn(ctx, "disk_cache_writes", s.writes, LSQ_COUNTER_TOTAL);
		fn(ctx, "disk_cache_corrupt", s.corrupt, LSQ_COUNTER_TOTAL);
		fn(ctx, "disk_cache_evictions", s.evictions,
		   LSQ_COUNTER_TOTAL);
		fn(ctx, "disk_cache_bytes", s.bytes, LSQ_COUNTER_GAUGE);
		fn(ctx, "disk_cache_limit_bytes", s.budget, LSQ_COUNTER_GAUGE);
	}
	if (st->cas) {
		struct lsq_cas_stats s;

		lsq_cas_get_stats(st->cas, &s);
		fn(ctx, "cas_hits", s.hits, LSQ_COUNTER_TOTAL);
		fn(ctx, "cas_misses", s.misses, LSQ_COUNTER_TOTAL);
		fn(ctx, "cas_writes", s.writes, LSQ_COUNTER_TOTAL);
		fn(ctx, "cas_evictions", s.evictions, LSQ_COUNTER_TOTAL);
		fn(ctx, "cas_bytes", s.bytes, LSQ_COUNTER_GAUGE);
		fn(ctx, "cas_limit_bytes", s.budget, LSQ_COUNTER_GAUGE);
	}
	fn(ctx, "background_requests", atomic_load(&st->bg_requests),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_bytes", atomic_load(&st->bg_bytes),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_failures", atomic_load(&st->bg_failures),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_blocks", atomic_load(&st->bg_blocks),
	   LSQ_COUNTER_TOTAL);
}

/* From now on units are checked as they load; with a cache_dir, the
 * units the manifest lists go to its shared store instead of the image's
 * own cache file, which keeps the rest (the pinned metadata region, the
 * manifest). The store does not check units itself: what the check
 * refuses the caller refetches, which stores it again. */
static int store_use_units(struct lsq_source *src,
			   const struct lsq_unit_checks *units, char *warn,
			   size_t warnlen)
{
	struct store_layer *st = (struct store_layer *)src;
	struct lsq_cas_store *cas;
	int ret;

	st->units.check = units->check;
	st->units.digest_of = units->digest_of;
	st->units.ctx = units->ctx;
	if (!st->dir || st->cas || !units->digest_of)
		return LSQ_OK;
	ret = lsq_cas_open(st->dir, st->dir_bytes, &cas, warn, warnlen);
	if (ret != LSQ_OK)
		return ret;
	st->cas = cas;  /* last: unit_digest() takes cas as the sign */
	return LSQ_OK;
}

static void store_destroy(struct lsq_source *src)
{
	struct store_layer *st = (struct store_layer *)src;

	lsq_disk_cache_close(st->disk);
	lsq_cas_close(st->cas);
	free(st->dir);
	free(st->disk_origin);
	free(st->cas_origin);
	lsq_layer_fini(src);
	free(st);
}

static const struct lsq_source_ops store_ops = {
	.read = store_read,
	.destroy = store_destroy,
	.refetch = store_refetch,
	.prefetch = store_prefetch,
	.held = store_held,
	.keeps = store_keeps,
	.counters = store_counters,
	.use_units = store_use_units,
};

int lsq_store_layer_create(struct lsq_source *inner,
			   const struct lsq_cache_options *opt,
			   struct lsq_source **out, char *warn,
			   size_t warnlen)
{
	struct store_layer *st = calloc(1, sizeof(*st));

	if (warnlen)
		warn[0] = '\0';
	if (!st)
		return LSQ_ERR_NOMEM;
	if (lsq_layer_init(&st->base, &store_ops, inner) != LSQ_OK) {
		free(st);
		return LSQ_ERR_NOMEM;
	}
	if (opt->dir && opt->dir_bytes) {
		st->dir = strdup(opt->dir);
		st->dir_bytes = opt->dir_bytes;
		if (asprintf(&st->disk_origin, "cache_dir %s", opt->dir) < 0)
			st->disk_origin = NULL;
		if (asprintf(&st->cas_origin, "cache_dir %s/cas", opt->dir) < 0)
			st->cas_origin = NULL;
		if (!inner->identity)
			snprintf(warn, warnlen,
				 "cache_dir: %s has no ETag or Last-Modified, so a changed image could not be told apart; running without the persistent cache",
				 inner->name);
		else if (lsq_disk_cache_open(opt->dir, inner->identity,
					     inner->location, inner->size,
					     opt->dir_bytes, &st->disk, warn,
					     warnlen) != LSQ_OK)
			st->disk = NULL;
	}
	*out = &st->base;
	return LSQ_OK;
}
