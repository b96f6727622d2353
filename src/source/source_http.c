/* SPDX-License-Identifier: MIT */
/*
 * source_http.c - a remote image over HTTP(S) range requests.
 *
 * Design (docs/http-source.md has the user-facing side):
 *  - open: one ranged GET of the first 64 KiB probes size, ETag and
 *    Last-Modified and keeps those bytes pinned (superblock + compressor
 *    options); every mirror is probed the same way and must match.
 *  - the metadata region is pinned by the caching layer in front
 *    (source_cache.c), which reads it whole through this source.
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
 * libcurl types stay in this file.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/url.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "lsq_config.h"

#define LSQ_HTTP_HEAD_SIZE (64u * 1024u)

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
	       strncasecmp(url, "file://", 7) == 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* file://[localhost]/path, percent-decoded, served by the file source. */
static int open_file_url(const char *url, uint64_t base_offset,
			 struct lsq_source **out, char *err, size_t errlen)
{
	const char *p = url + 7;
	char *path, *q;
	int ret;

	if (strncasecmp(p, "localhost/", 10) == 0)
		p += 9;
	if (p[0] != '/') {
		snprintf(err, errlen, "%s: only local file:// URLs are supported",
			 url);
		return LSQ_ERR_INVALID;
	}
	path = malloc(strlen(p) + 1);
	if (!path)
		return LSQ_ERR_NOMEM;
	for (q = path; *p && *p != '?' && *p != '#'; p++) {
		if (p[0] == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
			*q++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
			p += 2;
		} else {
			*q++ = *p;
		}
	}
	*q = '\0';
	ret = lsq_source_file_open(path, base_offset, out);
	if (ret == LSQ_ERR_IO)
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	else if (ret == LSQ_ERR_OUT_OF_BOUNDS)
		snprintf(err, errlen, "%s: offset is past the end of the file",
			 path);
	else if (ret)
		snprintf(err, errlen, "%s: %s", path, lsq_strerror(ret));
	free(path);
	return ret;
}

#if !LSQ_HAVE_CURL

int lsq_source_http_open(const char *url, const struct lsq_http_options *opt,
			 struct lsq_source **out, char *err, size_t errlen)
{
	if (strncasecmp(url, "file://", 7) == 0)
		return open_file_url(url, opt->base_offset, out, err, errlen);
	snprintf(err, errlen, "%s: sqfs-lazy was built without HTTP support "
		 "(libcurl)", url);
	return LSQ_ERR_UNSUPPORTED;
}

const char *lsq_source_http_backend(void)
{
	return "none (built without libcurl)";
}

void lsq_source_allow_threads(struct lsq_source *src)
{
	(void)src;
}

int lsq_source_http_get_stats(const struct lsq_source *src,
			      struct lsq_http_stats *out)
{
	(void)src;
	(void)out;
	return LSQ_ERR_INVALID;
}

#else /* LSQ_HAVE_CURL */

#include <curl/curl.h>

#include "source/curl_lazy.h"
#include "source/latency_window.h"

/* Limits and policy constants, documented in docs/http-source.md. */
#define LSQ_HTTP_RA_FACTOR 8u          /* readahead cache = 8 x readahead */
#define LSQ_HTTP_RA_MIN_CACHE (4u * 1024u * 1024u)
#define LSQ_HTTP_RA_START (128u * 1024u)  /* first readahead window */
#define LSQ_HTTP_STREAMS 8             /* sequential streams tracked */
#define LSQ_HTTP_RA_SLACK (512u * 1024u) /* reordering a stream tolerates */
#define LSQ_HTTP_MAX_PREFETCH 4        /* prefetch workers at most */
#define LSQ_HTTP_RA_JUDGE (8u * 1024u * 1024u) /* readahead checked per */
#define LSQ_HTTP_BACKOFF_BASE 0.2      /* seconds, doubled per retry */
#define LSQ_HTTP_BACKOFF_MAX 8.0
#define LSQ_HTTP_RETRY_AFTER_MAX 30.0
#define LSQ_HTTP_LOW_SPEED 1024L       /* bytes/s ... */
#define LSQ_HTTP_LOW_SPEED_TIME 15.0   /* ... for this long (or timeout) */

enum verdict {
	V_OK,
	V_RETRY,    /* transient: connection, 5xx, 429, short body */
	V_TIMEOUT,  /* transient: timed out */
	V_CHANGED,  /* the image is not the one we mounted */
	V_FATAL,    /* retrying this URL cannot help (404, TLS, ...) */
};

struct mirror {
	char *url;
	char *shown;          /* url for messages: no password, no query */
	char *etag;           /* strong ETag, or NULL */
	char *last_modified;  /* or NULL */
	struct curl_slist *headers;  /* user headers + If-Range */
};

struct handle {
	CURL *curl;
	char errbuf[CURL_ERROR_SIZE];
};

/* A piece of the image held in memory: pinned (head, metadata region) or
 * readahead (bounded, LRU). Immutable once READY; readers hold refs while
 * they copy outside the lock. */
struct chunk {
	struct chunk *prev, *next;  /* in http_source.chunks, MRU first */
	uint64_t off;
	size_t len;
	uint8_t *data;
	unsigned refs;
	bool ready;
	bool pinned;
	bool prefetch; /* loaded by a prefetch worker */
	bool window;   /* a latency window around a random miss */
	bool dead;    /* unlinked; freed by the last ref */
	struct chunk *qnext;  /* in the prefetch queue */
};

struct stream {
	uint64_t end;        /* where the next sequential read starts */
	uint64_t window;     /* bytes per readahead request (grows) */
	uint64_t fetched_to; /* end of what was requested for it */
	uint64_t ahead;      /* bytes to keep loading past end (grows when
			      * the reader catches up with the loads) */
	uint64_t stamp;
	bool confirmed;      /* reads continued it exactly: read ahead */
	uint64_t run;        /* bytes of the current run of exact reads */
	uint64_t need_run;   /* run that confirms it (grows when demoted) */
	uint64_t spec_bytes; /* fetched ahead for it since the last check */
	uint64_t spec_used;  /* bytes of its reads served from those */
	uint64_t limit;      /* no reading ahead from here on: the end of
			      * the file the reader is in, from the image's
			      * run-end hint; UINT64_MAX when not known */
};

struct http_source {
	struct lsq_source base;
	struct lsq_http_options opt;
	uint64_t base_offset;
	uint64_t total;            /* size of the remote object */
	struct mirror *mirrors;
	unsigned nmirrors;
	atomic_uint current;       /* mirror to try first */
	struct curl_slist *user_headers;
	char *cacert;              /* owned copy: handles are made lazily */
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

	/* handle pool */
	pthread_mutex_t pool_mu;
	pthread_cond_t pool_cv;
	struct handle **free_handles;
	unsigned nfree, created;

	/* memory: chunks, streams, pin */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct chunk *chunks;
	uint64_t ra_bytes;         /* bytes of readahead chunks */
	uint64_t win_bytes;        /* bytes of latency window chunks */
	uint64_t win_limit;
	uint64_t ra_limit;
	struct stream streams[LSQ_HTTP_STREAMS];
	uint64_t need_run;         /* exact run confirming a new stream */
	uint64_t clock;

