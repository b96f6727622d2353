/* SPDX-License-Identifier: MIT */
/*
 * http_internal.h - what the files of the HTTP source share: the source
 * object and its parts (mirrors, easy handles, chunks, streams, one
 * transfer), the limits, and the functions that cross files. Include only
 * from the HTTP source's own files, in a build with libcurl; the top of
 * http_source.c has the design and says which file holds what.
 */
#ifndef LSQ_SOURCE_HTTP_INTERNAL_H
#define LSQ_SOURCE_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "lsq/source.h"
#include "http/curl_lazy.h"
#include "http/latency_window.h"
#include "http/s3_credentials.h"
#include "http/url_command.h"

#define LSQ_HTTP_HEAD_SIZE (64u * 1024u)
/* The image's last bytes, fetched beside the probe (http_warmup.c) */
#define LSQ_HTTP_TAIL_SIZE (512u * 1024u)

/* Limits and policy constants, documented in docs/http-source.md. */
#define LSQ_HTTP_RA_FACTOR 8u          /* readahead cache = 8 x readahead */
#define LSQ_HTTP_RA_MIN_CACHE (4u * 1024u * 1024u)
/* Over a long round trip the readahead memory grows to 4 bandwidth-delay
 * products, at most this, and a request of it to at most the other. */
#define LSQ_HTTP_RA_LONG_MAX (32u * 1024u * 1024u)
#define LSQ_HTTP_RA_LONG_WINDOW (4u * 1024u * 1024u)
#define LSQ_HTTP_RA_START (128u * 1024u)  /* first readahead window */
#define LSQ_HTTP_STREAMS 8             /* sequential streams tracked */
#define LSQ_HTTP_RA_SLACK (512u * 1024u) /* reordering a stream tolerates */
#define LSQ_HTTP_EARLY_STREAMS 4u      /* newer streams that lose a bet */
#define LSQ_HTTP_MAX_PREFETCH 4        /* prefetch workers at most */
#define LSQ_HTTP_SPANS 16              /* speculative spans noted in flight */
/* A span in flight is counted on for 2 round trips, 4 times its bytes'
 * time on the link measured, and at least this (ns) */
#define LSQ_HTTP_SPAN_DUE_MIN_NS (100u * 1000u * 1000u)
/* A body that lasted this long times the link (all transfers' bytes) */
#define LSQ_HTTP_LINK_TIMED_NS (10u * 1000u * 1000u)
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
	unsigned pool;  /* index in http_source.pools */
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

/* A speculative span (a background or profile range) on its way: the
 * layers above keep its bytes, so readers' windows and readahead leave
 * them out while it is due (lsq_http_span_begin()). */
struct span_note {
	uint64_t lo, hi;
	uint64_t due_ns;     /* CLOCK_MONOTONIC; 0: the slot is free */
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
	bool early;          /* confirmed by a miss alone, no read yet
			      * (lsq_http_stream_early): a bet */
	uint64_t early_at;   /* hs->streams_started when it was made */
	uint64_t early_ahead; /* the reach it gets once a read pays it */
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

	/* Handle pools, each of at most max_connections: [0] for reads
	 * someone waits for, [1] for speculative ones (readahead,
	 * prefetch, background fetch), so a speculative transfer never
	 * holds the connection a reader waits for. */
	pthread_mutex_t pool_mu;
	pthread_cond_t pool_cv;
	struct handle_pool {
		struct handle **free_handles;
		unsigned nfree, created;
	} pools[2];

	/* memory: chunks, streams, pin */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct chunk *chunks;
	uint64_t ra_bytes;         /* bytes of readahead chunks */
	uint64_t win_bytes;        /* bytes of latency window chunks */
	uint64_t win_limit;
	uint64_t ra_limit;
	struct stream streams[LSQ_HTTP_STREAMS];
	uint64_t streams_started;  /* streams started so far */
	uint64_t need_run;         /* exact run confirming a new stream */
	uint64_t clock;
	struct span_note spans[LSQ_HTTP_SPANS];

	/* prefetch workers (started on the first sequential stream) */
	pthread_cond_t queue_cv;
	struct chunk *queue, *queue_tail;
	pthread_t *prefetchers;
	unsigned nprefetchers, prefetch_max, prefetch_inflight;
	bool prefetch_allowed, prefetch_started, stopping;
	/* Pacing over a long round trip: a stream whose next window waits
	 * until the bytes still to arrive drop below a bandwidth-delay
	 * product (paced_stream, with mu), and the flag that tells the
	 * transfers to wake a worker for it when they do. */
	struct stream *paced_stream;
	bool pace_kicked;
	atomic_bool pace_waiting;

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

