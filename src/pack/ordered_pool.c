/* SPDX-License-Identifier: MIT */
/*
 * ordered_pool.c - the threaded ordered pool. One mutex, two condition
 * variables: workers take the oldest job from the work queue, process it
 * unlocked, and put it in the done slot of its ticket (ticket % capacity);
 * the owner waits for the slot of the next ticket it expects. Since at most
 * 'capacity' jobs are pending, slots never collide.
 *
 * The owner never processes jobs itself: it is the reader and the writer,
 * and with N workers exactly N threads compress, so '-j N' means what
 * mksquashfs -processors N means (the main thread's reading, hashing of
 * tails and writing overlap compression), and -j 2 can be twice as fast
 * as -j 1 on two CPUs.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "lsq/error.h"
#include "pack/ordered_pool.h"

struct thread_pool {
	struct lsq_opool base;
	const struct lsq_opool_ops *ops;
	pthread_mutex_t lock;
	pthread_cond_t work_cond;  /* signalled: job queued or shutdown */
	pthread_cond_t done_cond;  /* signalled: the expected slot filled */
	struct lsq_opool_item *head, *tail; /* protected by lock */
	struct lsq_opool_item **done;       /* protected by lock */
	uint64_t next_out;                  /* protected by lock */
	bool shutdown;                      /* protected by lock */
	unsigned nthreads;  /* started threads */
	unsigned nargs;     /* worker contexts, one per thread */
	pthread_t *threads;
	struct worker_arg {
		struct thread_pool *pool;
		void *wctx;
	} *args;
};

static void *worker_main(void *p)
{
	struct worker_arg *wa = p;
	struct thread_pool *tp = wa->pool;

	pthread_mutex_lock(&tp->lock);
	for (;;) {
		struct lsq_opool_item *job;

		while (!tp->head && !tp->shutdown)
			pthread_cond_wait(&tp->work_cond, &tp->lock);
		if (tp->shutdown)
			break;
		job = tp->head;
		tp->head = job->next;
		if (!tp->head)
			tp->tail = NULL;
		pthread_mutex_unlock(&tp->lock);

		job->err = tp->ops->process(wa->wctx, job);

		pthread_mutex_lock(&tp->lock);
		tp->done[job->ticket % tp->base.capacity] = job;
		if (job->ticket == tp->next_out)
			pthread_cond_signal(&tp->done_cond);
	}
	pthread_mutex_unlock(&tp->lock);
	return NULL;
}

static int thread_submit(struct lsq_opool *p, struct lsq_opool_item *job)
{
	struct thread_pool *tp = (struct thread_pool *)p;

	job->next = NULL;
	pthread_mutex_lock(&tp->lock);
	if (tp->tail)
		tp->tail->next = job;
	else
		tp->head = job;
	tp->tail = job;
	pthread_cond_signal(&tp->work_cond);
	pthread_mutex_unlock(&tp->lock);
	return LSQ_OK;
}

static struct lsq_opool_item *thread_dequeue(struct lsq_opool *p)
{
	struct thread_pool *tp = (struct thread_pool *)p;
	struct lsq_opool_item *job;
	size_t slot;

	pthread_mutex_lock(&tp->lock);
	slot = tp->next_out % tp->base.capacity;
	while (!tp->done[slot])
		pthread_cond_wait(&tp->done_cond, &tp->lock);
	job = tp->done[slot];
	tp->done[slot] = NULL;
	tp->next_out++;
	pthread_mutex_unlock(&tp->lock);
	job->next = NULL;
	return job;
}

static void thread_destroy(struct lsq_opool *p)
{
	struct thread_pool *tp = (struct thread_pool *)p;

	pthread_mutex_lock(&tp->lock);
	tp->shutdown = true;
	pthread_cond_broadcast(&tp->work_cond);
	pthread_mutex_unlock(&tp->lock);
	for (unsigned i = 0; i < tp->nthreads; i++)
		pthread_join(tp->threads[i], NULL);
	if (tp->args && tp->ops->worker_destroy)
		for (unsigned i = 0; i < tp->nargs; i++)
			if (tp->args[i].wctx)
				tp->ops->worker_destroy(tp->args[i].wctx);
	pthread_cond_destroy(&tp->work_cond);
	pthread_cond_destroy(&tp->done_cond);
	pthread_mutex_destroy(&tp->lock);
	free(tp->threads);
	free(tp->args);
	free(tp->done);
	free(tp);
}

static const struct lsq_opool_impl thread_impl = {
	.submit = thread_submit,
	.dequeue = thread_dequeue,
	.destroy = thread_destroy,
};

struct lsq_opool *lsq_opool_create(unsigned workers, size_t capacity,
				   const struct lsq_opool_ops *ops, void *arg)
{
	struct thread_pool *tp;
	unsigned started = 0;

	if (workers == 0 || capacity == 0)
		return NULL;
	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return NULL;
	tp->base.impl = &thread_impl;
	tp->base.capacity = capacity;
	tp->ops = ops;
	pthread_mutex_init(&tp->lock, NULL);
	pthread_cond_init(&tp->work_cond, NULL);
	pthread_cond_init(&tp->done_cond, NULL);
	tp->done = calloc(capacity, sizeof(*tp->done));
	tp->threads = calloc(workers, sizeof(*tp->threads));
	tp->args = calloc(workers, sizeof(*tp->args));
	if (!tp->done || !tp->threads || !tp->args)
		goto fail;
	tp->nargs = workers;
	for (unsigned i = 0; i < workers; i++) {
		tp->args[i].pool = tp;
		if (ops->worker_create) {
			tp->args[i].wctx = ops->worker_create(arg);
			if (!tp->args[i].wctx)
				goto fail;
		}
	}
	for (; started < workers; started++)
		if (pthread_create(&tp->threads[started], NULL, worker_main,
				   &tp->args[started]))
			goto fail;
	tp->nthreads = workers;
	return &tp->base;
fail:
	/* also when an array is missing: nothing was started then */
	tp->nthreads = started;
	thread_destroy(&tp->base);
	return NULL;
}