	/* prefetch workers (started on the first sequential stream) */
	pthread_cond_t queue_cv;
	struct chunk *queue, *queue_tail;
	pthread_t *prefetchers;
	unsigned nprefetchers, prefetch_max, prefetch_inflight;
	bool prefetch_allowed, prefetch_started, stopping;

	/* transfer engine (threads allowed and libcurl has the multi calls) */
	CURLM *multi;
	pthread_t engine_thread;
	pthread_mutex_t eng_mu;
	pthread_cond_t eng_cv;
	struct engine_job *eng_queue;
	bool engine_started, eng_stop;
	atomic_bool engine_on;
	bool multiplexing;      /* a probe answered over HTTP/2 or later */

	/* windows around random misses, sized from measured round trips */
	struct lsq_latency_window win;

	atomic_bool changed;
	atomic_uint_least64_t not_before_ns;  /* Retry-After, CLOCK_MONOTONIC */
	atomic_uint_least64_t seed;
	atomic_uint_least64_t requests, bytes_fetched, retries, failures,
		cache_hits, readahead_bytes, in_flight;
};

static const struct lsq_source_ops http_ops;

/* ---- small helpers ---- */

static void sleep_seconds(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double jitter(struct http_source *hs)
{
	uint64_t x = atomic_fetch_add(&hs->seed, 0x9E3779B97F4A7C15ull);

	x ^= x >> 30;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 27;
	x *= 0x94D049BB133111EBull;
	x ^= x >> 31;
	return (double)(x >> 11) / 9007199254740992.0;  /* [0, 1) */
}

static char *trim(char *s)
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

/* ---- libcurl share handle locks ---- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access acc,
		       void *user)
{
	struct http_source *hs = user;

	(void)h;
	(void)acc;
	if ((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&hs->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user)
{
	struct http_source *hs = user;

	(void)h;
	if ((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&hs->share_locks[data]);
}

/* ---- one transfer ---- */

struct xfer {
	struct http_source *hs;
	const struct mirror *m;
	bool probe;          /* at open: learn total and validators */
	uint64_t off;        /* absolute offset in the remote object */
	size_t want;
	uint8_t *buf;
	size_t got;
	/* the current response's headers */
	long status;
	bool have_cr, cr_star;
	uint64_t cr_first, cr_last, cr_total;
	bool have_clen;
	uint64_t clen;
	char etag[256];
	char last_modified[128];
	double retry_after;
	/* outcome */
	bool final_seen;
	bool multiplexed;    /* probe: the answer came over HTTP/2 or later */
	enum verdict verdict;
	char why[256];
};

static void set_verdict(struct xfer *x, enum verdict v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_verdict(struct xfer *x, enum verdict v, const char *fmt, ...)
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
	snprintf(dst, size, "%s", trim(tmp));
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
			set_verdict(x, V_RETRY, "206 without a usable Content-Range");
			return;
		}
		if (x->probe) {
			if (x->cr_first != x->off || x->cr_last < x->cr_first ||
			    x->cr_last > last || x->cr_total <= x->cr_last ||
			    (x->cr_last != last && x->cr_last + 1 != x->cr_total)) {
				set_verdict(x, V_FATAL, "wrong Content-Range: asked "
					    "bytes %" PRIu64 "-%" PRIu64 ", got %"
					    PRIu64 "-%" PRIu64 "/%" PRIu64,
					    x->off, last, x->cr_first,
					    x->cr_last, x->cr_total);
				return;
			}
			x->want = (size_t)(x->cr_last - x->cr_first + 1);
			return;
		}
		if (x->cr_total != hs->total) {
			set_verdict(x, V_CHANGED, "size %" PRIu64 " -> %" PRIu64,
				    hs->total, x->cr_total);
			return;
		}
		if (m->etag && x->etag[0] && strcmp(m->etag, x->etag) != 0) {
			set_verdict(x, V_CHANGED, "ETag %s -> %s", m->etag,
				    x->etag);
			return;
		}
		if (!m->etag && m->last_modified && x->last_modified[0] &&
		    strcmp(m->last_modified, x->last_modified) != 0) {
			set_verdict(x, V_CHANGED, "Last-Modified %s -> %s",
				    m->last_modified, x->last_modified);
			return;
		}
		if (x->cr_first != x->off || x->cr_last != last) {
			set_verdict(x, V_RETRY, "wrong Content-Range: asked "
				    "bytes %" PRIu64 "-%" PRIu64 ", got %" PRIu64
				    "-%" PRIu64, x->off, last, x->cr_first,
				    x->cr_last);
			return;
		}
		if (x->have_clen && x->clen != x->want) {
			set_verdict(x, V_RETRY, "Content-Length %" PRIu64
				    " for %zu asked bytes", x->clen, x->want);
			return;
		}
		x->verdict = V_OK;
		return;
	}
	if (s == 200) {
		if (x->probe && x->have_clen && x->clen == 0) {
			set_verdict(x, V_FATAL, "empty (0 bytes), not a "
				    "SquashFS image");
			return;
		}
		if (x->probe) {
			set_verdict(x, V_FATAL, "the server ignores Range "
				    "requests (200 instead of 206); it must "
				    "support byte ranges");
			return;
		}
		/* To a conditional range request, 200 means "changed"
		 * unless the validators and length say it is the same
		 * object and the server just ignored Range. */
		if ((x->have_clen && x->clen != hs->total) ||
		    !validators_match(x, m))
			set_verdict(x, V_CHANGED, "full response with other "
				    "validators or size (HTTP 200 to If-Range)");
		else
			set_verdict(x, V_RETRY, "server ignored Range (200 "
				    "instead of 206)");
		return;
	}
	if (s == 416) {
		if (x->probe)
			set_verdict(x, V_FATAL, "HTTP 416: empty or too small "
				    "for a SquashFS image");
		else
			set_verdict(x, V_CHANGED, "HTTP 416: the image shrank");
		return;
	}
	if (s == 408 || s == 429 || s >= 500) {
		set_verdict(x, V_RETRY, "HTTP %ld", s);
		return;
	}
	set_verdict(x, V_FATAL, "HTTP %ld", s);
}

static size_t on_header(char *line, size_t size, size_t nitems, void *user)
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
			sp++;
			if (parse_u64(&sp, &st) && st < 1000)
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
		if (x->status >= 300 && x->status < 400 &&
		    x->status != 304)
			return n;
		judge_headers(x);
		if (x->verdict != V_OK)
			return 0;  /* abort: never download a wrong body */
	}
	return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
	struct xfer *x = user;
	size_t n = size * nmemb;

	if (!x->final_seen)
		return n;  /* body of a redirect */
	if (x->verdict != V_OK)
		return 0;
	if (n > x->want - x->got) {
		set_verdict(x, V_RETRY, "server sent more than the %zu "
			    "bytes asked", x->want);
		return 0;
	}
	memcpy(x->buf + x->got, data, n);
	x->got += n;
	atomic_fetch_add_explicit(&x->hs->bytes_fetched, n,
				  memory_order_relaxed);
	return n;
}

/* Seconds as curl's milliseconds: at least 1 (0 would mean "none"), at
 * most about 11 days. */
static long millis(double seconds)
{
	double ms = seconds * 1000.0;

	if (!(ms >= 1.0))
		return 1;
	if (ms > 1e9)
		return 1000000000L;
	return (long)ms;
}

