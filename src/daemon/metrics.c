/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the Prometheus endpoint (metrics.h).
 *
 * One thread, one connection at a time: a scrape is a few kilobytes every
 * few seconds, and nothing here touches the read path but the counters'
 * atomic loads. A request must arrive whole within REQUEST_TIMEOUT_MS and
 * REQUEST_MAX bytes, else the connection is closed (a slow or endless
 * client holds the endpoint that long at most, never a reader).
 */
#include "daemon/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/histogram.h"
#include "common/log.h"
#include "common/url.h"
#include "daemon/metrics_request.h"
#include "fuse/stats.h"

#define REQUEST_MAX 8192
#define REQUEST_TIMEOUT_MS 2000
/* A scrape within this long of the last rendering gets that rendering
 * again: a storm of scrapes costs the daemon the sockets, not 0.3 ms of
 * CPU each (a scraper asks every 15 s or so). */
#define RENDER_MIN_MS 100
#define PREFIX "sqfs_lazy_"

/* ---- rendering ---- */

/* A label value: backslash, double quote and newline escaped. */
static void put_label(FILE *f, const char *key, const char *value,
		      bool first)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", key);
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* The mount's labels ("{mountpoint=...,image=...}"), plus key="value"
 * when key is not NULL. */
static void put_labels(FILE *f, const char *labels, const char *key,
		       const char *value)
{
	fprintf(f, "%.*s", (int)strlen(labels) - 1, labels);
	if (key)
		put_label(f, key, value, false);
	fputc('}', f);
}

/* The caches' counters are one family per kind, told apart by a cache
 * label: data_hits is sqfs_lazy_cache_hits_total{cache="data"}. */
static const struct {
	const char *prefix, *cache;
} caches[] = {
	{ "meta_", "metadata" }, { "data_", "data" }, { "frag_", "fragment" },
	{ "block_cache_", "block" }, { "disk_cache_", "disk" },
	{ "cas_", "store" },
};
static const char *const cache_kinds[] = {
	"hits", "misses", "evictions", "bytes", "limit_bytes", "writes",
	"corrupt",
};

struct family {
	char name[128];
	double scale;       /* the value is divided by it */
	const char *cache;  /* the cache label; NULL: none */
};

/* A counter's family under Prometheus's conventions: base units (a name
 * in _ns or _us is in seconds), _total for what only grows. */
static void family_of(const struct lsq_counter *c, struct family *fam)
{
	const char *name = c->name;
	const char *total = c->kind == LSQ_COUNTER_TOTAL ? "_total" : "";
	size_t n = strlen(name);
	const char *unit = "";

	fam->scale = 1;
	fam->cache = NULL;
	for (size_t i = 0; i < sizeof(caches) / sizeof(caches[0]); i++) {
		size_t pl = strlen(caches[i].prefix);

		if (strncmp(name, caches[i].prefix, pl) != 0)
			continue;
		for (size_t k = 0; k < sizeof(cache_kinds) /
				       sizeof(cache_kinds[0]); k++)
			if (strcmp(name + pl, cache_kinds[k]) == 0) {
				fam->cache = caches[i].cache;
				snprintf(fam->name, sizeof(fam->name),
					 PREFIX "cache_%s%s", cache_kinds[k],
					 total);
				return;
			}
	}
	if (n > 3 && strcmp(name + n - 3, "_ns") == 0) {
		n -= 3;
		unit = "_seconds";
		fam->scale = 1e9;
	} else if (n > 3 && strcmp(name + n - 3, "_us") == 0) {
		n -= 3;
		unit = "_seconds";
		fam->scale = 1e6;
	}
	snprintf(fam->name, sizeof(fam->name), PREFIX "%.*s%s%s", (int)n,
		 name, unit, total);
}

