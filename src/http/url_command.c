/* SPDX-License-Identifier: MIT */
/*
 * url_command.c - run -o url_command=, read a signed URL's expiry, keep
 * the current URL (url_command.h has the contract).
 *
 * The command runs with posix_spawnp(), not fork(): the daemon is
 * multithreaded by the time a URL expires, and posix_spawn is safe there.
 * Its pipes are made close-on-exec so that a command started by another
 * thread at the same moment cannot inherit them and keep them open. It
 * gets its own process group, so that a timeout kills whatever it started
 * too, and the default signal mask and dispositions (the daemon blocks
 * its stop signals for a sigwait() thread). Its stdout is read up to a
 * cap and only its first line used; of stderr only the tail is kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/histogram.h"
#include "common/iso8601.h"
#include "common/log.h"
#include "lsq/error.h"
#include "http/url_command.h"

extern char **environ;

#define STDERR_KEEP 512u            /* tail of stderr kept for the reason */
#define SHOWN_STDERR 200            /* at most this much of its last line */
#define EARLY_RETRY_S 10            /* after a failed renewal ahead of time */
#define MIN_INTERVAL_S 1            /* between renewals ahead of time */
#define REFUSED_HOLD_S 1.0          /* a failed run stands this long */

void lsq_url_command_free(char *url)
{
	if (url) {
		explicit_bzero(url, strlen(url));
		free(url);
	}
}

static double monotonic_s(void)
{
	return (double)lsq_now_ns() / 1e9;
}

/* The last non-empty line of what the command wrote to stderr, for the
 * reason: printable ASCII only, cut short, and with the query of any URL
 * in it masked (a failing signer may print the URL it could not use). */
static void last_stderr_line(const char *buf, size_t len, char *out,
			     size_t outlen)
{
	size_t end = len, start, n = 0;
	bool in_query = false;

	out[0] = '\0';
	while (end > 0 && (buf[end - 1] == '\n' || buf[end - 1] == '\r' ||
			   buf[end - 1] == ' '))
		end--;
	start = end;
	while (start > 0 && buf[start - 1] != '\n')
		start--;
	for (size_t i = start; i < end && n + 4 < outlen &&
			       n < SHOWN_STDERR; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c == ' ' || c == '\t')
			in_query = false;
		if (in_query)
			continue;
		if (c == '?' && i >= 3 && memmem(buf + start, i - start, "://",
						 3)) {
			memcpy(out + n, "?***", 4);
			n += 4;
			in_query = true;
			continue;
		}
		out[n++] = (c >= ' ' && c < 0x7f) ? (char)c : '?';
	}
	out[n] = '\0';
}

static bool usable_url(const char *s)
{
	if (strncasecmp(s, "http://", 7) != 0 &&
	    strncasecmp(s, "https://", 8) != 0)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

/* Words of cmd into argv (pointers into copy). -1 when there are none or
 * too many. */
static int split_words(char *copy, char **argv)
{
	int argc = 0;
	char *p = copy;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (argc == LSQ_URL_COMMAND_MAX_ARGS)
			return -1;
		argv[argc++] = p;
		p += strcspn(p, " \t");
		if (*p)
			*p++ = '\0';
	}
	argv[argc] = NULL;
	return argc ? argc : -1;
}

static int spawn(char **argv, int out_fd, int err_fd, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	int ret;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
#if defined(__GLIBC__) && \
	(__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	/* nothing else of ours, /dev/fuse above all: a command that
	 * outlived a dying daemon must not keep its mount alive */
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
					 POSIX_SPAWN_SETSIGMASK |
					 POSIX_SPAWN_SETSIGDEF);
	ret = posix_spawnp(pid, argv[0], &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return ret;
}

/* Read stdout (up to the cap) and the tail of stderr until both close or
 * the deadline passes. Returns false on the deadline. */
static bool collect(int out_fd, int err_fd, double deadline, char *out,
		    size_t *out_len, bool *too_long, char *errbuf,
		    size_t *err_len)
{
	struct pollfd p[2] = { { .fd = out_fd, .events = POLLIN },
			       { .fd = err_fd, .events = POLLIN } };
	char tmp[4096];

	while (p[0].fd >= 0 || p[1].fd >= 0) {
		double left = deadline - monotonic_s();
		int n;

		if (left <= 0)
			return false;
		n = poll(p, 2, (int)(left * 1000) + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return false;
		for (int i = 0; i < 2; i++) {
			ssize_t got;

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			got = read(p[i].fd, tmp, sizeof(tmp));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				p[i].fd = -1;
				continue;
			}
			if (i == 0) {
				size_t room = LSQ_URL_COMMAND_MAX_OUTPUT -
					      *out_len;

				if ((size_t)got > room) {
					*too_long = true;
					got = (ssize_t)room;
				}
				memcpy(out + *out_len, tmp, (size_t)got);
				*out_len += (size_t)got;
			} else {
				/* keep the last STDERR_KEEP bytes */
				size_t g = (size_t)got, keep;

				if (g >= STDERR_KEEP) {
					memcpy(errbuf, tmp + g - STDERR_KEEP,
					       STDERR_KEEP);
					*err_len = STDERR_KEEP;
					continue;
				}
				keep = *err_len + g > STDERR_KEEP
					       ? STDERR_KEEP - g : *err_len;
				memmove(errbuf, errbuf + *err_len - keep, keep);
				memcpy(errbuf + keep, tmp, g);
				*err_len = keep + g;
			}
		}
	}
	return true;
}

/* Wait for the child until the deadline; then kill its group. */
static bool reap(pid_t pid, double deadline, int *status)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		if (r == pid)
			return true;
		if (r < 0 && errno != EINTR)
			return true;  /* not ours to wait for: nothing left */
		if (monotonic_s() >= deadline)
			break;
		nanosleep(&ts, NULL);
	}
	kill(-pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return false;
}

