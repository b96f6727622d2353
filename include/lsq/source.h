/* SPDX-License-Identifier: MIT */
/*
 * source.h - the byte-source seam.
 *
 * Every byte the reader takes from an image comes through
 * lsq_source_read_at(). A source knows nothing about SquashFS: a local file,
 * an HTTP range fetcher, a memory buffer and a fault injector all implement
 * the same small vtable.
 *
 * Thread safety: read_at may be called from many threads at once; an
 * implementation must not rely on a shared file position.
 */
#ifndef LSQ_SOURCE_H
#define LSQ_SOURCE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lsq_source;

struct lsq_source_ops {
	/* Read exactly len bytes at offset into buf. A range that reaches
	 * past the end of the source is LSQ_ERR_OUT_OF_BOUNDS (nothing is
	 * read); transport failures are LSQ_ERR_IO / LSQ_ERR_TIMEOUT /
	 * LSQ_ERR_REMOTE_CHANGED. Must be thread-safe. */
	int (*read_at)(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset);
	/* Optional (may be NULL): advise that [offset, offset+len) will be
	 * read soon. Asynchronous sources may start fetching; must not
	 * block. */
	void (*advise)(struct lsq_source *src, uint64_t offset, uint64_t len);
	/* Release everything the source owns, including itself. */
	void (*destroy)(struct lsq_source *src);
};

/* Counters kept by lsq_source_read_at() for every source. */
struct lsq_source_stats {
	atomic_uint_least64_t reads;      /* read_at calls */
	atomic_uint_least64_t bytes_read; /* bytes delivered */
	atomic_uint_least64_t failures;   /* read_at calls that failed */
};

/* Base object; implementations embed it as their first member. */
struct lsq_source {
	const struct lsq_source_ops *ops;
	uint64_t size;      /* bytes readable, fixed for the source's life */
	char *name;         /* for messages: path or URL (owned, malloc'd) */
	struct lsq_source_stats stats;
};

/* Bounds-checked, counted read through the vtable. */
int lsq_source_read_at(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset);

/* Hint; no-op for sources without advise. */
void lsq_source_advise(struct lsq_source *src, uint64_t offset, uint64_t len);

/* Destroy a source; NULL is ignored. */
void lsq_source_destroy(struct lsq_source *src);

/* Open a local file read-only. base_offset skips that many leading bytes
 * (an image embedded in a larger file); the source then starts there.
 * Errors: LSQ_ERR_IO (with errno left set), LSQ_ERR_OUT_OF_BOUNDS when
 * base_offset is past the end of the file. */
int lsq_source_file_open(const char *path, uint64_t base_offset,
			 struct lsq_source **out);

/* A source over a memory buffer. The buffer is copied, so the caller keeps
 * ownership of data. */
int lsq_source_mem_create(const void *data, size_t size, const char *name,
			  struct lsq_source **out);

#ifdef __cplusplus
}
#endif
#endif