/* Every family once, its samples together, as the format wants. */
static void render_counters(FILE *f, const struct lsq_counter_set *set,
			    const char *labels)
{
	bool done[LSQ_COUNTER_SET_MAX] = { false };

	for (size_t i = 0; i < set->n; i++) {
		const struct lsq_counter *c = &set->items[i];
		struct family fam, other;

		if (done[i])
			continue;
		family_of(c, &fam);
		if (fam.cache)
			fprintf(f, "# HELP %s The caches' --stats counters "
				"*_%s (docs/metrics.md).\n", fam.name,
				fam.name + strlen(PREFIX "cache_"));
		else
			fprintf(f, "# HELP %s The --stats counter %s "
				"(docs/metrics.md).\n", fam.name, c->name);
		fprintf(f, "# TYPE %s %s\n", fam.name,
			c->kind == LSQ_COUNTER_TOTAL ? "counter" : "gauge");
		for (size_t j = i; j < set->n; j++) {
			const struct lsq_counter *o = &set->items[j];

			if (done[j])
				continue;
			family_of(o, &other);
			if (strcmp(other.name, fam.name) != 0)
				continue;
			done[j] = true;
			fputs(fam.name, f);
			put_labels(f, labels, other.cache ? "cache" : NULL,
				   other.cache);
			if (fam.scale == 1)
				fprintf(f, " %llu\n",
					(unsigned long long)o->value);
			else
				fprintf(f, " %.9g\n",
					(double)o->value / fam.scale);
		}
	}
}

static bool has_samples(const struct lsq_histogram *h)
{
	return atomic_load_explicit(&h->count, memory_order_relaxed) != 0;
}

static void render_histogram(FILE *f, const struct lsq_histogram *h,
			     const char *labels)
{
	double scale = h->unit == LSQ_HISTOGRAM_NS ? 1e9 : 1;
	size_t n;
	const uint64_t *b = lsq_histogram_bounds(h->unit, &n);
	uint64_t cumulative = 0;

	for (size_t i = 0; i <= n; i++) {
		cumulative += atomic_load_explicit(&h->buckets[i],
						   memory_order_relaxed);
		fprintf(f, PREFIX "%s_bucket", h->name);
		fprintf(f, "%.*s", (int)strlen(labels) - 1, labels);
		if (h->label)
			put_label(f, h->label, h->value, false);
		if (i < n)
			fprintf(f, ",le=\"%.9g\"} %llu\n", (double)b[i] / scale,
				(unsigned long long)cumulative);
		else
			fprintf(f, ",le=\"+Inf\"} %llu\n",
				(unsigned long long)cumulative);
	}
	fprintf(f, PREFIX "%s_sum", h->name);
	put_labels(f, labels, h->label, h->value);
	fprintf(f, " %.9g\n", (double)atomic_load(&h->sum) / scale);
	/* the buckets' total, so that _count equals the +Inf bucket */
	fprintf(f, PREFIX "%s_count", h->name);
	put_labels(f, labels, h->label, h->value);
	fprintf(f, " %llu\n", (unsigned long long)cumulative);
}

/* The histograms with samples, grouped by family. */
static void render_histograms(FILE *f, const char *labels)
{
	const struct lsq_histogram *all = lsq_histograms();

	for (const struct lsq_histogram *h = all; h; h = h->next) {
		bool shown = false;

		for (const struct lsq_histogram *e = all; e != h; e = e->next)
			shown = shown || (has_samples(e) &&
					  strcmp(e->name, h->name) == 0);
		if (shown || !has_samples(h))
			continue;
		fprintf(f, "# HELP " PREFIX "%s %s\n# TYPE " PREFIX
			"%s histogram\n", h->name, h->help, h->name);
		for (const struct lsq_histogram *e = h; e; e = e->next)
			if (has_samples(e) && strcmp(e->name, h->name) == 0)
				render_histogram(f, e, labels);
	}
}

char *lsq_metrics_render(const struct lsq_counter_set *set,
			 const char *labels, size_t *len)
{
	char *out = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&out, &size);

	if (!f)
		return NULL;
	fprintf(f, "# HELP " PREFIX "build_info The version of sqfs-lazy-mount serving this mount.\n"
		"# TYPE " PREFIX "build_info gauge\n"
		PREFIX "build_info{version=\"%s\"} 1\n", LSQ_VERSION);
	render_counters(f, set, labels);
	render_histograms(f, labels);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	*len = size;
	return out;
}

/* ---- binding ---- */

