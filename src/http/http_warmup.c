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
 * With tail_with_probe (the pin layer above will want the metadata
 * region) the first of them asks for the image's last LSQ_HTTP_TAIL_SIZE
 * bytes instead, a suffix range, as the size is not known yet: the
 * metadata tables sit at the end of a SquashFS image and a mount reads
 * them right after the superblock, which alone locates them, one more
 * round trip before the mount is ready. Once the probe is done, the
 * superblock in its head says whether the region, [inode_table_start,
 * bytes_used), lies in the tail: if not (a larger image, or no SquashFS
 * at offset 0, as in a SIF file) the tail is aborted at once; if so it is
 * waited for as the other warm-ups are (at most as long again as the
 * probe took), and kept as a readahead chunk when the answer is the
 * probed object (same size and validators): the pin layer's read of the
 * region then costs no request. With tail_unless (the validator cache_dir
 * recorded for the URL) the request is conditional: an unchanged image,
 * whose tables the cache holds, answers 304 without a body.
 *
 * Over HTTP/2 transfers share the engine's connection, and these are
 * closed again once the probe said so. The warm-ups are requests like any
 * other in the counters, but the 1-byte ones are no sample of the latency
 * windows: cold connections to a cold server would be all they saw. The
 * tail, a request for real bytes, is one.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/histogram.h"
#include "format/ondisk.h"
#include "format/superblock.h"
#include "http/http_internal.h"
#include "lsq/error.h"

/* The tail's answer, checked against the probe's at the end. */
struct tail {
	uint8_t *buf;         /* NULL: no tail asked for */
	struct curl_slist *headers;
	atomic_bool over;     /* not wanted, or too late: abort it */
	struct xfer x;
};

struct lsq_http_warmup {
	struct http_source *hs;
	struct tail tail;
	pthread_t threads[LSQ_HTTP_MAX_PREFETCH];
	unsigned n;
	atomic_bool over;  /* the probe is done: abort the 1-byte warm-ups */
	uint64_t start_ns;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned done;
};

static void warm(struct lsq_http_warmup *w, struct xfer *x, uint8_t *buf,
		 size_t want, bool suffix, const atomic_bool *over,
		 const struct curl_slist *headers)
{
	*x = (struct xfer){
		.hs = w->hs,
		.m = &w->hs->mirrors[0],
		.probe = true,  /* no validators yet to check */
		.suffix = suffix,
		.speculative = true,
		.warmup_over = over,
		.off = w->hs->base_offset,
		.want = want,
		.buf = buf,
	};
	lsq_http_transfer(x, headers);
}

static void warmed(struct lsq_http_warmup *w)
{
	pthread_mutex_lock(&w->mu);
	w->done++;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void *warm_tail(void *arg)
{
	struct lsq_http_warmup *w = arg;

	warm(w, &w->tail.x, w->tail.buf, LSQ_HTTP_TAIL_SIZE, true,
	     &w->tail.over, w->tail.headers ? w->tail.headers
					    : w->hs->user_headers);
	warmed(w);
	return NULL;
}

static void *warm_one(void *arg)
{
	struct lsq_http_warmup *w = arg;
	uint8_t byte;
	struct xfer x;

	warm(w, &x, &byte, 1, false, &w->over, w->hs->user_headers);
	warmed(w);
	return NULL;
}

/* The user's headers and the condition that spares an unchanged image's
 * tail: If-None-Match for an ETag, If-Modified-Since for a date. */
static struct curl_slist *tail_headers(const struct http_source *hs,
				       const char *unless)
{
	struct curl_slist *list = NULL, *l;
	char *cond;

	if (!unless || !*unless || strpbrk(unless, "\r\n"))
		return NULL;
	for (const struct curl_slist *u = hs->user_headers; u; u = u->next) {
		l = curl_slist_append(list, u->data);
		if (!l)
			goto fail;
		list = l;
	}
	if (asprintf(&cond, "%s: %s", unless[0] == '"' ||
				       strncmp(unless, "W/", 2) == 0
				       ? "If-None-Match" : "If-Modified-Since",
		     unless) < 0)
		goto fail;
	l = curl_slist_append(list, cond);
	free(cond);
	if (l)
		return l;
fail:
	curl_slist_free_all(list);
	return NULL;
}

struct lsq_http_warmup *lsq_http_warmup_start(
	struct http_source *hs, const struct lsq_http_options *opt)
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
	atomic_init(&w->tail.over, false);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (opt->tail_with_probe) {
		w->tail.buf = malloc(LSQ_HTTP_TAIL_SIZE);
		w->tail.headers = tail_headers(hs, opt->tail_unless);
	}
	for (; w->n < hs->prefetch_max; w->n++)
		if (pthread_create(&w->threads[w->n], NULL,
				   w->n == 0 && w->tail.buf ? warm_tail
							    : warm_one, w))
			break;
	if (w->n == 0) {  /* no thread took the tail */
		free(w->tail.buf);
		w->tail.buf = NULL;
	}
	return w;
}

