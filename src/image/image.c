/* SPDX-License-Identifier: MIT */
/*
 * image.c - open an image: superblock, compressor options, lookup tables,
 * table bounds and caches, validated before anything is mounted.
 */
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "image/image_internal.h"
#include "image/verify.h"
#include "lsq/error.h"

#define MiB (1024u * 1024u)

void lsq_image_options_default(struct lsq_image_options *opt)
{
	*opt = (struct lsq_image_options){
		.metadata_cache_bytes = 16 * MiB,
		.data_cache_bytes = 32 * MiB,
		.fragment_cache_blocks = 32,
	};
}

static int read_comp_options(struct lsq_image *img, uint8_t *opts,
			     size_t *len, char *err, size_t errlen)
{
	const struct lsq_manifest_entry *e;
	uint8_t block[2 + 64];
	size_t size, unit = 0; /* unit: the signed length, 0 unsigned */
	int ret;

	if (img->verifier) {
		/* One listed unit: header and options in one checked read. */
		e = lsq_verifier_unit(img->verifier, SQUASHFS_SUPERBLOCK_SIZE);
		if (!e || e->length < 2 || e->length > sizeof(block)) {
			snprintf(err, errlen,
				 "the signed manifest lists no compressor options block at 0x60");
			return LSQ_ERR_CORRUPT;
		}
		unit = e->length;
		ret = lsq_image_read_unit(img, block, unit,
					  SQUASHFS_SUPERBLOCK_SIZE);
	} else {
		ret = lsq_source_read_at(img->src, block, 2,
					 SQUASHFS_SUPERBLOCK_SIZE);
	}
	if (ret)
		goto io;
	size = lsq_le16(block) & ~SQUASHFS_COMPRESSED_BIT;
	/* Options are tiny and always stored raw: they configure the very
	 * decompressor that would be needed to read them. */
	if (!(lsq_le16(block) & SQUASHFS_COMPRESSED_BIT) || size == 0 ||
	    size > 64 || (unit && size + 2 != unit)) {
		snprintf(err, errlen,
			 "bad compressor options: block header 0x%04x at 0x60",
			 lsq_le16(block));
		return LSQ_ERR_CORRUPT;
	}
	if (!unit) {
		ret = lsq_source_read_at(img->src, block + 2, size,
					 SQUASHFS_SUPERBLOCK_SIZE + 2);
		if (ret)
			goto io;
	}
	memcpy(opts, block + 2, size);
	*len = size;
	return LSQ_OK;
io:
	snprintf(err, errlen, "cannot read compressor options at 0x60: %s",
		 lsq_strerror(ret));
	return ret;
}

static int load_ids(struct lsq_image *img, char *err, size_t errlen)
{
	struct lookup_table t;
	int ret;

	ret = lsq_lookup_table_load(img, &t, img->sb.id_table_start,
				    img->sb.id_count, SQUASHFS_ID_SIZE,
				    "id table", err, errlen);
	if (ret)
		return ret;
	img->ids = calloc(img->sb.id_count, sizeof(*img->ids));
	if (!img->ids) {
		lsq_lookup_table_free(&t);
		return LSQ_ERR_NOMEM;
	}
	for (uint32_t i = 0; i < img->sb.id_count; i++) {
		uint8_t b[4];

		ret = lsq_lookup_table_read(img, &t, i, b);
		if (ret) {
			/* the metadata layer's detail says which block and
			 * what is wrong with it */
			snprintf(err, errlen, "bad id table: entry %u unreadable: %s%s%s",
				 i, img->open_detail,
				 img->open_detail[0] ? ": " : "",
				 lsq_strerror(ret));
			break;
		}
		img->ids[i] = lsq_le32(b);
	}
	lsq_lookup_table_free(&t);
	return ret;
}

