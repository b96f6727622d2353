/* SPDX-License-Identifier: MIT */
/*
 * image_internal.h - state of an opened image, shared by the files of
 * src/image/. Everything here is immutable after lsq_image_open() except
 * the caches, which are thread-safe on their own.
 */
#ifndef LSQ_IMAGE_INTERNAL_H
#define LSQ_IMAGE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cache/block_cache.h"
#include "codec/codec.h"
#include "format/ondisk.h"
#include "format/superblock.h"
#include "lsq/image.h"

/* A metadata table: where its blocks may lie. */
struct meta_table {
	uint64_t start; /* absolute offset of the table's first block */
	uint64_t limit; /* no block of the table may reach past this */
	const char *name;
};

/* "Lookup tables" (ids, fragments, export, xattr ids): an index of u64
 * block locations, read at open, pointing at metadata blocks of fixed-size
 * entries. */
struct lookup_table {
	uint64_t *blocks;  /* absolute offsets of the metadata blocks */
	uint32_t nblocks;
	uint32_t count;    /* number of entries */
	uint32_t entry_size;
	const char *name;
};

struct lsq_image {
	struct lsq_source *src;
	struct lsq_superblock sb;
	struct lsq_image_info info;
	struct lsq_codec *codec;

	struct meta_table inode_table;
	struct meta_table dir_table;
	struct meta_table xattr_table; /* start 0 when the image has none */

	uint32_t *ids;  /* the whole id table, decoded at open */
	struct lookup_table frag_table;
	struct lookup_table export_table;
	struct lookup_table xattr_ids;

	struct lsq_block_cache *meta_cache; /* key: absolute block offset */
	struct lsq_block_cache *frag_cache; /* key: fragment index */
	struct lsq_block_cache *data_cache; /* key: absolute block offset */
	struct lsq_block_cache *blockidx_cache; /* key: inode ref */
	atomic_uint_fast64_t direct_blocks; /* decompressed into a reply */
	/* Fragment readahead state (fragment_ahead in file.c): 1 + the
	 * last fragment index loaded in the high 32 bits (0: none yet), how
	 * many loads in a row were each the block after the one before in
	 * the low 32. */
	atomic_uint_fast64_t frag_seq;
	/* on-disk size of the compressor options block (0: none): the
	 * stored startup profile follows it (profile/record.h) */
	uint32_t comp_opts_block;
	struct lsq_prefetch *prefetch; /* NULL until lsq_image_prefetch */
	struct lsq_background *background; /* NULL until lsq_image_background */
	/* 1 + the offset of the last data or fragment block a reader
	 * loaded (0: none yet): where background fetch looks first */
	atomic_uint_fast64_t read_pos;
	struct lsq_verifier *verifier; /* NULL: no manifest to check */

	/* Until open succeeds, corruption is not logged: open reports it in
	 * its one error line (errbuf), and a refused image must give exactly
	 * one line. The first detail is kept for that line. */
	bool opened;
	char open_detail[256];
};

/* S_IFMT bits of a basic inode type (1..7); 0 for anything else. */
static inline uint32_t lsq_type_mode(unsigned basic_type)
{
	static const uint32_t bits[] = {
		0, S_IFDIR, S_IFREG, S_IFLNK, S_IFBLK, S_IFCHR, S_IFIFO,
		S_IFSOCK,
	};
	return basic_type < 8 ? bits[basic_type] : 0;
}

/* A position in a metadata stream. The cursor keeps a reference to the
 * block it last read from, so the many small reads of a decode cost one
 * cache lookup per block rather than one each. A cursor is owned by one
 * caller; a copy must not share blk (clear it), and every initialised
 * cursor ends with lsq_meta_cursor_fini(). */
struct meta_cursor {
	const struct meta_table *table;
	uint64_t block;   /* absolute offset of the current metadata block */
	uint32_t offset;  /* offset inside its decompressed bytes */
	struct lsq_block *blk; /* referenced block last read, or NULL */
};

/* Position a cursor at ref-style (block relative to table, offset). A
 * cursor that holds a block must be finished first. */
void lsq_meta_cursor_init(struct meta_cursor *cur,
			  const struct meta_table *table, uint64_t rel_block,
			  uint32_t offset);