int lsq_url_command_run(const char *cmd, double timeout_s, char **url,
			char *err, size_t errlen)
{
	char *argv[LSQ_URL_COMMAND_MAX_ARGS + 1], *copy, *out = NULL;
	char errbuf[STDERR_KEEP], line[SHOWN_STDERR + 8];
	size_t out_len = 0, err_len = 0, n;
	int out_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };
	int status = 0, ret = LSQ_ERR_IO, e;
	double deadline = monotonic_s() + timeout_s;
	bool in_time, too_long = false;
	pid_t pid;

	*url = NULL;
	copy = strdup(cmd);
	out = malloc(LSQ_URL_COMMAND_MAX_OUTPUT + 1);
	if (!copy || !out) {
		snprintf(err, errlen, "out of memory");
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	if (split_words(copy, argv) < 0) {
		snprintf(err, errlen, "url_command: empty, or more than %d "
			 "words", LSQ_URL_COMMAND_MAX_ARGS);
		ret = LSQ_ERR_INVALID;
		goto out;
	}
	if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
		snprintf(err, errlen, "url_command: pipe: %s", strerror(errno));
		goto out;
	}
	e = spawn(argv, out_pipe[1], err_pipe[1], &pid);
	close(out_pipe[1]);
	close(err_pipe[1]);
	out_pipe[1] = err_pipe[1] = -1;
	if (e) {
		snprintf(err, errlen, "url_command: cannot run %s: %s",
			 argv[0], strerror(e));
		goto out;
	}
	in_time = collect(out_pipe[0], err_pipe[0], deadline, out, &out_len,
			  &too_long, errbuf, &err_len);
	/* past the deadline or the output cap: kill it, wait for nothing */
	in_time = reap(pid, in_time && !too_long ? deadline : 0, &status) &&
		  in_time;
	last_stderr_line(errbuf, err_len, line, sizeof(line));
	out[out_len] = '\0';
	if (too_long) {
		snprintf(err, errlen, "url_command: printed more than %u "
			 "bytes", LSQ_URL_COMMAND_MAX_OUTPUT);
		goto out;
	}
	if (!in_time) {
		snprintf(err, errlen, "url_command: no answer within %g s",
			 timeout_s);
		ret = LSQ_ERR_TIMEOUT;
		goto out;
	}
	if (WIFSIGNALED(status) || (WIFEXITED(status) &&
				    WEXITSTATUS(status) != 0)) {
		if (WIFSIGNALED(status))
			snprintf(err, errlen, "url_command: killed by signal "
				 "%d%s%s", WTERMSIG(status), line[0] ? ": " : "",
				 line);
		else
			snprintf(err, errlen, "url_command: exit status %d%s%s",
				 WEXITSTATUS(status), line[0] ? ": " : "",
				 line);
		goto out;
	}
	n = strcspn(out, "\n");
	while (n > 0 && (out[n - 1] == '\r' || out[n - 1] == ' ' ||
			 out[n - 1] == '\t'))
		n--;
	out[n] = '\0';
	if (n == 0) {
		snprintf(err, errlen, "url_command: printed no URL%s%s",
			 line[0] ? ": " : "", line);
		goto out;
	}
	if (!usable_url(out)) {
		/* never echoed: it may be a URL with a space in its secret */
		snprintf(err, errlen, "url_command: printed something that is "
			 "not an http:// or https:// URL");
		goto out;
	}
	*url = strdup(out);
	if (!*url) {
		snprintf(err, errlen, "out of memory");
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	ret = LSQ_OK;
out:
	for (int i = 0; i < 2; i++) {
		if (out_pipe[i] >= 0)
			close(out_pipe[i]);
		if (err_pipe[i] >= 0)
			close(err_pipe[i]);
	}
	if (out) {
		explicit_bzero(out, LSQ_URL_COMMAND_MAX_OUTPUT + 1);
		free(out);
	}
	free(copy);
	return ret;
}

