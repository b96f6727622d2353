/* SPDX-License-Identifier: MIT */
/*
 * status.c - sqfs-lazy-mount --stats and --status: a running mount's
 * counters (LSQ_STATS_XATTR) as they are, or with what the daemon says of
 * itself (LSQ_INFO_XATTR) as a summary a person reads in a few lines.
 */
#include "daemon/status.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "fuse/mount.h"

/* The root's xattr name of mountpoint, malloc'd and NUL-terminated (*len
 * its length); NULL with errno set. The value can grow between the size
 * probe and the read: a few tries. */
static char *read_root_xattr(const char *mountpoint, const char *name,
			     ssize_t *len)
{
	char *buf = NULL;

	*len = -1;
	for (int tries = 0; tries < 5; tries++) {
		char *nbuf;

		*len = getxattr(mountpoint, name, NULL, 0);
		if (*len < 0)
			break;
		nbuf = realloc(buf, (size_t)*len + 1);
		if (!nbuf) {
			errno = ENOMEM;
			*len = -1;
			break;
		}
		buf = nbuf;
		*len = getxattr(mountpoint, name, buf, (size_t)*len);
		if (*len >= 0 || errno != ERANGE)
			break;
	}
	if (*len < 0) {
		int e = errno;

		free(buf);
		errno = e;
		return NULL;
	}
	buf[*len] = '\0';
	return buf;
}

static int report_error(const char *mountpoint)
{
	int e = errno;

	if (e == ENODATA || e == ENOTSUP)
		lsq_err_log("%s: no statistics here (not the root of a "
			    "sqfs-lazy mount?)", mountpoint);
	else
		lsq_err_log("%s: %s", mountpoint, strerror(e));
	return 1;
}

int lsq_print_stats(const char *mountpoint)
{
	ssize_t len;
	char *buf = read_root_xattr(mountpoint, LSQ_STATS_XATTR, &len);

	if (!buf)
		return report_error(mountpoint);
	fwrite(buf, 1, (size_t)len, stdout);
	if (len > 0 && buf[len - 1] != '\n')
		putchar('\n');
	free(buf);
	return fflush(stdout) == 0 ? 0 : 1;
}

/* ---- --status ---- */

/* The value of key in "key value\n" text, or "" (points into text). */
static const char *field(const char *text, const char *key, size_t *vlen)
{
	size_t kl = strlen(key);

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);

		if (ll > kl && strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			*vlen = ll - kl - 1;
			return p + kl + 1;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	*vlen = 0;
	return "";
}

static uint64_t num(const char *text, const char *key)
{
	size_t n;
	const char *v = field(text, key, &n);

	return n ? strtoull(v, NULL, 10) : 0;
}

/* 12.3 MiB */
static const char *size_str(uint64_t bytes, char *buf, size_t size)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

/* "95% hits" of hits and misses, or "unused". */
static const char *ratio(uint64_t hits, uint64_t misses, char *buf,
			 size_t size)
{
	if (hits + misses == 0)
		snprintf(buf, size, "unused");
	else
		snprintf(buf, size, "%.0f%% hits",
			 100.0 * (double)hits / (double)(hits + misses));
	return buf;
}

/* A bucket's upper bound in ns as "25 ms"; past the last, "over 30 s". */
static const char *ms_bound(uint64_t ns, char *buf, size_t size)
{
	if (ns == UINT64_MAX)
		snprintf(buf, size, "over 30 s");
	else if (ns >= 1000000000u)
		snprintf(buf, size, "%g s", (double)ns / 1e9);
	else
		snprintf(buf, size, "%g ms", (double)ns / 1e6);
	return buf;
}

static void ago(time_t then, char *buf, size_t size)
{
	long s = (long)(time(NULL) - then);

	if (s < 120)
		snprintf(buf, size, "%lds ago", s);
	else if (s < 7200)
		snprintf(buf, size, "%ldm ago", s / 60);
	else if (s < 172800)
		snprintf(buf, size, "%ldh %ldm ago", s / 3600, s / 60 % 60);
	else
		snprintf(buf, size, "%ld days ago", s / 86400);
}

