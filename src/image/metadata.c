/* SPDX-License-Identifier: MIT */
/*
 * metadata.c - metadata blocks (8 KiB units with a 2-byte header), the
 * cursor that streams across them, and the fixed-entry lookup tables.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_math.h"
#include "common/endian.h"
#include "common/log.h"
#include "image/image_internal.h"
#include "image/verify.h"
#include "lsq/error.h"

int lsq_image_corrupt(struct lsq_image *img, int err, uint64_t offset,
		      const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!img->opened) {
		if (!img->open_detail[0])
			snprintf(img->open_detail, sizeof(img->open_detail),
				 "%.200s at offset 0x%llx", msg,
				 (unsigned long long)offset);
		return err;
	}
	lsq_log_once(offset ^ ((uint64_t)(-err) << 56), LSQ_LOG_ERROR,
		     "%s: %s at offset 0x%llx: %s", img->src->name, msg,
		     (unsigned long long)offset, lsq_strerror(err));
	return err;
}

/* Loader for the metadata cache: one source read covers the header and the
 * largest possible body, clipped to the image. */
int lsq_meta_loader(void *ctx, uint64_t offset, struct lsq_block **out)
{
	struct lsq_image *img = ctx;
	uint64_t end = img->sb.bytes_used;
	uint8_t raw[2 + SQUASHFS_METADATA_SIZE];
	struct lsq_block *blk;
	size_t avail, disk_size, unit = 0; /* unit: signed length */
	uint16_t header;
	int ret;

	if (offset >= end || end - offset < 2)
		return lsq_image_corrupt(img, LSQ_ERR_OUT_OF_BOUNDS, offset,
					 "metadata block header past the end of the image");
	avail = end - offset < sizeof(raw) ? (size_t)(end - offset) : sizeof(raw);
	if (img->verifier) {
		/* Signed: the listed unit, header and body in one checked
		 * read; the header must then agree with its length. */
		const struct lsq_manifest_entry *e =
			lsq_verifier_unit(img->verifier, offset);

		if (!e || e->length < 3 || e->length > avail)
			return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, offset,
						 "no metadata block of the signed manifest here");
		unit = e->length;
		ret = lsq_image_read_unit(img, raw, unit, offset);
	} else {
		ret = lsq_source_read_at(img->src, raw, 2, offset);
	}
	if (ret)
		return ret;
	header = lsq_le16(raw);
	disk_size = header & ~SQUASHFS_COMPRESSED_BIT;
	if (disk_size == 0 || disk_size > SQUASHFS_METADATA_SIZE)
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, offset,
					 "metadata block size %zu invalid",
					 disk_size);
	if (disk_size + 2 > avail)
		return lsq_image_corrupt(img, LSQ_ERR_OUT_OF_BOUNDS, offset,
					 "metadata block of %zu bytes past the end of the image",
					 disk_size);
	if (unit && unit != disk_size + 2)
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, offset,
					 "metadata block of %zu bytes, signed as %zu",
					 disk_size, unit - 2);
	if (!unit) {
		ret = lsq_source_read_at(img->src, raw + 2, disk_size,
					 offset + 2);
		if (ret)
			return ret;
	}

	blk = lsq_block_alloc(SQUASHFS_METADATA_SIZE);
	if (!blk)
		return LSQ_ERR_NOMEM;
	if (header & SQUASHFS_COMPRESSED_BIT) {
		/* the bit set means stored uncompressed */
		memcpy(blk->data, raw + 2, disk_size);
		blk->size = disk_size;
	} else {
		size_t n;

		ret = lsq_codec_decompress(img->codec, raw + 2, disk_size,
					   blk->data, SQUASHFS_METADATA_SIZE,
					   &n);
		if (ret) {
			lsq_block_put(blk);
			return lsq_image_corrupt(img, ret, offset,
						 "metadata block of %zu bytes",
						 disk_size);
		}
		blk->size = n;
	}
	blk->key = offset;
	blk->aux = offset + 2 + disk_size;
	*out = blk;
	return LSQ_OK;
}

int lsq_meta_block_get(struct lsq_image *img, uint64_t offset,
		       struct lsq_block **out)
{
	return lsq_block_cache_get(img->meta_cache, offset, out);
}

void lsq_meta_cursor_init(struct meta_cursor *cur,
			  const struct meta_table *table, uint64_t rel_block,
			  uint32_t offset)
{
	cur->table = table;
	/* May overflow past limit; meta_walk checks before any use. */
	cur->block = table->start + rel_block;
	cur->offset = offset;
	cur->blk = NULL;
}

void lsq_meta_cursor_fini(struct meta_cursor *cur)
{
	lsq_block_put(cur->blk);
	cur->blk = NULL;
}

/* Walk len bytes; copy them into buf when buf is not NULL. On failure the
 * position is undefined (callers give up), the reference is still owned. */
