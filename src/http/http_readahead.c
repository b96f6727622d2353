/* SPDX-License-Identifier: MIT */
/*
 * http_readahead.c - reading ahead of sequential readers: the streams
 * (which read continues which, which stream is confirmed, whether reading
 * ahead pays for it, where its reader's file ends) and the prefetch
 * workers that keep windows loading in the background. the read tells it
 * of every hit (lsq_http_note_hit()) and asks it on a miss
 * (lsq_http_readahead_miss()); the chunks it loads are http_chunks.c's.
 * Apart because it is policy that neither the memory nor the transport
 * needs to know.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsq/error.h"
#include "lsq/source.h"
#include "http/http_internal.h"

/* The end of the run the reader's read belongs to (lsq_read.run), where
 * its file ends: readahead stays in it. A read of no run (not a file's
 * data: tables, the superblock) leaves the stream's limit as it was, so
 * it cannot let readahead run past the end of the file the stream was
 * reading. */
static void stream_take_run_end(struct stream *s, uint64_t offset,
				uint64_t end)
{
	if (end > offset)
		s->limit = end;
}

/* Readahead wanted for s from start on, at most n: none past its limit. */
static uint64_t within_limit(const struct stream *s, uint64_t start,
			     uint64_t n)
{
	if (start >= s->limit)
		return 0;
	return n < s->limit - start ? n : s->limit - start;
}

static uint64_t window_max(struct http_source *hs);

/* A stream's first window and reach: small (a few reads may be all), but
 * over a long round trip each doubling costs a round trip, so it starts
 * at half a bandwidth-delay product. */
static void stream_start_window(struct http_source *hs, struct stream *s)
{
	uint64_t bdp = lsq_latency_window_bdp(&hs->win);

	s->window = hs->opt.readahead < LSQ_HTTP_RA_START
			    ? hs->opt.readahead : LSQ_HTTP_RA_START;
	if (hs->opt.readahead && bdp / 2 > s->window)
		s->window = bdp / 2 < window_max(hs) ? bdp / 2
						    : window_max(hs);
	s->ahead = hs->opt.readahead > s->window ? hs->opt.readahead
						 : s->window;
	/* over a long round trip a reach that doubles per wait costs a
	 * round trip per doubling: start with two bandwidth-delay
	 * products in flight (the stream is confirmed before any of it
	 * is fetched) */
	if (hs->opt.readahead && 2 * bdp > s->ahead)
		s->ahead = 2 * bdp < lsq_http_ra_limit(hs) / 2
				   ? 2 * bdp : lsq_http_ra_limit(hs) / 2;
}

/* Readahead did not pay: this stream, and every stream started after,
 * must show a longer run of exact reads to be confirmed (hs->mu held). */
static void demote(struct http_source *hs, struct stream *s)
{
	hs->need_run = hs->need_run ? 2 * hs->need_run
				    : LSQ_HTTP_RA_START * 8;
	if (hs->need_run > LSQ_HTTP_RA_JUDGE)
		hs->need_run = LSQ_HTTP_RA_JUDGE;
	s->confirmed = false;
	s->early = false;
	s->run = 0;
	s->need_run = hs->need_run;
	s->spec_bytes = s->spec_used = 0;
	stream_start_window(hs, s);
}

/* A bet no read paid (hs->mu held). */
static void lose_bet(struct http_source *hs, struct stream *s)
{
	demote(hs, s);
	atomic_fetch_add_explicit(&hs->bets_lost, 1, memory_order_relaxed);
}

/* An early stream (lsq_http_stream_early) is a bet that a miss into a
 * long file starts a sequential read of it. A read that extends it pays
 * it, and it gets its full reach; LSQ_HTTP_EARLY_STREAMS streams started
 * after it first (misses elsewhere) lose it. A lost bet demotes
 * readahead, which ends the bets until a stream pays again: a reader that
 * jumps about a large file (a database, a dataset) would otherwise pay a
 * window and a reach for every miss, each one a new stream that no
 * judgement of its own ever reaches. Streams, not reads: parallel readers
 * of large files each make a bet, and one of them reading its arrived
 * window must not lose the others' bets while their windows are still on
 * the way (hs->mu held). */
