/* SPDX-License-Identifier: MIT */
/*
 * background_policy.h - -o background=: whether and how much of the image
 * the daemon fetches behind the readers (src/image/background.c).
 */
#ifndef LSQ_DAEMON_BACKGROUND_POLICY_H
#define LSQ_DAEMON_BACKGROUND_POLICY_H

#include "daemon/options.h"
#include "lsq/image.h"

/* Start the background fetch of img as opt says: by default for URLs
 * only, all of the image, bounded by cache_dir's cache_size, else the
 * whole image where it fits in block_cache, else half of block_cache;
 * nothing where neither keeps bytes. Logs one line why
 * not where it cannot start. */
void lsq_background_policy_start(const struct lsq_mount_options *opt,
				 struct lsq_image *img);

#endif