static struct handle *new_handle(struct http_source *hs)
{
	const struct lsq_http_options *o = &hs->opt;
	struct handle *h = calloc(1, sizeof(*h));
	double low_time = o->timeout > 0 && o->timeout < LSQ_HTTP_LOW_SPEED_TIME
				  ? o->timeout : LSQ_HTTP_LOW_SPEED_TIME;
	CURL *c;

	if (!h)
		return NULL;
	c = h->curl = curl_easy_init();
	if (!c) {
		free(h);
		return NULL;
	}
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "sqfs-lazy/" LSQ_VERSION);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION,
			 (long)CURL_HTTP_VERSION_2TLS);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(c, CURLOPT_PROTOCOLS,
			 (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS,
			 (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(c, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			 millis(o->connect_timeout));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, millis(o->timeout));
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, LSQ_HTTP_LOW_SPEED);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
			 low_time < 1.0 ? 1L : (long)low_time);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	if (hs->share)
		curl_easy_setopt(c, CURLOPT_SHARE, hs->share);
	if (o->cacert)
		curl_easy_setopt(c, CURLOPT_CAINFO, o->cacert);
	if (o->insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	return h;
}

static struct handle *acquire_handle(struct http_source *hs)
{
	struct handle *h = NULL;

	pthread_mutex_lock(&hs->pool_mu);
	while (hs->nfree == 0 && hs->created >= hs->opt.max_connections)
		pthread_cond_wait(&hs->pool_cv, &hs->pool_mu);
	if (hs->nfree > 0) {
		h = hs->free_handles[--hs->nfree];
		pthread_mutex_unlock(&hs->pool_mu);
		return h;
	}
	hs->created++;
	pthread_mutex_unlock(&hs->pool_mu);
	h = new_handle(hs);
	if (!h) {
		pthread_mutex_lock(&hs->pool_mu);
		hs->created--;
		pthread_cond_signal(&hs->pool_cv);
		pthread_mutex_unlock(&hs->pool_mu);
	}
	return h;
}

static void release_handle(struct http_source *hs, struct handle *h)
{
	pthread_mutex_lock(&hs->pool_mu);
	hs->free_handles[hs->nfree++] = h;
	pthread_cond_signal(&hs->pool_cv);
	pthread_mutex_unlock(&hs->pool_mu);
}

static bool transient_curl_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP3:
	case CURLE_QUIC_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

/* ---- the transfer engine ----
 *
 * libcurl multiplexes HTTP/2 streams only among the transfers of one multi
 * handle. Once threads are allowed (after the daemon forked), every
 * transfer is handed to one engine thread that drives a multi handle, so
 * parallel requests share one HTTP/2 connection (HTTP/1.1: one pool of at
 * most max_connections connections); the caller waits for its transfer.
 * Before that, or with a libcurl that lacks the multi calls used here, a
 * transfer is curl_easy_perform() on the calling thread. */

struct engine_job {
	struct handle *h;
	CURLcode rc;
	bool done;
	struct engine_job *next;
};

static void finish_job(struct http_source *hs, struct engine_job *j,
		       CURLcode rc)
{
	pthread_mutex_lock(&hs->eng_mu);
	j->rc = rc;
	j->done = true;
	pthread_cond_broadcast(&hs->eng_cv);
	pthread_mutex_unlock(&hs->eng_mu);
}

static void *engine_main(void *arg)
{
	struct http_source *hs = arg;
	int running = 0;

	pthread_setname_np(pthread_self(), "sqfs-http");
	for (;;) {
		struct engine_job *todo, *next;
		CURLMsg *msg;
		int left;
		bool stop;

		pthread_mutex_lock(&hs->eng_mu);
		todo = hs->eng_queue;
		hs->eng_queue = NULL;
		stop = hs->eng_stop;
		pthread_mutex_unlock(&hs->eng_mu);
		for (; todo; todo = next) {
			next = todo->next;
			if (curl_multi_add_handle(hs->multi, todo->h->curl) !=
			    CURLM_OK)
				finish_job(hs, todo, CURLE_FAILED_INIT);
			else
				running++;
		}
		/* stop comes after every transfer ended (see http_destroy) */
		if (stop && running == 0)
			break;
		curl_multi_perform(hs->multi, &running);
		while ((msg = curl_multi_info_read(hs->multi, &left))) {
			CURL *easy = msg->easy_handle;
			CURLcode rc = msg->data.result;
			char *job = NULL;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(easy, CURLINFO_PRIVATE, &job);
			curl_multi_remove_handle(hs->multi, easy);
			if (job)
				finish_job(hs, (struct engine_job *)job, rc);
		}
		curl_multi_poll(hs->multi, NULL, 0, 1000, NULL);
	}
	return NULL;
}

static CURLcode engine_perform(struct http_source *hs, struct handle *h)
{
	struct engine_job job = { .h = h, .rc = CURLE_OK };

	curl_easy_setopt(h->curl, CURLOPT_PRIVATE, (char *)&job);
	/* wait for a connection that may multiplex rather than open more */
	curl_easy_setopt(h->curl, CURLOPT_PIPEWAIT, 1L);
	pthread_mutex_lock(&hs->eng_mu);
	job.next = hs->eng_queue;
	hs->eng_queue = &job;
	pthread_mutex_unlock(&hs->eng_mu);
	curl_multi_wakeup(hs->multi);
	pthread_mutex_lock(&hs->eng_mu);
	while (!job.done)
		pthread_cond_wait(&hs->eng_cv, &hs->eng_mu);
	pthread_mutex_unlock(&hs->eng_mu);
	curl_easy_setopt(h->curl, CURLOPT_PRIVATE, NULL);
	return job.rc;
}

static void engine_start(struct http_source *hs)
{
	CURLM *multi;

	if (!curl_multi_init || hs->engine_started)
		return;
	multi = curl_multi_init();
	if (!multi)
		return;
	curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			  (long)hs->opt.max_connections);
	hs->multi = multi;
	if (pthread_create(&hs->engine_thread, NULL, engine_main, hs) != 0) {
		curl_multi_cleanup(multi);
		hs->multi = NULL;
		return;
	}
	hs->engine_started = true;
	atomic_store(&hs->engine_on, true);
}

static void engine_stop(struct http_source *hs)
{
	if (!hs->engine_started)
		return;
	pthread_mutex_lock(&hs->eng_mu);
	hs->eng_stop = true;
	pthread_mutex_unlock(&hs->eng_mu);
	curl_multi_wakeup(hs->multi);
	pthread_join(hs->engine_thread, NULL);
	curl_multi_cleanup(hs->multi);
	hs->multi = NULL;
	hs->engine_started = false;
}

static bool answered_multiplexed(CURL *curl)
{
#if LIBCURL_VERSION_NUM >= 0x073200
	long version = 0;

	return curl_easy_getinfo(curl, CURLINFO_HTTP_VERSION, &version) ==
		       CURLE_OK &&
	       version >= (long)CURL_HTTP_VERSION_2_0;
#else
	(void)curl;
	return false;
#endif
}

/* Round trip (request sent to first byte) and body throughput of a
 * transfer that just succeeded, for the latency windows. */