static void judge_early_bets(struct http_source *hs)
{
	for (unsigned i = 0; i < LSQ_HTTP_STREAMS; i++) {
		struct stream *s = &hs->streams[i];

		if (s->early && hs->streams_started - s->early_at >=
					LSQ_HTTP_EARLY_STREAMS)
			lose_bet(hs, s);
	}
}

/* Sequential detection (hs->mu held): the stream this read belongs to, or
 * NULL when it starts a new one (which replaces the least recently used).
 * A read within LSQ_HTTP_RA_SLACK of a stream's end belongs to it: the
 * kernel and the FUSE workers deliver one reader's requests in parallel,
 * slightly out of order, and splitting the stream there would restart its
 * window. Only a read that starts exactly at the end (*exact) confirms the
 * stream and earns a window on a miss; a stream never confirmed (random
 * reads that happen to land close) never fetches ahead. A stream the read
 * belongs to takes its reader's run end. */
static struct stream *stream_advance(struct http_source *hs, uint64_t off,
				     size_t len, uint64_t run_end, bool *exact)
{
	struct stream *oldest = &hs->streams[0];

	hs->clock++;
	*exact = false;
	for (unsigned i = 0; i < LSQ_HTTP_STREAMS; i++) {
		struct stream *s = &hs->streams[i];

		if (s->stamp && off + LSQ_HTTP_RA_SLACK >= s->end &&
		    off <= s->end + LSQ_HTTP_RA_SLACK) {
			*exact = off == s->end;
			if (s->early && off + len > s->end) {
				s->early = false;  /* the bet paid */
				if (s->ahead < s->early_ahead)
					s->ahead = s->early_ahead;
			}
			if (*exact)
				s->run += len;
			else if (off > s->end)
				s->run = 0;  /* skipped bytes: not sequential */
			if (s->run >= s->need_run)
				s->confirmed = true;
			if (off + len > s->end)
				s->end = off + len;
			s->stamp = hs->clock;
			stream_take_run_end(s, off, run_end);
			return s;
		}
		if (s->stamp < oldest->stamp)
			oldest = s;
	}
	hs->streams_started++;
	judge_early_bets(hs);
	if (oldest->early)  /* replaced before a read paid its bet */
		lose_bet(hs, oldest);
	oldest->end = off + len;
	oldest->fetched_to = off + len;
	oldest->stamp = hs->clock;
	stream_start_window(hs, oldest);
	oldest->confirmed = false;
	oldest->run = 0;
	oldest->need_run = hs->need_run;
	oldest->spec_bytes = oldest->spec_used = 0;
	oldest->limit = UINT64_MAX;
	return NULL;
}

/* Whether reading ahead pays for this stream (hs->mu held). Every
 * LSQ_HTTP_RA_JUDGE bytes fetched ahead (more for a long reach), compare
 * them with what the reader took from them, allowing for what is still
 * ahead of it: a reader that skips (files picked out of a directory,
 * blocks in image order with gaps between) leaves most of it unread.
 * Then the stream is demoted and it, and every stream started after, must
 * show a longer run of exact reads to be confirmed; a stream that pays
 * halves that run again. */
static bool worth_reading_ahead(struct http_source *hs, struct stream *s)
{
	uint64_t span = 4 * s->ahead;
	bool ok;

	if (span < LSQ_HTTP_RA_JUDGE)
		span = LSQ_HTTP_RA_JUDGE;
	if (s->spec_bytes < span)
		return true;
	ok = (s->spec_used + s->ahead) * 4 >= s->spec_bytes * 3;
	s->spec_bytes = s->spec_used = 0;
	/* what is learnt holds for the streams this reader starts next */
	if (ok) {
		hs->need_run /= 2;
		return true;
	}
	demote(hs, s);
	return false;
}

uint64_t lsq_http_ra_limit(struct http_source *hs)
{
	uint64_t want = 4 * lsq_latency_window_bdp(&hs->win);

	if (want > LSQ_HTTP_RA_LONG_MAX)
		want = LSQ_HTTP_RA_LONG_MAX;
	return want > hs->ra_limit ? want : hs->ra_limit;
}

