/* SPDX-License-Identifier: MIT */
/*
 * http_source.c - a remote image over HTTP(S) range requests: the source's
 * entry points (read, destroy, lsq_source_allow_threads(), the
 * counters), and the choice each read makes between the memory, the
 * readahead, a latency window and a plain range GET.
 *
 * Design (docs/http-source.md has the user-facing side):
 *  - open: one ranged GET of the first 64 KiB probes size, ETag and
 *    Last-Modified and keeps those bytes pinned (superblock + compressor
 *    options); every mirror is probed the same way and must match.
 *  - the metadata region is pinned by the pin layer above (pin_layer.c),
 *    which reads it whole through this source.
 *  - reads: a hit in the head or readahead memory is a memcpy; a miss
 *    that continues a sequential stream fetches one window ahead and has
 *    the prefetch workers keep further windows loading in the background
 *    (several requests in flight over a slow link); any other miss is one
 *    range GET written straight into the caller's buffer.
 *  - every range request carries If-Range (strong ETag, else
 *    Last-Modified) and every response is checked (status 206,
 *    Content-Range equal to the asked range and the recorded total, ETag);
 *    a change is sticky: all later reads fail with LSQ_ERR_REMOTE_CHANGED.
 *  - transient faults are retried with exponential backoff and jitter,
 *    rotating through the mirrors; a read that still fails logs one line.
 *
 * Threads: none until lsq_source_allow_threads() (the daemon calls
 * it after forking); then, if the server answered the probe over HTTP/2,
 * the transfer engine (one thread driving a multi handle, so requests
 * multiplex over one connection; over HTTP/1.1 each calling thread runs
 * its transfer itself) and, with the first sequential stream, up to
 * LSQ_HTTP_MAX_PREFETCH prefetch workers. Easy handles come from a small
 * pool (mutex + condvar); no lock of ours is held across a transfer.
 *
 * Files (libcurl types stay in them; http_internal.h is what they share):
 *  - http_source.c: this file; with http_open.c, the only one built
 *    without libcurl (file:// URLs work, other URLs are refused).
 *  - http_open.c: lsq_source_http_open(): the header file, the probe of
 *    every mirror and the checks that they match, the pinned head.
 *  - http_response.c: one response's headers parsed and judged (status,
 *    Content-Range, size, ETag/Last-Modified) before any body byte.
 *  - http_transfer.c: the easy-handle pool, one range GET, and a read with
 *    retries, backoff, Retry-After and mirror failover.
 *  - http_engine.c: the thread driving a multi handle (HTTP/2).
 *  - http_chunks.c: the memory: head, readahead chunks, latency windows.
 *  - http_readahead.c: sequential streams and the prefetch workers.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lsq/error.h"
#include "lsq/source.h"
#include "lsq_config.h"

void lsq_http_options_default(struct lsq_http_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->max_connections = 4;
	opt->retries = 5;
	opt->connect_timeout = 10.0;
	opt->timeout = 60.0;
	opt->readahead = 1024 * 1024;
}

int lsq_source_is_url(const char *url)
{
	return strncasecmp(url, "http://", 7) == 0 ||
	       strncasecmp(url, "https://", 8) == 0 ||
	       strncasecmp(url, "file://", 7) == 0 ||
	       strncasecmp(url, "s3://", 5) == 0;
}

#if !LSQ_HAVE_CURL

const char *lsq_source_http_backend(void)
{
	return "none (built without libcurl)";
}

#else /* LSQ_HAVE_CURL */

#include "common/histogram.h"
#include "http/http_internal.h"

/* *waited: the read waited for the network (a transfer of its own, or
 * one in flight that covers it), not only copied from memory. */
