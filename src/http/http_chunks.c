/* SPDX-License-Identifier: MIT */
/*
 * http_chunks.c - the bytes of the image held in memory: the pinned head,
 * the readahead chunks and the latency windows, in one list (most recently
 * used first) with a budget each for readahead and windows, evicted least
 * recently used. A chunk is immutable once ready; readers hold refs while
 * they copy outside the lock. Once threads run, every call here is made
 * with hs->mu held. Apart from the readahead (http_readahead.c), which
 * decides what to load into them, and from the read, which looks them up.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/histogram.h"
#include "lsq/error.h"
#include "http/http_internal.h"

void lsq_http_chunk_unlink(struct http_source *hs, struct chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		hs->chunks = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	if (c->window)
		hs->win_bytes -= c->len;
	else if (!c->pinned)
		hs->ra_bytes -= c->len;
	c->dead = true;
}

void lsq_http_chunk_free(struct chunk *c)
{
	lsq_bufpool_free(c->data);
	free(c);
}

void lsq_http_chunk_put(struct http_source *hs, struct chunk *c)
{
	(void)hs;
	if (--c->refs == 0 && c->dead)
		lsq_http_chunk_free(c);
}

void lsq_http_chunk_link_front(struct http_source *hs, struct chunk *c)
{
	c->prev = NULL;
	c->next = hs->chunks;
	if (hs->chunks)
		hs->chunks->prev = c;
	hs->chunks = c;
}

struct chunk *lsq_http_find_cover(struct http_source *hs, uint64_t off,
				  size_t len)
{
	for (struct chunk *c = hs->chunks; c; c = c->next)
		if (off >= c->off && off + len <= c->off + c->len)
			return c;
	return NULL;
}

/* A span due now (the time now_ns). A span that stalls past its due
 * time (an origin slow to answer speculative ranges) no longer counts:
 * readers' readahead must not wait on it. */
static bool span_due(const struct span_note *sp, uint64_t now_ns)
{
	return sp->due_ns > now_ns;
}

int lsq_http_span_begin(struct http_source *hs, uint64_t lo, uint64_t hi)
{
	uint64_t now = lsq_now_ns(), rtt, rate, due;

	rtt = atomic_load_explicit(&hs->win.rtt_ns, memory_order_relaxed);
	rate = lsq_latency_window_rate(&hs->win);
	due = 2 * rtt;
	if (rate)
		due += (uint64_t)((double)(hi - lo) * 4e9 / (double)rate);
	if (due < LSQ_HTTP_SPAN_DUE_MIN_NS)
		due = LSQ_HTTP_SPAN_DUE_MIN_NS;
	for (int i = 0; i < LSQ_HTTP_SPANS; i++) {
		struct span_note *sp = &hs->spans[i];

		if (span_due(sp, now))
			continue;
		*sp = (struct span_note){ lo, hi, now + due };
		return i;
	}
	return -1;
}

void lsq_http_span_end(struct http_source *hs, int slot, uint64_t lo)
{
	/* a span that stalled past its due time may have lost its slot */
	if (slot >= 0 && hs->spans[slot].lo == lo)
		hs->spans[slot].due_ns = 0;
}

/* Readahead from end must stop where a chunk already held or being
 * fetched begins: concurrent sequential readers (the kernel's own
 * readahead sends several reads at once) would otherwise fetch the same
 * bytes twice. So must it where a background or profile span on its way
 * begins: a reader in a large file misses the span's blocks until it
 * arrives, and its readahead fetched 10-14 MB of a java start's spans a
 * second time at 50 ms, on a link the spans filled. */
uint64_t lsq_http_trim_to_held(struct http_source *hs, uint64_t end,
			       uint64_t ra)
{
	uint64_t now = lsq_now_ns();

	for (struct chunk *c = hs->chunks; c; c = c->next) {
		if (c->off + c->len <= end || c->off >= end + ra)
			continue;
		if (c->off <= end)
			return 0; /* the bytes after this read are covered */
		ra = c->off - end;
	}
	for (int i = 0; i < LSQ_HTTP_SPANS; i++) {
		const struct span_note *sp = &hs->spans[i];

		if (!span_due(sp, now) || sp->hi <= end || sp->lo >= end + ra)
			continue;
		atomic_fetch_add_explicit(&hs->span_trims, 1,
					  memory_order_relaxed);
		if (sp->lo <= end)
			return 0;
		ra = sp->lo - end;
	}
	return ra;
}

