/* SPDX-License-Identifier: MIT */
/*
 * http_transfer.c - getting bytes over the network: the pool of easy
 * handles (mutex + condvar, made lazily, at most max_connections), one
 * range GET of a mirror (on the calling thread, or through the engine
 * while it runs), and lsq_http_fetch(): a read with retries, exponential
 * backoff with jitter, Retry-After for every request of the source,
 * failover between mirrors, and the sticky "remote image changed". Every
 * byte of the image comes through here (the probe at open makes its
 * transfers directly). Apart from the memory and readahead above it,
 * which never see a handle, and from the response checks
 * (http_response.c), which never see a retry.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/histogram.h"
#include "common/log.h"
#include "http/http_internal.h"
#include "lsq/error.h"

void lsq_http_sleep_seconds(double s)
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
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, lsq_http_on_header);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, lsq_http_on_body);
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

/* A speculative transfer may borrow an idle handle of the readers' pool,
 * and with it the open connection it keeps (a handshake saved, a round
 * trip or two), while the readers keep room for one more transfer of
 * their own. Handles carry their connections: libcurl does not support
 * one connection cache shared by concurrent threads
 * (CURL_LOCK_DATA_CONNECT), so there is none. */
static struct handle *borrow_idle_reader_handle(struct http_source *hs)
{
	struct handle_pool *readers = &hs->pools[0];
	unsigned busy = readers->created - readers->nfree;

	if (readers->nfree == 0 || busy + 1 >= hs->opt.max_connections)
		return NULL;
	return readers->free_handles[--readers->nfree];
}

/* A handle of the pool for speculative or waited-for transfers; a handle
 * remembers its pool (h->pool) for release_handle(). */
static struct handle *acquire_handle(struct http_source *hs, bool speculative)
{
	struct handle_pool *pool = &hs->pools[speculative ? 1 : 0];
	struct handle *h = NULL;

	pthread_mutex_lock(&hs->pool_mu);
	for (;;) {
		if (pool->nfree > 0)
			h = pool->free_handles[--pool->nfree];
		else if (speculative)
			h = borrow_idle_reader_handle(hs);
		if (h) {
			pthread_mutex_unlock(&hs->pool_mu);
			return h;
		}
		if (pool->created < hs->opt.max_connections)
			break;
		pthread_cond_wait(&hs->pool_cv, &hs->pool_mu);
	}
	pool->created++;
	pthread_mutex_unlock(&hs->pool_mu);
	h = new_handle(hs);
	if (h) {
		h->pool = speculative ? 1 : 0;
	} else {
		pthread_mutex_lock(&hs->pool_mu);
		pool->created--;
		pthread_cond_broadcast(&hs->pool_cv);
		pthread_mutex_unlock(&hs->pool_mu);
	}
	return h;
}

