/* SPDX-License-Identifier: MIT */
/*
 * http_response.c - what one response says, and whether to take it.
 *
 * libcurl hands every header line to lsq_http_on_header(): the status,
 * Content-Range, Content-Length, ETag, Last-Modified and Retry-After are
 * recorded in the transfer, and at the end of the final header block
 * judge_headers() gives the verdict before any body byte is taken: the
 * status, the range against the one asked, the size and the validators
 * against those recorded at mount (a mismatch is the image changing). A
 * wrong answer aborts the transfer. Apart from the transport because this
 * is what guards against a changed image and a misbehaving server: parsing
 * and policy only, no handle, no retry, no lock.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http/http_internal.h"

char *lsq_http_trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' ||
			 e[-1] == '\t'))
		*--e = '\0';
	return s;
}

void lsq_http_set_verdict(struct xfer *x, enum verdict v, const char *fmt,
			  ...)
{
	va_list ap;

	x->verdict = v;
	va_start(ap, fmt);
	vsnprintf(x->why, sizeof(x->why), fmt, ap);
	va_end(ap);
}

static bool header_is(const char *line, size_t n, const char *name,
		      const char **value)
{
	size_t l = strlen(name);

	if (n <= l || strncasecmp(line, name, l) != 0 || line[l] != ':')
		return false;
	*value = line + l + 1;
	return true;
}

static void copy_value(char *dst, size_t size, const char *v, size_t n)
{
	char tmp[512];

	if (n >= sizeof(tmp))
		n = sizeof(tmp) - 1;
	memcpy(tmp, v, n);
	tmp[n] = '\0';
	snprintf(dst, size, "%s", lsq_http_trim(tmp));
}

static bool parse_u64(const char **p, uint64_t *out)
{
	char *end;

	if (!isdigit((unsigned char)**p))
		return false;
	errno = 0;
	*out = strtoull(*p, &end, 10);
	if (errno)
		return false;
	*p = end;
	return true;
}

/* "bytes FIRST-LAST/TOTAL" or "bytes * /TOTAL" */
static void parse_content_range(struct xfer *x, const char *v)
{
	const char *p = v;

	while (*p == ' ')
		p++;
	if (strncasecmp(p, "bytes ", 6) != 0)
		return;
	p += 6;
	while (*p == ' ')
		p++;
	if (*p == '*') {
		p++;
		x->cr_star = true;
	} else {
		if (!parse_u64(&p, &x->cr_first) || *p++ != '-' ||
		    !parse_u64(&p, &x->cr_last))
			return;
	}
	if (*p++ != '/' || !parse_u64(&p, &x->cr_total))
		return;
	x->have_cr = true;
}

static bool validators_match(const struct xfer *x, const struct mirror *m)
{
	if (m->etag && x->etag[0])
		return strcmp(m->etag, x->etag) == 0;
	if (m->last_modified && x->last_modified[0])
		return strcmp(m->last_modified, x->last_modified) == 0;
	return true;
}

