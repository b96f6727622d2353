/* SPDX-License-Identifier: MIT */
/*
 * test_http_span_trim.c - a reader's latency window and readahead leave
 * out what a speculative span (background or profile prefetch) on its way
 * brings (lsq_http_span_begin, lsq_http_trim_to_held, lsq_http_held_end,
 * lsq_http_window_chunk in src/http/http_chunks.c), but never the read's
 * own bytes; a span that ended, or stalled past its due time, leaves
 * them as they were.
 */
#include <stdlib.h>

#include "common/histogram.h"
#include "harness/check.h"
#include "http/http_internal.h"

#define KiB 1024u
#define MiB (1024u * 1024u)
#define BIG (1024u * MiB)  /* a run end far past every window */

/* The window a miss at [off, off+len) gets, as [*lo, *hi); false: none
 * (the read alone is fetched). The chunk is dropped at once. */
static bool window(struct http_source *hs, uint64_t off, size_t len,
		   uint64_t run_end, uint64_t *lo, uint64_t *hi)
{
	uint64_t ra = 0;
	struct chunk *c;

	c = lsq_http_window_chunk(hs, off, len, 2 * MiB, run_end, &ra);
	if (!c)
		return false;
	*lo = c->off;
	*hi = c->off + c->len;
	CHECK(ra == c->len - len);
	lsq_http_chunk_unlink(hs, c);
	c->dead = true;
	lsq_http_chunk_put(hs, c);
	return true;
}

static uint64_t trims(struct http_source *hs)
{
	return atomic_load(&hs->span_trims);
}

int main(void)
{
	struct http_source *hs = calloc(1, sizeof(*hs));
	uint64_t lo = 0, hi = 0, before;
	int slot, slots[LSQ_HTTP_SPANS];

	CHECK(hs != NULL);
	pthread_mutex_init(&hs->mu, NULL);
	pthread_cond_init(&hs->cv, NULL);
	hs->base.size = 64 * MiB;
	hs->win_limit = 32 * MiB;
	lsq_latency_window_init(&hs->win, 2 * MiB);
	atomic_store(&hs->win.rtt_ns, 50u * 1000u * 1000u);

	/* nothing on its way: the aligned window, readahead as asked */
	CHECK(window(hs, 4 * MiB + 512 * KiB, 128 * KiB, 0, &lo, &hi));
	CHECK(lo == 4 * MiB && hi == 6 * MiB);
	CHECK(lsq_http_trim_to_held(hs, 4 * MiB, 4 * MiB) == 4 * MiB);
	CHECK(lsq_http_held_end(hs, 4 * MiB) == 4 * MiB);
	CHECK(trims(hs) == 0);

	/* a span on its way above the read: the window stops where it
	 * begins, and so does readahead */
	slot = lsq_http_span_begin(hs, 5 * MiB, 7 * MiB);
	CHECK(slot >= 0);
	CHECK(window(hs, 4 * MiB + 512 * KiB, 128 * KiB, 0, &lo, &hi));
	CHECK(lo == 4 * MiB && hi == 5 * MiB);
	CHECK(lsq_http_trim_to_held(hs, 4 * MiB, 4 * MiB) == MiB);
	CHECK(lsq_http_trim_to_held(hs, 7 * MiB, 4 * MiB) == 4 * MiB);
	/* readahead that reaches a span's start looks past it */
	CHECK(lsq_http_trim_to_held(hs, 5 * MiB, 4 * MiB) == 0);
	CHECK(lsq_http_held_end(hs, 5 * MiB) == 7 * MiB);
	CHECK(lsq_http_held_end(hs, 7 * MiB) == 7 * MiB);
	CHECK(trims(hs) == 3);

	/* a read inside it: its own bytes only, no window */
	CHECK(!window(hs, 5 * MiB + 512 * KiB, 128 * KiB, BIG, &lo, &hi));
	/* one straddling its end: from the span's end on */
	CHECK(window(hs, 7 * MiB - 64 * KiB, 128 * KiB, BIG, &lo, &hi));
	CHECK(lo == 7 * MiB - 64 * KiB && hi == 9 * MiB - 64 * KiB);

	/* arrived: the window is whole again */
	lsq_http_span_end(hs, slot, hs->spans[slot].lo);
	before = trims(hs);
	CHECK(window(hs, 4 * MiB + 512 * KiB, 128 * KiB, 0, &lo, &hi));
	CHECK(lo == 4 * MiB && hi == 6 * MiB);
	CHECK(lsq_http_held_end(hs, 5 * MiB) == 5 * MiB);
	CHECK(trims(hs) == before);

	/* a span below the read: the window starts at its end */
	slot = lsq_http_span_begin(hs, 3 * MiB, 4 * MiB + 256 * KiB);
	CHECK(window(hs, 4 * MiB + 512 * KiB, 128 * KiB, 0, &lo, &hi));
	CHECK(lo == 4 * MiB + 256 * KiB && hi == 6 * MiB);
	/* stalled past its due time (an origin slow to answer speculative
	 * ranges): readers no longer count on it */
	hs->spans[slot].due_ns = lsq_now_ns() - 1;
	CHECK(window(hs, 4 * MiB + 512 * KiB, 128 * KiB, 0, &lo, &hi));
	CHECK(lo == 4 * MiB && hi == 6 * MiB);
	CHECK(lsq_http_held_end(hs, 3 * MiB) == 3 * MiB);

	/* a span is due for two round trips at least */
	slot = lsq_http_span_begin(hs, 0, MiB);
	CHECK(hs->spans[slot].due_ns >= lsq_now_ns() + 90u * 1000u * 1000u);
	lsq_http_span_end(hs, slot, hs->spans[slot].lo);

	/* every slot in flight: a further span goes unnoted */
	for (int i = 0; i < LSQ_HTTP_SPANS; i++) {
		slots[i] = lsq_http_span_begin(hs, (uint64_t)i * MiB,
					       (uint64_t)(i + 1) * MiB);
		CHECK(slots[i] >= 0);
	}
	CHECK(lsq_http_span_begin(hs, 32 * MiB, 33 * MiB) == -1);
	lsq_http_span_end(hs, -1, 0);  /* ending an unnoted one is harmless */
	CHECK(lsq_http_held_end(hs, 32 * MiB) == 32 * MiB);
	CHECK(lsq_http_held_end(hs, 15 * MiB) == 16 * MiB);
	lsq_http_span_end(hs, slots[3], 3 * MiB);
	CHECK(lsq_http_span_begin(hs, 32 * MiB, 33 * MiB) == slots[3]);
	/* the span that had the slot before ends late: this one stays */
	lsq_http_span_end(hs, slots[3], 3 * MiB);
	CHECK(lsq_http_held_end(hs, 32 * MiB) == 33 * MiB);

	CHECK(hs->chunks == NULL && hs->win_bytes == 0);
	pthread_cond_destroy(&hs->cv);
	pthread_mutex_destroy(&hs->mu);
	free(hs);
	return 0;
}