/* A request of readahead: over a long round trip, enough that the
 * workers together keep a bandwidth-delay product in flight. */
static uint64_t window_max(struct http_source *hs)
{
	uint64_t w = lsq_http_ra_limit(hs) / 2 /
		     (hs->prefetch_max ? hs->prefetch_max : 1);

	if (!hs->opt.readahead)
		return 0;
	if (w > LSQ_HTTP_RA_LONG_WINDOW)
		w = LSQ_HTTP_RA_LONG_WINDOW;
	return w > hs->opt.readahead ? w : hs->opt.readahead;
}

static void grow_window(struct http_source *hs, struct stream *s)
{
	s->window *= 2;
	if (s->window > window_max(hs))
		s->window = window_max(hs);
}

/* The reader caught up with the loads (waited for one, or missed): keep
 * more in flight, up to half the readahead memory. */
static void reach_further(struct http_source *hs, struct stream *s)
{
	s->ahead *= 2;
	if (s->ahead > lsq_http_ra_limit(hs) / 2)
		s->ahead = lsq_http_ra_limit(hs) / 2;
}

/* Whether the next window waits: what pacing keeps in flight over a long
 * round trip is a bandwidth-delay product. The next window goes out when
 * less than that is still to arrive, so it starts arriving as the last
 * bytes before it do, and the link never idles a round trip between
 * waves of windows (windows sent together share the link and end
 * together). On a short round trip (no product) there is no pacing: the
 * workers alone bound what is in flight. */
static bool enough_in_flight(struct http_source *hs)
{
	uint64_t target = lsq_latency_window_bdp(&hs->win);

	return target && atomic_load(&hs->to_arrive) >= target;
}

void lsq_http_pace_arrived(struct http_source *hs, uint64_t n)
{
	atomic_fetch_sub(&hs->to_arrive, n);
	if (!atomic_load_explicit(&hs->pace_waiting, memory_order_relaxed) ||
	    enough_in_flight(hs))
		return;
	if (!atomic_exchange(&hs->pace_waiting, false))
		return;
	pthread_mutex_lock(&hs->mu);
	hs->pace_kicked = true;
	pthread_cond_signal(&hs->queue_cv);
	pthread_mutex_unlock(&hs->mu);
}

static void *prefetch_worker(void *arg);

static bool start_prefetchers(struct http_source *hs)
{
	if (!hs->prefetch_allowed)
		return false;
	if (hs->prefetch_started)
		return hs->nprefetchers > 0;
	hs->prefetch_started = true;
	for (unsigned i = 0; i < hs->prefetch_max; i++) {
		if (pthread_create(&hs->prefetchers[i], NULL, prefetch_worker,
				   hs) != 0)
			break;
		hs->nprefetchers++;
	}
	return hs->nprefetchers > 0;
}

/* Keep up to s->ahead bytes past the reader loading in the background,
 * one window per request, so a sequential reader over a slow link finds
 * its next bytes already in memory. hs->mu held. */