/* The image's metadata region, [*lo, *hi) in image offsets, from the
 * superblock in the pinned head, when the tail, once whole, holds it: it
 * starts at most LSQ_HTTP_TAIL_SIZE before the object's end. */
static bool region_in_tail(struct http_source *hs, uint64_t *lo,
			   uint64_t *hi)
{
	struct lsq_superblock sb;
	struct chunk *head;
	char why[128];
	bool in;

	pthread_mutex_lock(&hs->mu);
	head = lsq_http_find_cover(hs, 0, SQUASHFS_SUPERBLOCK_SIZE);
	in = head && head->pinned &&
	     lsq_superblock_decode(head->data, hs->base.size, &sb, why,
				   sizeof(why)) == 0;
	pthread_mutex_unlock(&hs->mu);
	if (!in)
		return false;
	*lo = sb.inode_table_start;
	*hi = sb.bytes_used;
	return *lo < *hi && *hi <= hs->base.size &&
	       hs->base_offset + *lo + LSQ_HTTP_TAIL_SIZE >= hs->total;
}

/* Keep the metadata region [lo, hi) from the tail if the tail is the
 * probed image's last bytes: a complete 206, of the same size, with the
 * validators the probe saw (none, when the probe had none: then, as for
 * every read, the size alone). Stricter than a read's check, as no
 * If-Range vouched for this answer. */
static void keep_tail(struct http_source *hs, const struct tail *t,
		      uint64_t lo, uint64_t hi)
{
	const struct mirror *m = &hs->mirrors[0];
	const struct xfer *x = &t->x;
	struct chunk *c;

	if (x->verdict != V_OK || x->status != 206 || x->got != x->want ||
	    x->cr_total != hs->total || x->off + x->got != hs->total ||
	    hs->base_offset + lo < x->off)
		return;
	if ((m->etag && strcmp(m->etag, x->etag) != 0) ||
	    (!m->etag && x->etag[0] && strncmp(x->etag, "W/", 2) != 0) ||
	    (m->last_modified && strcmp(m->last_modified,
					x->last_modified) != 0))
		return;
	pthread_mutex_lock(&hs->mu);
	if (lsq_http_make_room(hs, hi - lo, NULL) &&
	    (c = lsq_http_chunk_new(hs, lo, (size_t)(hi - lo), false))) {
		memcpy(c->data, t->buf + (hs->base_offset + lo - x->off),
		       c->len);
		lsq_http_chunk_loaded(hs, c, LSQ_OK);
	}
	pthread_mutex_unlock(&hs->mu);
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
	uint64_t lo = 0, hi = 0;
	bool tail_wanted;

	if (!w)
		return;
	tail_wanted = keep && w->tail.buf && region_in_tail(w->hs, &lo, &hi);
	if (!tail_wanted)
		atomic_store(&w->tail.over, true);
	/* Begun with the probe, the warm-ups normally end with it; one that
	 * takes twice as long (a server that queues new connections, or a
	 * tail on a slow link) is not worth a later mount. */
	until = lsq_realtime_after_ns(keep ? lsq_now_ns() - w->start_ns : 0);
	pthread_mutex_lock(&w->mu);
	while (w->done < w->n &&
	       pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
		;
	pthread_mutex_unlock(&w->mu);
	atomic_store(&w->over, true);
	atomic_store(&w->tail.over, true);
	for (unsigned i = 0; i < w->n; i++)
		pthread_join(w->threads[i], NULL);
	if (tail_wanted)
		keep_tail(w->hs, &w->tail, lo, hi);
	free(w->tail.buf);
	curl_slist_free_all(w->tail.headers);
	if (keep && w->hs->multiplexing)
		drop_idle_speculative(w->hs);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