static void sample_timing(struct http_source *hs, CURL *curl, size_t bytes)
{
	curl_off_t pre = 0, first = 0, total = 0;

	if (curl_easy_getinfo(curl, CURLINFO_PRETRANSFER_TIME_T, &pre) ||
	    curl_easy_getinfo(curl, CURLINFO_STARTTRANSFER_TIME_T, &first) ||
	    curl_easy_getinfo(curl, CURLINFO_TOTAL_TIME_T, &total) ||
	    first < pre || total < first)
		return;
	lsq_latency_window_sample(&hs->win, (uint64_t)(first - pre) * 1000u,
				  bytes, (uint64_t)(total - first) * 1000u);
}

/* One GET of [x->off, x->off + x->want) from mirror m into x->buf. */
static void transfer(struct xfer *x, const struct curl_slist *headers)
{
	struct http_source *hs = x->hs;
	struct handle *h;
	char range[64];
	CURLcode rc;

	h = acquire_handle(hs);
	if (!h) {
		set_verdict(x, V_RETRY, "out of memory for a connection");
		return;
	}
	snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, x->off,
		 x->off + x->want - 1);
	h->errbuf[0] = '\0';
	curl_easy_setopt(h->curl, CURLOPT_URL, x->m->url);
	curl_easy_setopt(h->curl, CURLOPT_RANGE, range);
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, x);
	x->verdict = V_OK;
	x->why[0] = '\0';
	atomic_fetch_add_explicit(&hs->requests, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&hs->in_flight, 1, memory_order_relaxed);
	rc = atomic_load(&hs->engine_on) ? engine_perform(hs, h)
					 : curl_easy_perform(h->curl);
	atomic_fetch_sub_explicit(&hs->in_flight, 1, memory_order_relaxed);
	if (x->probe)  /* only the probe's answer decides on the engine */
		x->multiplexed = answered_multiplexed(h->curl);
	if (rc == CURLE_OK && x->verdict == V_OK && x->got == x->want)
		sample_timing(hs, h->curl, x->got);

	if (rc == CURLE_OK) {
		if (!x->final_seen)
			set_verdict(x, V_RETRY, "no response");
		else if (x->verdict == V_OK && x->got != x->want)
			set_verdict(x, V_RETRY, "short body: %zu of %zu bytes",
				    x->got, x->want);
	} else if (rc == CURLE_WRITE_ERROR && x->verdict != V_OK) {
		/* we aborted; the verdict says why */
	} else if (rc == CURLE_OPERATION_TIMEDOUT) {
		set_verdict(x, V_TIMEOUT, "timed out: %s",
			    h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc));
	} else {
		/* A failure after a good header block: short/reset body. */
		set_verdict(x, transient_curl_error(rc) ? V_RETRY : V_FATAL,
			    "%s", h->errbuf[0] ? h->errbuf
					       : curl_easy_strerror(rc));
	}
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
	release_handle(hs, h);
}

static void mark_changed(struct http_source *hs, const struct mirror *m,
			 const char *why)
{
	if (!atomic_exchange(&hs->changed, true))
		lsq_err_log("remote image changed: %s (%s); every further "
			    "read fails", m->shown, why);
}

static double backoff(struct http_source *hs, unsigned attempt,
		      double retry_after)
{
	double d = LSQ_HTTP_BACKOFF_BASE;

	for (unsigned i = 0; i < attempt && d < LSQ_HTTP_BACKOFF_MAX; i++)
		d *= 2;
	if (d > LSQ_HTTP_BACKOFF_MAX)
		d = LSQ_HTTP_BACKOFF_MAX;
	d = d / 2 + d / 2 * jitter(hs);
	if (retry_after > 0)
		d = retry_after > LSQ_HTTP_RETRY_AFTER_MAX
			    ? LSQ_HTTP_RETRY_AFTER_MAX : retry_after;
	return d;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double seconds_until(uint64_t when_ns)
{
	uint64_t now = monotonic_ns();

	return when_ns > now ? (double)(when_ns - now) / 1e9 : 0;
}

/* Hold every request of this source back for s seconds from now. */
static void not_before(struct http_source *hs, double s)
{
	uint64_t want = monotonic_ns() + (uint64_t)(s * 1e9);
	uint64_t cur = atomic_load(&hs->not_before_ns);

	while (cur < want &&
	       !atomic_compare_exchange_weak(&hs->not_before_ns, &cur, want))
		;
}

/* Fetch [off, off+len) of the image (source coordinates) into buf, with
 * retries and mirror failover. speculative (readahead): one try, quiet. */
static int fetch(struct http_source *hs, uint8_t *buf, size_t len,
		 uint64_t off, bool speculative)
{
	/* A failed readahead costs nothing: the reader fetches for itself,
	 * with retries, and reports. */
	unsigned tries = speculative ? 1 : hs->opt.retries + 1;
	enum verdict last = V_RETRY;
	struct xfer x;
	char why[256] = "";
	const char *url = hs->mirrors[0].shown;

	for (unsigned attempt = 0; attempt < tries; attempt++) {
		unsigned cur = atomic_load(&hs->current);
		unsigned mi = cur % hs->nmirrors;
		const struct mirror *m = &hs->mirrors[mi];
		double wait = seconds_until(atomic_load(&hs->not_before_ns));

		if (atomic_load(&hs->changed))
			return LSQ_ERR_REMOTE_CHANGED;
		/* The server asked everyone to come back later (Retry-After):
		 * a reader waits, a readahead gives up. */
		if (wait > 0 && speculative)
			return LSQ_ERR_IO;
		if (wait > 0)
			sleep_seconds(wait);
		if (attempt > 0)
			atomic_fetch_add_explicit(&hs->retries, 1,
						  memory_order_relaxed);
		memset(&x, 0, sizeof(x));
		x.hs = hs;
		x.m = m;
		x.off = off + hs->base_offset;
		x.want = len;
		x.buf = buf;
		transfer(&x, m->headers);
		if (x.verdict == V_OK)
			return LSQ_OK;
		if (x.verdict == V_CHANGED) {
			mark_changed(hs, m, x.why);
			return LSQ_ERR_REMOTE_CHANGED;
		}
		if (x.retry_after > 0)
			not_before(hs, x.retry_after > LSQ_HTTP_RETRY_AFTER_MAX
					       ? LSQ_HTTP_RETRY_AFTER_MAX
					       : x.retry_after);
		last = x.verdict;
		url = m->shown;
		snprintf(why, sizeof(why), "%s", x.why);
		lsq_debug("%s: bytes %" PRIu64 "-%" PRIu64 ": %s (try %u of %u)",
			  m->shown, x.off, x.off + len - 1, x.why, attempt + 1,
			  tries);
		/* Another mirror may do better; move everyone on. */
		if (hs->nmirrors > 1)
			atomic_compare_exchange_strong(&hs->current, &cur,
						       (mi + 1) % hs->nmirrors);
		if (x.verdict == V_FATAL && hs->nmirrors == 1)
			break;
		if (attempt + 1 < tries && !(x.verdict == V_FATAL))
			sleep_seconds(backoff(hs, attempt, x.retry_after));
	}
	if (speculative) {
		lsq_debug("%s: readahead of bytes %" PRIu64 "-%" PRIu64
			  " failed: %s", url, off + hs->base_offset,
			  off + hs->base_offset + len - 1, why);
		return LSQ_ERR_IO;
	}
	atomic_fetch_add_explicit(&hs->failures, 1, memory_order_relaxed);
	lsq_err_log("%s: read of bytes %" PRIu64 "-%" PRIu64 " failed: %s",
		    url, off + hs->base_offset, off + hs->base_offset + len - 1,
		    why);
	return last == V_TIMEOUT ? LSQ_ERR_TIMEOUT : LSQ_ERR_IO;
}

/* ---- memory: pinned regions and the readahead cache ---- */

static void chunk_unlink(struct http_source *hs, struct chunk *c)
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

static void chunk_free(struct chunk *c)
{
	free(c->data);
	free(c);
}

static void chunk_put(struct http_source *hs, struct chunk *c)
{
	(void)hs;
	if (--c->refs == 0 && c->dead)
		chunk_free(c);
}

static void chunk_link_front(struct http_source *hs, struct chunk *c)
{
	c->prev = NULL;
	c->next = hs->chunks;
	if (hs->chunks)
		hs->chunks->prev = c;
	hs->chunks = c;
}

static struct chunk *find_cover(struct http_source *hs, uint64_t off,
				size_t len)
{
	for (struct chunk *c = hs->chunks; c; c = c->next)
		if (off >= c->off && off + len <= c->off + c->len)
			return c;
	return NULL;
}

/* Readahead from end must stop where a chunk already held or being
 * fetched begins: concurrent sequential readers (the kernel's own
 * readahead sends several reads at once) would otherwise fetch the same
 * bytes twice. Called with hs->mu held. */
static uint64_t trim_to_next_chunk(struct http_source *hs, uint64_t end,
				   uint64_t ra)
{
	for (struct chunk *c = hs->chunks; c; c = c->next) {
		if (c->off + c->len <= end || c->off >= end + ra)
			continue;
		if (c->off <= end)
			return 0; /* the bytes after this read are covered */
		ra = c->off - end;
	}
	return ra;
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
	uint64_t limit = window ? hs->win_limit : hs->ra_limit;

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
			chunk_unlink(hs, tail);
			if (tail->refs == 0)
				chunk_free(tail);
		}
		tail = prev;
	}
	return *used + need <= limit;
}