uint64_t lsq_http_held_end(struct http_source *hs, uint64_t pos)
{
	uint64_t now = lsq_now_ns();
	struct chunk *c = lsq_http_find_cover(hs, pos, 1);

	if (c)
		return c->off + c->len;
	for (int i = 0; i < LSQ_HTTP_SPANS; i++) {
		const struct span_note *sp = &hs->spans[i];

		if (span_due(sp, now) && pos >= sp->lo && pos < sp->hi)
			return sp->hi;
	}
	return pos;
}

/* Make room for need unpinned bytes, least recently used first; false if
 * chunks in flight or kept hold it. keep (may be NULL): a stream whose
 * loaded-but-unread bytes, [end, fetched_to), must stay: evicting them to
 * fetch further ahead would fetch them twice. */
static bool make_room_of(struct http_source *hs, uint64_t need,
			 const struct stream *keep, bool window)
{
	struct chunk *c = hs->chunks, *tail = NULL;
	uint64_t *used = window ? &hs->win_bytes : &hs->ra_bytes;
	uint64_t limit = window ? hs->win_limit : lsq_http_ra_limit(hs);

	if (need > limit)
		return false;
	while (c) {
		tail = c;
		c = c->next;
	}
	while (*used + need > limit && tail) {
		struct chunk *prev = tail->prev;
		bool kept = keep && tail->off < keep->fetched_to &&
			    tail->off + tail->len > keep->end;

		if (!tail->pinned && tail->window == window && tail->ready &&
		    !kept) {
			lsq_http_chunk_unlink(hs, tail);
			if (tail->refs == 0)
				lsq_http_chunk_free(tail);
		}
		tail = prev;
	}
	return *used + need <= limit;
}

/* Room in the readahead memory (windows have their own). */
bool lsq_http_make_room(struct http_source *hs, uint64_t need,
			const struct stream *keep)
{
	return make_room_of(hs, need, keep, false);
}

struct chunk *lsq_http_chunk_new(struct http_source *hs, uint64_t off,
				 size_t len, bool pinned)
{
	struct chunk *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->data = lsq_bufpool_alloc(len);
	if (!c->data) {
		free(c);
		return NULL;
	}
	c->off = off;
	c->len = len;
	c->pinned = pinned;
	c->refs = 1;  /* the loader's */
	if (!pinned)
		hs->ra_bytes += len;
	lsq_http_chunk_link_front(hs, c);
	return c;
}

/* The end of a chunk's load, ret its outcome: the chunk is ready, or, when
 * the load failed, gone (a reader fetches those bytes itself); the
 * loader's ref is dropped and the readers waiting for it woken. */
void lsq_http_chunk_loaded(struct http_source *hs, struct chunk *c, int ret)
{
	if (ret == LSQ_OK)
		c->ready = true;
	else if (!c->dead)
		lsq_http_chunk_unlink(hs, c);
	lsq_http_chunk_put(hs, c);
	pthread_cond_broadcast(&hs->cv);
}

/* A range held by two chunks: readahead windows end at arbitrary bytes,
 * blocks do not, so a block may start in one window and end in the next.
 * The chunk holding its first byte and the one starting where that ends. */
bool lsq_http_find_split_cover(struct http_source *hs, uint64_t off,
			       size_t len, struct chunk **a, struct chunk **b)
{
	struct chunk *c1 = lsq_http_find_cover(hs, off, 1), *c2;
	uint64_t mid;

	if (!c1)
		return false;
	mid = c1->off + c1->len;
	if (mid >= off + len)
		return false;
	c2 = lsq_http_find_cover(hs, mid, (size_t)(off + len - mid));
	if (!c2)
		return false;
	*a = c1;
	*b = c2;
	return true;
}

/* A miss over a long round trip that no sequential readahead covers
 * (hs->mu held): the loading chunk of the aligned window of w bytes around
 * it (latency_window.h), trimmed so as not to fetch bytes other chunks
 * hold, with *ra the bytes beyond the read; NULL when there is no room.
 * A read whose file goes on for half a window more (run_end) gets the
 * window from the read on: the bytes before it are another file's, or
 * blocks of its own it has not asked for. */