static int read_from(struct lsq_source *src, struct lsq_read *rq,
		     bool *waited_network)
{
	struct http_source *hs = (struct http_source *)src;
	uint8_t *buf = rq->buf;
	size_t len = rq->len;
	uint64_t offset = rq->offset;
	struct chunk *c, *c2;
	uint64_t ra = 0, w, run_end;
	bool waited = false;
	int ret;

	if (atomic_load(&hs->changed))
		return LSQ_ERR_REMOTE_CHANGED;
	/* the readahead streams and the windows take the read's run end
	 * under hs->mu; it is worked out here, before (it may read
	 * metadata) */
	run_end = lsq_run_end(rq->run);
	pthread_mutex_lock(&hs->mu);
	for (;;) {
		size_t first;

		c = lsq_http_find_cover(hs, offset, len);
		if (c && c->ready) {
			if (c->window)
				lsq_latency_window_hit(&hs->win);
			lsq_http_note_hit(hs, c, rq, run_end, waited);
			pthread_mutex_unlock(&hs->mu);
			memcpy(buf, c->data + (offset - c->off), len);
			atomic_fetch_add_explicit(&hs->cache_hits, 1,
						  memory_order_relaxed);
			pthread_mutex_lock(&hs->mu);
			lsq_http_chunk_put(hs, c);
			pthread_mutex_unlock(&hs->mu);
			return LSQ_OK;
		}
		if (!c && lsq_http_find_split_cover(hs, offset, len, &c, &c2)) {
			if (c->ready && c2->ready) {
				/* c2's reference first: the hit may schedule
				 * readahead, whose room may evict c2 */
				c2->refs++;
				lsq_http_note_hit(hs, c, rq, run_end, waited);
				pthread_mutex_unlock(&hs->mu);
				first = (size_t)(c->off + c->len - offset);
				memcpy(buf, c->data + (offset - c->off), first);
				memcpy((uint8_t *)buf + first,
				       c2->data + (offset + first - c2->off),
				       len - first);
				atomic_fetch_add_explicit(&hs->cache_hits, 1,
							  memory_order_relaxed);
				pthread_mutex_lock(&hs->mu);
				lsq_http_chunk_put(hs, c);
				lsq_http_chunk_put(hs, c2);
				pthread_mutex_unlock(&hs->mu);
				return LSQ_OK;
			}
			if (!c->ready)
				c2 = c;  /* the one to wait for */
			c = c2;
		}
		if (!c)
			break;
		/* someone is loading it: wait for that one load */
		waited = waited || c->prefetch;
		*waited_network = true;
		pthread_cond_wait(&hs->cv, &hs->mu);
	}

	c = NULL;
	*waited_network = true;
	if (rq->speculative) {
		/* a background span often starts or ends inside a latency
		 * window a reader's miss fetched (it starts past the
		 * reader's block, the window from it on): 35 of 246 MB
		 * fetched twice by 300 SQLite lookups at 50 ms */
		uint64_t lo, hi, copied;
		int slot;

		copied = lsq_http_span_from_memory(hs, buf, offset, len, &lo,
						   &hi);
		slot = lo < hi ? lsq_http_span_begin(hs, lo, hi) : -1;
		pthread_mutex_unlock(&hs->mu);
		atomic_fetch_add_explicit(&hs->span_memory_bytes, copied,
					  memory_order_relaxed);
		if (lo >= hi)
			return LSQ_OK;
		ret = lsq_http_fetch(hs, buf + (lo - offset), (size_t)(hi - lo),
				     lo, LSQ_FETCH_SPAN, &rq->origin);
		pthread_mutex_lock(&hs->mu);
		lsq_http_span_end(hs, slot, lo);
		pthread_mutex_unlock(&hs->mu);
		return ret;
	}
	w = lsq_latency_window_size(&hs->win);
	if (hs->opt.readahead)
		c = lsq_http_readahead_miss(hs, offset, len, run_end, &ra);
	if (!c && w) {
		c = lsq_http_window_chunk(hs, offset, len, w, run_end, &ra);
		if (c && hs->opt.readahead && c->off == offset &&
		    run_end > c->off + c->len)
			lsq_http_stream_early(hs, offset, len, c->off + c->len,
					      run_end);
	}
	if (!c) {
		pthread_mutex_unlock(&hs->mu);
		return lsq_http_fetch(hs, buf, len, offset, LSQ_FETCH_WAITED,
				      &rq->origin);
	}

	/* c is a loading chunk we own; nobody else fetches it. */
	pthread_mutex_unlock(&hs->mu);
	ret = lsq_http_fetch(hs, c->data, c->len, c->off, LSQ_FETCH_WAITED,
			     &rq->origin);
	if (ret == LSQ_OK) {
		memcpy(buf, c->data + (offset - c->off), len);
		atomic_fetch_add_explicit(&hs->readahead_bytes, ra,
					  memory_order_relaxed);
	}
	pthread_mutex_lock(&hs->mu);
	lsq_http_chunk_loaded(hs, c, ret);
	pthread_mutex_unlock(&hs->mu);
	return ret;
}