/* ---- expiry ---- */

/* Seconds in decimal, up to 12 digits. */
static int parse_seconds(const char *s, size_t len, int64_t *out)
{
	int64_t v = 0;

	if (len == 0 || len > 12)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

/* The value of query parameter name (case-insensitive name), undecoded,
 * as [*val, *val + *len). */
static bool query_param(const char *url, const char *name, const char **val,
			size_t *len)
{
	const char *q = strchr(url, '?');
	size_t nlen = strlen(name);

	if (!q)
		return false;
	for (const char *p = q + 1; *p && *p != '#';) {
		size_t plen = strcspn(p, "&#");

		if (plen > nlen && p[nlen] == '=' &&
		    strncasecmp(p, name, nlen) == 0) {
			*val = p + nlen + 1;
			*len = plen - nlen - 1;
			return true;
		}
		p += plen;
		if (*p == '&')
			p++;
	}
	return false;
}

/* Date plus lifetime, as the V4 signatures have them. */
static int date_plus_expires(const char *url, const char *date_name,
			     const char *expires_name, int64_t *expires,
			     int64_t *issued)
{
	const char *d, *e;
	size_t dl, el;
	int64_t t, life;

	if (!query_param(url, date_name, &d, &dl) ||
	    !query_param(url, expires_name, &e, &el) ||
	    lsq_parse_iso8601_basic(d, dl, &t) || parse_seconds(e, el, &life))
		return -1;
	*issued = t;
	*expires = t + life;
	return 0;
}

int lsq_url_expiry(const char *url, int64_t *expires, int64_t *issued)
{
	const char *v;
	size_t len;
	char iso[64], *q;

	if (!date_plus_expires(url, "X-Amz-Date", "X-Amz-Expires", expires,
			       issued) ||
	    !date_plus_expires(url, "X-Goog-Date", "X-Goog-Expires", expires,
			       issued))
		return 0;
	if (query_param(url, "Expires", &v, &len) &&
	    !parse_seconds(v, len, expires)) {
		*issued = 0;
		return 0;
	}
	/* Azure SAS: se=2026-11-25T20:00:00Z, ':' maybe percent-encoded */
	if (query_param(url, "se", &v, &len) && len < sizeof(iso)) {
		q = iso;
		for (size_t i = 0; i < len; i++) {
			if (v[i] == '%' && i + 2 < len && v[i + 1] == '3' &&
			    (v[i + 2] == 'A' || v[i + 2] == 'a')) {
				*q++ = ':';
				i += 2;
			} else {
				*q++ = v[i];
			}
		}
		*q = '\0';
		if (!lsq_parse_iso8601(iso, expires)) {
			*issued = 0;
			return 0;
		}
	}
	return -1;
}

int64_t lsq_url_renew_at(int64_t expires, int64_t issued, int64_t now)
{
	int64_t life = expires - (issued > 0 ? issued : now), margin;

	if (life <= 0)
		return expires;
	margin = life / 2 < 60 ? life / 2 : 60;
	if (life / 10 > margin)
		margin = life / 10;
	return expires - margin;
}

/* ---- the renewer ---- */

struct lsq_url_renewer {
	char *cmd;
	char *name;
	double timeout_s;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *url;            /* protected by mu; NULL before the first run */
	unsigned gen;         /* protected by mu; +1 per new URL */
	int64_t renew_at;     /* protected by mu; Unix time; INT64_MAX: never */
	bool running;         /* protected by mu: a run is under way */
	double failed_at;     /* protected by mu; monotonic; 0: last run ok */
	int fail_ret;         /* protected by mu: the last failed run's */
	char fail_why[320];   /* protected by mu */
	atomic_uint_least64_t renewals, failures;
};

struct lsq_url_renewer *lsq_url_renewer_create(const char *cmd,
					       double timeout_s,
					       const char *name)
{
	struct lsq_url_renewer *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->cmd = strdup(cmd);
	r->name = strdup(name);
	if (!r->cmd || !r->name) {
		free(r->cmd);
		free(r->name);
		free(r);
		return NULL;
	}
	r->timeout_s = timeout_s > 0 ? timeout_s : 60;
	r->renew_at = INT64_MAX;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	return r;
}

void lsq_url_renewer_destroy(struct lsq_url_renewer *r)
{
	if (!r)
		return;
	lsq_url_command_free(r->url);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r->cmd);
	free(r->name);
	free(r);
}