static int load_xattr_ids(struct lsq_image *img, char *err, size_t errlen)
{
	uint64_t start = img->sb.xattr_id_table_start;
	uint8_t h[SQUASHFS_XATTR_ID_TABLE_HEADER];
	uint64_t kv_start;
	uint32_t count;
	int ret;

	if (start == SQUASHFS_INVALID_BLK || (img->sb.flags & SQUASHFS_NO_XATTR))
		return LSQ_OK;
	if (start + sizeof(h) > img->sb.bytes_used) {
		snprintf(err, errlen, "bad xattr id table: offset 0x%llx beyond image size 0x%llx",
			 (unsigned long long)start,
			 (unsigned long long)img->sb.bytes_used);
		return LSQ_ERR_OUT_OF_BOUNDS;
	}
	ret = lsq_image_read_unit(img, h, sizeof(h), start);
	if (ret) {
		snprintf(err, errlen, "cannot read xattr id table at 0x%llx: %s",
			 (unsigned long long)start, lsq_strerror(ret));
		return ret;
	}
	kv_start = lsq_le64(h);
	count = lsq_le32(h + 8);
	if (kv_start < SQUASHFS_SUPERBLOCK_SIZE || kv_start > start) {
		snprintf(err, errlen, "bad xattr id table: xattr table offset 0x%llx outside 0x60..0x%llx",
			 (unsigned long long)kv_start, (unsigned long long)start);
		return LSQ_ERR_OUT_OF_BOUNDS;
	}
	ret = lsq_lookup_table_load(img, &img->xattr_ids, start + sizeof(h),
				    count, SQUASHFS_XATTR_ID_SIZE,
				    "xattr id table", err, errlen);
	if (ret)
		return ret;
	img->xattr_table.start = kv_start;
	img->xattr_table.limit = count ? img->xattr_ids.blocks[0] : start;
	if (img->xattr_table.limit < kv_start)
		img->xattr_table.limit = kv_start;
	img->xattr_table.name = "xattr table";
	return LSQ_OK;
}

/* The directory table ends where the first block of any later table
 * begins (the kernel's "next_table" rule). */
static uint64_t dir_table_limit(const struct lsq_image *img)
{
	uint64_t limit = img->sb.bytes_used;
	const struct lookup_table *tables[] = {
		&img->frag_table, &img->export_table, &img->xattr_ids,
	};

	if (img->sb.id_table_start < limit)
		limit = img->sb.id_table_start;
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (tables[i]->nblocks && tables[i]->blocks[0] < limit &&
		    tables[i]->blocks[0] > img->sb.directory_table_start)
			limit = tables[i]->blocks[0];
	if (img->xattr_table.start > img->sb.directory_table_start &&
	    img->xattr_table.start < limit)
		limit = img->xattr_table.start;
	return limit;
}

static int create_caches(struct lsq_image *img,
			 const struct lsq_image_options *opt)
{
	size_t frag_bytes = (size_t)opt->fragment_cache_blocks *
			    (img->sb.block_size + 64);
	int ret;

	ret = lsq_block_cache_create(opt->metadata_cache_bytes, 0,
				     lsq_meta_loader, img, &img->meta_cache);
	if (!ret)
		ret = lsq_block_cache_create(frag_bytes, 0, lsq_frag_loader,
					     img, &img->frag_cache);
	if (!ret)
		ret = lsq_block_cache_create(opt->data_cache_bytes, 0, NULL,
					     img, &img->data_cache);
	if (!ret)
		ret = lsq_block_cache_create(4 * MiB, 0, NULL, img,
					     &img->blockidx_cache);
	return ret;
}

int lsq_image_open(struct lsq_source *src, const struct lsq_image_options *opt,
		   struct lsq_image **out, char *errbuf, size_t errlen)
{
	struct lsq_image_options defaults;
	uint8_t raw[SQUASHFS_SUPERBLOCK_SIZE];
	uint8_t comp_opts[64];
	size_t comp_len = 0;
	char dummy[8];
	struct lsq_image *img;
	struct lsq_inode root;
	int ret;

