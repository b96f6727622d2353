/* SPDX-License-Identifier: MIT */
/*
 * disk_cache.h - a persistent cache of image byte ranges (-o cache_dir=).
 *
 * Keyed by the image's identity (for a URL: URL, size and validator), so a
 * remount of the same image reuses it and a changed image never sees the
 * old bytes; a location (URL) keeps the files of its latest image only. Safe against kill -9 at any moment: every range is checked
 * against its recorded CRC before it is served, so a torn or stale write
 * reads as a miss. One daemon owns an image's cache at a time; a second one
 * gets an error from open and runs without.
 *
 * Thread-safe; no lock is held across file I/O.
 */
#ifndef LSQ_DISK_CACHE_H
#define LSQ_DISK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lsq_disk_cache;

struct lsq_disk_cache_stats {
	uint64_t hits, misses;  /* lookups served / not served */
	uint64_t writes;        /* ranges stored */
	uint64_t corrupt;       /* ranges whose CRC did not match (dropped) */
	uint64_t evictions;     /* ranges dropped to stay under the budget */
	uint64_t bytes;         /* bytes of ranges held now */
	uint64_t budget;        /* the bound on them */
};

/* Open (creating dir with mode 0700 and the files if needed) the cache of
 * the image named by identity (any string; only a hash of it reaches the
 * disk). budget: hard bound on the bytes of ranges kept. location (NULL:
 * none; for a URL its URL and offset, lsq_source.location) keeps one
 * image: the cache of another image opened there before is removed now,
 * or by its daemon at close if one holds it. On failure returns an
 * lsq_err and writes one line to err (e.g. "in use by another daemon"). */
int lsq_disk_cache_open(const char *dir, const char *identity,
			const char *location, uint64_t image_size,
			uint64_t budget, struct lsq_disk_cache **out,
			char *err, size_t errlen);

/* LSQ_OK and len bytes in buf when [offset, offset+len) is cached and
 * intact; LSQ_ERR_NOT_FOUND otherwise. */
int lsq_disk_cache_read(struct lsq_disk_cache *dc, void *buf, size_t len,
			uint64_t offset);

/* Whether the index lists [offset, offset+len) (no I/O, no CRC check:
 * a read may still miss). */
bool lsq_disk_cache_has(struct lsq_disk_cache *dc, size_t len,
			uint64_t offset);

/* Store a range (best effort: a failed write only logs once). */
void lsq_disk_cache_write(struct lsq_disk_cache *dc, const void *buf,
			  size_t len, uint64_t offset);

void lsq_disk_cache_get_stats(struct lsq_disk_cache *dc,
			      struct lsq_disk_cache_stats *out);

/* NULL is ignored. No read or write may be in progress. */
void lsq_disk_cache_close(struct lsq_disk_cache *dc);

#endif
