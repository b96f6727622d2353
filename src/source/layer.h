/* SPDX-License-Identifier: MIT */
/*
 * layer.h - what the layers of a source stack share (source.c).
 */
#ifndef LSQ_SOURCE_LAYER_H
#define LSQ_SOURCE_LAYER_H

#include "lsq/source.h"

/* A layer over inner: its size, name and reads_ahead; owns inner from
 * here on only if this returns LSQ_OK. */
int lsq_layer_init(struct lsq_source *layer, const struct lsq_source_ops *ops,
		   struct lsq_source *inner);
/* Free what lsq_layer_init made and destroy the layers below. */
void lsq_layer_fini(struct lsq_source *layer);

/* Ranges larger than this bypass the RAM layer: no data or metadata
 * block is this big, so they are one-off reads (or a hostile image's). */
#define LSQ_LAYER_MAX_UNIT (2u * 1024u * 1024u)

/* Whether e is a unit a layer may keep: not empty, at most
 * LSQ_LAYER_MAX_UNIT, within src. */
bool lsq_extent_fits(const struct lsq_source *src,
		     const struct lsq_extent *e);

/* Read units[0..n) with one speculative read through src of the range
 * spanning them, [*lo, *lo + *span), into a buffer of the pool (*buf,
 * the caller frees it, also on failure); checked: NULL, or one per unit
 * (lsq_read.units_checked). LSQ_ERR_NOMEM, before any read, for a span
 * over 16 x LSQ_LAYER_MAX_UNIT (callers keep spans short; this bounds a
 * mistake). */
int lsq_layer_read_units(struct lsq_source *src,
			 const struct lsq_extent *units, size_t n,
			 bool *checked, uint8_t **buf, uint64_t *lo,
			 uint64_t *span);

/* The caching layers, each over inner (owned from here on on success);
 * lsq_source_open_stack composes them. */
int lsq_store_layer_create(struct lsq_source *inner,
			   const struct lsq_cache_options *opt,
			   struct lsq_source **out, char *warn,
			   size_t warnlen);
int lsq_ram_layer_create(struct lsq_source *inner, uint64_t bytes,
			 struct lsq_source **out);
int lsq_pin_layer_create(struct lsq_source *inner, struct lsq_source **out);

#endif