	/* s3:// images: every request is signed (CURLOPT_AWS_SIGV4) with
	 * creds, which are re-read when the server refuses them */
	bool s3;
	char *s3_sigv4;            /* "aws:amz:REGION:s3" */
	struct lsq_s3_where s3_where;  /* owned copies of the options */
	pthread_mutex_t s3_mu;
	struct lsq_s3_creds s3_creds;  /* protected by s3_mu */
	unsigned s3_gen;               /* protected by s3_mu; +1 per reload */
	/* CLOCK_MONOTONIC ns of the next look at the credentials file (at
	 * most one a second: a rotation is taken up before the server
	 * refuses the old credentials) */
	atomic_uint_least64_t s3_next_look_ns;

	/* -o url_command=: mirrors[0].url only names the image; every
	 * request goes to the renewer's current URL */
	struct lsq_url_renewer *renewer;

	atomic_bool changed;
	atomic_uint_least64_t not_before_ns;  /* Retry-After, CLOCK_MONOTONIC */
	atomic_uint_least64_t seed;
	atomic_uint_least64_t requests, bytes_fetched, retries, failures,
		cache_hits, readahead_bytes, in_flight, readahead_in_flight;
	/* what pacing counts: bytes the prefetch queue's jobs and the
	 * paced transfers running now (xfer.paced) have still to receive */
	atomic_uint_least64_t to_arrive;
	atomic_uint_least64_t paced;  /* times it held a window back */
	atomic_uint_least64_t bets, bets_lost;  /* early streams, and lost */
	/* bytes of speculative spans copied from memory, not fetched */
	atomic_uint_least64_t span_memory_bytes;
	/* readers' windows and readahead cut short at a span in flight */
	atomic_uint_least64_t span_trims;
};

/* One transfer: what was asked, the current response's headers, and the
 * verdict on it. */
struct xfer {
	struct http_source *hs;
	const struct mirror *m;
	bool probe;          /* at open: learn total and validators */
	bool suffix;         /* probe the object's last `want` bytes (off
			      * is set to where they start) */
	bool speculative;    /* nobody waits for it: the speculative pool */
	bool paced;          /* counted in hs->to_arrive */
	/* a warm-up (http_warmup.c): aborted once set; no timing sample
	 * but for the tail (suffix) */
	const atomic_bool *warmup_over;
	uint64_t off;        /* absolute offset in the remote object */
	size_t want;
	uint8_t *buf;
	size_t got;
	/* the source's bytes_fetched at this body's first bytes: what every
	 * transfer received meanwhile times the link, not this one's share */
	uint64_t link_bytes_at_body;
	unsigned s3_gen;     /* credentials generation this request used */
	unsigned url_gen;    /* url_command's URL generation used, or 0 */
	/* the current response's headers (reset per status line) */
	long status;
	bool have_cr, cr_star;
	uint64_t cr_first, cr_last, cr_total;
	bool have_clen;
	uint64_t clen;
	char etag[256];
	char last_modified[128];
	double retry_after;
	char s3_error[1024];  /* start of an S3 error document (body) */
	size_t s3_error_len;
	/* outcome */
	bool final_seen;
	bool multiplexed;    /* probe: the answer came over HTTP/2 or later */
	enum verdict verdict;
	char why[512];
	char s3_code[64];    /* the S3 error document's Code, or "" */
};

/* ---- http_source.c ---- */

extern const struct lsq_source_ops lsq_http_ops;
void lsq_http_destroy(struct lsq_source *src);

/* ---- http_response.c: what a response says, libcurl's callbacks ---- */

char *lsq_http_trim(char *s);
void lsq_http_set_verdict(struct xfer *x, enum verdict v, const char *fmt,
			  ...) __attribute__((format(printf, 3, 4)));
size_t lsq_http_on_header(char *line, size_t size, size_t nitems,
			  void *user);
size_t lsq_http_on_body(char *data, size_t size, size_t nmemb, void *user);

/* ---- http_transfer.c: the handle pool, one GET, a read with retries ---- */

void lsq_http_sleep_seconds(double s);
double lsq_http_backoff(struct http_source *hs, unsigned attempt,
			double retry_after);
void lsq_http_transfer(struct xfer *x, const struct curl_slist *headers);
/* Who a fetch is for: a reader waiting (retries, errors logged), or
 * nobody yet (one quiet try): the readahead, which pacing counts, or a
 * profile's or the background's span, which it does not (they give way
 * to readers; the readahead must not wait behind them). */