/* Get a URL newer than generation gen, one run at a time. Called and
 * returns with r->mu held; the command runs without it. *ran tells
 * whether this call ran the command. */
static int renew_locked(struct lsq_url_renewer *r, unsigned gen, bool *ran,
			char *err, size_t errlen)
{
	char why[sizeof(r->fail_why)] = "", *url = NULL;
	int64_t expires, issued, now;
	int ret;

	*ran = false;
	while (r->running)
		pthread_cond_wait(&r->cv, &r->mu);
	if (r->gen != gen)
		return LSQ_OK;
	if (r->failed_at > 0 && monotonic_s() - r->failed_at < REFUSED_HOLD_S) {
		snprintf(err, errlen, "%s", r->fail_why);
		return r->fail_ret;
	}
	r->running = true;
	pthread_mutex_unlock(&r->mu);
	ret = lsq_url_command_run(r->cmd, r->timeout_s, &url, why,
				  sizeof(why));
	pthread_mutex_lock(&r->mu);
	r->running = false;
	pthread_cond_broadcast(&r->cv);
	*ran = true;
	if (ret) {
		r->failed_at = monotonic_s();
		r->fail_ret = ret;
		snprintf(r->fail_why, sizeof(r->fail_why), "%s", why);
		snprintf(err, errlen, "%s", why);
		atomic_fetch_add(&r->failures, 1);
		return ret;
	}
	now = (int64_t)time(NULL);
	r->renew_at = INT64_MAX;
	if (lsq_url_expiry(url, &expires, &issued) == 0) {
		r->renew_at = lsq_url_renew_at(expires, issued, now);
		/* an URL that is (nearly) expired already must not make
		 * every request run the command */
		if (r->renew_at < now + MIN_INTERVAL_S)
			r->renew_at = now + MIN_INTERVAL_S;
	}
	if (r->url)
		atomic_fetch_add(&r->renewals, 1);
	lsq_url_command_free(r->url);
	r->url = url;
	r->gen++;
	r->failed_at = 0;
	lsq_debug("%s: url_command gave a new URL (%s)", r->name,
		  r->renew_at == INT64_MAX ? "no expiry in it"
					   : "renewed before it expires");
	return LSQ_OK;
}

int lsq_url_renewer_get(struct lsq_url_renewer *r, char **url,
			unsigned *gen, char *err, size_t errlen)
{
	int ret = LSQ_OK;
	bool ran;

	pthread_mutex_lock(&r->mu);
	if (!r->url) {
		ret = renew_locked(r, r->gen, &ran, err, errlen);
	} else if (!r->running && (int64_t)time(NULL) >= r->renew_at) {
		char why[sizeof(r->fail_why)];

		/* ahead of the expiry: on failure the URL still works */
		r->renew_at = (int64_t)time(NULL) + EARLY_RETRY_S;
		if (renew_locked(r, r->gen, &ran, why, sizeof(why)) && ran)
			lsq_warn("%s: renewing the URL before it expires "
				 "failed (%s); trying again in %d s", r->name,
				 why, EARLY_RETRY_S);
	}
	if (!ret && r->url) {
		*url = strdup(r->url);
		*gen = r->gen;
		if (!*url) {
			snprintf(err, errlen, "out of memory");
			ret = LSQ_ERR_NOMEM;
		}
	} else if (!ret) {
		/* another thread's first run failed while we waited */
		snprintf(err, errlen, "%s", r->fail_why);
		ret = r->fail_ret ? r->fail_ret : LSQ_ERR_IO;
	}
	pthread_mutex_unlock(&r->mu);
	return ret;
}

int lsq_url_renewer_refused(struct lsq_url_renewer *r, unsigned gen,
			    char *err, size_t errlen)
{
	bool ran;
	int ret;

	pthread_mutex_lock(&r->mu);
	ret = renew_locked(r, gen, &ran, err, errlen);
	pthread_mutex_unlock(&r->mu);
	return ret;
}

void lsq_url_renewer_get_stats(struct lsq_url_renewer *r,
			       struct lsq_url_renewer_stats *out)
{
	out->renewals = atomic_load(&r->renewals);
	out->failures = atomic_load(&r->failures);
}
