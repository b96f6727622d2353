/* SPDX-License-Identifier: MIT */
/*
 * test_http_streams.c - which reads the HTTP source's sequential streams
 * (src/http/http_readahead.c) follow. A reader's exact continuation
 * confirms its stream; a speculative read (a startup profile's or the
 * background's span) served from readahead memory tracks no stream at
 * all: a span that continued where a reader stopped would confirm a
 * stream with no file end to hold it, and the prefetch workers would read
 * the rest of the image ahead of the spans on the readers' connections.
 */
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "http/http_internal.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

/* An HTTP source with readahead on and no prefetch workers (so no
 * request is ever made), holding one loaded chunk [0, 8 MiB). */
static void setup(struct http_source *hs, struct chunk *c)
{
	memset(hs, 0, sizeof(*hs));
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&hs->mu, NULL);
	hs->opt.readahead = MiB;
	hs->base.size = 64 * MiB;
	lsq_latency_window_init(&hs->win, 2 * MiB);
	c->off = 0;
	c->len = 8 * MiB;
	c->ready = true;
	hs->chunks = c;   /* the LRU's head: a hit leaves the list alone */
}

static unsigned streams_tracked(const struct http_source *hs)
{
	unsigned n = 0;

	for (unsigned i = 0; i < LSQ_HTTP_STREAMS; i++)
		n += hs->streams[i].stamp != 0;
	return n;
}

static bool any_confirmed(const struct http_source *hs)
{
	for (unsigned i = 0; i < LSQ_HTTP_STREAMS; i++)
		if (hs->streams[i].confirmed)
			return true;
	return false;
}

static void hit(struct http_source *hs, struct chunk *c, uint64_t off,
		size_t len, bool speculative, uint64_t run_end)
{
	struct lsq_read rq = { .offset = off, .len = len,
			       .speculative = speculative };

	pthread_mutex_lock(&hs->mu);
	lsq_http_note_hit(hs, c, &rq, run_end, false);
	pthread_mutex_unlock(&hs->mu);
}

int main(void)
{
	struct http_source *hs = calloc(1, sizeof(*hs));
	struct chunk c;

	CHECK(hs != NULL);

	/* a reader: its second, exact read confirms its stream, which
	 * takes the end of the reader's file as its limit */
	setup(hs, &c);
	hit(hs, &c, 0, 128 * KiB, false, 6 * MiB);
	CHECK(streams_tracked(hs) == 1);
	CHECK(!any_confirmed(hs));
	hit(hs, &c, 128 * KiB, 128 * KiB, false, 6 * MiB);
	CHECK(streams_tracked(hs) == 1);
	CHECK(any_confirmed(hs));

	/* spans served from memory, one after the other: no stream */
	setup(hs, &c);
	hit(hs, &c, 0, 2 * MiB, true, 0);
	hit(hs, &c, 2 * MiB, 2 * MiB, true, 0);
	hit(hs, &c, 4 * MiB, 2 * MiB, true, 0);
	CHECK(streams_tracked(hs) == 0);
	CHECK(!any_confirmed(hs));

	/* a span that continues a reader's stream exactly neither
	 * confirms it nor moves it on */
	setup(hs, &c);
	hit(hs, &c, 0, 128 * KiB, false, 6 * MiB);
	hit(hs, &c, 128 * KiB, 2 * MiB, true, 0);
	CHECK(!any_confirmed(hs));
	for (unsigned i = 0; i < LSQ_HTTP_STREAMS; i++)
		if (hs->streams[i].stamp)
			CHECK(hs->streams[i].end == 128 * KiB);
	/* the reader's own next read still continues it */
	hit(hs, &c, 128 * KiB, 128 * KiB, false, 6 * MiB);
	CHECK(any_confirmed(hs));

	/* every hit took a reference, as a read does */
	CHECK(c.refs == 3);
	pthread_mutex_destroy(&hs->mu);
	free(hs);
	return 0;
}