enum lsq_http_fetch_kind {
	LSQ_FETCH_WAITED,
	LSQ_FETCH_READAHEAD,
	LSQ_FETCH_SPAN,
};
int lsq_http_fetch(struct http_source *hs, uint8_t *buf, size_t len,
		   uint64_t off, enum lsq_http_fetch_kind kind,
		   const char **origin);
bool lsq_http_s3_refused(const struct xfer *x);
int lsq_http_s3_reload(struct http_source *hs, unsigned gen,
		       const char *why);
bool lsq_http_url_renew(struct xfer *x);

/* ---- http_warmup.c: the speculative pool's connections, during the probe */

struct lsq_http_warmup;
struct lsq_http_warmup *lsq_http_warmup_start(
	struct http_source *hs, const struct lsq_http_options *opt);
/* keep: the probe succeeded (then wait as long again for the warm-ups) */
void lsq_http_warmup_finish(struct lsq_http_warmup *w, bool keep);

/* ---- http_engine.c: the multi-handle thread (HTTP/2) ---- */

CURLcode lsq_http_engine_perform(struct http_source *hs, struct handle *h);
void lsq_http_engine_start(struct http_source *hs);
void lsq_http_engine_stop(struct http_source *hs);

/* ---- http_readahead.c ---- */

/* Bytes readahead chunks may hold: ra_limit, more over a long round trip
 * (LSQ_HTTP_RA_LONG_MAX at most). */
uint64_t lsq_http_ra_limit(struct http_source *hs);
/* n bytes a paced transfer was owed are no longer to arrive: received,
 * or given up at its end (no lock held). Wakes a prefetch worker for the
 * paced stream once what is still to arrive fell below what pacing keeps
 * in flight. */
void lsq_http_pace_arrived(struct http_source *hs, uint64_t n);

/* ---- http_chunks.c: head, readahead and window memory ---- */

void lsq_http_chunk_unlink(struct http_source *hs, struct chunk *c);
void lsq_http_chunk_free(struct chunk *c);
void lsq_http_chunk_put(struct http_source *hs, struct chunk *c);
void lsq_http_chunk_link_front(struct http_source *hs, struct chunk *c);
struct chunk *lsq_http_chunk_new(struct http_source *hs, uint64_t off,
				 size_t len, bool pinned);
void lsq_http_chunk_loaded(struct http_source *hs, struct chunk *c, int ret);
struct chunk *lsq_http_find_cover(struct http_source *hs, uint64_t off,
				  size_t len);
bool lsq_http_find_split_cover(struct http_source *hs, uint64_t off,
			       size_t len, struct chunk **a,
			       struct chunk **b);
/* Readahead from end, at most ra: up to where a chunk held or loading, or
 * a span due, begins (0: such a one holds end). */
uint64_t lsq_http_trim_to_held(struct http_source *hs, uint64_t end,
			       uint64_t ra);
/* Where what holds pos ends (a chunk, or a span due); pos: nothing does. */
uint64_t lsq_http_held_end(struct http_source *hs, uint64_t pos);
/* A speculative span [lo, hi) goes out now: the slot to end it with, or
 * -1 when none is free. lsq_http_span_end(): it arrived, or failed. */
int lsq_http_span_begin(struct http_source *hs, uint64_t lo, uint64_t hi);
void lsq_http_span_end(struct http_source *hs, int slot, uint64_t lo);
bool lsq_http_make_room(struct http_source *hs, uint64_t need,
			const struct stream *keep);
void lsq_http_stream_early(struct http_source *hs, uint64_t offset,
			   size_t len, uint64_t window_end, uint64_t run_end);
struct chunk *lsq_http_window_chunk(struct http_source *hs, uint64_t offset,
				    size_t len, uint64_t w, uint64_t run_end,
				    uint64_t *ra);
/* A speculative read (a background or profile span) that no chunk holds
 * whole: copy into buf (the span's bytes from off) what ready chunks hold
 * of its head and its tail, and set [*lo, *hi) to the rest, still to
 * fetch in one request (bytes chunks hold between are fetched again);
 * *lo == *hi: all copied. Returns the bytes copied. Called with hs->mu
 * held; drops it while copying. */
uint64_t lsq_http_span_from_memory(struct http_source *hs, uint8_t *buf,
				   uint64_t off, size_t len, uint64_t *lo,
				   uint64_t *hi);

/* ---- http_readahead.c: sequential streams, prefetch workers ---- */

void lsq_http_note_hit(struct http_source *hs, struct chunk *c,
		       const struct lsq_read *rq, uint64_t run_end,
		       bool waited);
struct chunk *lsq_http_readahead_miss(struct http_source *hs,
				      uint64_t offset, size_t len,
				      uint64_t run_end, uint64_t *beyond);
void lsq_http_prefetch_stop(struct http_source *hs);

#endif