static LSQ_HISTOGRAM(network_wait, "read_network_wait_seconds",
		     "Time a read someone waits for spent waiting for the "
		     "network (reads served from memory are not counted).",
		     NULL, NULL, LSQ_HISTOGRAM_NS)

static int http_read(struct lsq_source *src, struct lsq_read *rq)
{
	uint64_t start = lsq_now_ns();
	bool waited = false;
	int ret = read_from(src, rq, &waited);

	if (waited && !rq->speculative)
		lsq_histogram_add(&network_wait, lsq_now_ns() - start);
	return ret;
}

static void free_mirrors(struct http_source *hs)
{
	for (unsigned i = 0; i < hs->nmirrors; i++) {
		free(hs->mirrors[i].url);
		free(hs->mirrors[i].shown);
		free(hs->mirrors[i].etag);
		free(hs->mirrors[i].last_modified);
		curl_slist_free_all(hs->mirrors[i].headers);
	}
	free(hs->mirrors);
}

void lsq_http_destroy(struct lsq_source *src)
{
	struct http_source *hs = (struct http_source *)src;

	lsq_http_prefetch_stop(hs);
	free(hs->prefetchers);
	/* no transfer is left: readers are gone, prefetchers joined */
	lsq_http_engine_stop(hs);
	pthread_mutex_destroy(&hs->eng_mu);
	pthread_cond_destroy(&hs->eng_cv);

	while (hs->chunks) {
		struct chunk *c = hs->chunks;

		lsq_http_chunk_unlink(hs, c);
		lsq_http_chunk_free(c);
	}
	for (unsigned p = 0; p < 2; p++) {
		struct handle_pool *pool = &hs->pools[p];

		for (unsigned i = 0; i < pool->nfree; i++) {
			curl_easy_cleanup(pool->free_handles[i]->curl);
			free(pool->free_handles[i]);
		}
		free(pool->free_handles);
	}
	if (hs->share)
		curl_share_cleanup(hs->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&hs->share_locks[i]);
	pthread_mutex_destroy(&hs->pool_mu);
	pthread_cond_destroy(&hs->pool_cv);
	pthread_mutex_destroy(&hs->mu);
	pthread_cond_destroy(&hs->cv);
	pthread_cond_destroy(&hs->queue_cv);
	free_mirrors(hs);
	curl_slist_free_all(hs->user_headers);
	free(hs->cacert);
	lsq_s3_creds_clear(&hs->s3_creds);
	pthread_mutex_destroy(&hs->s3_mu);
	free(hs->s3_sigv4);
	lsq_url_renewer_destroy(hs->renewer);
	free((char *)hs->s3_where.profile);
	free((char *)hs->s3_where.credentials_file);
	free(src->name);
	free(hs);
}

/* The bytes the current mirror gave failed a check: move everyone to the
 * next mirror (once per failure seen, however many readers saw it) and
 * fetch past the chunks, which may hold the bad copy. */
static int http_refetch(struct lsq_source *src, struct lsq_read *rq)
{
	struct http_source *hs = (struct http_source *)src;
	unsigned cur = atomic_load(&hs->current);

	if (hs->nmirrors > 1)
		atomic_compare_exchange_strong(&hs->current, &cur,
					       (cur + 1) % hs->nmirrors);
	return lsq_http_fetch(hs, rq->buf, rq->len, rq->offset,
			      LSQ_FETCH_WAITED, &rq->origin);
}

