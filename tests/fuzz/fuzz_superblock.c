/* SPDX-License-Identifier: MIT */
/*
 * fuzz_superblock.c - libFuzzer target: the open path only (superblock,
 * id/fragment/export/xattr-id tables), then the facts derived from them
 * (info, statfs, root inode, stat). Must never crash, hang or leak.
 */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsq_image *img = fuzz_open(data, size);
	struct lsq_inode root;
	struct statvfs sv;
	struct stat st;

	if (!img)
		return 0;
	(void)lsq_image_info(img);
	lsq_image_statfs(img, &sv);
	if (!lsq_image_inode(img, lsq_image_root(img), &root))
		lsq_image_stat(img, &root, &st);
	lsq_image_close(img);
	return 0;
}
