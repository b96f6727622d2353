/* SPDX-License-Identifier: MIT */
/*
 * ordered_pool.h - a ticketed work pool that returns jobs in submission
 * order, in two implementations with one interface:
 *
 *   ordered_pool.c         worker threads (work queue + done slots)
 *   ordered_pool_serial.c  no threads: process runs in dequeue; the
 *                          reference the threaded pool must equal.
 *
 * Rules: only one thread (the owner) calls submit/dequeue/destroy. The
 * process callback runs unlocked on a worker (or on the owner, serially),
 * touches only its job and its own worker context, and never calls back
 * into the pool. Jobs come back from dequeue strictly in submit order, so
 * everything the owner does with them is independent of the thread count.
 * A job's processing result (an lsq_err) is stored in job->err; the pool
 * never interprets it.
 */
#ifndef LSQ_ORDERED_POOL_H
#define LSQ_ORDERED_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Embed as the first member of a job. */
struct lsq_opool_item {
	struct lsq_opool_item *next; /* work queue link, owned by the pool */
	uint64_t ticket;             /* submit order, set by submit */
	int err;                     /* set from the process callback */
};

struct lsq_opool_ops {
	/* Create one worker's private context (e.g. a compressor); NULL means
	 * failure. Called on the owner thread during create. */
	void *(*worker_create)(void *arg);
	void (*worker_destroy)(void *wctx);
	/* Process one job with the worker's context; return an lsq_err. */
	int (*process)(void *wctx, struct lsq_opool_item *job);
};

struct lsq_opool;

/* workers: threads for the threaded pool (>= 1); capacity: jobs that may be
 * submitted and not yet dequeued. Returns NULL on failure. */
struct lsq_opool *lsq_opool_create(unsigned workers, size_t capacity,
				   const struct lsq_opool_ops *ops, void *arg);
struct lsq_opool *lsq_opool_serial_create(size_t capacity,
					  const struct lsq_opool_ops *ops,
					  void *arg);

/* Queue a job. LSQ_ERR_RANGE if capacity jobs are already pending: the
 * owner must dequeue first. */
int lsq_opool_submit(struct lsq_opool *pool, struct lsq_opool_item *job);

/* Jobs submitted and not yet dequeued. */
size_t lsq_opool_pending(const struct lsq_opool *pool);

/* Next job in submit order, waiting for it; NULL when nothing is pending. */
struct lsq_opool_item *lsq_opool_dequeue(struct lsq_opool *pool);

/* Stops the workers; pending jobs are dropped (not freed: the owner owns
 * them). Accepts NULL. */
void lsq_opool_destroy(struct lsq_opool *pool);

/* Internal vtable shared by both implementations. */
struct lsq_opool_impl {
	int (*submit)(struct lsq_opool *pool, struct lsq_opool_item *job);
	struct lsq_opool_item *(*dequeue)(struct lsq_opool *pool);
	void (*destroy)(struct lsq_opool *pool);
};

struct lsq_opool {
	const struct lsq_opool_impl *impl;
	size_t pending;   /* owner thread only */
	size_t capacity;
	uint64_t next_ticket; /* owner thread only */
};

#endif
