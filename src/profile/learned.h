/* SPDX-License-Identifier: MIT */
/*
 * learned.h - with cache_dir=, every mount notes which files its
 * start reads, and the next mount of the same image location prefetches
 * them (docs/prefetch.md, "Learned profiles").
 *
 * One file per location (the URL without credentials or query, or the
 * image file's real path): cache_dir/profiles/SHA256.prof, a startup
 * profile (profile/profile.h) behind the 16-byte header of an image's
 * profile record (magic, length, CRC-32: profile/record.h), so
 * a damaged or truncated file is told from a good one. Keyed by location,
 * not by the image's identity: the next version published at the same URL
 * starts with what its predecessor's starts read. At unmount the mount's
 * reads are merged in (lsq_profile_merge: this run's files first, files
 * not read by more than LEARN_MAX_MISSED runs in a row dropped) and the file is replaced
 * atomically, so two daemons sharing cache_dir never leave a torn one.
 */
#ifndef LSQ_PROFILE_LEARNED_H
#define LSQ_PROFILE_LEARNED_H

#include <stddef.h>

struct lsq_recorder;

/* The recorder's bounds: the first reads of this many files (a start),
 * the names of this many nodes (a walk of a huge tree costs no more). */
#define LSQ_LEARN_MAX_FILES 4096u
#define LSQ_LEARN_MAX_NODES 65536u

/* The learned profile's file in cache_dir for image (a URL or a file
 * name, as given), malloc'd; NULL when cache_dir is NULL or out of
 * memory. */
char *lsq_learned_profile_path(const char *cache_dir, const char *image);

/* The profile text in path (malloc'd, not NUL-terminated). LSQ_OK;
 * LSQ_ERR_NOT_FOUND (none yet); LSQ_ERR_CORRUPT (damaged or truncated:
 * the caller warns and ignores it); LSQ_ERR_IO, LSQ_ERR_NOMEM. */
int lsq_learned_profile_read(const char *path, char **text, size_t *len);

/* Merge what rec saw into path and replace it. Logs one line at debug
 * level, or a warning when it cannot be written. */
void lsq_learned_profile_save(const char *path, struct lsq_recorder *rec);

#endif