static void release_handle(struct http_source *hs, struct handle *h)
{
	struct handle_pool *pool = &hs->pools[h->pool];

	pthread_mutex_lock(&hs->pool_mu);
	pool->free_handles[pool->nfree++] = h;
	/* waiters of both pools share the condition variable */
	pthread_cond_broadcast(&hs->pool_cv);
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

/* Round trip (request sent to first byte) and throughput of a transfer
 * that just succeeded, for the latency windows and the readahead. Its body
 * shared the link with the transfers running beside it (the readahead's
 * workers run several): the link's rate is what all of them received
 * while it lasted. A short body is timed alone: other transfers' bytes
 * arrive in bursts of a receive buffer, which over a few milliseconds
 * would count several times over. */
static void sample_timing(struct http_source *hs, CURL *curl,
			  const struct xfer *x)
{
	curl_off_t pre = 0, first = 0, total = 0;
	uint64_t body_ns, bytes = x->got;
	bool link;

	if (curl_easy_getinfo(curl, CURLINFO_PRETRANSFER_TIME_T, &pre) ||
	    curl_easy_getinfo(curl, CURLINFO_STARTTRANSFER_TIME_T, &first) ||
	    curl_easy_getinfo(curl, CURLINFO_TOTAL_TIME_T, &total) ||
	    first < pre || total < first)
		return;
	body_ns = (uint64_t)(total - first) * 1000u;
	link = body_ns >= LSQ_HTTP_LINK_TIMED_NS;
	if (link)
		bytes = atomic_load_explicit(&hs->bytes_fetched,
					     memory_order_relaxed) -
			x->link_bytes_at_body;
	lsq_latency_window_sample(&hs->win, (uint64_t)(first - pre) * 1000u,
				  bytes, body_ns, link);
}

/* Read the credentials of generation gen again and take them if they
 * differ: the server refused them (403, or S3's 400 for an expired
 * token), or their file changed or their expiry is near (why says which,
 * for messages). The file is read with no lock held (readers signing
 * meanwhile must not wait on a disk); when two readers do it at once, the
 * first to finish installs its copy and the other sees the new
 * generation. 1 when there are newer credentials than gen's (the caller
 * may try again with them), 0 when they are the same, -1 when they could
 * not be read (logged). */
int lsq_http_s3_reload(struct http_source *hs, unsigned gen, const char *why)
{
	struct lsq_s3_creds fresh = { 0 };
	char err[512] = "", from[sizeof(fresh.from)];
	bool changed = false, newer;

	pthread_mutex_lock(&hs->s3_mu);
	newer = hs->s3_gen != gen;
	pthread_mutex_unlock(&hs->s3_mu);
	if (newer)
		return 1;
	if (lsq_s3_creds_load(&hs->s3_where, &fresh, err, sizeof(err))) {
		lsq_warn("%s: %s, and the credentials could not be read "
			 "again: %s", hs->base.name, why, err);
		return -1;
	}
	pthread_mutex_lock(&hs->s3_mu);
	newer = hs->s3_gen != gen;
	if (!newer && !lsq_s3_creds_equal(&fresh, &hs->s3_creds)) {
		lsq_s3_creds_clear(&hs->s3_creds);
		hs->s3_creds = fresh;  /* moved: fresh is not cleared below */
		memset(&fresh, 0, sizeof(fresh));
		hs->s3_gen++;
		memcpy(from, hs->s3_creds.from, sizeof(from));
		changed = true;
	} else if (!newer) {
		/* the same keys: remember the file as it is now, or it
		 * would look changed at every look */
		hs->s3_creds.stamp = fresh.stamp;
		hs->s3_creds.expires = fresh.expires;
	}
	pthread_mutex_unlock(&hs->s3_mu);
	lsq_s3_creds_clear(&fresh);
	if (changed)
		lsq_info("%s: %s; using the credentials read again from %s",
			 hs->base.name, why, from);
	return changed || newer ? 1 : 0;
}

/* Before signing: at most once a second, one thread looks whether the
 * credentials file was rewritten (a rotator's new keys) or the
 * credentials expire within LSQ_S3_RENEW_BEFORE_S, and reads it again
 * then, so the old keys are not used until the server refuses them. The
 * stat() runs without s3_mu held. */
static void s3_look_ahead(struct http_source *hs)
{
	uint64_t now = lsq_now_ns(), next = atomic_load(&hs->s3_next_look_ns);
	struct lsq_s3_file_stamp stamp;
	int64_t expires, wall = (int64_t)time(NULL);
	char *file = NULL;
	unsigned gen;
	bool stale;

	if (now < next || !atomic_compare_exchange_strong(
				  &hs->s3_next_look_ns, &next, now + 1000000000u))
		return;
	pthread_mutex_lock(&hs->s3_mu);
	if (hs->s3_creds.file)
		file = strdup(hs->s3_creds.file);
	stamp = hs->s3_creds.stamp;
	expires = hs->s3_creds.expires;
	gen = hs->s3_gen;
	pthread_mutex_unlock(&hs->s3_mu);
	if (!file)
		return;
	stale = lsq_s3_creds_stale(file, &stamp, expires, wall);
	free(file);
	if (stale && lsq_http_s3_reload(hs, gen,
					expires && wall >= expires -
					LSQ_S3_RENEW_BEFORE_S
					? "the credentials expire soon"
					: "the credentials file changed") < 0)
		/* unreadable (a rotator half-way?): look again later, and
		 * warn no more than every 10 s */
		atomic_store(&hs->s3_next_look_ns, now + 10000000000u);
}

/* An S3 request: libcurl signs it (Signature Version 4) with the current
 * credentials. We add x-amz-content-sha256 ourselves (libcurl 7.88 does
 * not, and S3 requires it; UNSIGNED-PAYLOAD for a GET) and the session
 * token; being x-amz-* headers, both are signed with the rest. Returns
 * the request's header list (owned by the caller; the token is in it),
 * or NULL when out of memory. */
static struct curl_slist *s3_sign(struct http_source *hs, CURL *curl,
				  const struct curl_slist *headers,
				  unsigned *gen)
{
	struct curl_slist *list = NULL, *n;
	char *token = NULL;
	bool ok = true;

	s3_look_ahead(hs);
	for (; headers; headers = headers->next) {
		n = curl_slist_append(list, headers->data);
		if (!n)
			goto fail;
		list = n;
	}
	n = curl_slist_append(list, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (!n)
		goto fail;
	list = n;
	pthread_mutex_lock(&hs->s3_mu);
	*gen = hs->s3_gen;
	/* libcurl copies these strings */
	curl_easy_setopt(curl, CURLOPT_USERNAME, hs->s3_creds.access_key);
	curl_easy_setopt(curl, CURLOPT_PASSWORD, hs->s3_creds.secret);
	if (hs->s3_creds.token &&
	    asprintf(&token, "x-amz-security-token: %s",
		     hs->s3_creds.token) < 0) {
		token = NULL;
		ok = false;
	}
	pthread_mutex_unlock(&hs->s3_mu);
	if (!ok)
		goto fail;
	if (token) {
		n = curl_slist_append(list, token);
		explicit_bzero(token, strlen(token));
		free(token);
		if (!n)
			goto fail;
		list = n;
	}
	curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, hs->s3_sigv4);
	/* S3 names another region's endpoint in an error document, not in a
	 * Location to follow; and a signed request is not sent on elsewhere */
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
	return list;
fail:
	curl_slist_free_all(list);
	return NULL;
}

/* The Code of an S3 error document, letters and digits only (it goes
 * into messages; the rest of the document, which may quote the access
 * key and what was signed, never does). */
static void s3_error_code(struct xfer *x)
{
	const char *p = strstr(x->s3_error, "<Code>");
	size_t n = 0;

	x->s3_code[0] = '\0';
	if (!p)
		return;
	for (p += 6; n + 1 < sizeof(x->s3_code) &&
		     ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9'));
	     p++)
		x->s3_code[n++] = *p;
	x->s3_code[n] = '\0';
	if (strncmp(p, "</Code>", 7) != 0)
		x->s3_code[0] = '\0';
}

/* Whether the S3 server refused the credentials themselves: 403, or
 * the 400 S3 gives for an expired or unknown session token. */
bool lsq_http_s3_refused(const struct xfer *x)
{
	if (!x->hs->s3)
		return false;
	if (x->status == 403)
		return true;
	return x->status == 400 &&
	       (strcmp(x->s3_code, "ExpiredToken") == 0 ||
		strcmp(x->s3_code, "InvalidToken") == 0 ||
		strcmp(x->s3_code, "TokenRefreshRequired") == 0);
}

/* The server refused a URL from -o url_command= (401 or 403: expired,
 * or used up): true when the caller should try again with a new one;
 * otherwise the command's reason is added to x->why. */
bool lsq_http_url_renew(struct xfer *x)
{
	char why[320];
	size_t n;

	if (!x->url_gen || (x->status != 401 && x->status != 403))
		return false;
	if (lsq_url_renewer_refused(x->hs->renewer, x->url_gen, why,
				    sizeof(why)) == LSQ_OK)
		return true;
	n = strlen(x->why);
	snprintf(x->why + n, sizeof(x->why) - n, "; %s", why);
	return false;
}

/* The URL of mirror m for one request: with -o url_command= the
 * renewer's current one (x->url_gen set; *owned to be wiped and freed
 * after curl_easy_setopt, which copies it), else the mirror's. NULL with
 * x's verdict set when the command gave no URL. */
static const char *request_url(struct xfer *x, char **owned)
{
	char why[320];

	*owned = NULL;
	if (!x->hs->renewer || x->m != &x->hs->mirrors[0])
		return x->m->url;
	if (lsq_url_renewer_get(x->hs->renewer, owned, &x->url_gen, why,
				sizeof(why))) {
		lsq_http_set_verdict(x, V_FATAL, "%s", why);
		return NULL;
	}
	return *owned;
}

/* Each request's time and size, by how it ended (enum verdict). */
#define OUTCOME(v, name)                                                   \
	static LSQ_HISTOGRAM(v##_seconds, "http_request_seconds",          \
			     "Time from sending a range request to its "   \
			     "end.", "outcome", name, LSQ_HISTOGRAM_NS)     \
	static LSQ_HISTOGRAM(v##_bytes, "http_response_bytes",             \
			     "Body bytes a range request received.",       \
			     "outcome", name, LSQ_HISTOGRAM_BYTES)
OUTCOME(V_OK, "ok")
OUTCOME(V_RETRY, "retry")
OUTCOME(V_TIMEOUT, "timeout")
OUTCOME(V_CHANGED, "changed")
OUTCOME(V_FATAL, "error")

static void record_outcome(const struct xfer *x, uint64_t ns)
{
	static struct lsq_histogram *const seconds[] = {
		[V_OK] = &V_OK_seconds, [V_RETRY] = &V_RETRY_seconds,
		[V_TIMEOUT] = &V_TIMEOUT_seconds,
		[V_CHANGED] = &V_CHANGED_seconds, [V_FATAL] = &V_FATAL_seconds,
	};
	static struct lsq_histogram *const bytes[] = {
		[V_OK] = &V_OK_bytes, [V_RETRY] = &V_RETRY_bytes,
		[V_TIMEOUT] = &V_TIMEOUT_bytes,
		[V_CHANGED] = &V_CHANGED_bytes, [V_FATAL] = &V_FATAL_bytes,
	};

	lsq_histogram_add(seconds[x->verdict], ns);
	lsq_histogram_add(bytes[x->verdict], x->got);
}

static int warmup_progress(void *user, curl_off_t dltotal, curl_off_t dlnow,
			   curl_off_t ultotal, curl_off_t ulnow)
{
	const struct xfer *x = user;

	return atomic_load(x->warmup_over) ? 1 : 0;
}

/* One GET of [x->off, x->off + x->want) from mirror m into x->buf. */
void lsq_http_transfer(struct xfer *x, const struct curl_slist *headers)
{
	struct http_source *hs = x->hs;
	struct curl_slist *signed_headers = NULL;
	struct handle *h;
	char range[64], *url_copy;
	const char *url;
	uint64_t start;
	CURLcode rc;

	url = request_url(x, &url_copy);
	if (!url)
		return;
	h = acquire_handle(hs, x->speculative);
	if (!h) {
		lsq_url_command_free(url_copy);
		lsq_http_set_verdict(x, V_RETRY, "out of memory for a "
				     "connection");
		return;
	}
	if (x->suffix)
		snprintf(range, sizeof(range), "-%zu", x->want);
	else
		snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, x->off,
			 x->off + x->want - 1);
	h->errbuf[0] = '\0';
	curl_easy_setopt(h->curl, CURLOPT_URL, url);
	lsq_url_command_free(url_copy);
	curl_easy_setopt(h->curl, CURLOPT_RANGE, range);
	if (hs->s3) {
		signed_headers = s3_sign(hs, h->curl, headers, &x->s3_gen);
		if (!signed_headers) {
			release_handle(hs, h);
			lsq_http_set_verdict(x, V_RETRY, "out of memory for "
					     "a request");
			return;
		}
		headers = signed_headers;
	}
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, x);
	if (x->warmup_over) {
		curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION,
				 warmup_progress);
		curl_easy_setopt(h->curl, CURLOPT_XFERINFODATA, x);
		curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
	}
	x->verdict = V_OK;
	x->why[0] = '\0';
	atomic_fetch_add_explicit(&hs->requests, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&hs->in_flight, 1, memory_order_relaxed);
	if (x->paced)
		atomic_fetch_add(&hs->to_arrive, x->want);
	start = lsq_now_ns();
	rc = atomic_load(&hs->engine_on) ? lsq_http_engine_perform(hs, h)
					 : curl_easy_perform(h->curl);
	atomic_fetch_sub_explicit(&hs->in_flight, 1, memory_order_relaxed);
	if (x->paced)  /* what it did not give, if it ended short */
		lsq_http_pace_arrived(hs, x->want - x->got);
	if (x->probe)  /* only the probe's answer decides on the engine */
		x->multiplexed = answered_multiplexed(h->curl);
	if (x->warmup_over)
		curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 1L);
	/* of the warm-ups, only the tail is a request like the others */
	if ((!x->warmup_over || x->suffix) && rc == CURLE_OK &&
	    x->verdict == V_OK && x->got == x->want)
		sample_timing(hs, h->curl, x);

	if (rc == CURLE_OK) {
		if (!x->final_seen)
			lsq_http_set_verdict(x, V_RETRY, "no response");
		else if (x->verdict == V_OK && x->got != x->want)
			lsq_http_set_verdict(x, V_RETRY, "short body: %zu of "
					     "%zu bytes", x->got, x->want);
	} else if (rc == CURLE_WRITE_ERROR && x->verdict != V_OK) {
		/* we aborted; the verdict says why */
	} else if (rc == CURLE_OPERATION_TIMEDOUT) {
		lsq_http_set_verdict(x, V_TIMEOUT, "timed out: %s",
				     h->errbuf[0] ? h->errbuf
						  : curl_easy_strerror(rc));
	} else {
		/* A failure after a good header block: short/reset body. */
		lsq_http_set_verdict(x, transient_curl_error(rc) ? V_RETRY
							       : V_FATAL, "%s",
				     h->errbuf[0] ? h->errbuf
						  : curl_easy_strerror(rc));
	}
	if (hs->s3 && x->s3_error_len) {
		s3_error_code(x);
		if (x->s3_code[0]) {
			size_t n = strlen(x->why);

			snprintf(x->why + n, sizeof(x->why) - n, " (%s)",
				 x->s3_code);
		}
	}
	record_outcome(x, lsq_now_ns() - start);
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(signed_headers);
	release_handle(hs, h);
}