/* End of a final response's headers: decide before any body byte. */
static void judge_headers(struct xfer *x)
{
	struct http_source *hs = x->hs;
	const struct mirror *m = x->m;
	long s = x->status;

	x->final_seen = true;
	if (s == 206) {
		uint64_t last = x->off + x->want - 1;

		if (!x->have_cr || x->cr_star) {
			lsq_http_set_verdict(x, V_RETRY, "206 without a usable "
					     "Content-Range");
			return;
		}
		if (x->suffix) {
			if (x->cr_last < x->cr_first ||
			    x->cr_last + 1 != x->cr_total ||
			    x->cr_last - x->cr_first >= x->want) {
				lsq_http_set_verdict(x, V_FATAL, "wrong "
						     "Content-Range for the "
						     "last %zu bytes: %" PRIu64
						     "-%" PRIu64 "/%" PRIu64,
						     x->want, x->cr_first,
						     x->cr_last, x->cr_total);
				return;
			}
			x->off = x->cr_first;
			x->want = (size_t)(x->cr_last - x->cr_first + 1);
			return;
		}
		if (x->probe) {
			if (x->cr_first != x->off || x->cr_last < x->cr_first ||
			    x->cr_last > last || x->cr_total <= x->cr_last ||
			    (x->cr_last != last && x->cr_last + 1 != x->cr_total)) {
				lsq_http_set_verdict(x, V_FATAL, "wrong "
						     "Content-Range: asked "
						     "bytes %" PRIu64 "-%"
						     PRIu64 ", got %" PRIu64
						     "-%" PRIu64 "/%" PRIu64,
						     x->off, last,
						     x->cr_first, x->cr_last,
						     x->cr_total);
				return;
			}
			x->want = (size_t)(x->cr_last - x->cr_first + 1);
			return;
		}
		if (x->cr_total != hs->total) {
			lsq_http_set_verdict(x, V_CHANGED, "size %" PRIu64
					     " -> %" PRIu64, hs->total,
					     x->cr_total);
			return;
		}
		if (m->etag && x->etag[0] && strcmp(m->etag, x->etag) != 0) {
			lsq_http_set_verdict(x, V_CHANGED, "ETag %s -> %s",
					     m->etag, x->etag);
			return;
		}
		if (!m->etag && m->last_modified && x->last_modified[0] &&
		    strcmp(m->last_modified, x->last_modified) != 0) {
			lsq_http_set_verdict(x, V_CHANGED,
					     "Last-Modified %s -> %s",
					     m->last_modified,
					     x->last_modified);
			return;
		}
		if (x->cr_first != x->off || x->cr_last != last) {
			lsq_http_set_verdict(x, V_RETRY, "wrong Content-Range: "
					     "asked bytes %" PRIu64 "-%"
					     PRIu64 ", got %" PRIu64 "-%"
					     PRIu64, x->off, last,
					     x->cr_first, x->cr_last);
			return;
		}
		if (x->have_clen && x->clen != x->want) {
			lsq_http_set_verdict(x, V_RETRY, "Content-Length %"
					     PRIu64 " for %zu asked bytes",
					     x->clen, x->want);
			return;
		}
		x->verdict = V_OK;
		return;
	}
	if (s == 200) {
		if (x->probe && x->have_clen && x->clen == 0) {
			lsq_http_set_verdict(x, V_FATAL, "empty (0 bytes), not "
					     "a SquashFS image");
			return;
		}
		if (x->probe) {
			lsq_http_set_verdict(x, V_FATAL, "the server ignores "
					     "Range requests (200 instead of "
					     "206); it must support byte "
					     "ranges");
			return;
		}
		/* To a conditional range request, 200 means "changed"
		 * unless the validators and length say it is the same
		 * object and the server just ignored Range. */
		if ((x->have_clen && x->clen != hs->total) ||
		    !validators_match(x, m))
			lsq_http_set_verdict(x, V_CHANGED, "full response with "
					     "other validators or size (HTTP "
					     "200 to If-Range)");
		else
			lsq_http_set_verdict(x, V_RETRY, "server ignored Range "
					     "(200 instead of 206)");
		return;
	}
	if (s == 304 && x->suffix) {  /* the tail of an unchanged image */
		x->want = 0;
		x->verdict = V_OK;
		return;
	}
	if (s == 416) {
		if (x->probe)
			lsq_http_set_verdict(x, V_FATAL, "HTTP 416: empty or "
					     "too small for a SquashFS image");
		else
			lsq_http_set_verdict(x, V_CHANGED, "HTTP 416: the "
					     "image shrank");
		return;
	}
	if (s == 408 || s == 429 || s >= 500) {
		lsq_http_set_verdict(x, V_RETRY, "HTTP %ld", s);
		return;
	}
	lsq_http_set_verdict(x, V_FATAL, "HTTP %ld", s);
}

