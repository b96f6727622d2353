/* SPDX-License-Identifier: MIT */
/*
 * startup_profile.h - where -o prefetch= takes its profile from, and the
 * start of the image's prefetcher (docs/prefetch.md).
 *
 *   auto (default)  the profile stored in the image (sqfs-lazy-pack
 *                   --order), if any; nothing otherwise
 *   off             nothing
 *   PATH            a local file, read at mount
 *   URL             fetched like the image (same TLS and header options)
 *
 * A profile that cannot be had is one warning, never a failed mount.
 */
#ifndef LSQ_FUSE_STARTUP_PROFILE_H
#define LSQ_FUSE_STARTUP_PROFILE_H

#include "fuse/options.h"
#include "lsq/image.h"

struct lsq_startup_profile {
	char *text;   /* malloc'd, not NUL-terminated; NULL: none */
	size_t len;
	char *name;   /* for messages (a URL without credentials) */
	bool fetch_url; /* a URL, fetched by lsq_startup_profile_start */
};

/* Before the daemon forks: read a file profile or the image's stored one
 * (local reads or the probe's bytes: no request). */
void lsq_startup_profile_load(struct lsq_startup_profile *p,
			      const struct lsq_mount_options *opt,
			      struct lsq_image *img);

/* After the fork: fetch a URL profile, then start the prefetcher. */
void lsq_startup_profile_start(struct lsq_startup_profile *p,
			       const struct lsq_mount_options *opt,
			       struct lsq_image *img);

void lsq_startup_profile_fini(struct lsq_startup_profile *p);

#endif
