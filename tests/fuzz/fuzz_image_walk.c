/* SPDX-License-Identifier: MIT */
/*
 * fuzz_image_walk.c - libFuzzer target: open the input as an image through
 * the memory source, walk every directory, read every file, symlink and
 * xattr. Must never crash, hang or leak, whatever the bytes.
 */
#include <stddef.h>
#include <stdint.h>

#include "common/log.h"
#include "lsq/image.h"
#include "tools/walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsq_image_options opt;
	struct lsq_source *src;
	struct lsq_image *img;
	struct lsq_inode root;

	lsq_log_set_level(LSQ_LOG_SILENT);
	if (lsq_source_mem_create(data, size, "fuzz", &src))
		return 0;
	lsq_image_options_default(&opt);
	/* small caches so eviction paths run too */
	opt.metadata_cache_bytes = 64 * 1024;
	opt.data_cache_bytes = 256 * 1024;
	opt.fragment_cache_blocks = 2;
	opt.decomp_contexts = 1;
	if (lsq_image_open(src, &opt, &img, NULL, 0)) {
		lsq_source_destroy(src);
		return 0;
	}
	if (!lsq_image_inode(img, lsq_image_root(img), &root))
		(void)lsq_walk(img, &root, "", NULL, false, 5000);
	lsq_image_close(img);
	return 0;
}