struct chunk *lsq_http_window_chunk(struct http_source *hs, uint64_t offset,
				    size_t len, uint64_t w, uint64_t run_end,
				    uint64_t *ra)
{
	uint64_t lo, hi, end = offset + len, now = lsq_now_ns();
	struct chunk *c;

	lo = run_end >= end + w / 2 ? offset : offset & ~(w - 1);
	hi = lo + w > end ? lo + w : end;
	if (hi > hs->base.size)
		hi = hs->base.size;
	for (c = hs->chunks; c; c = c->next) {
		if (c->off + c->len <= offset && c->off + c->len > lo)
			lo = c->off + c->len;
		if (c->off >= end && c->off < hi)
			hi = c->off;
	}
	/* and what spans on their way bring, but the read's own bytes: it
	 * does not wait for a speculative range */
	for (int i = 0; i < LSQ_HTTP_SPANS; i++) {
		const struct span_note *sp = &hs->spans[i];

		if (!span_due(sp, now) || sp->hi <= lo || sp->lo >= hi)
			continue;
		if (sp->lo < offset)
			lo = sp->hi < offset ? sp->hi : offset;
		if (sp->hi > end)
			hi = sp->lo > end ? sp->lo : end;
		atomic_fetch_add_explicit(&hs->span_trims, 1,
					  memory_order_relaxed);
	}
	if (hi - lo <= len || !make_room_of(hs, hi - lo, NULL, true))
		return NULL;
	c = lsq_http_chunk_new(hs, lo, (size_t)(hi - lo), false);
	if (!c)
		return NULL;
	/* lsq_http_chunk_new() charged the readahead memory */
	hs->ra_bytes -= c->len;
	hs->win_bytes += c->len;
	c->refs = 1;
	c->window = true;
	*ra = hi - lo - len;
	lsq_latency_window_fetched(&hs->win);
	return c;
}

/* The ready chunk holding byte pos, or NULL. */
static struct chunk *ready_at(struct http_source *hs, uint64_t pos)
{
	for (struct chunk *c = hs->chunks; c; c = c->next)
		if (c->ready && pos >= c->off && pos < c->off + c->len)
			return c;
	return NULL;
}

/* One piece of a span copied from a chunk. */
struct piece {
	struct chunk *c;
	uint64_t off;
	size_t len;
};

/* Note the pieces of [from, to) that ready chunks hold, from `from` up,
 * each with a ref; returns where they stop (to, or short of it where no
 * chunk holds the next byte or pieces[] is full). */
static uint64_t collect(struct http_source *hs, uint64_t from, uint64_t to,
			struct piece *pieces, size_t *n, size_t max)
{
	while (from < to && *n < max) {
		struct chunk *c = ready_at(hs, from);
		uint64_t end;

		if (!c)
			break;
		end = c->off + c->len < to ? c->off + c->len : to;
		c->refs++;
		pieces[(*n)++] = (struct piece){ c, from, (size_t)(end - from) };
		from = end;
	}
	return from;
}

uint64_t lsq_http_span_from_memory(struct http_source *hs, uint8_t *buf,
				   uint64_t off, size_t len, uint64_t *lo,
				   uint64_t *hi)
{
	struct piece pieces[16];
	size_t n = 0;
	uint64_t copied = 0;
	struct chunk *c;

	*hi = off + len;
	*lo = collect(hs, off, *hi, pieces, &n, 16);
	/* the tail: the chunks holding the bytes just below *hi, down */
	while (*lo < *hi && n < 16 && (c = ready_at(hs, *hi - 1)) != NULL) {
		uint64_t start = c->off > *lo ? c->off : *lo;

		c->refs++;
		pieces[n++] = (struct piece){ c, start, (size_t)(*hi - start) };
		*hi = start;
	}
	if (n == 0)
		return 0;
	pthread_mutex_unlock(&hs->mu);
	for (size_t i = 0; i < n; i++) {
		memcpy(buf + (pieces[i].off - off),
		       pieces[i].c->data + (pieces[i].off - pieces[i].c->off),
		       pieces[i].len);
		copied += pieces[i].len;
	}
	pthread_mutex_lock(&hs->mu);
	for (size_t i = 0; i < n; i++)
		lsq_http_chunk_put(hs, pieces[i].c);
	return copied;
}
