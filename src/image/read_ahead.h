/* SPDX-License-Identifier: MIT */
/*
 * read_ahead.h - helper threads that load (fetch and decompress) the data
 * blocks of a multi-block read in parallel, into the image's data cache.
 *
 * A 1 MiB read is eight 128 KiB blocks; decompressing them one after the
 * other on the thread that answers it leaves the other CPUs idle, and the
 * kernel sends a sequential reader's readahead as one or two such reads at
 * a time. The thread answering a read hands the blocks after its first to
 * this pool and starts on the first; by the time it gets to the others they
 * are in the data cache, or being loaded (the cache's single-flight makes
 * it wait for that load rather than repeat it).
 */
#ifndef LSQ_IMAGE_READ_AHEAD_H
#define LSQ_IMAGE_READ_AHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct lsq_image;

#define LSQ_READ_AHEAD_QUEUE 64u
#define LSQ_READ_AHEAD_MAX_THREADS 64u

struct lsq_read_ahead_job {
	uint64_t offset;    /* absolute offset of the block */
	uint32_t size_word; /* its size word from the block list */
	uint64_t run_end;   /* run-end hint for the source (0: none) */
};

struct lsq_read_ahead {
	struct lsq_image *img;
	unsigned max_threads;   /* 0: disabled */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lsq_read_ahead_job queue[LSQ_READ_AHEAD_QUEUE];
	unsigned head, count;   /* mu */
	unsigned nthreads;      /* mu; started on first use */
	unsigned idle;          /* mu */
	bool stop;              /* mu */
	bool warned;            /* mu: could not start a thread */
	pthread_t threads[LSQ_READ_AHEAD_MAX_THREADS];
};

/* threads: helper threads at most (0 disables the pool). No thread starts
 * before the first submit, so a daemon may still fork after this. */
void lsq_read_ahead_init(struct lsq_read_ahead *ra, struct lsq_image *img,
			 unsigned threads);

/* Whether submitting is worth anything. */
static inline bool lsq_read_ahead_enabled(const struct lsq_read_ahead *ra)
{
	return ra->max_threads > 0;
}

/* Queue a block load; dropped when the queue is full (it is a hint: the
 * reader loads the block itself then). */
void lsq_read_ahead_submit(struct lsq_read_ahead *ra,
			   const struct lsq_read_ahead_job *job);

/* Stop and join the threads; queued jobs are dropped. */
void lsq_read_ahead_fini(struct lsq_read_ahead *ra);

#endif
