/* SPDX-License-Identifier: MIT */
/*
 * http_open.c - lsq_source_http_open(). A file:// URL goes to the file
 * source. For http(s): libcurl is loaded and initialised, the share handle
 * and the header file set up, every mirror probed (one ranged GET of the
 * head: size, ETag, Last-Modified) and checked against the first, the
 * If-Range headers built from the validators, and the head kept pinned.
 * Apart from the rest because it runs once, before any thread may start,
 * and is all set-up: reads never come here. Built without libcurl too:
 * file:// URLs still work, other URLs are refused.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/hex.h"
#include "common/log.h"
#include "common/url.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "lsq_config.h"

/* %XX: either case. */
static int hexval(int c)
{
	return lsq_hex_digit(tolower(c));
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

#else /* LSQ_HAVE_CURL */

#include "http/http_internal.h"

/* libcurl share handle locks */

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
		char *l = lsq_http_trim(line), *colon;
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
	bool reloaded = false, renewed = false;
	struct xfer x;

	for (unsigned attempt = 0; attempt < tries; attempt++) {
		memset(&x, 0, sizeof(x));
		x.hs = hs;
		x.m = m;
		x.probe = true;
		x.off = hs->base_offset;
		x.want = *head_len;
		x.buf = buf;
		lsq_http_transfer(&x, hs->user_headers);
		if (x.verdict == V_OK) {
			hs->multiplexing |= x.multiplexed;
			break;
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
		if (x.verdict == V_FATAL || attempt + 1 == tries) {
			if (lsq_http_s3_refused(&x))
				snprintf(err, errlen, "%s: %s: the S3 server "
					 "refused the credentials from %s",
					 m->shown, x.why, hs->s3_creds.from);
			else
				snprintf(err, errlen, "%s: %s", m->shown, x.why);
			/* offline_ok tells these from answers that refuse */
			if (x.verdict == V_TIMEOUT)
				return LSQ_ERR_TIMEOUT;
			return x.verdict == V_RETRY ? LSQ_ERR_UNREACHABLE
						    : LSQ_ERR_IO;
		}
		lsq_http_sleep_seconds(lsq_http_backoff(hs, attempt,
							x.retry_after));
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

/* Every request carries If-Range with the mirror's validator. */
static int mirror_headers(struct http_source *hs)
{
	for (unsigned i = 0; i < hs->nmirrors; i++) {
		struct mirror *m = &hs->mirrors[i];
		char *line = NULL;

		if (m->etag || m->last_modified) {
			if (asprintf(&line, "If-Range: %s",
				     m->etag ? m->etag : m->last_modified) < 0)
				return LSQ_ERR_NOMEM;
		} else if (i == 0) {
			lsq_warn("%s: no ETag or Last-Modified; a change of the "
				 "image is only detected by its size", m->shown);
		}
		m->headers = copy_headers(hs->user_headers, line);
		free(line);
		if (!m->headers && (hs->user_headers || m->etag ||
				    m->last_modified))
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
	ret = mirror_headers(hs);
	if (ret)
		goto out;
	hs->base.size = hs->total - hs->base_offset;
	c = lsq_http_chunk_new(hs, 0, head_len, true);
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

/* offline_ok: size and validator as recorded ("SIZE\nVALIDATOR"), for
 * every mirror; a strong ETag is quoted, a Last-Modified date is not. The
 * first answer that disagrees is a change, as for a probed image. */
static int open_known(struct http_source *hs, const char *known, char *err,
		      size_t errlen)
{
	const char *nl = strchr(known, '\n');
	char *end;

	errno = 0;
	hs->total = strtoull(known, &end, 10);
	if (errno || end != nl || !nl[1] || strchr(nl + 1, '\n') ||
	    hs->total <= hs->base_offset) {
		snprintf(err, errlen, "%s: unusable record of the image",
			 hs->base.name);
		return LSQ_ERR_INVALID;
	}
	for (unsigned i = 0; i < hs->nmirrors; i++) {
		char **slot = nl[1] == '"' ? &hs->mirrors[i].etag
					   : &hs->mirrors[i].last_modified;

		*slot = strdup(nl + 1);
		if (!*slot)
			return LSQ_ERR_NOMEM;
	}
	hs->base.size = hs->total - hs->base_offset;
	return mirror_headers(hs);
}

/* S3 object keys go into the path as they are, but for the bytes a URL
 * path may not hold, which are percent-encoded ('/' stays: it is the
 * key's own separator and S3 reads it back as such). */
static bool s3_unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
	       c == '/';
}

/* s3://BUCKET/KEY -> ENDPOINT/BUCKET/KEY (path-style), ENDPOINT being
 * -o endpoint= or https://s3.REGION.amazonaws.com. */
static int s3_url(const char *spec, const char *endpoint, const char *region,
		  char **out, char *err, size_t errlen)
{
	const char *bucket = spec + 5, *slash = strchr(bucket, '/');
	size_t blen = slash ? (size_t)(slash - bucket) : 0, elen, n = 0;
	char *url, *host = NULL;

	if (!slash || blen == 0 || blen > 63 || !slash[1]) {
		snprintf(err, errlen, "%s: expected s3://BUCKET/KEY", spec);
		return LSQ_ERR_INVALID;
	}
	for (size_t i = 0; i < blen; i++) {
		if (!isalnum((unsigned char)bucket[i]) && bucket[i] != '-' &&
		    bucket[i] != '.' && bucket[i] != '_') {
			snprintf(err, errlen, "%s: not a valid bucket name",
				 spec);
			return LSQ_ERR_INVALID;
		}
	}
	/* the region goes into a host name and the signature's scope */
	if (!region[0] || strlen(region) > 32 ||
	    strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
		    strlen(region)) {
		snprintf(err, errlen, "region %s: not a region name", region);
		return LSQ_ERR_INVALID;
	}
	if (!endpoint) {
		if (asprintf(&host, "https://s3.%s.amazonaws.com", region) < 0)
			return LSQ_ERR_NOMEM;
		endpoint = host;
	} else if (strncasecmp(endpoint, "http://", 7) != 0 &&
		   strncasecmp(endpoint, "https://", 8) != 0) {
		snprintf(err, errlen, "endpoint %s: not an http:// or "
			 "https:// URL", endpoint);
		return LSQ_ERR_INVALID;
	}
	elen = strlen(endpoint);
	while (elen > 0 && endpoint[elen - 1] == '/')
		elen--;
	url = malloc(elen + 1 + 3 * strlen(bucket) + 1);
	if (!url) {
		free(host);
		return LSQ_ERR_NOMEM;
	}
	memcpy(url, endpoint, elen);
	n = elen;
	url[n++] = '/';
	for (const char *p = bucket; *p; p++) {
		if (s3_unreserved((unsigned char)*p)) {
			url[n++] = *p;
		} else {
			snprintf(url + n, 4, "%%%02X", (unsigned char)*p);
			n += 3;
		}
	}
	url[n] = '\0';
	free(host);
	*out = url;
	return LSQ_OK;
}

/* Keep what signing needs: the options (to read the credentials again
 * when the server refuses them), the first credentials, the region. */
static int s3_setup(struct http_source *hs, const struct lsq_http_options *opt,
		    char *err, size_t errlen)
{
	const char *region = lsq_s3_region(opt->region);
	int ret;

	hs->s3 = true;
	if (opt->aws_profile) {
		hs->s3_where.profile = strdup(opt->aws_profile);
		if (!hs->s3_where.profile)
			return LSQ_ERR_NOMEM;
	}
	if (opt->credentials_file) {
		hs->s3_where.credentials_file = strdup(opt->credentials_file);
		if (!hs->s3_where.credentials_file)
			return LSQ_ERR_NOMEM;
	}
	if (asprintf(&hs->s3_sigv4, "aws:amz:%s:s3", region) < 0) {
		hs->s3_sigv4 = NULL;
		return LSQ_ERR_NOMEM;
	}
	ret = lsq_s3_creds_load(&hs->s3_where, &hs->s3_creds, err, errlen);
	if (ret) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " (for %s)", hs->base.name);
	}
	return ret;
}

int lsq_source_http_open(const char *url, const struct lsq_http_options *opt,
			 struct lsq_source **out, char *err, size_t errlen)
{
	struct http_source *hs;
	const char *spec = url;
	char *s3 = NULL;
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
	if (opt->url_command &&
	    (strncasecmp(url, "http", 4) != 0 || opt->nmirrors)) {
		snprintf(err, errlen, "%s: url_command= needs an http:// or "
			 "https:// image and no mirror=", url);
		return LSQ_ERR_INVALID;
	}
	if (strncasecmp(url, "s3://", 5) == 0) {
		if (opt->nmirrors) {
			snprintf(err, errlen, "%s: mirror= is not supported "
				 "for s3:// images", url);
			return LSQ_ERR_INVALID;
		}
		ret = s3_url(url, opt->endpoint, lsq_s3_region(opt->region),
			     &s3, err, errlen);
		if (ret)
			return ret;
		url = s3;
		ret = LSQ_ERR_NOMEM;
	}
	if (lsq_curl_load(err, errlen)) {
		free(s3);
		return LSQ_ERR_UNSUPPORTED;
	}
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		snprintf(err, errlen, "cannot initialise libcurl: %s",
			 curl_easy_strerror(global_rc));
		free(s3);
		return LSQ_ERR_IO;
	}

	hs = calloc(1, sizeof(*hs));
	if (!hs) {
		free(s3);
		return LSQ_ERR_NOMEM;
	}
	pthread_mutex_init(&hs->s3_mu, NULL);
	hs->opt = *opt;
	hs->opt.header_file = NULL;
	hs->opt.cacert = NULL;
	hs->opt.known = NULL;
	hs->opt.tail_unless = NULL;  /* for lsq_http_warmup_start() only */
	hs->opt.url_command = NULL;
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
	hs->base.ops = &lsq_http_ops;
	hs->base.reads_ahead = hs->opt.readahead > 0;
	/* shown in messages; an S3 image as the user named it */
	hs->base.name = s3 ? strdup(spec) : lsq_url_redact(url);
	for (unsigned i = 0; i < 2; i++)
		hs->pools[i].free_handles = calloc(
			hs->opt.max_connections,
			sizeof(*hs->pools[i].free_handles));
	hs->mirrors = calloc(1 + opt->nmirrors, sizeof(*hs->mirrors));
	hs->prefetchers = calloc(hs->prefetch_max, sizeof(*hs->prefetchers));
	if (!hs->base.name || !hs->pools[0].free_handles ||
	    !hs->pools[1].free_handles || !hs->mirrors ||
	    !hs->prefetchers)
		goto fail;
	hs->nmirrors = 1 + opt->nmirrors;
	for (unsigned i = 0; i < hs->nmirrors; i++) {
		hs->mirrors[i].url = strdup(i ? opt->mirrors[i - 1] : url);
		hs->mirrors[i].shown = i == 0 && s3
					       ? strdup(spec)
					       : lsq_url_redact(hs->mirrors[i].url);
		if (!hs->mirrors[i].url || !hs->mirrors[i].shown)
			goto fail;
	}
	if (s3) {
		ret = s3_setup(hs, opt, err, errlen);
		if (ret)
			goto fail;
	}
	/* The command's URLs replace IMAGE in requests; IMAGE still names
	 * the image: in messages, and in the identity (a persistent cache
	 * outlives any one signed URL). The command first runs with the
	 * probe below (or the first read, when offline_ok knows the image). */
	if (opt->url_command) {
		hs->renewer = lsq_url_renewer_create(opt->url_command,
						     opt->timeout,
						     hs->base.name);
		if (!hs->renewer)
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
	if (opt->known) {
		ret = open_known(hs, opt->known, err, errlen);
	} else {
		struct lsq_http_warmup *warm = lsq_http_warmup_start(hs, opt);

		ret = open_mirrors(hs, err, errlen);
		lsq_http_warmup_finish(warm, ret == LSQ_OK);
	}
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
		if (asprintf(&hs->base.location, "%s\n%" PRIu64, m->url,
			     hs->base_offset) < 0) {
			free(hs->base.identity);
			hs->base.identity = hs->base.location = NULL;
			ret = LSQ_ERR_NOMEM;
			goto fail;
		}
	}
	free(s3);
	*out = &hs->base;
	return LSQ_OK;
fail:
	if (ret == LSQ_ERR_NOMEM && !err[0])
		snprintf(err, errlen, "out of memory");
	free(s3);
	lsq_http_destroy(&hs->base);
	return ret;
}

#endif /* LSQ_HAVE_CURL */

