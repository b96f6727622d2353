/* SPDX-License-Identifier: MIT */
/*
 * ordered_pool_serial.c - the ordered pool without threads: submit queues,
 * dequeue processes the oldest job on the caller's thread. This is the
 * reference the threaded pool is tested against.
 */
#include <stdlib.h>

#include "lsq/error.h"
#include "pack/ordered_pool.h"

struct serial_pool {
	struct lsq_opool base;
	const struct lsq_opool_ops *ops;
	void *wctx;
	struct lsq_opool_item *head, *tail;
};

static int serial_submit(struct lsq_opool *p, struct lsq_opool_item *job)
{
	struct serial_pool *sp = (struct serial_pool *)p;

	job->next = NULL;
	if (sp->tail)
		sp->tail->next = job;
	else
		sp->head = job;
	sp->tail = job;
	return LSQ_OK;
}

static struct lsq_opool_item *serial_dequeue(struct lsq_opool *p)
{
	struct serial_pool *sp = (struct serial_pool *)p;
	struct lsq_opool_item *job = sp->head;

	if (!job)
		return NULL;
	sp->head = job->next;
	if (!sp->head)
		sp->tail = NULL;
	job->next = NULL;
	job->err = sp->ops->process(sp->wctx, job);
	return job;
}

static void serial_destroy(struct lsq_opool *p)
{
	struct serial_pool *sp = (struct serial_pool *)p;

	if (sp->ops->worker_destroy && sp->wctx)
		sp->ops->worker_destroy(sp->wctx);
	free(sp);
}

static const struct lsq_opool_impl serial_impl = {
	.submit = serial_submit,
	.dequeue = serial_dequeue,
	.destroy = serial_destroy,
};

struct lsq_opool *lsq_opool_serial_create(size_t capacity,
					  const struct lsq_opool_ops *ops,
					  void *arg)
{
	struct serial_pool *sp = calloc(1, sizeof(*sp));

	if (!sp || capacity == 0) {
		free(sp);
		return NULL;
	}
	sp->base.impl = &serial_impl;
	sp->base.capacity = capacity;
	sp->ops = ops;
	if (ops->worker_create) {
		sp->wctx = ops->worker_create(arg);
		if (!sp->wctx) {
			free(sp);
			return NULL;
		}
	}
	return &sp->base;
}

/* The common front end: ticketing and the capacity bound. */
int lsq_opool_submit(struct lsq_opool *pool, struct lsq_opool_item *job)
{
	int ret;

	if (pool->pending >= pool->capacity)
		return LSQ_ERR_RANGE;
	job->ticket = pool->next_ticket;
	job->err = LSQ_OK;
	ret = pool->impl->submit(pool, job);
	if (ret)
		return ret;
	pool->next_ticket++;
	pool->pending++;
	return LSQ_OK;
}

size_t lsq_opool_pending(const struct lsq_opool *pool)
{
	return pool->pending;
}

struct lsq_opool_item *lsq_opool_dequeue(struct lsq_opool *pool)
{
	struct lsq_opool_item *job;

	if (pool->pending == 0)
		return NULL;
	job = pool->impl->dequeue(pool);
	if (job)
		pool->pending--;
	return job;
}

void lsq_opool_destroy(struct lsq_opool *pool)
{
	if (pool)
		pool->impl->destroy(pool);
}