static void http_allow_threads(struct lsq_source *src)
{
	struct http_source *hs = (struct http_source *)src;

	pthread_mutex_lock(&hs->mu);
	hs->prefetch_allowed = true;
	pthread_mutex_unlock(&hs->mu);
	/* The engine only pays where transfers share a connection: over
	 * HTTP/1.1 each transfer has a connection of its own anyway, and
	 * handing it to another thread and back costs two wakeups per
	 * request (docs/http-source.md). */
	if (hs->multiplexing)
		lsq_http_engine_start(hs);
}

/* One request = one HTTP transfer. */
static void http_counters(const struct lsq_source *src, lsq_counter_fn fn,
			  void *ctx)
{
	const struct http_source *hs = (const struct http_source *)src;
	uint64_t held;

	fn(ctx, "http_requests", atomic_load(&hs->requests),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_bytes", atomic_load(&hs->bytes_fetched),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_retries", atomic_load(&hs->retries), LSQ_COUNTER_TOTAL);
	fn(ctx, "http_failures", atomic_load(&hs->failures),
	   LSQ_COUNTER_TOTAL);
	/* reads served from pinned, readahead or window memory */
	fn(ctx, "http_memory_hits", atomic_load(&hs->cache_hits),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_readahead_bytes", atomic_load(&hs->readahead_bytes),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_span_memory_bytes", atomic_load(&hs->span_memory_bytes),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_span_trims", atomic_load(&hs->span_trims),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_in_flight", atomic_load(&hs->in_flight),
	   LSQ_COUNTER_GAUGE);
	fn(ctx, "http_rtt_us", atomic_load(&hs->win.rtt_ns) / 1000u,
	   LSQ_COUNTER_GAUGE);
	fn(ctx, "http_windows", atomic_load(&hs->win.windows),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_window_hits", atomic_load(&hs->win.hits),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_link_bytes_per_second",
	   lsq_latency_window_rate(&hs->win), LSQ_COUNTER_GAUGE);
	fn(ctx, "http_paced", atomic_load(&hs->paced), LSQ_COUNTER_TOTAL);
	fn(ctx, "http_readahead_bets", atomic_load(&hs->bets),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "http_readahead_bets_lost", atomic_load(&hs->bets_lost),
	   LSQ_COUNTER_TOTAL);
	/* counters only read the lock's state; the source is not changed */
	pthread_mutex_lock((pthread_mutex_t *)&hs->mu);
	held = hs->ra_bytes + hs->win_bytes;
	pthread_mutex_unlock((pthread_mutex_t *)&hs->mu);
	fn(ctx, "http_buffer_bytes", held, LSQ_COUNTER_GAUGE);
	if (hs->renewer) {
		struct lsq_url_renewer_stats us;

		lsq_url_renewer_get_stats(hs->renewer, &us);
		fn(ctx, "http_url_renewals", us.renewals, LSQ_COUNTER_TOTAL);
		fn(ctx, "http_url_failures", us.failures, LSQ_COUNTER_TOTAL);
	}
}

static int http_link(const struct lsq_source *src, struct lsq_link *out)
{
	const struct http_source *hs = (const struct http_source *)src;

	out->rtt_us = atomic_load(&hs->win.rtt_ns) / 1000u;
	out->rtt_samples = atomic_load(&hs->win.samples);
	out->in_flight = atomic_load(&hs->in_flight);
	out->readahead_in_flight = atomic_load(&hs->readahead_in_flight);
	out->mirrors = hs->nmirrors;
	out->mirror_index = atomic_load(&hs->current) % hs->nmirrors;
	out->mirror = hs->nmirrors > 1 ? hs->mirrors[out->mirror_index].shown
				       : NULL;
	return LSQ_OK;
}

const struct lsq_source_ops lsq_http_ops = {
	.read = http_read,
	.refetch = http_refetch,
	.destroy = lsq_http_destroy,
	.allow_threads = http_allow_threads,
	.counters = http_counters,
	.link = http_link,
};

const char *lsq_source_http_backend(void)
{
	static char why[256];

	if (lsq_curl_load(why, sizeof(why)))
		return why;
	return curl_version();
}

#endif /* LSQ_HAVE_CURL */

