/* SPDX-License-Identifier: MIT */
/*
 * http_warmup.c - connections for the speculative pool, opened while the
 * probe runs.
 *
 * Readahead, the follow-ups of a latency window and background fetch take
 * handles of the speculative pool, made on first use. Over HTTP/1.1 each
 * handle has a connection of its own, so the first parallel fetch after a
 * mount paid a TCP (and TLS) handshake before its request: a round trip
 * or more, at the moment a sequential reader or a program start waits for
 * it. While the probe's own handshake and request are under way, a few
 * threads send a 1-byte range request each on a new speculative handle
 * and return it, connection open, to the pool. They end before
 * lsq_source_http_open() returns: the daemon forks after that.
 *
 * Over HTTP/2 transfers share the engine's connection, and these are
 * closed again once the probe said so. The warm-ups are requests like any
 * other in the counters, but no sample of the latency windows: cold
 * connections to a cold server would be all they saw.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/histogram.h"
#include "http/http_internal.h"

struct lsq_http_warmup {
	struct http_source *hs;
	pthread_t threads[LSQ_HTTP_MAX_PREFETCH];
	unsigned n;
	atomic_bool over;  /* the probe is done: abort what is left */
	uint64_t start_ns;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned done;
};

static void *warm_one(void *arg)
{
	struct lsq_http_warmup *w = arg;
	uint8_t byte;
	struct xfer x = {
		.hs = w->hs,
		.m = &w->hs->mirrors[0],
		.probe = true,  /* no validators yet to check */
		.speculative = true,
		.warmup_over = &w->over,
		.off = w->hs->base_offset,
		.want = 1,
		.buf = &byte,
	};

	lsq_http_transfer(&x, w->hs->user_headers);
	pthread_mutex_lock(&w->mu);
	w->done++;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct lsq_http_warmup *lsq_http_warmup_start(struct http_source *hs)
{
	struct lsq_http_warmup *w;

	/* no parallel fetch to warm for; a renewed URL is the probe's */
	if (!hs->opt.readahead || hs->opt.max_connections < 2 || hs->renewer)
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->hs = hs;
	w->start_ns = lsq_now_ns();
	atomic_init(&w->over, false);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	for (; w->n < hs->prefetch_max; w->n++)
		if (pthread_create(&w->threads[w->n], NULL, warm_one, w))
			break;
	return w;
}

/* Close the idle connections of the speculative pool: over HTTP/2 the
 * engine makes its own. */
static void drop_idle_speculative(struct http_source *hs)
{
	struct handle_pool *pool = &hs->pools[1];

	pthread_mutex_lock(&hs->pool_mu);
	while (pool->nfree > 0) {
		struct handle *h = pool->free_handles[--pool->nfree];

		pool->created--;
		curl_easy_cleanup(h->curl);
		free(h);
	}
	pthread_mutex_unlock(&hs->pool_mu);
}

void lsq_http_warmup_finish(struct lsq_http_warmup *w, bool keep)
{
	struct timespec until;

	if (!w)
		return;
	/* Begun with the probe, the warm-ups normally end with it; one that
	 * takes twice as long (a server that queues new connections) is
	 * not worth a later mount. */
	until = lsq_realtime_after_ns(keep ? lsq_now_ns() - w->start_ns : 0);
	pthread_mutex_lock(&w->mu);
	while (w->done < w->n &&
	       pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
		;
	pthread_mutex_unlock(&w->mu);
	atomic_store(&w->over, true);
	for (unsigned i = 0; i < w->n; i++)
		pthread_join(w->threads[i], NULL);
	if (keep && w->hs->multiplexing)
		drop_idle_speculative(w->hs);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
