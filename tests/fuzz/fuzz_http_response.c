/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http_response.c - arbitrary bytes as the answer of a (lying) server,
 * fed into the HTTP source's real callbacks (http_response.c) as libcurl
 * delivers them: one header line per lsq_http_on_header() call, each in a
 * buffer of exactly its length (no NUL, so ASan sees any over-read), then
 * the body in pieces to lsq_http_on_body(). No libcurl transfer runs; only
 * curl_getdate (Retry-After dates) goes through the dlopen()ed table.
 *
 * Input: 24 bytes of request (flags, offset, length, recorded size), a
 * recorded ETag and Last-Modified (NUL-terminated), then the response.
 * Aborts if a response is accepted (V_OK) whose range, size or validators
 * do not match what was asked: that is the source's promise.
 */
#include <stdlib.h>
#include <string.h>

#include "http/http_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t take_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* A NUL-terminated string at *p (at most max bytes), or NULL if empty. */
static char *take_str(const uint8_t **p, const uint8_t *end, size_t max)
{
	size_t n = 0;
	char *s;

	while (*p + n < end && n < max && (*p)[n])
		n++;
	s = n ? strndup((const char *)*p, n) : NULL;
	*p += n + (*p + n < end);
	return s;
}

static void check_accepted(const struct xfer *x, uint64_t want0)
{
	uint64_t last = x->off + want0 - 1;

	if (x->got > x->want)
		abort();
	if (!x->final_seen) {
		if (x->got)  /* a redirect's body must not be kept */
			abort();
		return;
	}
	if (x->status != 206 || !x->have_cr || x->cr_star ||
	    x->cr_first != x->off)
		abort();
	if (x->probe) {
		/* a shorter answer only when the object ends there */
		if (x->cr_last > last || x->cr_total <= x->cr_last ||
		    (x->cr_last != last && x->cr_last + 1 != x->cr_total) ||
		    x->want != x->cr_last - x->cr_first + 1)
			abort();
		return;
	}
	if (x->cr_last != last || x->cr_total != x->hs->total ||
	    x->want != want0)
		abort();
	if (x->m->etag && x->etag[0] && strcmp(x->m->etag, x->etag))
		abort();
	if (!x->m->etag && x->m->last_modified && x->last_modified[0] &&
	    strcmp(x->m->last_modified, x->last_modified))
		abort();
	if (x->have_clen && x->clen != x->want)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_source hs;  /* only total and counters are used */
	static bool loaded;
	const uint8_t *p = data, *end = data + size;
	struct mirror m = { 0 };
	struct xfer x;
	uint8_t *buf;
	size_t piece;
	bool in_body = false;
	char err[128];

	if (size < 24)
		return 0;
	if (!loaded) {
		if (lsq_curl_load(err, sizeof(err)))
			abort();  /* curl_getdate is part of what is tested */
		loaded = true;
	}
	memset(&x, 0, sizeof(x));
	x.hs = &hs;
	x.m = &m;
	x.probe = p[0] & 1;
	piece = (size_t)(p[0] >> 1) + 1;           /* body piece size */
	x.off = take_u64(p + 1) >> (p[9] & 63);    /* small and huge */
	x.want = (size_t)(p[10] << 8 | p[11]) + 1; /* 1..65536 */
	if (x.off > UINT64_MAX - x.want)
		return 0;  /* the source never asks past 2^64 */
	hs.total = take_u64(p + 12) >> (p[20] & 63);
	p += 24;
	m.etag = take_str(&p, end, 64);
	m.last_modified = take_str(&p, end, 64);
	buf = malloc(x.want);
	if (!buf)
		abort();
	x.buf = buf;
	x.verdict = V_OK;  /* as lsq_http_transfer() starts a transfer */

	uint64_t want0 = x.want;
	bool stopped = false;

	while (p < end && !stopped) {
		if (!in_body) {
			const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
			size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
			char *line = malloc(n);

			memcpy(line, p, n);
			p += n;
			bool blank = n <= 2 && (line[0] == '\r' || line[0] == '\n');

			stopped = lsq_http_on_header(line, 1, n, &x) != n;
			free(line);
			if (blank && x.final_seen)
				in_body = true;
		} else {
			size_t n = (size_t)(end - p) < piece ? (size_t)(end - p)
							      : piece;
			char *chunk = malloc(n);

			memcpy(chunk, p, n);
			p += n;
			stopped = lsq_http_on_body(chunk, 1, n, &x) != n;
			free(chunk);
		}
	}
	if (x.verdict == V_OK)
		check_accepted(&x, want0);
	else if (x.why[0] == '\0')
		abort();  /* every refusal says why */
	free(buf);
	free(m.etag);
	free(m.last_modified);
	return 0;
}