size_t lsq_http_on_header(char *line, size_t size, size_t nitems, void *user)
{
	struct xfer *x = user;
	size_t n = size * nitems;
	const char *v;

	if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		const char *sp = memchr(line, ' ', n);
		uint64_t st = 0;

		memset(&x->status, 0, sizeof(*x) - offsetof(struct xfer,
							    status));
		if (sp) {
			/* the line is not NUL-terminated (libcurl does not
			 * promise it): parse a bounded copy, not the line
			 * (found by fuzz_http_response: "HTTP/1.1 " at the
			 * end of the buffer read past it) */
			char tmp[32];
			const char *p = tmp;

			sp++;
			copy_value(tmp, sizeof(tmp), sp,
				   n - (size_t)(sp - line));
			if (parse_u64(&p, &st) && st < 1000)
				x->status = (long)st;
		}
		return n;
	}
	if (header_is(line, n, "content-range", &v)) {
		char tmp[160];

		copy_value(tmp, sizeof(tmp), v, n - (size_t)(v - line));
		parse_content_range(x, tmp);
	} else if (header_is(line, n, "content-length", &v)) {
		char tmp[64];
		const char *p = tmp;

		copy_value(tmp, sizeof(tmp), v, n - (size_t)(v - line));
		x->have_clen = parse_u64(&p, &x->clen) && *p == '\0';
	} else if (header_is(line, n, "etag", &v)) {
		copy_value(x->etag, sizeof(x->etag), v, n - (size_t)(v - line));
	} else if (header_is(line, n, "last-modified", &v)) {
		copy_value(x->last_modified, sizeof(x->last_modified), v,
			   n - (size_t)(v - line));
	} else if (header_is(line, n, "retry-after", &v)) {
		char tmp[64];
		const char *p = tmp;
		uint64_t secs;

		copy_value(tmp, sizeof(tmp), v, n - (size_t)(v - line));
		if (parse_u64(&p, &secs)) {
			x->retry_after = secs > 3600 ? 3600.0 : (double)secs;
		} else {
			/* an HTTP-date */
			time_t when = curl_getdate(tmp, NULL), now = time(NULL);

			if (when != -1 && when > now)
				x->retry_after = (double)(when - now);
		}
	} else if (n <= 2 && (line[0] == '\r' || line[0] == '\n')) {
		/* end of a header block; 1xx and redirects are not final */
		if (x->status >= 100 && x->status < 200)
			return n;
		/* (S3 requests follow no redirect: S3 answers a wrong
		 * region with 301 and an error document, judged below) */
		if (x->status >= 300 && x->status < 400 &&
		    x->status != 304 && !x->hs->s3)
			return n;
		judge_headers(x);
		/* An S3 error answer names its reason in the body's Code
		 * (ExpiredToken, SignatureDoesNotMatch, ...): read the start
		 * of it, lsq_http_on_body keeps it apart from the image. */
		if (x->verdict != V_OK && x->hs->s3 && x->status >= 300 &&
		    x->status != 416)
			return n;
		if (x->verdict != V_OK)
			return 0;  /* abort: never download a wrong body */
	}
	return n;
}

size_t lsq_http_on_body(char *data, size_t size, size_t nmemb, void *user)
{
	struct xfer *x = user;
	size_t n = size * nmemb;

	if (!x->final_seen)
		return n;  /* body of a redirect */
	if (x->verdict != V_OK && x->hs->s3 && x->status >= 300) {
		size_t room = sizeof(x->s3_error) - 1 - x->s3_error_len;

		if (n > room)
			n = room;
		memcpy(x->s3_error + x->s3_error_len, data, n);
		x->s3_error_len += n;
		x->s3_error[x->s3_error_len] = '\0';
		/* enough read: stop the transfer once the buffer is full */
		return n == size * nmemb ? n : 0;
	}
	if (x->verdict != V_OK)
		return 0;
	if (n > x->want - x->got) {
		lsq_http_set_verdict(x, V_RETRY, "server sent more than the "
				     "%zu bytes asked", x->want);
		return 0;
	}
	memcpy(x->buf + x->got, data, n);
	if (x->got == 0)
		x->link_bytes_at_body = atomic_load_explicit(
			&x->hs->bytes_fetched, memory_order_relaxed);
	x->got += n;
	atomic_fetch_add_explicit(&x->hs->bytes_fetched, n,
				  memory_order_relaxed);
	if (x->paced)
		lsq_http_pace_arrived(x->hs, n);
	return n;
}

