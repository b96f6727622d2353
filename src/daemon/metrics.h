/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - -o metrics=HOST:PORT|unix:PATH: the mount's counters in the
 * Prometheus text exposition format at GET /metrics (docs/metrics.md).
 *
 * The address is bound before the mount (a taken port or a bad path is the
 * mount's error line) and served by one thread started after the daemon
 * forked. A scrape reads the same counters as --stats, at that moment.
 */
#ifndef LSQ_DAEMON_METRICS_H
#define LSQ_DAEMON_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/counter_set.h"
#include "fuse/mount.h"

struct lsq_metrics {
	int listen_fd;          /* -1: off */
	int wake[2];            /* a pipe that ends the thread */
	char *unix_path;        /* removed at the end; NULL for TCP */
	char *labels;           /* {mountpoint="...",image="..."} */
	const struct lsq_mount *m;
	pthread_t thread;
	bool running;
	/* the last exposition, answered again to scrapes within
	 * RENDER_MIN_MS of it (metrics.c); the metrics thread's only */
	char *body;
	size_t body_len;
	uint64_t rendered;      /* when, in lsq_now_ns() */
	uint64_t renders;       /* sqfs_lazy_metrics_renders_total */
};

/* Off: what lsq_metrics_stop() may be given before any bind. */
#define LSQ_METRICS_OFF { .listen_fd = -1, .wake = { -1, -1 } }

/* Bind spec ("HOST:PORT", "[V6]:PORT" or "unix:PATH"); mountpoint and the
 * image (shown without credentials) label every sample. On error, a
 * one-line reason in err and -1. */
int lsq_metrics_bind(struct lsq_metrics *mx, const char *spec,
		     const char *mountpoint, const char *image, char *err,
		     size_t errlen);

/* Serve m's counters (after the fork). */
void lsq_metrics_start(struct lsq_metrics *mx, const struct lsq_mount *m);

/* Stop serving, close the socket (and remove a unix one). Safe on
 * LSQ_METRICS_OFF and after a failed bind. */
void lsq_metrics_stop(struct lsq_metrics *mx);

/* The exposition of set into a malloc'd string (*len its length), for the
 * server and the tests; NULL when out of memory. */
char *lsq_metrics_render(const struct lsq_counter_set *set,
			 const char *labels, size_t *len);

#endif