static int bind_unix(struct lsq_metrics *mx, const char *path, char *err,
		     size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "metrics=unix:%s: path too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	/* a socket left by a daemon that died is replaced; anything else
	 * at that path is not ours to remove */
	if (lstat(path, &st) == 0) {
		int probe;

		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "metrics=unix:%s: exists and is not a socket", path);
			return -1;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 &&
		    connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			snprintf(err, errlen, "metrics=unix:%s: another daemon serves it", path);
			return -1;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	mx->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (mx->listen_fd < 0 ||
	    bind(mx->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		snprintf(err, errlen, "metrics=unix:%s: %s", path,
			 strerror(errno));
		return -1;
	}
	mx->unix_path = strdup(path);
	return 0;
}

static int bind_tcp(struct lsq_metrics *mx, const char *spec, char *err,
		    size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char host[256];
	const char *colon = strrchr(spec, ':');
	const char *given = spec;
	size_t hl;
	int one = 1, rc;

	if (!colon || colon == spec || !colon[1]) {
		snprintf(err, errlen, "metrics=%s: want HOST:PORT or unix:PATH", spec);
		return -1;
	}
	hl = (size_t)(colon - spec);
	if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') {  /* [v6] */
		spec++;
		hl -= 2;
	}
	if (hl >= sizeof(host)) {
		snprintf(err, errlen, "metrics=%s: host too long", given);
		return -1;
	}
	memcpy(host, spec, hl);
	host[hl] = '\0';
	rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "metrics=%s: %s", given, gai_strerror(rc));
		return -1;
	}
	mx->listen_fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (mx->listen_fd >= 0)
		setsockopt(mx->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one,
			   sizeof(one));
	if (mx->listen_fd < 0 ||
	    bind(mx->listen_fd, res->ai_addr, res->ai_addrlen) != 0) {
		snprintf(err, errlen, "metrics=%s: %s", given, strerror(errno));
		freeaddrinfo(res);
		return -1;
	}
	freeaddrinfo(res);
	return 0;
}

int lsq_metrics_bind(struct lsq_metrics *mx, const char *spec,
		     const char *mountpoint, const char *image, char *err,
		     size_t errlen)
{
	char *shown = lsq_url_redact(image);
	FILE *labels;
	size_t labels_len = 0;
	int rc;

	memset(mx, 0, sizeof(*mx));
	mx->listen_fd = -1;
	mx->wake[0] = mx->wake[1] = -1;
	if (strncmp(spec, "unix:", 5) == 0)
		rc = bind_unix(mx, spec + 5, err, errlen);
	else
		rc = bind_tcp(mx, spec, err, errlen);
	if (rc == 0 && listen(mx->listen_fd, 16) != 0) {
		snprintf(err, errlen, "metrics=%s: %s", spec, strerror(errno));
		rc = -1;
	}
	if (rc == 0 && pipe2(mx->wake, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "metrics=%s: %s", spec, strerror(errno));
		rc = -1;
	}
	labels = open_memstream(&mx->labels, &labels_len);
	if (labels) {
		fputc('{', labels);
		put_label(labels, "mountpoint", mountpoint, true);
		put_label(labels, "image", shown ? shown : "", false);
		fputc('}', labels);
		if (fclose(labels) != 0)
			labels = NULL;
	}
	free(shown);
	if (rc == 0 && !labels) {
		snprintf(err, errlen, "metrics=%s: out of memory", spec);
		rc = -1;
	}
	if (rc != 0)
		lsq_metrics_stop(mx);
	return rc;
}

/* ---- serving ---- */

static long ms_since(uint64_t t0)
{
	return (long)((lsq_now_ns() - t0) / 1000000);
}

static void send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static void reply(int fd, const char *status, const char *type,
		  const char *body, size_t len)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, type, len);

	send_all(fd, head, (size_t)n);
	send_all(fd, body, len);
}

static void reply_text(int fd, const char *status, const char *body)
{
	reply(fd, status, "text/plain; charset=utf-8", body, strlen(body));
}

