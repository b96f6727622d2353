/* SPDX-License-Identifier: MIT */
/*
 * pin_layer.c - the image's metadata region, fetched whole and kept
 * (-o prefetch_metadata).
 *
 * The image advises the region once, right after the superblock: every
 * metadata table sits between the inode table and the end. The first
 * read in it fetches it whole, one round trip instead of one per
 * block, and every later lookup is served from memory.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cache/block_cache.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "source/layer.h"

enum pin_state { PIN_NONE, PIN_WANTED, PIN_LOADING, PIN_READY };

struct pin_layer {
	struct lsq_source base;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	enum pin_state state;
	uint64_t off, len;               /* set once, when WANTED */
	_Atomic(struct lsq_block *) pin; /* set once, when READY */
};

/* Single flight without holding the mutex across the fetch; rq: the
 * read that wants it. */
static int load_pin(struct pin_layer *pl, struct lsq_read *rq)
{
	struct lsq_block *blk;
	struct lsq_read sub;
	int ret;

	pthread_mutex_lock(&pl->mu);
	while (pl->state == PIN_LOADING)
		pthread_cond_wait(&pl->cv, &pl->mu);
	if (pl->state != PIN_WANTED) {
		pthread_mutex_unlock(&pl->mu);
		return LSQ_OK;
	}
	pl->state = PIN_LOADING;
	pthread_mutex_unlock(&pl->mu);

	blk = lsq_block_alloc((size_t)pl->len);
	ret = LSQ_ERR_NOMEM;
	if (blk) {
		sub = lsq_read_below(rq, blk->data, (size_t)pl->len, pl->off);
		sub.one_off = false;  /* the region is kept, whoever asks */
		ret = lsq_source_read(pl->base.inner, &sub);
		rq->origin = sub.origin;
	}

	pthread_mutex_lock(&pl->mu);
	if (ret == LSQ_OK) {
		blk->size = (size_t)pl->len;
		atomic_store_explicit(&pl->pin, blk, memory_order_release);
		pl->state = PIN_READY;
	} else {
		lsq_block_put(blk);
		pl->state = PIN_WANTED;  /* the next read tries again */
	}
	pthread_cond_broadcast(&pl->cv);
	pthread_mutex_unlock(&pl->mu);
	return ret;
}

/* Whether [off, off+len) lies in the region; len 0: not advised yet. */
static bool in_pin(const struct pin_layer *pl, size_t len, uint64_t off)
{
	return pl->len && off >= pl->off && len <= pl->len &&
	       off - pl->off <= pl->len - len;
}

static int pin_read(struct lsq_source *src, struct lsq_read *rq)
{
	struct pin_layer *pl = (struct pin_layer *)src;
	struct lsq_block *blk;
	int ret;

	blk = atomic_load_explicit(&pl->pin, memory_order_acquire);
	if (!blk && in_pin(pl, rq->len, rq->offset)) {
		ret = load_pin(pl, rq);
		if (ret)
			return ret;
		blk = atomic_load_explicit(&pl->pin, memory_order_acquire);
	}
	if (blk && in_pin(pl, rq->len, rq->offset)) {
		memcpy(rq->buf, blk->data + (rq->offset - pl->off), rq->len);
		rq->origin = "the pinned metadata region";
		return LSQ_OK;
	}
	return lsq_source_read(src->inner, rq);
}

/* Lazy: advise must not block, and the image's next reads are in the
 * region, so it is in memory before the mount answers. A region past the
 * cap goes to the layer below as advice. */
static void pin_advise(struct lsq_source *src, uint64_t offset, uint64_t len)
{
	struct pin_layer *pl = (struct pin_layer *)src;

	if (len == 0 || len > LSQ_CACHE_PIN_MAX || offset >= src->size ||
	    len > src->size - offset) {
		lsq_source_advise(src->inner, offset, len);
		return;
	}
	pthread_mutex_lock(&pl->mu);
	if (pl->state == PIN_NONE) {
		pl->off = offset;
		pl->state = PIN_WANTED;
		pl->len = len;
	}
	pthread_mutex_unlock(&pl->mu);
}

/* The pinned copy stays on a refetch (readers hold no reference to the
 * pin): a bad one costs a refetch per read of it, never bad bytes, and
 * the image's decompressed caches keep such reads rare. So refetch is
 * passed down. */

/* Prefetches leave out what the region holds. */
static int pin_prefetch(struct lsq_source *src, const struct lsq_extent *ext,
			size_t n, enum lsq_prefetch_mode mode,
			uint64_t *fetched)
{
	struct pin_layer *pl = (struct pin_layer *)src;
	struct lsq_extent *rest = malloc(n * sizeof(*rest));
	size_t k = 0;
	int ret;

	if (!rest)
		return LSQ_ERR_NOMEM;
	for (size_t i = 0; i < n; i++)
		if (!in_pin(pl, ext[i].len, ext[i].offset))
			rest[k++] = ext[i];
	ret = lsq_source_prefetch(src->inner, rest, k, mode, fetched);
	free(rest);
	return ret;
}

static unsigned pin_held(struct lsq_source *src, uint64_t offset, size_t len)
{
	return in_pin((struct pin_layer *)src, len, offset) ? LSQ_HELD_PIN : 0;
}

static unsigned pin_keeps(const struct lsq_source *src)
{
	return LSQ_HELD_PIN;
}

static void pin_counters(const struct lsq_source *src, lsq_counter_fn fn,
			 void *ctx)
{
	const struct pin_layer *pl = (const struct pin_layer *)src;
	struct lsq_block *blk = atomic_load_explicit(
		(_Atomic(struct lsq_block *) *)&pl->pin, memory_order_acquire);

	fn(ctx, "metadata_pinned_bytes", blk ? blk->size : 0,
	   LSQ_COUNTER_GAUGE);
}

static void pin_destroy(struct lsq_source *src)
{
	struct pin_layer *pl = (struct pin_layer *)src;

	lsq_block_put(atomic_load(&pl->pin));
	pthread_mutex_destroy(&pl->mu);
	pthread_cond_destroy(&pl->cv);
	lsq_layer_fini(src);
	free(pl);
}

static const struct lsq_source_ops pin_ops = {
	.read = pin_read,
	.destroy = pin_destroy,
	.advise = pin_advise,
	.prefetch = pin_prefetch,
	.held = pin_held,
	.keeps = pin_keeps,
	.counters = pin_counters,
};

int lsq_pin_layer_create(struct lsq_source *inner, struct lsq_source **out)
{
	struct pin_layer *pl = calloc(1, sizeof(*pl));

	if (!pl)
		return LSQ_ERR_NOMEM;
	if (lsq_layer_init(&pl->base, &pin_ops, inner) != LSQ_OK) {
		free(pl);
		return LSQ_ERR_NOMEM;
	}
	pthread_mutex_init(&pl->mu, NULL);
	pthread_cond_init(&pl->cv, NULL);
	*out = &pl->base;
	return LSQ_OK;
}