static void print_status(const char *mountpoint, const char *st,
			 const char *info)
{
	char a[32], b[32], c[32], d[32], when[64], since[32];
	size_t n;
	const char *image = field(info, "image", &n);
	size_t image_len = n;
	time_t started = (time_t)num(info, "started");
	time_t problem_at = (time_t)num(info, "last_problem_at");
	uint64_t used = num(info, "bytes_used");
	/* a URL's source probes the image at mount: never 0 requests */
	bool remote = num(st, "http_requests") > 0;
	const char *comp;
	size_t comp_len;
	struct tm tm;

	gmtime_r(&started, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	ago(started, since, sizeof(since));
	printf("%s: %.*s\n", mountpoint, (int)image_len, image);
	comp = field(info, "compression", &comp_len);
	printf("  mounted %s (%s), pid %" PRIu64 "; %.*s, %s blocks, "
	       "%s image, %" PRIu64 " inodes\n", when, since,
	       num(info, "pid"), (int)comp_len, comp,
	       size_str(num(info, "block_size"), a, sizeof(a)),
	       size_str(used, b, sizeof(b)), num(info, "inodes"));
	if (remote) {
		uint64_t got = num(st, "http_bytes");

		printf("  fetched %s in %" PRIu64 " requests (%.0f%% of the "
		       "image), %" PRIu64 " retries, %" PRIu64
		       " failed reads; round trip %.1f ms, %" PRIu64
		       " in flight\n", size_str(got, a, sizeof(a)),
		       num(st, "http_requests"),
		       used ? 100.0 * (double)got / (double)used : 0.0,
		       num(st, "http_retries"), num(st, "source_failures"),
		       (double)num(st, "http_rtt_us") / 1000.0,
		       num(st, "http_in_flight"));
		if (num(info, "mirrors") > 1) {
			const char *mirror = field(info, "mirror", &n);

			printf("  mirror in use: %.*s (%" PRIu64 " of %" PRIu64
			       ")\n", (int)n, mirror,
			       num(info, "mirror_index") + 1,
			       num(info, "mirrors"));
		}
		if (num(info, "network_waits"))
			printf("  reads waited for the network %" PRIu64
			       " times: half within %s, 99%% within %s\n",
			       num(info, "network_waits"),
			       ms_bound(num(info, "network_wait_p50_ns"), a,
					sizeof(a)),
			       ms_bound(num(info, "network_wait_p99_ns"), b,
					sizeof(b)));
	} else {
		printf("  read %s from the file in %" PRIu64 " reads, %" PRIu64
		       " failed\n", size_str(num(st, "source_bytes"), a,
					     sizeof(a)),
		       num(st, "source_reads"), num(st, "source_failures"));
	}
	printf("  caches: data %s, metadata %s, fragments %s",
	       ratio(num(st, "data_hits"), num(st, "data_misses"), a,
		     sizeof(a)),
	       ratio(num(st, "meta_hits"), num(st, "meta_misses"), b,
		     sizeof(b)),
	       ratio(num(st, "frag_hits"), num(st, "frag_misses"), c,
		     sizeof(c)));
	if (num(st, "block_cache_hits") + num(st, "block_cache_misses"))
		printf("; RAM block cache %s (%s)",
		       size_str(num(st, "block_cache_bytes"), d, sizeof(d)),
		       ratio(num(st, "block_cache_hits"),
			     num(st, "block_cache_misses"), a, sizeof(a)));
	if (num(st, "disk_cache_hits") + num(st, "disk_cache_misses") +
	    num(st, "cas_hits") + num(st, "cas_misses"))
		printf("; cache_dir %s (%s)",
		       size_str(num(st, "disk_cache_bytes") +
					num(st, "cas_bytes"), d, sizeof(d)),
		       ratio(num(st, "disk_cache_hits") + num(st, "cas_hits"),
			     num(st, "disk_cache_misses") +
				     num(st, "cas_misses"), a, sizeof(a)));
	printf("\n");
	if (num(st, "prefetch_spans") || num(st, "prefetch_files"))
		printf("  prefetch: %" PRIu64 " files (%" PRIu64 " missing), "
		       "%s planned, %" PRIu64 " of %" PRIu64 " spans done\n",
		       num(st, "prefetch_files"), num(st, "prefetch_missing"),
		       size_str(num(st, "prefetch_planned_bytes"), a,
				sizeof(a)),
		       num(st, "prefetch_spans_done"),
		       num(st, "prefetch_spans"));
	if (num(st, "background_units"))
		printf("  background: %s of %s fetched, %s\n",
		       size_str(num(st, "background_bytes"), a, sizeof(a)),
		       size_str(num(st, "background_planned_bytes"), b,
				sizeof(b)),
		       num(st, "background_done") ? "done" : "running");
	if (num(st, "verify_units") + num(st, "verify_mismatches") +
	    num(st, "verify_refused"))
		printf("  verification: %" PRIu64 " units good, %" PRIu64
		       " bad copies, %" PRIu64 " reads refused\n",
		       num(st, "verify_units"), num(st, "verify_mismatches"),
		       num(st, "verify_refused"));
	if (!problem_at) {
		printf("  problems: none logged\n");
	} else {
		const char *line = field(info, "last_problem", &n);

		gmtime_r(&problem_at, &tm);
		strftime(when, sizeof(when), "%H:%M:%S UTC", &tm);
		printf("  problems: %" PRIu64 " in the last minute; the last, "
		       "at %s: %.*s\n", num(info, "problems_last_minute"),
		       when, (int)n, line);
	}
}

int lsq_print_status(const char *mountpoint)
{
	ssize_t slen, ilen;
	char *st = read_root_xattr(mountpoint, LSQ_STATS_XATTR, &slen);
	char *info;

	if (!st)
		return report_error(mountpoint);
	info = read_root_xattr(mountpoint, LSQ_INFO_XATTR, &ilen);
	if (!info) {
		free(st);
		return report_error(mountpoint);
	}
	print_status(mountpoint, st, info);
	free(st);
	free(info);
	return fflush(stdout) == 0 ? 0 : 1;
}

/* ---- --takeover ---- */

/* daemon_pid, takeovers_upgrade and takeover_ready of a running mount;
 * false with errno set when it does not answer. */
static bool takeover_state(const char *mountpoint, uint64_t *pid,
			   uint64_t *upgrades, uint64_t *ready)
{
	ssize_t len;
	char *text = read_root_xattr(mountpoint, LSQ_STATS_XATTR, &len);

	if (!text)
		return false;
	*pid = num(text, "daemon_pid");
	*upgrades = num(text, "takeovers_upgrade");
	*ready = num(text, "takeover_ready");
	free(text);
	return true;
}

int lsq_takeover_mount(const char *mountpoint)
{
	uint64_t pid, upgrades, ready, now_pid, now_upgrades;
	struct timespec nap = { 0, 50 * 1000 * 1000 };

	if (!takeover_state(mountpoint, &pid, &upgrades, &ready))
		return report_error(mountpoint);
	if (!ready || !pid) {
		lsq_err_log("%s: its daemon cannot hand it over (takeover is off: takeover=off, io_uring rings, no connection guard, or a kernel before Linux 6.9); nothing done",
			    mountpoint);
		return 1;
	}
	/* to the main thread: it leaves the request loop */
	if (syscall(SYS_tgkill, (pid_t)pid, (pid_t)pid, SIGUSR2) != 0) {
		lsq_err_log("%s: cannot signal its daemon %" PRIu64 ": %s",
			    mountpoint, pid, strerror(errno));
		return 1;
	}
	for (int i = 0; i < 90 * 20; i++) {
		/* answered once a daemon serves again */
		if (!takeover_state(mountpoint, &now_pid, &now_upgrades,
				    &ready)) {
			lsq_err_log("%s: the mount ended during the takeover: %s",
				    mountpoint, strerror(errno));
			return 1;
		}
		if (now_pid != pid && now_upgrades > upgrades) {
			printf("%s: process %" PRIu64 " serves it now (was %" PRIu64 ")\n",
			       mountpoint, now_pid, pid);
			return fflush(stdout) == 0 ? 0 : 1;
		}
		nanosleep(&nap, NULL);
	}
	lsq_err_log("%s: no new daemon took it over within 90 s (process %" PRIu64 " still serves)",
		    mountpoint, now_pid);
	return 1;
}
