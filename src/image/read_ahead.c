/* SPDX-License-Identifier: MIT */
#include "image/read_ahead.h"

#include <string.h>

#include "common/log.h"
#include "image_internal.h"
#include "lsq/error.h"
#include "lsq/source.h"

void lsq_read_ahead_init(struct lsq_read_ahead *ra, struct lsq_image *img,
			 unsigned threads)
{
	memset(ra, 0, sizeof(*ra));
	ra->img = img;
	ra->max_threads = threads < LSQ_READ_AHEAD_MAX_THREADS
				  ? threads : LSQ_READ_AHEAD_MAX_THREADS;
	pthread_mutex_init(&ra->mu, NULL);
	pthread_cond_init(&ra->cv, NULL);
}

static void *read_ahead_main(void *arg)
{
	struct lsq_read_ahead *ra = arg;

	pthread_mutex_lock(&ra->mu);
	for (;;) {
		struct lsq_read_ahead_job job;
		struct lsq_block *blk;

		while (!ra->stop && ra->count == 0) {
			ra->idle++;
			pthread_cond_wait(&ra->cv, &ra->mu);
			ra->idle--;
		}
		if (ra->stop)
			break;
		job = ra->queue[ra->head];
		ra->head = (ra->head + 1) % LSQ_READ_AHEAD_QUEUE;
		ra->count--;
		pthread_mutex_unlock(&ra->mu);

		lsq_source_hint_run_end(job.run_end);
		/* Errors are the reader's to report when it reads the block. */
		if (lsq_data_block_get(ra->img, job.offset, job.size_word,
				       &blk) == LSQ_OK)
			lsq_block_put(blk);
		lsq_source_hint_run_end(0);

		pthread_mutex_lock(&ra->mu);
	}
	pthread_mutex_unlock(&ra->mu);
	return NULL;
}

void lsq_read_ahead_submit(struct lsq_read_ahead *ra,
			   const struct lsq_read_ahead_job *job)
{
	if (!ra->max_threads)
		return;
	pthread_mutex_lock(&ra->mu);
	if (ra->stop || ra->count == LSQ_READ_AHEAD_QUEUE) {
		pthread_mutex_unlock(&ra->mu);
		return;
	}
	ra->queue[(ra->head + ra->count) % LSQ_READ_AHEAD_QUEUE] = *job;
	ra->count++;
	if (ra->idle) {
		pthread_cond_signal(&ra->cv);
	} else if (ra->nthreads < ra->max_threads) {
		/* Started on demand, so never before a daemon's fork. */
		if (pthread_create(&ra->threads[ra->nthreads], NULL,
				   read_ahead_main, ra) == 0) {
			ra->nthreads++;
		} else if (ra->nthreads == 0) {
			ra->count--;  /* nobody would ever take it */
			if (!ra->warned)
				lsq_warn("parallel block loading: cannot "
					 "start a thread");
			ra->warned = true;
		}
	}
	pthread_mutex_unlock(&ra->mu);
}

void lsq_read_ahead_fini(struct lsq_read_ahead *ra)
{
	pthread_mutex_lock(&ra->mu);
	ra->stop = true;
	pthread_cond_broadcast(&ra->cv);
	pthread_mutex_unlock(&ra->mu);
	for (unsigned i = 0; i < ra->nthreads; i++)
		pthread_join(ra->threads[i], NULL);
	ra->nthreads = 0;
	pthread_cond_destroy(&ra->cv);
	pthread_mutex_destroy(&ra->mu);
}