static void schedule_ahead(struct http_source *hs, struct stream *s)
{
	uint64_t size = hs->base.size;

	for (unsigned guard = 0; guard < 4 * LSQ_HTTP_MAX_PREFETCH; guard++) {
		uint64_t start = s->fetched_to, n = s->window;
		struct chunk *c;

		if (start < s->end)
			start = s->fetched_to = s->end;
		if (start >= size || start >= s->end + s->ahead ||
		    hs->prefetch_inflight >= hs->nprefetchers)
			return;
		if (n > size - start)
			n = size - start;
		n = within_limit(s, start, n);
		if (n == 0)
			return;
		/* less than half a window left of the file would go out
		 * alone, a round trip later once a worker is free: take it
		 * along */
		if (s->limit <= size && s->limit - (start + n) < n / 2)
			n = s->limit - start;
		n = lsq_http_trim_to_held(hs, start, n);
		if (n == 0) {  /* held or on its way already: look past it */
			uint64_t past = lsq_http_held_end(hs, start);

			if (past == start)
				return;
			s->fetched_to = past;
			continue;
		}
		/* the file's last window goes now: nothing would follow it
		 * to keep the link busy, and the reader waits for its end */
		if (start + n < s->limit && enough_in_flight(hs)) {
			hs->paced_stream = s;
			atomic_store(&hs->pace_waiting, true);
			/* the last bytes may have come before the flag */
			if (enough_in_flight(hs)) {
				atomic_fetch_add_explicit(&hs->paced, 1,
							  memory_order_relaxed);
				return;
			}
			atomic_store(&hs->pace_waiting, false);
		}
		if (!lsq_http_make_room(hs, n, s))
			return;
		c = lsq_http_chunk_new(hs, start, (size_t)n, false);
		if (!c)
			return;
		c->refs = 1;  /* the job's */
		c->prefetch = true;
		if (hs->queue_tail)
			hs->queue_tail->qnext = c;
		else
			hs->queue = c;
		hs->queue_tail = c;
		hs->prefetch_inflight++;
		atomic_fetch_add(&hs->to_arrive, n);
		s->fetched_to = start + n;
		s->spec_bytes += n;
		grow_window(hs, s);
		pthread_cond_signal(&hs->queue_cv);
	}
}

static void *prefetch_worker(void *arg)
{
	struct http_source *hs = arg;

	pthread_setname_np(pthread_self(), "sqfs-prefetch");
	pthread_mutex_lock(&hs->mu);
	for (;;) {
		struct chunk *c;
		int ret;

		while (!hs->stopping && !hs->queue && !hs->pace_kicked)
			pthread_cond_wait(&hs->queue_cv, &hs->mu);
		if (hs->stopping)
			break;
		if (hs->pace_kicked) {
			struct stream *s = hs->paced_stream;

			hs->pace_kicked = false;
			hs->paced_stream = NULL;
			if (s && s->confirmed)
				schedule_ahead(hs, s);
			if (!hs->queue)
				continue;
		}
		c = hs->queue;
		hs->queue = c->qnext;
		if (!hs->queue)
			hs->queue_tail = NULL;
		c->qnext = NULL;
		atomic_fetch_sub(&hs->to_arrive, c->len);
		pthread_mutex_unlock(&hs->mu);
		atomic_fetch_add_explicit(&hs->readahead_in_flight, 1,
					  memory_order_relaxed);
		ret = lsq_http_fetch(hs, c->data, c->len, c->off,
				     LSQ_FETCH_READAHEAD, NULL);
		atomic_fetch_sub_explicit(&hs->readahead_in_flight, 1,
					  memory_order_relaxed);
		if (ret == LSQ_OK)
			atomic_fetch_add_explicit(&hs->readahead_bytes, c->len,
						  memory_order_relaxed);
		pthread_mutex_lock(&hs->mu);
		hs->prefetch_inflight--;
		lsq_http_chunk_loaded(hs, c, ret);
	}
	pthread_mutex_unlock(&hs->mu);
	return NULL;
}

/* A read served from memory: LRU, then the reader's stream (hs->mu).
 * A speculative read (a profile's or the background's span) is no
 * reader: it tracks no stream. One that continued a reader's stream
 * would confirm it (exactly where the reader stopped, with no run end to
 * hold it in a file) and have the prefetch workers read the rest of the
 * image ahead of the spans, on the readers' connections (seen on the g++
 * start at 50 ms: 46 MiB of 4 MiB windows behind the profile). */
void lsq_http_note_hit(struct http_source *hs, struct chunk *c,
		       const struct lsq_read *rq, uint64_t run_end,
		       bool waited)
{
	uint64_t offset = rq->offset;
	size_t len = rq->len;
	struct stream *s;
	bool exact;

	c->refs++;
	if (!c->pinned && c != hs->chunks) {
		/* LRU: move to the front */
		lsq_http_chunk_unlink(hs, c);
		c->dead = false;
		if (c->window)
			hs->win_bytes += c->len;
		else
			hs->ra_bytes += c->len;
		lsq_http_chunk_link_front(hs, c);
	}
	if (c->pinned || !hs->opt.readahead || rq->speculative)
		return;
	s = stream_advance(hs, offset, len, run_end, &exact);
	if (!s || !s->confirmed)
		return;
	s->spec_used += len;
	if (!worth_reading_ahead(hs, s))
		return;
	if (waited)
		reach_further(hs, s);
	if (start_prefetchers(hs))
		schedule_ahead(hs, s);
}

