/* SPDX-License-Identifier: MIT */
/*
 * startup_profile.h - where -o prefetch= takes its profile from, and the
 * start of the image's prefetcher (docs/prefetch.md).
 *
 *   auto (default)  the first of: the profile learned in cache_dir
 *                   (fuse/learned_profile.h); the one stored in the
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
#ifndef LSQ_FUSE_STARTUP_PROFILE_H
#define LSQ_FUSE_STARTUP_PROFILE_H

#include "fuse/options.h"
#include "lsq/image.h"

struct lsq_startup_profile {
	char *text;   /* malloc'd, not NUL-terminated; NULL: none */
	size_t len;
	char *name;   /* for messages (a URL without credentials) */
	char *url;    /* fetched by the prefetch's thread; NULL: none */
	bool quiet;   /* url is a guess (URL.profile): absent is fine */
	const struct lsq_mount_options *opt;  /* for fetching url */
};

/* Before the daemon forks: read a file profile, the learned one
 * (learned_path, NULL: none) or the image's stored one (local reads or
 * the probe's bytes: no request). */
void lsq_startup_profile_load(struct lsq_startup_profile *p,
			      const struct lsq_mount_options *opt,
			      struct lsq_image *img, const char *learned_path);

/* After the fork: fetch a URL profile, then start the prefetcher. */
void lsq_startup_profile_start(struct lsq_startup_profile *p,
			       const struct lsq_mount_options *opt,
			       struct lsq_image *img);

void lsq_startup_profile_fini(struct lsq_startup_profile *p);

#endif
