/* SPDX-License-Identifier: MIT */
/*
 * codec_pool.c - per-CPU slots of reusable decompression contexts.
 *
 * Decompression runs on the thread that needs the data; the pool only lends
 * it a context. A thread starts at the slot of the CPU it runs on, so with
 * one slot per CPU two threads rarely meet on the same mutex; when they do,
 * it tries the other slots before blocking. There is no pool-wide lock.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "lsq/error.h"
#include "codec/codec_i.h"

#define SLOT_ALIGN 64

/* One cache line per slot so neighbouring CPUs do not false-share. */
struct lsq_codec_slot {
	_Alignas(SLOT_ALIGN) pthread_mutex_t lock;
	void *ctx; /* protected by lock; NULL until first use */
};

struct lsq_codec_pool {
	const struct lsq_codec_ops *ops;
	const struct lsq_codec_cfg *cfg; /* owned by the codec, read-only */
	unsigned n;
	struct lsq_codec_slot *slots;
};

int lsq_codec_pool_create(const struct lsq_codec_ops *ops,
			  const struct lsq_codec_cfg *cfg, unsigned slots,
			  struct lsq_codec_pool **out)
{
	struct lsq_codec_pool *pool;
	size_t bytes = (size_t)slots * sizeof(struct lsq_codec_slot);
	unsigned i;

	if (slots == 0)
		return LSQ_ERR_INVALID;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return LSQ_ERR_NOMEM;
	/* sizeof(slot) is a multiple of SLOT_ALIGN, as aligned_alloc wants */
	pool->slots = aligned_alloc(SLOT_ALIGN, bytes);
	if (!pool->slots)
		goto fail_free_pool;
	memset(pool->slots, 0, bytes);
	for (i = 0; i < slots; i++) {
		if (pthread_mutex_init(&pool->slots[i].lock, NULL) != 0)
			goto fail_destroy_locks;
	}
	pool->ops = ops;
	pool->cfg = cfg;
	pool->n = slots;
	*out = pool;
	return LSQ_OK;

fail_destroy_locks:
	while (i-- > 0)
		pthread_mutex_destroy(&pool->slots[i].lock);
	free(pool->slots);
fail_free_pool:
	free(pool);
	return LSQ_ERR_NOMEM;
}

void lsq_codec_pool_destroy(struct lsq_codec_pool *pool)
{
	if (!pool)
		return;
	for (unsigned i = 0; i < pool->n; i++) {
		if (pool->slots[i].ctx)
			pool->ops->ctx_destroy(pool->slots[i].ctx);
		pthread_mutex_destroy(&pool->slots[i].lock);
	}
	free(pool->slots);
	free(pool);
}

static unsigned home_slot(const struct lsq_codec_pool *pool)
{
	int cpu = sched_getcpu();

	/* sched_getcpu can fail (e.g. unsupported); any slot is correct */
	return cpu < 0 ? 0 : (unsigned)cpu % pool->n;
}

int lsq_codec_pool_acquire(struct lsq_codec_pool *pool,
			   struct lsq_codec_slot **slot, void **ctx)
{
	unsigned home = home_slot(pool);
	struct lsq_codec_slot *s = NULL;
	int err;

	for (unsigned i = 0; i < pool->n; i++) {
		struct lsq_codec_slot *cand;

		cand = &pool->slots[(home + i) % pool->n];
		if (pthread_mutex_trylock(&cand->lock) == 0) {
			s = cand;
			break;
		}
	}
	if (!s) {
		/* all busy: queue on our own CPU's slot */
		s = &pool->slots[home];
		if (pthread_mutex_lock(&s->lock) != 0)
			abort(); /* only on misuse of the mutex */
	}

	if (!s->ctx) {
		err = pool->ops->ctx_create(pool->cfg, &s->ctx);
		if (err < 0) {
			s->ctx = NULL;
			pthread_mutex_unlock(&s->lock);
			return err;
		}
	}
	*slot = s;
	*ctx = s->ctx;
	return LSQ_OK;
}

void lsq_codec_pool_release(struct lsq_codec_slot *slot)
{
	pthread_mutex_unlock(&slot->lock);
}
