/* SPDX-License-Identifier: MIT */
/*
 * walk.h - walk a whole image, printing one manifest line per path:
 *   PATH mode=%o ino= uid= gid= size= mtime= nlink= blocks= [rdev=M:m]
 *   [target=...] [fnv=CONTENT_HASH] [xattr:NAME=LEN:HASH]...
 * The same format is produced from a kernel mount by the tests, so the two
 * can be diffed. Used by sqfs-lazy-cat, the unit tests and the fuzzer.
 */
#ifndef LSQ_WALK_H
#define LSQ_WALK_H

#include <stdio.h>

#include "lsq/image.h"

/* Walk the subtree at ino (named path, "" for the root), visiting at most
 * max_nodes entries. Errors on one path are reported to stderr when report
 * is set and the walk goes on; returns the first error met, 0 if none.
 * out may be NULL (fuzzing). Also checks that lookup finds every name
 * readdir lists. */
int lsq_walk(struct lsq_image *img, const struct lsq_inode *ino,
	     const char *path, FILE *out, bool report,
	     unsigned long max_nodes);

/* FNV-1a 64, the manifest's content hash. */
uint64_t lsq_walk_fnv(uint64_t h, const void *p, size_t n);
#define LSQ_WALK_FNV_INIT 0xcbf29ce484222325ull

#endif