static int meta_walk(struct lsq_image *img, struct meta_cursor *c,
		     uint8_t *buf, size_t len)
{
	while (len > 0) {
		struct lsq_block *blk = c->blk;
		size_t n;
		int ret;

		if (!blk || blk->key != c->block) {
			lsq_meta_cursor_fini(c);
			if (c->block < c->table->start ||
			    c->block >= c->table->limit)
				return lsq_image_corrupt(img, LSQ_ERR_OUT_OF_BOUNDS,
							 c->block,
							 "%s reference outside the table",
							 c->table->name);
			ret = lsq_meta_block_get(img, c->block, &blk);
			if (ret)
				return ret;
			c->blk = blk;
			if (blk->aux > c->table->limit)
				return lsq_image_corrupt(img, LSQ_ERR_OUT_OF_BOUNDS,
							 c->block,
							 "%s block runs past the table",
							 c->table->name);
		}
		if (c->offset >= blk->size) {
			/* Nothing left here: continue in the next block. A
			 * short block followed by more data is what makes
			 * offset exceed size; only full blocks may be left
			 * with the offset at their end. */
			if (blk->size != SQUASHFS_METADATA_SIZE &&
			    c->offset > blk->size)
				return lsq_image_corrupt(img, LSQ_ERR_CORRUPT,
							 c->block,
							 "%s offset %u past a short block of %zu bytes",
							 c->table->name, c->offset,
							 blk->size);
			if (blk->size == 0)
				return lsq_image_corrupt(img, LSQ_ERR_CORRUPT,
							 c->block, "%s empty block",
							 c->table->name);
			c->offset -= (uint32_t)blk->size;
			c->block = blk->aux;
			continue;
		}
		n = blk->size - c->offset;
		if (n > len)
			n = len;
		if (buf) {
			memcpy(buf, blk->data + c->offset, n);
			buf += n;
		}
		c->offset += (uint32_t)n;
		len -= n;
		if (c->offset == blk->size && blk->size == SQUASHFS_METADATA_SIZE) {
			c->offset = 0;
			c->block = blk->aux;
		}
	}
	return LSQ_OK;
}

int lsq_meta_read(struct lsq_image *img, struct meta_cursor *cur, void *buf,
		  size_t len)
{
	return meta_walk(img, cur, buf, len);
}

int lsq_meta_skip(struct lsq_image *img, struct meta_cursor *cur, size_t len)
{
	return meta_walk(img, cur, NULL, len);
}

int lsq_lookup_table_load(struct lsq_image *img, struct lookup_table *t,
			  uint64_t index_start, uint32_t count,
			  uint32_t entry_size, const char *name, char *err,
			  size_t errlen)
{
	uint64_t bytes = (uint64_t)count * entry_size;
	uint32_t nblocks = (uint32_t)((bytes + SQUASHFS_METADATA_SIZE - 1) /
				      SQUASHFS_METADATA_SIZE);
	uint8_t *raw;
	int ret;

	memset(t, 0, sizeof(*t));
	t->name = name;
	t->entry_size = entry_size;
	if (count == 0)
		return LSQ_OK;
	if (lsq_range_outside(index_start, (uint64_t)nblocks * 8,
			      img->sb.bytes_used)) {
		snprintf(err, errlen,
			 "bad %s: index of %u blocks for %u entries at 0x%llx beyond image size 0x%llx",
			 name, nblocks, count, (unsigned long long)index_start,
			 (unsigned long long)img->sb.bytes_used);
		return LSQ_ERR_OUT_OF_BOUNDS;
	}
	raw = malloc((size_t)nblocks * 8);
	t->blocks = calloc(nblocks, sizeof(*t->blocks));
	if (!raw || !t->blocks) {
		free(raw);
		free(t->blocks);
		t->blocks = NULL;
		return LSQ_ERR_NOMEM;
	}
	ret = lsq_image_read_unit(img, raw, (size_t)nblocks * 8, index_start);
	if (ret) {
		snprintf(err, errlen, "cannot read %s index at 0x%llx: %s",
			 name, (unsigned long long)index_start,
			 lsq_strerror(ret));
		goto fail;
	}
	for (uint32_t i = 0; i < nblocks; i++) {
		t->blocks[i] = lsq_le64(raw + 8 * i);
		/* Blocks lie before their own index (that is how every
		 * writer lays them out, and the kernel relies on it). */
		if (t->blocks[i] >= index_start ||
		    t->blocks[i] < SQUASHFS_SUPERBLOCK_SIZE) {
			snprintf(err, errlen,
				 "bad %s: block %u at 0x%llx outside 0x60..0x%llx",
				 name, i, (unsigned long long)t->blocks[i],
				 (unsigned long long)index_start);
			ret = LSQ_ERR_OUT_OF_BOUNDS;
			goto fail;
		}
	}
	free(raw);
	t->nblocks = nblocks;
	t->count = count;
	return LSQ_OK;

fail:
	free(raw);
	free(t->blocks);
	t->blocks = NULL;
	return ret;
}

void lsq_lookup_table_free(struct lookup_table *t)
{
	free(t->blocks);
	t->blocks = NULL;
}

int lsq_lookup_table_read(struct lsq_image *img, const struct lookup_table *t,
			  uint32_t index, void *buf)
{
	uint64_t pos = (uint64_t)index * t->entry_size;
	uint32_t bi = (uint32_t)(pos / SQUASHFS_METADATA_SIZE);
	uint32_t off = (uint32_t)(pos % SQUASHFS_METADATA_SIZE);
	struct lsq_block *blk;
	int ret;

	if (index >= t->count)
		return LSQ_ERR_OUT_OF_BOUNDS;
	ret = lsq_meta_block_get(img, t->blocks[bi], &blk);
	if (ret)
		return ret;
	/* Entry sizes divide 8 KiB, so an entry never straddles blocks. */
	if ((size_t)off + t->entry_size > blk->size) {
		uint64_t at = t->blocks[bi];

		lsq_block_put(blk);
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, at,
					 "%s block too short for entry %u",
					 t->name, index);
	}
	memcpy(buf, blk->data + off, t->entry_size);
	lsq_block_put(blk);
	return LSQ_OK;
}
