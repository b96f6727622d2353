/* SPDX-License-Identifier: MIT */
/*
 * startup.h - where -o prefetch= takes its profile from, and the start
 * of the image's prefetcher (docs/prefetch.md).
 *
 *   auto (default)  the first of: the profile learned in cache_dir
 *                   (profile/learned.h); the one stored in the
 *                   image (sqfs-lazy-pack --order); for a URL, the one
 *                   its publisher put beside it (URL.profile, fetched
 *                   after the mount, quietly absent)
 *   off             nothing
 *   PATH            a local file, read at mount
 *   URL             fetched like the image (same TLS and header options)
 *
 * URLs are fetched by the prefetch's own thread, off the mount's critical
 * path. A profile that cannot be had is one warning (none for an absent
 * URL.profile), never a failed mount.
 */
#ifndef LSQ_PROFILE_STARTUP_H
#define LSQ_PROFILE_STARTUP_H

#include "lsq/image.h"
#include "lsq/source.h"

/* Where a mount's profile may come from. */
struct lsq_profile_sources {
	const char *want;          /* -o prefetch=; NULL: auto */
	const char *image;         /* the image as given (a URL or a file) */
	const char *learned_path;  /* profile/learned.h; NULL: none */
	/* the image's HTTP options, for a URL profile: same headers and
	 * TLS, not its mirrors or url_command; must outlive the profile */
	const struct lsq_http_options *http;
};

struct lsq_startup_profile {
	char *text;   /* malloc'd, not NUL-terminated; NULL: none */
	size_t len;
	char *name;   /* for messages (a URL without credentials) */
	char *url;    /* fetched by the prefetch's thread; NULL: none */
	bool quiet;   /* url is a guess (URL.profile): absent is fine */
	const struct lsq_http_options *http;  /* for fetching url */
};

/* Before the daemon forks: read a file profile, the learned one or the
 * image's stored one (local reads or the probe's bytes: no request). */
void lsq_startup_profile_load(struct lsq_startup_profile *p,
			      const struct lsq_profile_sources *from,
			      struct lsq_image *img);

/* After the fork: fetch a URL profile, then start the prefetcher with
 * po. */
void lsq_startup_profile_start(struct lsq_startup_profile *p,
			       struct lsq_image *img,
			       const struct lsq_prefetch_options *po);

void lsq_startup_profile_fini(struct lsq_startup_profile *p);

#endif
