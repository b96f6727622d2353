/* SPDX-License-Identifier: MIT */
/*
 * unit_hash.h - SHA-256 of many units of one file, reading the file once,
 * front to back, while other threads hash what was read.
 */
#ifndef LSQ_UNIT_HASH_H
#define LSQ_UNIT_HASH_H

#include <stddef.h>

#include "format/manifest.h"

/* Set e[i].digest to the SHA-256 of the bytes [e[i].offset,
 * e[i].offset + e[i].length) of the file fd, for e sorted by offset and
 * non-overlapping (as a manifest is). threads hashing threads (0: one per
 * online CPU) run beside the calling thread, which only reads. Returns
 * LSQ_OK, or an lsq_err with a one-line reason in err (a read failed, the
 * file is shorter than a unit). */
int lsq_hash_units(int fd, struct lsq_manifest_entry *e, size_t n,
		   unsigned threads, char *err, size_t errlen);

#endif