static void mark_changed(struct http_source *hs, const struct mirror *m,
			 const char *why)
{
	if (!atomic_exchange(&hs->changed, true))
		lsq_err_log("remote image changed: %s (%s); every further "
			    "read fails", m->shown, why);
}

double lsq_http_backoff(struct http_source *hs, unsigned attempt,
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

static double seconds_until(uint64_t when_ns)
{
	uint64_t now = lsq_now_ns();

	return when_ns > now ? (double)(when_ns - now) / 1e9 : 0;
}

/* Hold every request of this source back for s seconds from now. */
static void not_before(struct http_source *hs, double s)
{
	uint64_t want = lsq_now_ns() + (uint64_t)(s * 1e9);
	uint64_t cur = atomic_load(&hs->not_before_ns);

	while (cur < want &&
	       !atomic_compare_exchange_weak(&hs->not_before_ns, &cur, want))
		;
}

/* Fetch [off, off+len) of the image (source coordinates) into buf, with
 * retries and mirror failover; one quiet try when nobody waits (kind).
 * *origin (when origin is not NULL): the mirror that answered, where
 * there are several. */
int lsq_http_fetch(struct http_source *hs, uint8_t *buf, size_t len,
		   uint64_t off, enum lsq_http_fetch_kind kind,
		   const char **origin)
{
	bool speculative = kind != LSQ_FETCH_WAITED;
	/* A failed readahead costs nothing: the reader fetches for itself,
	 * with retries, and reports. */
	unsigned tries = speculative ? 1 : hs->opt.retries + 1;
	enum verdict last = V_RETRY;
	bool reloaded = false;
	struct xfer x;
	bool renewed = false;
	char why[sizeof(x.why)] = "";
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
			lsq_http_sleep_seconds(wait);
		if (attempt > 0)
			atomic_fetch_add_explicit(&hs->retries, 1,
						  memory_order_relaxed);
		memset(&x, 0, sizeof(x));
		x.hs = hs;
		x.m = m;
		x.off = off + hs->base_offset;
		x.want = len;
		x.buf = buf;
		x.speculative = speculative;
		x.paced = kind != LSQ_FETCH_SPAN;
		lsq_http_transfer(&x, m->headers);
		if (x.verdict == V_OK) {
			/* which copy of the image, for a verifier's message */
			if (hs->nmirrors > 1 && origin)
				*origin = m->shown;
			return LSQ_OK;
		}
		if (x.verdict == V_CHANGED) {
			mark_changed(hs, m, x.why);
			return LSQ_ERR_REMOTE_CHANGED;
		}
		if (lsq_http_s3_refused(&x) && !reloaded &&
		    lsq_http_s3_reload(hs, x.s3_gen, "access refused") > 0) {
			reloaded = true;
			attempt--;  /* new credentials: not a retry */
			continue;
		}
		if (!renewed && lsq_http_url_renew(&x)) {
			renewed = true;
			attempt--;  /* a new URL: not a retry */
			continue;
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
			lsq_http_sleep_seconds(lsq_http_backoff(hs, attempt,
								x.retry_after));
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

