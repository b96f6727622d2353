/* SPDX-License-Identifier: MIT */
/*
 * fuzz_common.h - helpers shared by the fuzz targets: open fuzzer bytes as
 * an image through the memory source (small caches, so eviction runs too)
 * and walk the directory tree with bounds on nodes and depth, because a
 * corrupt image can make cycles.
 */
#ifndef LSQ_FUZZ_COMMON_H
#define LSQ_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "lsq/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Open data as an image; returns NULL when the image is refused. */
struct lsq_image *fuzz_open(const uint8_t *data, size_t size);

/* Called once per inode reached (the root first). */
typedef void (*fuzz_visit_fn)(struct lsq_image *img,
			      const struct lsq_inode *ino, void *ctx);

/* Depth-first walk from the root: readdir of every directory, visiting at
 * most max_nodes inodes in total. */
void fuzz_walk(struct lsq_image *img, unsigned max_nodes, fuzz_visit_fn fn,
	       void *ctx);

#endif
