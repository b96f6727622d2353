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