/* Room in the readahead memory (windows have their own). */
static bool make_room(struct http_source *hs, uint64_t need,
		      const struct stream *keep)
{
	return make_room_of(hs, need, keep, false);
}

static struct chunk *chunk_new(struct http_source *hs, uint64_t off,
			       size_t len, bool pinned)
{
	struct chunk *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->data = malloc(len);
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
	chunk_link_front(hs, c);
	return c;
}

/* What the reader's thread said of the file it reads: readahead stays in
 * it. A read without a hint (not a file's data: tables, the superblock)
 * leaves the stream's limit as it was, so it cannot let readahead run
 * past the end of the file the stream was reading. */
static void stream_take_hint(struct stream *s, uint64_t offset)
{
	uint64_t end = lsq_source_run_end();

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

/* Sequential detection (hs->mu held): the stream this read belongs to, or
 * NULL when it starts a new one (which replaces the least recently used).
 * A read within LSQ_HTTP_RA_SLACK of a stream's end belongs to it: the
 * kernel and the FUSE workers deliver one reader's requests in parallel,
 * slightly out of order, and splitting the stream there would restart its
 * window. Only a read that starts exactly at the end (*exact) confirms the
 * stream and earns a window on a miss; a stream never confirmed (random
 * reads that happen to land close) never fetches ahead. A stream the read
 * belongs to takes its reader's run-end hint. */
static struct stream *stream_advance(struct http_source *hs, uint64_t off,
				     size_t len, bool *exact)
{
	struct stream *oldest = &hs->streams[0];

	hs->clock++;
	*exact = false;
	for (unsigned i = 0; i < LSQ_HTTP_STREAMS; i++) {
		struct stream *s = &hs->streams[i];

		if (s->stamp && off + LSQ_HTTP_RA_SLACK >= s->end &&
		    off <= s->end + LSQ_HTTP_RA_SLACK) {
			*exact = off == s->end;
			if (*exact)
				s->run += len;
			else if (off > s->end)
				s->run = 0;  /* skipped bytes: not sequential */
			if (s->run >= s->need_run)
				s->confirmed = true;
			if (off + len > s->end)
				s->end = off + len;
			s->stamp = hs->clock;
			stream_take_hint(s, off);
			return s;
		}
		if (s->stamp < oldest->stamp)
			oldest = s;
	}
	oldest->end = off + len;
	oldest->fetched_to = off + len;
	oldest->stamp = hs->clock;
	oldest->window = hs->opt.readahead < LSQ_HTTP_RA_START
				 ? hs->opt.readahead : LSQ_HTTP_RA_START;
	oldest->ahead = hs->opt.readahead;
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
	hs->need_run = hs->need_run ? 2 * hs->need_run
				    : LSQ_HTTP_RA_START * 8;
	if (hs->need_run > LSQ_HTTP_RA_JUDGE)
		hs->need_run = LSQ_HTTP_RA_JUDGE;
	s->confirmed = false;
	s->run = 0;
	s->need_run = hs->need_run;
	s->window = hs->opt.readahead < LSQ_HTTP_RA_START
			    ? hs->opt.readahead : LSQ_HTTP_RA_START;
	s->ahead = hs->opt.readahead;
	return false;
}

static void grow_window(struct http_source *hs, struct stream *s)
{
	s->window *= 2;
	if (s->window > hs->opt.readahead)
		s->window = hs->opt.readahead;
}

/* The reader caught up with the loads (waited for one, or missed): keep
 * more in flight, up to half the readahead memory. */
static void reach_further(struct http_source *hs, struct stream *s)
{
	s->ahead *= 2;
	if (s->ahead > hs->ra_limit / 2)
		s->ahead = hs->ra_limit / 2;
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
		n = trim_to_next_chunk(hs, start, n);
		if (n == 0) {  /* held or loading already: look past it */
			c = find_cover(hs, start, 1);
			if (!c)
				return;
			s->fetched_to = c->off + c->len;
			continue;
		}
		if (!make_room(hs, n, s))
			return;
		c = chunk_new(hs, start, (size_t)n, false);
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

		while (!hs->stopping && !hs->queue)
			pthread_cond_wait(&hs->queue_cv, &hs->mu);
		if (hs->stopping)
			break;
		c = hs->queue;
		hs->queue = c->qnext;
		if (!hs->queue)
			hs->queue_tail = NULL;
		c->qnext = NULL;
		pthread_mutex_unlock(&hs->mu);
		ret = fetch(hs, c->data, c->len, c->off, true);
		if (ret == LSQ_OK)
			atomic_fetch_add_explicit(&hs->readahead_bytes, c->len,
						  memory_order_relaxed);
		pthread_mutex_lock(&hs->mu);
		hs->prefetch_inflight--;
		if (ret == LSQ_OK)
			c->ready = true;
		else if (!c->dead)
			chunk_unlink(hs, c);  /* a reader fetches it itself */
		chunk_put(hs, c);
		pthread_cond_broadcast(&hs->cv);
	}
	pthread_mutex_unlock(&hs->mu);
	return NULL;
}

/* A range held by two chunks: readahead windows end at arbitrary bytes,
 * blocks do not, so a block may start in one window and end in the next.
 * The chunk holding its first byte and the one starting where that ends. */