	if (!errbuf || !errlen) {
		errbuf = dummy;
		errlen = sizeof(dummy);
	}
	errbuf[0] = '\0';
	if (!opt) {
		lsq_image_options_default(&defaults);
		opt = &defaults;
	}
	if (src->size < SQUASHFS_SUPERBLOCK_SIZE) {
		snprintf(errbuf, errlen,
			 "not a SquashFS image: %llu bytes, the superblock alone needs 96",
			 (unsigned long long)src->size);
		return LSQ_ERR_CORRUPT;
	}
	img = calloc(1, sizeof(*img));
	if (!img)
		return LSQ_ERR_NOMEM;
	img->src = src;
	img->verifier = opt->verifier;
	ret = lsq_image_read_unit(img, raw, sizeof(raw), 0);
	if (ret) {
		snprintf(errbuf, errlen, "cannot read the superblock: %s",
			 lsq_strerror(ret));
		goto fail;
	}
	ret = lsq_superblock_decode(raw, src->size, &img->sb, errbuf, errlen);
	if (ret)
		goto fail;
	/* Every table lies between the inode table and the end: a remote
	 * source can fetch that whole region in one request now, instead of
	 * one round trip per table and block. */
	lsq_source_advise(src, img->sb.inode_table_start,
			  img->sb.bytes_used - img->sb.inode_table_start);
	if (img->sb.flags & SQUASHFS_COMP_OPT) {
		ret = read_comp_options(img, comp_opts, &comp_len, errbuf, errlen);
		if (ret)
			goto fail;
		img->comp_opts_block = 2 + (uint32_t)comp_len;
	}
	ret = lsq_codec_create(img->sb.compression_id,
			       comp_len ? comp_opts : NULL, comp_len,
			       img->sb.block_size, opt->decomp_contexts,
			       &img->codec);
	if (ret) {
		snprintf(errbuf, errlen, ret == LSQ_ERR_UNSUPPORTED ?
			 "unsupported compressor %s (id %u)" :
			 "bad compressor options for %s (id %u)",
			 lsq_codec_name(img->sb.compression_id),
			 img->sb.compression_id);
		goto fail;
	}
	ret = create_caches(img, opt);
	if (ret)
		goto fail;

	ret = load_ids(img, errbuf, errlen);
	if (!ret && img->sb.fragment_count)
		ret = lsq_lookup_table_load(img, &img->frag_table,
					    img->sb.fragment_table_start,
					    img->sb.fragment_count,
					    SQUASHFS_FRAGMENT_ENTRY_SIZE,
					    "fragment table", errbuf, errlen);
	if (!ret && (img->sb.flags & SQUASHFS_EXPORT) &&
	    img->sb.export_table_start != SQUASHFS_INVALID_BLK)
		ret = lsq_lookup_table_load(img, &img->export_table,
					    img->sb.export_table_start,
					    img->sb.inode_count,
					    SQUASHFS_EXPORT_ENTRY_SIZE,
					    "export table", errbuf, errlen);
	if (!ret)
		ret = load_xattr_ids(img, errbuf, errlen);
	if (ret)
		goto fail;

	img->inode_table = (struct meta_table){
		.start = img->sb.inode_table_start,
		.limit = img->sb.directory_table_start,
		.name = "inode table",
	};
	img->dir_table = (struct meta_table){
		.start = img->sb.directory_table_start,
		.limit = dir_table_limit(img),
		.name = "directory table",
	};

	ret = lsq_image_inode(img, img->sb.root_inode_ref, &root);
	if (ret) {
		snprintf(errbuf, errlen, "bad root inode 0x%llx in the inode table at 0x%llx: %s: %s",
			 (unsigned long long)img->sb.root_inode_ref,
			 (unsigned long long)img->sb.inode_table_start,
			 img->open_detail, lsq_strerror(ret));
		goto fail;
	}
	if (!S_ISDIR(root.mode)) {
		snprintf(errbuf, errlen, "bad root inode 0x%llx: not a directory",
			 (unsigned long long)img->sb.root_inode_ref);
		ret = LSQ_ERR_CORRUPT;
		goto fail;
	}

	img->info = (struct lsq_image_info){
		.bytes_used = img->sb.bytes_used,
		.inode_count = img->sb.inode_count,
		.block_size = img->sb.block_size,
		.compression_id = img->sb.compression_id,
		.compression_name = lsq_codec_name(img->sb.compression_id),
		.mkfs_time = img->sb.mkfs_time,
		.fragment_count = img->sb.fragment_count,
		.flags = img->sb.flags,
		.has_export_table = img->export_table.count != 0,
		.has_xattrs = img->xattr_ids.count != 0,
	};
	img->opened = true;
	*out = img;
	return LSQ_OK;

fail:
	if (!errbuf[0] && img->open_detail[0])
		snprintf(errbuf, errlen, "%s", img->open_detail);
	img->src = NULL; /* the caller keeps the source on failure */
	img->verifier = NULL; /* and the verifier */
	lsq_image_close(img);
	return ret;
}