/* One request on fd: read its head within the limits, answer. */
static void serve(struct lsq_metrics *mx, int fd)
{
	char req[REQUEST_MAX];
	size_t got = 0;
	uint64_t t0 = lsq_now_ns();
	enum lsq_metrics_request what = LSQ_MREQ_INCOMPLETE;

	while (what == LSQ_MREQ_INCOMPLETE) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = REQUEST_TIMEOUT_MS - ms_since(t0);
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;  /* too slow: closed without a word */
		n = recv(fd, req + got, REQUEST_MAX - got, 0);
		if (n <= 0)
			return;
		got += (size_t)n;
		what = lsq_metrics_parse(req, got, REQUEST_MAX);
	}
	switch (what) {
	case LSQ_MREQ_TOO_LARGE:
		reply_text(fd, "431 Request Header Fields Too Large",
			   "request head over 8 KiB\n");
		return;
	case LSQ_MREQ_BAD:
		reply_text(fd, "400 Bad Request", "bad request line\n");
		return;
	case LSQ_MREQ_NOT_FOUND:
		reply_text(fd, "404 Not Found", "try /metrics\n");
		return;
	case LSQ_MREQ_METHOD:
		reply_text(fd, "405 Method Not Allowed", "GET only\n");
		return;
	default:
		break;
	}
	if (!mx->body || ms_since(mx->rendered) >= RENDER_MIN_MS) {
		struct lsq_counter_set *set = malloc(sizeof(*set));
		size_t len = 0;
		char *body = NULL;

		if (set) {
			lsq_stats_collect(mx->m, set);
			lsq_counter_set_add(set, "metrics_renders", ++mx->renders,
					    LSQ_COUNTER_TOTAL);
			body = lsq_metrics_render(set, mx->labels, &len);
			free(set);
		}
		if (!body) {
			reply_text(fd, "503 Service Unavailable",
				   "out of memory\n");
			return;
		}
		free(mx->body);
		mx->body = body;
		mx->body_len = len;
		mx->rendered = lsq_now_ns();
	}
	reply(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8",
	      mx->body, mx->body_len);
}

/* Close after an answer the client may still be sending into (an
 * oversized head): closing with unread bytes resets the connection, and
 * the reset can reach the client before the answer. Read what follows
 * for a moment (64 KiB, 200 ms at most), then close. */
static void close_gently(int fd)
{
	char sink[4096];
	uint64_t t0;
	size_t drained = 0;

	shutdown(fd, SHUT_WR);
	t0 = lsq_now_ns();
	while (drained < (64u << 10)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = 200 - ms_since(t0);
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		n = recv(fd, sink, sizeof(sink), 0);
		if (n <= 0)
			break;
		drained += (size_t)n;
	}
	close(fd);
}

static void *metrics_thread(void *arg)
{
	struct lsq_metrics *mx = arg;

	pthread_setname_np(pthread_self(), "sqfs-metrics");
	for (;;) {
		struct pollfd p[2] = { { .fd = mx->listen_fd, .events = POLLIN },
				       { .fd = mx->wake[0], .events = POLLIN } };
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		fd = accept4(mx->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(mx, fd);
		close_gently(fd);
	}
	return NULL;
}

void lsq_metrics_start(struct lsq_metrics *mx, const struct lsq_mount *m)
{
	if (mx->listen_fd < 0)
		return;
	mx->m = m;
	if (pthread_create(&mx->thread, NULL, metrics_thread, mx) != 0) {
		lsq_warn("metrics: no thread to serve them: %s",
			 strerror(errno));
		return;
	}
	mx->running = true;
}

void lsq_metrics_stop(struct lsq_metrics *mx)
{
	if (mx->running) {
		ssize_t n = write(mx->wake[1], "x", 1);

		(void)n;
		pthread_join(mx->thread, NULL);
		mx->running = false;
	}
	if (mx->listen_fd >= 0)
		close(mx->listen_fd);
	mx->listen_fd = -1;
	for (int i = 0; i < 2; i++)
		if (mx->wake[i] >= 0)
			close(mx->wake[i]);
	mx->wake[0] = mx->wake[1] = -1;
	if (mx->unix_path)
		unlink(mx->unix_path);
	free(mx->unix_path);
	mx->unix_path = NULL;
	free(mx->labels);
	mx->labels = NULL;
	free(mx->body);
	mx->body = NULL;
}