static bool find_split_cover(struct http_source *hs, uint64_t off,
			     size_t len, struct chunk **a, struct chunk **b)
{
	struct chunk *c1 = find_cover(hs, off, 1), *c2;
	uint64_t mid;

	if (!c1)
		return false;
	mid = c1->off + c1->len;
	if (mid >= off + len)
		return false;
	c2 = find_cover(hs, mid, (size_t)(off + len - mid));
	if (!c2)
		return false;
	*a = c1;
	*b = c2;
	return true;
}

/* A read served from memory: LRU, then the reader's stream (hs->mu). */
static void note_hit(struct http_source *hs, struct chunk *c, uint64_t offset,
		     size_t len, bool waited)
{
	struct stream *s;
	bool exact;

	c->refs++;
	if (!c->pinned && c != hs->chunks) {
		/* LRU: move to the front */
		chunk_unlink(hs, c);
		c->dead = false;
		if (c->window)
			hs->win_bytes += c->len;
		else
			hs->ra_bytes += c->len;
		chunk_link_front(hs, c);
	}
	if (c->pinned || !hs->opt.readahead)
		return;
	s = stream_advance(hs, offset, len, &exact);
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

/* A miss over a long round trip that no sequential readahead covers
 * (hs->mu held): the loading chunk of the aligned window of w bytes around
 * it (latency_window.h), trimmed so as not to fetch bytes other chunks
 * hold, with *ra the bytes beyond the read; NULL when there is no room. */
static struct chunk *window_chunk(struct http_source *hs, uint64_t offset,
				  size_t len, uint64_t w, uint64_t *ra)
{
	uint64_t lo, hi, end = offset + len;
	struct chunk *c;

	lo = offset & ~(w - 1);
	hi = lo + w > end ? lo + w : end;
	if (hi > hs->base.size)
		hi = hs->base.size;
	for (c = hs->chunks; c; c = c->next) {
		if (c->off + c->len <= offset && c->off + c->len > lo)
			lo = c->off + c->len;
		if (c->off >= end && c->off < hi)
			hi = c->off;
	}
	if (hi - lo <= len || !make_room_of(hs, hi - lo, NULL, true))
		return NULL;
	c = chunk_new(hs, lo, (size_t)(hi - lo), false);
	if (!c)
		return NULL;
	hs->ra_bytes -= c->len;  /* chunk_new charged the readahead memory */
	hs->win_bytes += c->len;
	c->refs = 1;
	c->window = true;
	*ra = hi - lo - len;
	lsq_latency_window_fetched(&hs->win);
	return c;
}

static int http_read_at(struct lsq_source *src, void *buf, size_t len,
			uint64_t offset)
{
	struct http_source *hs = (struct http_source *)src;
	struct stream *s = NULL;
	struct chunk *c, *c2;
	uint64_t ra = 0, w;
	bool waited = false, exact;
	int ret;

	if (atomic_load(&hs->changed))
		return LSQ_ERR_REMOTE_CHANGED;
	pthread_mutex_lock(&hs->mu);
	for (;;) {
		size_t first;

		c = find_cover(hs, offset, len);
		if (c && c->ready) {
			if (c->window)
				lsq_latency_window_hit(&hs->win);
			note_hit(hs, c, offset, len, waited);
			pthread_mutex_unlock(&hs->mu);
			memcpy(buf, c->data + (offset - c->off), len);
			atomic_fetch_add_explicit(&hs->cache_hits, 1,
						  memory_order_relaxed);
			pthread_mutex_lock(&hs->mu);
			chunk_put(hs, c);
			pthread_mutex_unlock(&hs->mu);
			return LSQ_OK;
		}
		if (!c && find_split_cover(hs, offset, len, &c, &c2)) {
			if (c->ready && c2->ready) {
				note_hit(hs, c, offset, len, waited);
				c2->refs++;
				pthread_mutex_unlock(&hs->mu);
				first = (size_t)(c->off + c->len - offset);
				memcpy(buf, c->data + (offset - c->off), first);
				memcpy((uint8_t *)buf + first,
				       c2->data + (offset + first - c2->off),
				       len - first);
				atomic_fetch_add_explicit(&hs->cache_hits, 1,
							  memory_order_relaxed);
				pthread_mutex_lock(&hs->mu);
				chunk_put(hs, c);
				chunk_put(hs, c2);
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
		pthread_cond_wait(&hs->cv, &hs->mu);
	}

	c = NULL;
	if (lsq_source_speculative()) {
		pthread_mutex_unlock(&hs->mu);
		return fetch(hs, buf, len, offset, true);
	}
	w = lsq_latency_window_size(&hs->win);
	if (hs->opt.readahead) {
		s = stream_advance(hs, offset, len, &exact);
		if (s && (!s->confirmed || !worth_reading_ahead(hs, s)))
			s = NULL;
		if (s && exact) {
			reach_further(hs, s);
			ra = s->window;
			if (ra > src->size - offset - len)
				ra = src->size - offset - len;
			ra = within_limit(s, offset + len, ra);
			ra = trim_to_next_chunk(hs, offset + len, ra);
			if (ra && make_room(hs, len + ra, s))
				c = chunk_new(hs, offset, (size_t)(len + ra),
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
	}
	if (!c && w)
		c = window_chunk(hs, offset, len, w, &ra);
	if (!c) {
		pthread_mutex_unlock(&hs->mu);
		return fetch(hs, buf, len, offset, false);
	}

	/* c is a loading chunk we own; nobody else fetches it. */
	pthread_mutex_unlock(&hs->mu);
	ret = fetch(hs, c->data, c->len, c->off, false);
	if (ret == LSQ_OK) {
		memcpy(buf, c->data + (offset - c->off), len);
		atomic_fetch_add_explicit(&hs->readahead_bytes, ra,
					  memory_order_relaxed);
	}
	pthread_mutex_lock(&hs->mu);
	if (ret == LSQ_OK)
		c->ready = true;
	else if (!c->dead)
		chunk_unlink(hs, c);
	chunk_put(hs, c);
	pthread_cond_broadcast(&hs->cv);
	pthread_mutex_unlock(&hs->mu);
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

static void http_destroy(struct lsq_source *src)
{
	struct http_source *hs = (struct http_source *)src;

	/* Stop the prefetchers: queued jobs are dropped, running ones end
	 * within the transfer timeouts. */
	pthread_mutex_lock(&hs->mu);
	hs->stopping = true;
	while (hs->queue) {
		struct chunk *c = hs->queue;

		hs->queue = c->qnext;
		if (!c->dead)
			chunk_unlink(hs, c);
		chunk_put(hs, c);
	}
	hs->queue_tail = NULL;
	pthread_cond_broadcast(&hs->queue_cv);
	pthread_mutex_unlock(&hs->mu);
	for (unsigned i = 0; i < hs->nprefetchers; i++)
		pthread_join(hs->prefetchers[i], NULL);
	free(hs->prefetchers);
	/* no transfer is left: readers are gone, prefetchers joined */
	engine_stop(hs);
	pthread_mutex_destroy(&hs->eng_mu);
	pthread_cond_destroy(&hs->eng_cv);

	while (hs->chunks) {
		struct chunk *c = hs->chunks;

		chunk_unlink(hs, c);
		chunk_free(c);
	}
	for (unsigned i = 0; i < hs->nfree; i++) {
		curl_easy_cleanup(hs->free_handles[i]->curl);
		free(hs->free_handles[i]);
	}
	free(hs->free_handles);
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
	free(src->name);
	free(hs);
}

static const struct lsq_source_ops http_ops = {
	.read_at = http_read_at,
	.destroy = http_destroy,
};

void lsq_source_allow_threads(struct lsq_source *src)
{
	struct http_source *hs;

	if (!src)
		return;
	src = (struct lsq_source *)lsq_source_unwrap(src);
	if (src->ops != &http_ops)
		return;
	hs = (struct http_source *)src;
	pthread_mutex_lock(&hs->mu);
	hs->prefetch_allowed = true;
	pthread_mutex_unlock(&hs->mu);
	/* The engine only pays where transfers share a connection: over
	 * HTTP/1.1 each transfer has a connection of its own anyway, and
	 * handing it to another thread and back costs two wakeups per
	 * request (docs/http-source.md). */
	if (hs->multiplexing)
		engine_start(hs);
}

int lsq_source_http_get_stats(const struct lsq_source *src,
			      struct lsq_http_stats *out)
{
	const struct http_source *hs;

	if (!src)
		return LSQ_ERR_INVALID;
	src = lsq_source_unwrap(src);
	if (src->ops != &http_ops)
		return LSQ_ERR_INVALID;
	hs = (const struct http_source *)src;
	out->requests = atomic_load(&hs->requests);
	out->bytes_fetched = atomic_load(&hs->bytes_fetched);
	out->retries = atomic_load(&hs->retries);
	out->failures = atomic_load(&hs->failures);
	out->cache_hits = atomic_load(&hs->cache_hits);
	out->readahead_bytes = atomic_load(&hs->readahead_bytes);
	out->in_flight = atomic_load(&hs->in_flight);
	out->rtt_us = atomic_load(&hs->win.rtt_ns) / 1000u;
	out->windows = atomic_load(&hs->win.windows);
	out->window_hits = atomic_load(&hs->win.hits);
	return LSQ_OK;
}

const char *lsq_source_http_backend(void)
{
	static char why[256];

	if (lsq_curl_load(why, sizeof(why)))
		return why;
	return curl_version();
}

/* ---- open ---- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* "Name: value" lines; blank lines and lines starting with # are skipped.
 * Values are never echoed in messages. */
static int read_header_file(const char *path, struct curl_slist **out,
			    char *err, size_t errlen)
{
	struct curl_slist *list = NULL;
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	struct stat st;
	FILE *f;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "header file %s: %s", path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return LSQ_ERR_INVALID;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "header file %s: not a regular file",
			 path);
		close(fd);
		return LSQ_ERR_INVALID;
	}
	if (st.st_mode & S_IROTH) {
		snprintf(err, errlen, "header file %s is readable by everyone; "
			 "it may hold credentials (chmod o-r %s)", path, path);
		close(fd);
		return LSQ_ERR_INVALID;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return LSQ_ERR_NOMEM;
	}
	while (getline(&line, &cap, f) >= 0) {
		char *l = trim(line), *colon;
		struct curl_slist *n;

		lineno++;
		if (l[0] == '\0' || l[0] == '#')
			continue;
		colon = strchr(l, ':');
		if (!colon || colon == l || strcspn(l, " \t") < (size_t)(colon - l)) {
			snprintf(err, errlen, "header file %s, line %u: expected "
				 "'Name: value'", path, lineno);
			goto fail;
		}
		n = curl_slist_append(list, l);
		if (!n) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		list = n;
	}
	free(line);
	fclose(f);
	*out = list;
	return LSQ_OK;
fail:
	free(line);
	fclose(f);
	curl_slist_free_all(list);
	return LSQ_ERR_INVALID;
}

static struct curl_slist *copy_headers(const struct curl_slist *src,
				       const char *extra)
{
	struct curl_slist *list = NULL, *n;

	for (; src; src = src->next) {
		n = curl_slist_append(list, src->data);
		if (!n)
			goto fail;
		list = n;
	}
	if (extra) {
		n = curl_slist_append(list, extra);
		if (!n)
			goto fail;
		list = n;
	}
	return list;
fail:
	curl_slist_free_all(list);
	return NULL;
}

/* Probe a mirror: GET of the head; learn total and validators; the head
 * bytes land in buf (head_len in/out). */
static int probe(struct http_source *hs, struct mirror *m, uint8_t *buf,
		 size_t *head_len, uint64_t *total, char *err, size_t errlen)
{
	unsigned tries = hs->opt.retries + 1;
	struct xfer x;

	for (unsigned attempt = 0; attempt < tries; attempt++) {
		memset(&x, 0, sizeof(x));
		x.hs = hs;
		x.m = m;
		x.probe = true;
		x.off = hs->base_offset;
		x.want = *head_len;
		x.buf = buf;
		transfer(&x, hs->user_headers);
		if (x.verdict == V_OK) {
			hs->multiplexing |= x.multiplexed;
			break;
		}
		if (x.verdict == V_FATAL || attempt + 1 == tries) {
			snprintf(err, errlen, "%s: %s", m->shown, x.why);
			return x.verdict == V_TIMEOUT ? LSQ_ERR_TIMEOUT
						      : LSQ_ERR_IO;
		}
		sleep_seconds(backoff(hs, attempt, x.retry_after));
	}
	if (x.cr_total <= hs->base_offset) {
		snprintf(err, errlen, "%s: offset %" PRIu64 " is past the end "
			 "(%" PRIu64 " bytes)", m->shown, hs->base_offset,
			 x.cr_total);
		return LSQ_ERR_OUT_OF_BOUNDS;
	}
	*total = x.cr_total;
	*head_len = x.got;
	/* Weak ETags cannot be used with If-Range. */
	if (x.etag[0] && strncmp(x.etag, "W/", 2) != 0) {
		m->etag = strdup(x.etag);
		if (!m->etag)
			return LSQ_ERR_NOMEM;
	}
	if (x.last_modified[0]) {
		m->last_modified = strdup(x.last_modified);
		if (!m->last_modified)
			return LSQ_ERR_NOMEM;
	}
	return LSQ_OK;
}

static int open_mirrors(struct http_source *hs, char *err, size_t errlen)
{
	uint8_t *head = NULL, *other = NULL;
	size_t head_len = LSQ_HTTP_HEAD_SIZE;
	int ret = LSQ_ERR_NOMEM;
	struct chunk *c;

	head = malloc(LSQ_HTTP_HEAD_SIZE);
	other = malloc(LSQ_HTTP_HEAD_SIZE);
	if (!head || !other)
		goto out;
	ret = probe(hs, &hs->mirrors[0], head, &head_len, &hs->total, err,
		    errlen);
	if (ret)
		goto out;
	for (unsigned i = 1; i < hs->nmirrors; i++) {
		struct mirror *m = &hs->mirrors[i], *p = &hs->mirrors[0];
		size_t len = LSQ_HTTP_HEAD_SIZE;
		uint64_t total;

		ret = probe(hs, m, other, &len, &total, err, errlen);
		if (ret)
			goto out;
		if (total != hs->total || len != head_len ||
		    memcmp(head, other, len) != 0) {
			snprintf(err, errlen, "mirror %s: not the same image "
				 "as %s (size %" PRIu64 " vs %" PRIu64 ")",
				 m->shown, p->shown, total, hs->total);
			ret = LSQ_ERR_INVALID;
			goto out;
		}
		if ((m->etag && p->etag && strcmp(m->etag, p->etag) != 0) ||
		    (!(m->etag && p->etag) && m->last_modified &&
		     p->last_modified &&
		     strcmp(m->last_modified, p->last_modified) != 0)) {
			snprintf(err, errlen, "mirror %s: validator (ETag or "
				 "Last-Modified) differs from %s", m->shown,
				 p->shown);
			ret = LSQ_ERR_INVALID;
			goto out;
		}
	}
	for (unsigned i = 0; i < hs->nmirrors; i++) {
		struct mirror *m = &hs->mirrors[i];
		char *line = NULL;

		if (m->etag || m->last_modified) {
			if (asprintf(&line, "If-Range: %s",
				     m->etag ? m->etag : m->last_modified) < 0) {
				ret = LSQ_ERR_NOMEM;
				goto out;
			}
		} else if (i == 0) {
			lsq_warn("%s: no ETag or Last-Modified; a change of the "
				 "image is only detected by its size", m->shown);
		}
		m->headers = copy_headers(hs->user_headers, line);
		free(line);
		if (!m->headers && (hs->user_headers || m->etag ||
				    m->last_modified)) {
			ret = LSQ_ERR_NOMEM;
			goto out;
		}
	}
	hs->base.size = hs->total - hs->base_offset;
	c = chunk_new(hs, 0, head_len, true);
	if (!c) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	memcpy(c->data, head, head_len);
	c->ready = true;
	c->refs = 0;
	ret = LSQ_OK;
out:
	free(head);
	free(other);
	return ret;
}

int lsq_source_http_open(const char *url, const struct lsq_http_options *opt,
			 struct lsq_source **out, char *err, size_t errlen)
{
	struct http_source *hs;
	int ret = LSQ_ERR_NOMEM;

	if (errlen)
		err[0] = '\0';
	if (strncasecmp(url, "file://", 7) == 0)
		return open_file_url(url, opt->base_offset, out, err, errlen);
	if (!lsq_source_is_url(url)) {
		snprintf(err, errlen, "%s: not an http:// or https:// URL", url);
		return LSQ_ERR_INVALID;
	}
	for (unsigned i = 0; i < opt->nmirrors; i++) {
		if (strncasecmp(opt->mirrors[i], "http://", 7) != 0 &&
		    strncasecmp(opt->mirrors[i], "https://", 8) != 0) {
			snprintf(err, errlen, "mirror %s: not an http:// or "
				 "https:// URL", opt->mirrors[i]);
			return LSQ_ERR_INVALID;
		}
	}
	if (lsq_curl_load(err, errlen))
		return LSQ_ERR_UNSUPPORTED;
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		snprintf(err, errlen, "cannot initialise libcurl: %s",
			 curl_easy_strerror(global_rc));
		return LSQ_ERR_IO;
	}

	hs = calloc(1, sizeof(*hs));
	if (!hs)
		return LSQ_ERR_NOMEM;
	hs->opt = *opt;
	hs->opt.header_file = NULL;
	hs->opt.cacert = NULL;
	if (hs->opt.max_connections == 0)
		hs->opt.max_connections = 1;
	hs->base_offset = opt->base_offset;
	hs->ra_limit = opt->readahead * LSQ_HTTP_RA_FACTOR;
	if (hs->ra_limit < LSQ_HTTP_RA_MIN_CACHE)
		hs->ra_limit = LSQ_HTTP_RA_MIN_CACHE;
	/* windows up to 2 x readahead, 16 of them kept: a program start
	 * comes back to the regions it read first */
	lsq_latency_window_init(&hs->win, 2 * opt->readahead);
	hs->win_limit = 16 * hs->win.max;
	atomic_init(&hs->seed, (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32);
	pthread_mutex_init(&hs->pool_mu, NULL);
	pthread_cond_init(&hs->pool_cv, NULL);
	pthread_mutex_init(&hs->mu, NULL);
	pthread_cond_init(&hs->cv, NULL);
	pthread_cond_init(&hs->queue_cv, NULL);
	pthread_mutex_init(&hs->eng_mu, NULL);
	pthread_cond_init(&hs->eng_cv, NULL);
	/* Leave one connection for the readers' own misses. */
	hs->prefetch_max = hs->opt.max_connections > 1
				   ? hs->opt.max_connections - 1 : 1;
	if (hs->prefetch_max > LSQ_HTTP_MAX_PREFETCH)
		hs->prefetch_max = LSQ_HTTP_MAX_PREFETCH;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&hs->share_locks[i], NULL);
	hs->base.ops = &http_ops;
	hs->base.reads_ahead = hs->opt.readahead > 0;
	hs->base.name = lsq_url_redact(url);  /* shown in messages */
	hs->free_handles = calloc(hs->opt.max_connections,
				  sizeof(*hs->free_handles));
	hs->mirrors = calloc(1 + opt->nmirrors, sizeof(*hs->mirrors));
	hs->prefetchers = calloc(hs->prefetch_max, sizeof(*hs->prefetchers));
	if (!hs->base.name || !hs->free_handles || !hs->mirrors ||
	    !hs->prefetchers)
		goto fail;
	hs->nmirrors = 1 + opt->nmirrors;
	for (unsigned i = 0; i < hs->nmirrors; i++) {
		hs->mirrors[i].url = strdup(i ? opt->mirrors[i - 1] : url);
		hs->mirrors[i].shown = lsq_url_redact(hs->mirrors[i].url);
		if (!hs->mirrors[i].url || !hs->mirrors[i].shown)
			goto fail;
	}
	if (opt->cacert) {
		hs->cacert = strdup(opt->cacert);
		if (!hs->cacert)
			goto fail;
		hs->opt.cacert = hs->cacert;
	}

	hs->share = curl_share_init();
	if (hs->share) {
		curl_share_setopt(hs->share, CURLSHOPT_LOCKFUNC, share_lock);
		curl_share_setopt(hs->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
		curl_share_setopt(hs->share, CURLSHOPT_USERDATA, hs);
		curl_share_setopt(hs->share, CURLSHOPT_SHARE,
				  CURL_LOCK_DATA_DNS);
		curl_share_setopt(hs->share, CURLSHOPT_SHARE,
				  CURL_LOCK_DATA_SSL_SESSION);
	}
	if (opt->header_file) {
		ret = read_header_file(opt->header_file, &hs->user_headers, err,
				       errlen);
		if (ret)
			goto fail;
	}
	if (opt->insecure)
		lsq_warn("%s: TLS certificate verification is off (-o insecure)",
			 hs->base.name);
	ret = open_mirrors(hs, err, errlen);
	if (ret)
		goto fail;
	/* Without a validator the same URL and size could be another image:
	 * no identity, so no persistent cache trusts it. */
	if (hs->mirrors[0].etag || hs->mirrors[0].last_modified) {
		const struct mirror *m = &hs->mirrors[0];

		if (asprintf(&hs->base.identity, "%s\n%" PRIu64 "\n%" PRIu64
			     "\n%s", m->url, hs->total, hs->base_offset,
			     m->etag ? m->etag : m->last_modified) < 0) {
			hs->base.identity = NULL;
			ret = LSQ_ERR_NOMEM;
			goto fail;
		}
	}
	*out = &hs->base;
	return LSQ_OK;
fail:
	if (ret == LSQ_ERR_NOMEM && !err[0])
		snprintf(err, errlen, "out of memory");
	http_destroy(&hs->base);
	return ret;
}

#endif /* LSQ_HAVE_CURL */