void lsq_image_close(struct lsq_image *img)
{
	if (!img)
		return;
	/* their threads read the image */
	lsq_background_destroy(img->background);
	lsq_prefetch_destroy(img->prefetch);
	lsq_block_cache_destroy(img->meta_cache);
	lsq_block_cache_destroy(img->frag_cache);
	lsq_block_cache_destroy(img->data_cache);
	lsq_block_cache_destroy(img->blockidx_cache);
	lsq_codec_destroy(img->codec);
	lsq_lookup_table_free(&img->frag_table);
	lsq_lookup_table_free(&img->export_table);
	lsq_lookup_table_free(&img->xattr_ids);
	free(img->ids);
	lsq_source_destroy(img->src);
	lsq_verifier_destroy(img->verifier);
	free(img);
}

int lsq_image_read_source(struct lsq_image *img, struct lsq_read *rq)
{
	if (img->verifier)
		return lsq_verifier_read(img->verifier, img->src, rq);
	return lsq_source_read(img->src, rq);
}

int lsq_image_read_unit(struct lsq_image *img, void *buf, size_t len,
			uint64_t offset)
{
	struct lsq_read rq = lsq_read_of(buf, len, offset);

	return lsq_image_read_source(img, &rq);
}

const struct lsq_image_info *lsq_image_info(const struct lsq_image *img)
{
	return &img->info;
}

lsq_inode_ref lsq_image_root(const struct lsq_image *img)
{
	return img->sb.root_inode_ref;
}

struct lsq_source *lsq_image_source(const struct lsq_image *img)
{
	return img->src;
}

void lsq_image_statfs(const struct lsq_image *img, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = img->sb.block_size;
	st->f_frsize = img->sb.block_size;
	st->f_blocks = ((img->sb.bytes_used - 1) >> img->sb.block_log) + 1;
	st->f_files = img->sb.inode_count;
	st->f_namemax = SQUASHFS_NAME_LEN;
	st->f_flag = ST_RDONLY;
}

/* A decompressed cache's counters, named PREFIX_hits and so on. */
static void cache_counters(const struct lsq_block_cache *cache,
			   const char *const names[5], lsq_counter_fn fn,
			   void *ctx)
{
	struct lsq_block_cache_stats cs;

	lsq_block_cache_get_stats((struct lsq_block_cache *)cache, &cs);
	fn(ctx, names[0], cs.hits, LSQ_COUNTER_TOTAL);
	fn(ctx, names[1], cs.misses, LSQ_COUNTER_TOTAL);
	fn(ctx, names[2], cs.evictions, LSQ_COUNTER_TOTAL);
	fn(ctx, names[3], cs.bytes, LSQ_COUNTER_GAUGE);
	fn(ctx, names[4], cs.budget, LSQ_COUNTER_GAUGE);
}

void lsq_image_counters(const struct lsq_image *img, lsq_counter_fn fn,
			void *ctx)
{
	static const char *const meta[5] = {
		"meta_hits", "meta_misses", "meta_evictions", "meta_bytes",
		"meta_limit_bytes" };
	static const char *const data[5] = {
		"data_hits", "data_misses", "data_evictions", "data_bytes",
		"data_limit_bytes" };
	static const char *const frag[5] = {
		"frag_hits", "frag_misses", "frag_evictions", "frag_bytes",
		"frag_limit_bytes" };
	uint64_t calls, ns;

	fn(ctx, "source_reads", atomic_load(&img->src->stats.reads),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "source_bytes", atomic_load(&img->src->stats.bytes_read),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "source_failures", atomic_load(&img->src->stats.failures),
	   LSQ_COUNTER_TOTAL);
	cache_counters(img->meta_cache, meta, fn, ctx);
	cache_counters(img->data_cache, data, fn, ctx);
	fn(ctx, "data_direct",
	   atomic_load_explicit(&img->direct_blocks, memory_order_relaxed),
	   LSQ_COUNTER_TOTAL);
	cache_counters(img->frag_cache, frag, fn, ctx);
	lsq_codec_get_stats(img->codec, &calls, &ns);
	fn(ctx, "decompress_calls", calls, LSQ_COUNTER_TOTAL);
	fn(ctx, "decompress_ns", ns, LSQ_COUNTER_TOTAL);
	lsq_source_counters(img->src, fn, ctx);
	lsq_prefetch_counters(img->prefetch, fn, ctx);
	lsq_background_counters(img->background, fn, ctx);
	if (img->verifier)
		lsq_verifier_counters(img->verifier, fn, ctx);
}