/* Drop the cursor's block reference; safe to call more than once. */
void lsq_meta_cursor_fini(struct meta_cursor *cur);

/* Read len bytes from the metadata stream and advance. */
int lsq_meta_read(struct lsq_image *img, struct meta_cursor *cur, void *buf,
		  size_t len);

/* Skip len bytes of the metadata stream. */
int lsq_meta_skip(struct lsq_image *img, struct meta_cursor *cur, size_t len);

/* Fetch a decompressed metadata block (referenced; lsq_block_put it).
 * blk->aux is the absolute offset of the following block. */
int lsq_meta_block_get(struct lsq_image *img, uint64_t offset,
		       struct lsq_block **out);

/* Read entry index of a lookup table into buf (entry_size bytes). */
int lsq_lookup_table_read(struct lsq_image *img, const struct lookup_table *t,
			  uint32_t index, void *buf);

/* Load a lookup table's index at open. */
int lsq_lookup_table_load(struct lsq_image *img, struct lookup_table *t,
			  uint64_t index_start, uint32_t count,
			  uint32_t entry_size, const char *name, char *err,
			  size_t errlen);
void lsq_lookup_table_free(struct lookup_table *t);

/* Read a data or fragment block of on-disk size word 'size_word' at
 * absolute offset and decompress it into a new block of up to out_cap
 * bytes (referenced, caller puts). run: the run of data it belongs to
 * (lsq_read.run), or NULL; long_work: told around the read and the
 * decompression (lsq_read.long_work), or NULL. */
int lsq_data_block_load(struct lsq_image *img, uint64_t offset,
			uint32_t size_word, size_t out_cap,
			struct lsq_run *run, lsq_long_work_fn long_work,
			struct lsq_block **out);

/* Loaders registered with the caches. */
int lsq_meta_loader(void *ctx, uint64_t key, struct lsq_block **out);
int lsq_frag_loader(void *ctx, uint64_t key, struct lsq_block **out);

/* Report corruption once per (offset) and return err. */
/* Read one unit of the image (a block, a table's index, the superblock):
 * checked against the signed manifest when there is one. */
int lsq_image_read_source(struct lsq_image *img, struct lsq_read *rq);
/* The same for a plain request. */
int lsq_image_read_unit(struct lsq_image *img, void *buf, size_t len,
			uint64_t offset);

int lsq_image_corrupt(struct lsq_image *img, int err, uint64_t offset,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* file.c */
int lsq_file_read(struct lsq_image *img, const struct lsq_inode *file,
		  void *buf, size_t len, uint64_t offset,
		  lsq_long_work_fn long_work, size_t *nread);

/* Call fn for each compressed unit a read of bytes [first, last] of file
 * would load: its data blocks (sparse ones have none) and the fragment
 * block of its tail, as (image offset, on-disk length). A non-zero return
 * of fn stops the walk and is returned. */
typedef int (*lsq_extent_fn)(void *ctx, uint64_t offset, uint32_t len);
int lsq_file_extents(struct lsq_image *img, const struct lsq_inode *file,
		     uint64_t first, uint64_t last, lsq_extent_fn fn,
		     void *ctx);

/* prefetch.c: stop and free the image's prefetcher (NULL is ignored) */
void lsq_prefetch_destroy(struct lsq_prefetch *pf);
void lsq_prefetch_counters(const struct lsq_prefetch *pf, lsq_counter_fn fn,
			   void *ctx);
/* Whether a prefetch is planning or has spans left (false for NULL). */
bool lsq_prefetch_busy(const struct lsq_prefetch *pf);

/* background.c: stop and free the background fetch (NULL is ignored) */
void lsq_background_destroy(struct lsq_background *bg);
/* background.c: a reader loaded the data block at offset: the rest of
 * the large file it lies in is fetched next (NULL and a plan not made
 * yet are ignored; no lock, a few relaxed atomics) */
void lsq_background_note_load(struct lsq_background *bg, uint64_t offset);
void lsq_background_counters(const struct lsq_background *bg,
			     lsq_counter_fn fn, void *ctx);

#endif
