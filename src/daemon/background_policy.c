/* SPDX-License-Identifier: MIT */
/* background_policy.c - -o background= (see background_policy.h). */
#include "daemon/background_policy.h"

#include "common/log.h"
#include "lsq/error.h"
#include "lsq/source.h"

void lsq_background_policy_start(const struct lsq_mount_options *opt,
				 struct lsq_image *img)
{
	bool remote = lsq_source_is_url(opt->image);
	struct lsq_cache_options co = lsq_mount_cache_options(opt, remote);
	struct lsq_background_options bo = { 0 };
	double fraction = opt->background < 0 ? 1.0 : opt->background;
	uint64_t want, room;
	int ret;

	/* a local file has nothing to hide: the page cache reads ahead */
	if (opt->background == 0 || (opt->background < 0 && !remote))
		return;
	want = (uint64_t)(fraction *
			  (double)lsq_image_info(img)->bytes_used);
	/* cache_dir keeps the whole image for later mounts. Without it,
	 * an image that fits in the RAM cache (with an eighth to spare
	 * for shards that fill unevenly) is fetched whole: the blocks
	 * readers fetch are its own, so nothing of theirs is evicted, and
	 * a reader that jumps about (a database, a dataset) finds every
	 * block in memory once it is in. A larger one gets half the
	 * cache, leaving the other half to what readers fetch. */
	room = co.dir ? co.dir_bytes
		      : want <= co.block_cache_bytes / 8 * 7
			? want : co.block_cache_bytes / 2;
	if (room == 0) {
		lsq_info("background fetch: off (no block_cache or cache_dir to keep it in)");
		return;
	}
	bo.budget_bytes = want < room ? want : room;
	/* the speculative connections: as many as the readers have, less
	 * one, so the origin sees at most twice max_connections */
	bo.streams = remote && opt->http_opts.max_connections > 1
			     ? opt->http_opts.max_connections - 1 : 1;
	/* auto: only where there is latency to hide, as the latency
	 * windows (src/http/latency_window.h) */
	bo.min_rtt_us = opt->background < 0 ? 2000 : 0;
	ret = lsq_image_background(img, &bo);
	if (ret)
		lsq_warn("background fetch: %s; not fetching",
			 lsq_strerror(ret));
}
