/* SPDX-License-Identifier: MIT */
/*
 * test_http_span_memory.c - a speculative span (background or profile
 * prefetch) takes from the HTTP source's memory what its ready chunks
 * hold of the span's head and tail, and is left with the one range still
 * to fetch (lsq_http_span_from_memory, src/http/http_chunks.c): a
 * background span that starts inside the latency window a reader's miss
 * fetched no longer fetches that window's bytes again. Chunks still
 * loading are not taken; bytes held only in the span's middle are
 * fetched again (a span stays one request).
 */
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "http/http_internal.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

/* The image's byte at offset p. */
static uint8_t byte_at(uint64_t p)
{
	return (uint8_t)(p * 131u + (p >> 16));
}

static struct chunk *chunk(uint64_t off, size_t len, bool ready)
{
	struct chunk *c = calloc(1, sizeof(*c));

	CHECK(c != NULL);
	c->data = malloc(len);
	CHECK(c->data != NULL);
	for (size_t i = 0; i < len; i++)
		c->data[i] = byte_at(off + i);
	c->off = off;
	c->len = len;
	c->ready = ready;
	return c;
}

static void hold(struct http_source *hs, struct chunk *c)
{
	lsq_http_chunk_link_front(hs, c);
}

static void drop_all(struct http_source *hs)
{
	while (hs->chunks) {
		struct chunk *c = hs->chunks;

		CHECK(c->refs == 0);  /* every ref taken was put back */
		hs->chunks = c->next;
		free(c->data);
		free(c);
	}
}

/* Take the span [off, off+len) from memory; check the bytes copied, and
 * that [*lo, *hi) is what is left. */
static void span(struct http_source *hs, uint64_t off, size_t len,
		 uint64_t want_lo, uint64_t want_hi, uint64_t want_copied)
{
	uint8_t *buf = malloc(len);
	uint64_t lo = 0, hi = 0, copied;

	CHECK(buf != NULL);
	memset(buf, 0, len);
	pthread_mutex_lock(&hs->mu);
	copied = lsq_http_span_from_memory(hs, buf, off, len, &lo, &hi);
	pthread_mutex_unlock(&hs->mu);
	CHECK(copied == want_copied);
	if (want_lo >= want_hi) {
		CHECK(lo >= hi);
	} else {
		CHECK(lo == want_lo);
		CHECK(hi == want_hi);
	}
	/* everything outside [lo, hi) is the image's */
	for (uint64_t p = off; p < off + len; p++) {
		if (p >= lo && p < hi)
			continue;
		if (buf[p - off] != byte_at(p)) {
			CHECK(buf[p - off] == byte_at(p));
			break;
		}
	}
	free(buf);
}

int main(void)
{
	struct http_source *hs = calloc(1, sizeof(*hs));

	CHECK(hs != NULL);
	pthread_mutex_init(&hs->mu, NULL);
	pthread_cond_init(&hs->cv, NULL);
	hs->base.size = 64 * MiB;

	/* nothing held: all of it to fetch */
	span(hs, 4 * MiB, 4 * MiB, 4 * MiB, 8 * MiB, 0);

	/* a window a reader's miss fetched from 3 MiB on; the background
	 * span starting past the aligned 4 MiB takes its last MiB */
	hold(hs, chunk(3 * MiB, 2 * MiB, true));
	span(hs, 4 * MiB, 4 * MiB, 5 * MiB, 8 * MiB, MiB);
	/* its tail too, from a window at 7.5 MiB */
	hold(hs, chunk(7 * MiB + 512 * KiB, 2 * MiB, true));
	span(hs, 4 * MiB, 4 * MiB, 5 * MiB, 7 * MiB + 512 * KiB,
	     MiB + 512 * KiB);
	/* held in the middle only: fetched again, one request */
	span(hs, 0, 10 * MiB, 0, 10 * MiB, 0);
	drop_all(hs);

	/* head chunk after chunk, up to the whole span: nothing to fetch */
	hold(hs, chunk(0, MiB, true));
	hold(hs, chunk(MiB, MiB, true));
	hold(hs, chunk(2 * MiB - 4 * KiB, MiB, true));  /* overlapping */
	span(hs, 256 * KiB, 2 * MiB, 0, 0, 2 * MiB);
	/* a span going on past them: its head, over the three */
	span(hs, 0, 4 * MiB, 3 * MiB - 4 * KiB, 4 * MiB,
	     3 * MiB - 4 * KiB);
	/* its tail, down over two */
	hold(hs, chunk(10 * MiB, MiB, true));
	hold(hs, chunk(11 * MiB, MiB, true));
	span(hs, 8 * MiB, 4 * MiB, 8 * MiB, 10 * MiB, 2 * MiB);
	drop_all(hs);

	/* a chunk still loading is not taken (its bytes are not there) */
	hold(hs, chunk(8 * MiB, 2 * MiB, false));
	span(hs, 8 * MiB, 4 * MiB, 8 * MiB, 12 * MiB, 0);
	drop_all(hs);

	/* a span inside one chunk: all copied */
	hold(hs, chunk(16 * MiB, 8 * MiB, true));
	span(hs, 17 * MiB, 3 * MiB + 7, 0, 0, 3 * MiB + 7);
	drop_all(hs);

	pthread_cond_destroy(&hs->cv);
	pthread_mutex_destroy(&hs->mu);
	free(hs);
	return 0;
}