/* A miss that continues a confirmed stream exactly (hs->mu held): the
 * loading chunk of the read and a window after it, *beyond the bytes past
 * the read; NULL when the read belongs to no such stream or there is no
 * room. The prefetch workers keep loading further ahead of the stream. */
struct chunk *lsq_http_readahead_miss(struct http_source *hs,
				      uint64_t offset, size_t len,
				      uint64_t run_end, uint64_t *beyond)
{
	struct stream *s;
	struct chunk *c = NULL;
	uint64_t ra = 0;
	bool exact;

	s = stream_advance(hs, offset, len, run_end, &exact);
	if (s && (!s->confirmed || !worth_reading_ahead(hs, s)))
		s = NULL;
	if (s && exact) {
		reach_further(hs, s);
		ra = s->window;
		if (ra > hs->base.size - offset - len)
			ra = hs->base.size - offset - len;
		ra = within_limit(s, offset + len, ra);
		ra = lsq_http_trim_to_held(hs, offset + len, ra);
		if (ra && lsq_http_make_room(hs, len + ra, s))
			c = lsq_http_chunk_new(hs, offset, (size_t)(len + ra),
					       false);
		if (c) {
			c->refs = 1;
			s->spec_bytes += ra;
			if (s->fetched_to < offset + len + ra)
				s->fetched_to = offset + len + ra;
			grow_window(hs, s);
		}
	}
	if (s && start_prefetchers(hs))
		schedule_ahead(hs, s);
	*beyond = ra;
	return c;
}

/* A miss whose window starts a file that goes on for more than the
 * window (hs->mu held): the stream the miss started is taken as
 * sequential at once, up to the file's end, so the workers fetch past the
 * window in the same round trip rather than after the reader's next read
 * confirmed it: a bet (judge_early_bets). Not once readahead was found
 * not to pay (need_run): then streams earn it by their reads again. */
void lsq_http_stream_early(struct http_source *hs, uint64_t offset,
			   size_t len, uint64_t window_end, uint64_t run_end)
{
	struct stream *s = NULL;
	bool other_bets = false;

	if (hs->need_run)
		return;
	for (unsigned i = 0; i < LSQ_HTTP_STREAMS; i++) {
		struct stream *t = &hs->streams[i];

		other_bets = other_bets || t->early;
		if (t->stamp == hs->clock && t->end == offset + len &&
		    !t->confirmed)
			s = t;
	}
	if (!s)
		return;
	s->confirmed = true;
	s->limit = run_end;
	if (s->fetched_to < window_end)
		s->fetched_to = window_end;
	/* a bet beside another one not yet judged (a reader that jumps
	 * about makes one per miss) reaches one window past the miss's
	 * until a read pays it */
	s->early = true;
	s->early_at = hs->streams_started;
	s->early_ahead = s->ahead;
	atomic_fetch_add_explicit(&hs->bets, 1, memory_order_relaxed);
	if (other_bets)
		s->ahead = window_end - s->end + s->window;
	if (start_prefetchers(hs))
		schedule_ahead(hs, s);
}

/* Stop the prefetchers: queued jobs are dropped, running ones end
 * within the transfer timeouts. */
void lsq_http_prefetch_stop(struct http_source *hs)
{
	pthread_mutex_lock(&hs->mu);
	hs->stopping = true;
	while (hs->queue) {
		struct chunk *c = hs->queue;

		hs->queue = c->qnext;
		atomic_fetch_sub(&hs->to_arrive, c->len);
		if (!c->dead)
			lsq_http_chunk_unlink(hs, c);
		lsq_http_chunk_put(hs, c);
	}
	hs->queue_tail = NULL;
	pthread_cond_broadcast(&hs->queue_cv);
	pthread_mutex_unlock(&hs->mu);
	for (unsigned i = 0; i < hs->nprefetchers; i++)
		pthread_join(hs->prefetchers[i], NULL);
}
