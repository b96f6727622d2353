/* SPDX-License-Identifier: MIT */
/*
 * test_ordered_pool.c - the threaded ordered pool must hand jobs back in
 * submit order with the same results as its serial twin, for any worker
 * count, with jobs finishing out of order; capacity is enforced; a job's
 * error comes back with the job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lsq/error.h"
#include "pack/ordered_pool.h"

struct job {
	struct lsq_opool_item item;
	unsigned id;
	unsigned delay_us;
	uint64_t result;
};

static int failures;

#define CHECK(c)                                                            \
	do {                                                                \
		if (!(c)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, \
				__LINE__, #c);                              \
			failures++;                                         \
		}                                                           \
	} while (0)

static int workers_made;

static void *wcreate(void *arg)
{
	(void)arg;
	workers_made++;
	return malloc(1);
}

static void wdestroy(void *w)
{
	free(w);
}

static int process(void *w, struct lsq_opool_item *it)
{
	struct job *j = (struct job *)it;
	struct timespec ts = { 0, (long)j->delay_us * 1000 };
	uint64_t h = 1469598103934665603ull;

	(void)w;
	nanosleep(&ts, NULL);
	for (unsigned i = 0; i < 1000 + j->id % 97; i++)
		h = (h ^ (j->id + i)) * 1099511628211ull;
	j->result = h;
	return j->id % 50 == 49 ? LSQ_ERR_CODEC : LSQ_OK;
}

static const struct lsq_opool_ops ops = {
	.worker_create = wcreate,
	.worker_destroy = wdestroy,
	.process = process,
};

#define N 600

/* Submit N jobs through pool with at most cap pending; record results in
 * dequeue order. */
static void run(struct lsq_opool *pool, size_t cap, uint64_t *out,
		int *errs)
{
	static struct job jobs[N];
	unsigned next = 0, got = 0;

	srand(7);
	for (unsigned i = 0; i < N; i++) {
		jobs[i].id = i;
		jobs[i].delay_us = (unsigned)(rand() % 300);
	}
	while (got < N) {
		if (next < N && lsq_opool_pending(pool) < cap) {
			CHECK(lsq_opool_submit(pool, &jobs[next].item) == LSQ_OK);
			next++;
			continue;
		}
		struct job *j = (struct job *)lsq_opool_dequeue(pool);

		CHECK(j != NULL);
		if (!j)
			return;
		CHECK(j->id == got);
		out[got] = j->result;
		errs[got] = j->item.err;
		got++;
	}
	CHECK(lsq_opool_dequeue(pool) == NULL);
}

int main(void)
{
	static uint64_t ref[N], res[N];
	static int ref_err[N], res_err[N];
	const size_t cap = 16;
	struct lsq_opool *p;
	static struct job extra[17];

	p = lsq_opool_serial_create(cap, &ops, NULL);
	CHECK(p != NULL);
	run(p, cap, ref, ref_err);
	lsq_opool_destroy(p);
	CHECK(ref_err[49] == LSQ_ERR_CODEC && ref_err[48] == LSQ_OK);

	for (unsigned w = 1; w <= 8; w *= 2) {
		workers_made = 0;
		p = lsq_opool_create(w, cap, &ops, NULL);
		CHECK(p != NULL);
		/* one context per thread and none for the owner: -j N
		 * means N compressing threads, the owner only reads and
		 * writes */
		CHECK(workers_made == (int)w);
		run(p, cap, res, res_err);
		for (unsigned i = 0; i < N; i++) {
			CHECK(res[i] == ref[i]);
			CHECK(res_err[i] == ref_err[i]);
		}
		lsq_opool_destroy(p);
	}

	/* capacity: the 17th submit is refused until one is dequeued */
	p = lsq_opool_create(2, cap, &ops, NULL);
	CHECK(p != NULL);
	for (unsigned i = 0; i < 17; i++) {
		extra[i].id = i;
		extra[i].delay_us = 10;
	}
	for (unsigned i = 0; i < 16; i++)
		CHECK(lsq_opool_submit(p, &extra[i].item) == LSQ_OK);
	CHECK(lsq_opool_submit(p, &extra[16].item) == LSQ_ERR_RANGE);
	CHECK(lsq_opool_dequeue(p) == &extra[0].item);
	CHECK(lsq_opool_submit(p, &extra[16].item) == LSQ_OK);
	/* destroy with jobs still pending must not hang or leak */
	lsq_opool_destroy(p);
	lsq_opool_destroy(NULL);

	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
