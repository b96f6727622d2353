/* SPDX-License-Identifier: MIT */
/* source.c - dispatch and accounting shared by every byte source. */
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/checked_math.h"
#include "common/long_work.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "source/layer.h"

/* l = the first layer from src down that has the optional operation
 * op, or NULL. */
#define FIND_LAYER(l, src, op)                                     \
	for ((l) = (src); (l) && !(l)->ops->op; (l) = (l)->inner) \
		;

int lsq_source_read(struct lsq_source *src, struct lsq_read *rq)
{
	int ret;

	/* Checked once here so no implementation can forget it. */
	if (lsq_range_outside(rq->offset, rq->len, src->size))
		return LSQ_ERR_OUT_OF_BOUNDS;
	rq->origin = NULL;
	rq->checked = false;
	if (rq->len == 0)
		return LSQ_OK;
	/* a fetch may wait, and wake us, for long */
	lsq_long_work_ahead(rq->long_work, LSQ_WORK_READ);
	ret = src->ops->read(src, rq);
	lsq_long_work_done(rq->long_work, LSQ_WORK_READ);
	atomic_fetch_add_explicit(&src->stats.reads, 1, memory_order_relaxed);
	if (ret == LSQ_OK)
		atomic_fetch_add_explicit(&src->stats.bytes_read, rq->len,
					  memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&src->stats.failures, 1,
					  memory_order_relaxed);
	return ret;
}

int lsq_source_read_at(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset)
{
	struct lsq_read rq = lsq_read_of(buf, len, offset);

	return lsq_source_read(src, &rq);
}

int lsq_source_refetch(struct lsq_source *src, struct lsq_read *rq)
{
	struct lsq_source *l;
	int ret;

	FIND_LAYER(l, src, refetch);
	if (!l)
		return lsq_source_read(src, rq);
	if (lsq_range_outside(rq->offset, rq->len, src->size))
		return LSQ_ERR_OUT_OF_BOUNDS;
	rq->origin = NULL;
	rq->checked = false;
	if (rq->len == 0)
		return LSQ_OK;
	lsq_long_work_ahead(rq->long_work, LSQ_WORK_READ);
	ret = l->ops->refetch(l, rq);
	lsq_long_work_done(rq->long_work, LSQ_WORK_READ);
	return ret;
}

void lsq_source_advise(struct lsq_source *src, uint64_t offset, uint64_t len)
{
	struct lsq_source *l;

	FIND_LAYER(l, src, advise);
	if (l)
		l->ops->advise(l, offset, len);
}

void lsq_source_destroy(struct lsq_source *src)
{
	if (src) {
		free(src->identity);
		free(src->location);
		src->identity = src->location = NULL;
		src->ops->destroy(src);
	}
}

uint64_t lsq_run_end(struct lsq_run *run)
{
	if (!run)
		return 0;
	if (run->fn) {  /* once per run */
		lsq_run_end_fn fn = run->fn;

		run->fn = NULL;
		run->end = fn(run->ctx);
	}
	return run->end;
}

/* [*lo, *hi): the range spanning ext[0..n) (empty when n is 0). */
static void extents_bounds(const struct lsq_extent *ext, size_t n,
			   uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (size_t i = 0; i < n; i++) {
		if (ext[i].offset < *lo)
			*lo = ext[i].offset;
		if (ext[i].offset + ext[i].len > *hi)
			*hi = ext[i].offset + ext[i].len;
	}
}

static void advise_span(struct lsq_source *src, const struct lsq_extent *ext,
			size_t n)
{
	uint64_t lo, hi;

	extents_bounds(ext, n, &lo, &hi);
	if (hi > lo)
		lsq_source_advise(src, lo, hi - lo);
}

int lsq_source_prefetch(struct lsq_source *src, const struct lsq_extent *ext,
			size_t n, enum lsq_prefetch_mode mode,
			uint64_t *fetched)
{
	struct lsq_source *l;
	uint64_t ignored;

	FIND_LAYER(l, src, prefetch);
	if (!fetched)
		fetched = &ignored;
	*fetched = 0;
	if (n == 0)
		return LSQ_OK;
	if (l)
		return l->ops->prefetch(l, ext, n, mode, fetched);
	/* nowhere to keep it: let the source read it ahead (a local
	 * file's page cache) */
	if (mode == LSQ_PREFETCH_RESERVE)
		advise_span(src, ext, n);
	return LSQ_OK;
}

unsigned lsq_source_held(struct lsq_source *src, uint64_t offset, size_t len,
			 unsigned which)
{
	unsigned bits = 0;

	for (; src; src = src->inner)
		if (src->ops->held && src->ops->keeps &&
		    (src->ops->keeps(src) & which))
			bits |= src->ops->held(src, offset, len);
	return bits & which;
}

unsigned lsq_source_keeps(const struct lsq_source *src)
{
	unsigned bits = 0;

	for (; src; src = src->inner)
		if (src->ops->keeps)
			bits |= src->ops->keeps(src);
	return bits;
}

void lsq_source_counters(const struct lsq_source *src, lsq_counter_fn fn,
			 void *ctx)
{
	for (; src; src = src->inner)
		if (src->ops->counters)
			src->ops->counters(src, fn, ctx);
}

int lsq_source_link(const struct lsq_source *src, struct lsq_link *out)
{
	const struct lsq_source *l;

	FIND_LAYER(l, src, link);
	return l ? l->ops->link(l, out) : LSQ_ERR_INVALID;
}

void lsq_source_allow_threads(struct lsq_source *src)
{
	for (; src; src = src->inner)
		if (src->ops->allow_threads)
			src->ops->allow_threads(src);
}

int lsq_source_use_units(struct lsq_source *src,
			 const struct lsq_unit_checks *units, char *warn,
			 size_t warnlen)
{
	struct lsq_source *l;

	FIND_LAYER(l, src, use_units);
	if (warnlen)
		warn[0] = '\0';
	return l ? l->ops->use_units(l, units, warn, warnlen) : LSQ_OK;
}

bool lsq_extent_fits(const struct lsq_source *src,
		     const struct lsq_extent *e)
{
	return e->len > 0 && e->len <= LSQ_LAYER_MAX_UNIT &&
	       !lsq_range_outside(e->offset, e->len, src->size);
}

int lsq_layer_read_units(struct lsq_source *src,
			 const struct lsq_extent *units, size_t n,
			 bool *checked, uint8_t **buf, uint64_t *lo,
			 uint64_t *span)
{
	struct lsq_read rq;
	uint64_t hi;

	extents_bounds(units, n, lo, &hi);
	*buf = NULL;
	*span = hi > *lo ? hi - *lo : 0;
	if (*span == 0 || *span > 16 * LSQ_LAYER_MAX_UNIT ||
	    !(*buf = lsq_bufpool_alloc((size_t)*span)))
		return LSQ_ERR_NOMEM;
	rq = lsq_read_of(*buf, (size_t)*span, *lo);
	rq.speculative = true;
	rq.units = units;
	rq.nunits = n;
	rq.units_checked = checked;
	return lsq_source_read(src, &rq);
}

int lsq_layer_init(struct lsq_source *layer, const struct lsq_source_ops *ops,
		   struct lsq_source *inner)
{
	layer->ops = ops;
	layer->size = inner->size;
	layer->reads_ahead = inner->reads_ahead;
	layer->name = strdup(inner->name ? inner->name : "");
	if (!layer->name)
		return LSQ_ERR_NOMEM;
	layer->inner = inner;
	return LSQ_OK;
}

void lsq_layer_fini(struct lsq_source *layer)
{
	lsq_source_destroy(layer->inner);
	free(layer->name);
}
