/* SPDX-License-Identifier: MIT */
/*
 * units.c - enumerate the compressed units of an open image, for the
 * signed manifest (docs/manifest.md).
 *
 * A unit is what this reader fetches and then uses whole: the superblock,
 * the compressor options block, the stored startup profile, each metadata
 * block (2-byte header + body), each index array, the xattr id table
 * header, each fragment block and each data block. The list is built from
 * the same structures the reader follows: metadata tables are walked
 * header by header from their start to the start of whatever comes next,
 * lookup-table blocks are taken from their indexes, and file blocks from
 * the block lists of the inodes reachable from the root, so nothing is
 * decompressed but metadata.
 */
#include "image/units.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/checked_math.h"
#include "common/endian.h"
#include "image/image_internal.h"
#include "lsq/error.h"
#include "profile/record.h"

static const char *const kind_names[LSQ_UNIT_KINDS] = {
	[LSQ_UNIT_SUPERBLOCK] = "superblock",
	[LSQ_UNIT_COMP_OPTS] = "compressor options",
	[LSQ_UNIT_PROFILE] = "startup profile",
	[LSQ_UNIT_INODE_BLOCK] = "inode table block",
	[LSQ_UNIT_DIR_BLOCK] = "directory table block",
	[LSQ_UNIT_FRAG_BLOCK] = "fragment table block",
	[LSQ_UNIT_EXPORT_BLOCK] = "export table block",
	[LSQ_UNIT_ID_BLOCK] = "id table block",
	[LSQ_UNIT_XATTR_BLOCK] = "xattr table block",
	[LSQ_UNIT_XATTR_ID_BLOCK] = "xattr id table block",
	[LSQ_UNIT_FRAG_INDEX] = "fragment table index",
	[LSQ_UNIT_EXPORT_INDEX] = "export table index",
	[LSQ_UNIT_ID_INDEX] = "id table index",
	[LSQ_UNIT_XATTR_HEADER] = "xattr id table header",
	[LSQ_UNIT_XATTR_INDEX] = "xattr id table index",
	[LSQ_UNIT_FRAGMENT] = "fragment block",
	[LSQ_UNIT_DATA] = "data block",
};

const char *lsq_unit_kind_name(uint32_t kind)
{
	return kind < LSQ_UNIT_KINDS ? kind_names[kind] : "unit";
}

struct units {
	struct lsq_image *img;
	struct lsq_unit *v;
	size_t n, cap;
	char *err;
	size_t errlen;
	/* the last window of table bytes read, for metadata headers */
	uint8_t win[64 * 1024];
	uint64_t win_start;
	size_t win_len;
};

static int fail(struct units *u, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct units *u, int ret, const char *fmt, ...)
{
	va_list ap;

	if (u->err && u->errlen) {
		va_start(ap, fmt);
		vsnprintf(u->err, u->errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

static int add(struct units *u, uint64_t offset, uint64_t length,
	       uint32_t kind)
{
	if (length == 0 || length > UINT32_MAX)
		return fail(u, LSQ_ERR_CORRUPT, "%s at 0x%llx has length %llu",
			    lsq_unit_kind_name(kind),
			    (unsigned long long)offset,
			    (unsigned long long)length);
	if (u->n == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 1024;
		struct lsq_unit *v = realloc(u->v, cap * sizeof(*v));

		if (!v)
			return LSQ_ERR_NOMEM;
		u->v = v;
		u->cap = cap;
	}
	u->v[u->n++] = (struct lsq_unit){ offset, (uint32_t)length, kind };
	return LSQ_OK;
}

/* The on-disk size of the metadata block at pos (2 + its stored size),
 * which must end at or before limit. Headers are read through a window
 * of table bytes, so a table costs a few reads, not one per block. */
static int meta_block_size(struct units *u, uint64_t pos, uint64_t limit,
			   uint32_t kind, uint32_t *size)
{
	struct lsq_image *img = u->img;
	uint16_t header;
	uint32_t disk;
	int ret;

	if (lsq_range_outside(pos, 2, limit))
		return fail(u, LSQ_ERR_OUT_OF_BOUNDS,
			    "%s header at 0x%llx crosses the table's end 0x%llx",
			    lsq_unit_kind_name(kind), (unsigned long long)pos,
			    (unsigned long long)limit);
	if (pos < u->win_start || pos + 2 > u->win_start + u->win_len) {
		uint64_t n = limit - pos;

		if (n > sizeof(u->win))
			n = sizeof(u->win);
		ret = lsq_source_read_at(img->src, u->win, (size_t)n, pos);
		if (ret)
			return fail(u, ret, "cannot read the %s at 0x%llx: %s",
				    lsq_unit_kind_name(kind),
				    (unsigned long long)pos, lsq_strerror(ret));
		u->win_start = pos;
		u->win_len = (size_t)n;
	}
	header = lsq_le16(u->win + (pos - u->win_start));
	disk = header & ~SQUASHFS_COMPRESSED_BIT;
	if (disk == 0 || disk > SQUASHFS_METADATA_SIZE)
		return fail(u, LSQ_ERR_CORRUPT,
			    "%s at 0x%llx: bad header 0x%04x",
			    lsq_unit_kind_name(kind), (unsigned long long)pos,
			    header);
	if (lsq_range_outside(pos, 2 + (uint64_t)disk, limit))
		return fail(u, LSQ_ERR_OUT_OF_BOUNDS,
			    "%s at 0x%llx (%u bytes) crosses the table's end 0x%llx",
			    lsq_unit_kind_name(kind), (unsigned long long)pos,
			    2 + disk, (unsigned long long)limit);
	*size = 2 + disk;
	return LSQ_OK;
}

/* Every block of a metadata table stored as one chain in [start, limit):
 * each header gives the next block's place, and the last must end
 * exactly at limit, where the next table starts. */
static int walk_chain(struct units *u, uint64_t start, uint64_t limit,
		      uint32_t kind)
{
	uint64_t pos = start;

	while (pos < limit) {
		uint32_t size;
		int ret = meta_block_size(u, pos, limit, kind, &size);

		if (!ret)
			ret = add(u, pos, size, kind);
		if (ret)
			return ret;
		pos += size;
	}
	return LSQ_OK;
}

/* The metadata blocks a lookup table's index points at (each before the
 * index: lsq_lookup_table_load checked that), and the index itself. */
static int lookup_blocks(struct units *u, const uint64_t *blocks,
			 uint32_t nblocks, uint64_t index_start,
			 uint32_t block_kind, uint32_t index_kind)
{
	int ret = LSQ_OK;

	for (uint32_t i = 0; i < nblocks && !ret; i++) {
		uint32_t size;

		ret = meta_block_size(u, blocks[i], index_start, block_kind,
				      &size);
		if (!ret)
			ret = add(u, blocks[i], size, block_kind);
	}
	if (!ret && nblocks)
		ret = add(u, index_start, (uint64_t)nblocks * 8, index_kind);
	return ret;
}

static uint32_t index_blocks(uint32_t count, uint32_t entry_size)
{
	uint64_t bytes = (uint64_t)count * entry_size;

	return (uint32_t)((bytes + SQUASHFS_METADATA_SIZE - 1) /
			  SQUASHFS_METADATA_SIZE);
}

/* The image keeps no copy of the id table's index (ids are decoded at
 * open), so read it again; open has checked that it lies in the image. */
static int id_blocks(struct units *u, uint64_t **out, uint32_t *n)
{
	const struct lsq_superblock *sb = &u->img->sb;
	uint32_t nblocks = index_blocks(sb->id_count, SQUASHFS_ID_SIZE);
	uint64_t *blocks;
	uint8_t *raw;
	int ret;

	*out = NULL;
	*n = 0;
	if (!nblocks)
		return LSQ_OK;
	raw = malloc((size_t)nblocks * 8);
	blocks = calloc(nblocks, sizeof(*blocks));
	if (!raw || !blocks) {
		free(raw);
		free(blocks);
		return LSQ_ERR_NOMEM;
	}
	ret = lsq_source_read_at(u->img->src, raw, (size_t)nblocks * 8,
				 sb->id_table_start);
	for (uint32_t i = 0; !ret && i < nblocks; i++) {
		blocks[i] = lsq_le64(raw + 8 * (size_t)i);
		if (blocks[i] < SQUASHFS_SUPERBLOCK_SIZE ||
		    blocks[i] >= sb->id_table_start)
			ret = fail(u, LSQ_ERR_OUT_OF_BOUNDS,
				   "id table block %u at 0x%llx outside 0x60..0x%llx",
				   i, (unsigned long long)blocks[i],
				   (unsigned long long)sb->id_table_start);
	}
	free(raw);
	if (ret) {
		free(blocks);
		return ret;
	}
	*out = blocks;
	*n = nblocks;
	return LSQ_OK;
}

static void lower_to(uint64_t *limit, uint64_t floor, uint64_t v)
{
	if (v >= floor && v < *limit)
		*limit = v;
}

static void lower_to_blocks(uint64_t *limit, uint64_t floor,
			    const uint64_t *blocks, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		lower_to(limit, floor, blocks[i]);
}

/* The directory table has no recorded end: it ends where the first thing
 * after it starts, among the table blocks, indexes and the xattr area.
 * ">=": a table starting right at directory_table_start means an empty
 * directory table. */
static uint64_t dir_table_end(const struct lsq_image *img,
			      const uint64_t *id_blocks, uint32_t n_id)
{
	const struct lsq_superblock *sb = &img->sb;
	uint64_t floor = sb->directory_table_start;
	uint64_t limit = sb->bytes_used;

	lower_to(&limit, floor, sb->id_table_start);
	lower_to_blocks(&limit, floor, id_blocks, n_id);
	if (img->frag_table.nblocks) {
		lower_to(&limit, floor, sb->fragment_table_start);
		lower_to_blocks(&limit, floor, img->frag_table.blocks,
				img->frag_table.nblocks);
	}
	if (img->export_table.nblocks) {
		lower_to(&limit, floor, sb->export_table_start);
		lower_to_blocks(&limit, floor, img->export_table.blocks,
				img->export_table.nblocks);
	}
	if (img->xattr_table.start) {
		lower_to(&limit, floor, sb->xattr_id_table_start);
		lower_to(&limit, floor, img->xattr_table.start);
		lower_to_blocks(&limit, floor, img->xattr_ids.blocks,
				img->xattr_ids.nblocks);
	}
	return limit;
}

static int table_units(struct units *u)
{
	struct lsq_image *img = u->img;
	const struct lsq_superblock *sb = &img->sb;
	uint64_t *ids;
	uint32_t n_id;
	int ret;

	ret = walk_chain(u, sb->inode_table_start, sb->directory_table_start,
			 LSQ_UNIT_INODE_BLOCK);
	if (!ret)
		ret = id_blocks(u, &ids, &n_id);
	if (ret)
		return ret;
	ret = walk_chain(u, sb->directory_table_start,
			 dir_table_end(img, ids, n_id), LSQ_UNIT_DIR_BLOCK);
	if (!ret)
		ret = lookup_blocks(u, ids, n_id, sb->id_table_start,
				    LSQ_UNIT_ID_BLOCK, LSQ_UNIT_ID_INDEX);
	free(ids);
	if (!ret)
		ret = lookup_blocks(u, img->frag_table.blocks,
				    img->frag_table.nblocks,
				    sb->fragment_table_start,
				    LSQ_UNIT_FRAG_BLOCK, LSQ_UNIT_FRAG_INDEX);
	if (!ret)
		ret = lookup_blocks(u, img->export_table.blocks,
				    img->export_table.nblocks,
				    sb->export_table_start,
				    LSQ_UNIT_EXPORT_BLOCK,
				    LSQ_UNIT_EXPORT_INDEX);
	/* xattrs, as load_xattr_ids reads them: the 16-byte header, then
	 * the index after it, then the key/value area up to the first id
	 * block (or the header when there are no ids) */
	if (!ret && img->xattr_table.start) {
		uint64_t hdr = sb->xattr_id_table_start;

		ret = add(u, hdr, SQUASHFS_XATTR_ID_TABLE_HEADER,
			  LSQ_UNIT_XATTR_HEADER);
		if (!ret)
			ret = lookup_blocks(u, img->xattr_ids.blocks,
					    img->xattr_ids.nblocks,
					    hdr + SQUASHFS_XATTR_ID_TABLE_HEADER,
					    LSQ_UNIT_XATTR_ID_BLOCK,
					    LSQ_UNIT_XATTR_INDEX);
		if (!ret)
			ret = walk_chain(u, img->xattr_table.start,
					 img->xattr_table.limit,
					 LSQ_UNIT_XATTR_BLOCK);
	}
	return ret;
}

static int fragment_units(struct units *u)
{
	struct lsq_image *img = u->img;

	for (uint32_t i = 0; i < img->frag_table.count; i++) {
		uint8_t e[SQUASHFS_FRAGMENT_ENTRY_SIZE];
		uint32_t disk;
		int ret;

		ret = lsq_lookup_table_read(img, &img->frag_table, i, e);
		if (ret)
			return fail(u, ret, "fragment %u: entry unreadable: %s",
				    i, lsq_strerror(ret));
		disk = SQUASHFS_BLOCK_ONDISK_SIZE(lsq_le32(e + 8));
		if (disk == 0 || disk > img->sb.block_size)
			return fail(u, LSQ_ERR_CORRUPT,
				    "fragment %u at 0x%llx: bad size word 0x%x",
				    i, (unsigned long long)lsq_le64(e),
				    lsq_le32(e + 8));
		ret = add(u, lsq_le64(e), disk, LSQ_UNIT_FRAGMENT);
		if (ret)
			return ret;
	}
	return LSQ_OK;
}

/* ---- the tree: every regular file's blocks, each inode once ---- */

struct tree_walk {
	struct units *u;
	uint8_t *seen;            /* bit per inode number */
	lsq_inode_ref *todo;      /* inodes still to visit */
	size_t ntodo, cap;
	int ret;
};

/* Mark an inode number; false when it was seen already (a hard link,
 * or a corrupt image's cycle). */
static int mark(struct tree_walk *w, uint32_t number, bool *fresh)
{
	const struct lsq_superblock *sb = &w->u->img->sb;

	if (number == 0 || number > sb->inode_count)
		return fail(w->u, LSQ_ERR_CORRUPT,
			    "inode number %u outside 1..%u", number,
			    sb->inode_count);
	*fresh = !(w->seen[number / 8] & (1u << (number % 8)));
	w->seen[number / 8] |= (uint8_t)(1u << (number % 8));
	return LSQ_OK;
}

static int push(struct tree_walk *w, lsq_inode_ref ref)
{
	if (w->ntodo == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		lsq_inode_ref *v = realloc(w->todo, cap * sizeof(*v));

		if (!v)
			return LSQ_ERR_NOMEM;
		w->todo = v;
		w->cap = cap;
	}
	w->todo[w->ntodo++] = ref;
	return LSQ_OK;
}

static int dirent_cb(void *ctx, const struct lsq_dirent *e)
{
	struct tree_walk *w = ctx;
	bool fresh;

	if (e->is_dot)
		return 0;
	w->ret = mark(w, e->inode_number, &fresh);
	if (!w->ret && fresh && (S_ISDIR(e->type) || S_ISREG(e->type)))
		w->ret = push(w, e->ref);
	return w->ret ? 1 : 0;
}

static int extent_cb(void *ctx, uint64_t offset, uint32_t len)
{
	return add(ctx, offset, len, LSQ_UNIT_DATA);
}

static int file_units(struct units *u)
{
	struct lsq_image *img = u->img;
	struct tree_walk w = { .u = u };
	struct lsq_inode root;
	bool fresh;
	int ret;

	w.seen = calloc((size_t)img->sb.inode_count / 8 + 1, 1);
	if (!w.seen)
		return LSQ_ERR_NOMEM;
	ret = lsq_image_inode(img, lsq_image_root(img), &root);
	if (ret)
		ret = fail(u, ret, "root inode unreadable: %s",
			   lsq_strerror(ret));
	if (!ret)
		ret = mark(&w, root.inode_number, &fresh);
	if (!ret)
		ret = push(&w, root.ref);
	while (!ret && w.ntodo) {
		struct lsq_inode ino;

		ret = lsq_image_inode(img, w.todo[--w.ntodo], &ino);
		if (ret) {
			ret = fail(u, ret, "inode 0x%llx unreadable: %s",
				   (unsigned long long)w.todo[w.ntodo],
				   lsq_strerror(ret));
		} else if (S_ISDIR(ino.mode)) {
			ret = lsq_image_readdir(img, &ino, 0, dirent_cb, &w);
			if (!ret)
				ret = w.ret;
			else
				ret = fail(u, ret, "directory inode %u unreadable: %s",
					   ino.inode_number, lsq_strerror(ret));
		} else if (S_ISREG(ino.mode)) {
			ret = lsq_file_extents(img, &ino, 0, UINT64_MAX,
					       extent_cb, u);
			if (ret && ret != LSQ_ERR_NOMEM)
				ret = fail(u, ret, "block list of inode %u unreadable: %s",
					   ino.inode_number, lsq_strerror(ret));
		}
	}
	free(w.todo);
	free(w.seen);
	return ret;
}

/* ---- putting it together ---- */

static int cmp_unit(const void *a, const void *b)
{
	const struct lsq_unit *x = a, *y = b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	if (x->length != y->length)
		return x->length < y->length ? -1 : 1;
	return x->kind < y->kind ? -1 : x->kind > y->kind;
}

/* Sort, drop repeats (a shared block is one unit; the lowest kind names
 * it), then insist that units neither overlap nor leave the filesystem:
 * a verifier checks reads unit by unit, which needs one unit per byte. */
static int finish(struct units *u)
{
	uint64_t bytes_used = u->img->sb.bytes_used;
	size_t n = 0;

	qsort(u->v, u->n, sizeof(*u->v), cmp_unit);
	for (size_t i = 0; i < u->n; i++) {
		const struct lsq_unit *c = &u->v[i];

		if (n && u->v[n - 1].offset == c->offset &&
		    u->v[n - 1].length == c->length)
			continue;
		if (lsq_range_outside(c->offset, c->length, bytes_used))
			return fail(u, LSQ_ERR_OUT_OF_BOUNDS,
				    "%s at 0x%llx (%u bytes) reaches past bytes_used 0x%llx",
				    lsq_unit_kind_name(c->kind),
				    (unsigned long long)c->offset, c->length,
				    (unsigned long long)bytes_used);
		if (n && u->v[n - 1].offset + u->v[n - 1].length > c->offset) {
			const struct lsq_unit *p = &u->v[n - 1];

			return fail(u, LSQ_ERR_CORRUPT,
				    "units overlap: %s at 0x%llx (%u bytes) and %s at 0x%llx (%u bytes)",
				    lsq_unit_kind_name(p->kind),
				    (unsigned long long)p->offset, p->length,
				    lsq_unit_kind_name(c->kind),
				    (unsigned long long)c->offset, c->length);
		}
		u->v[n++] = *c;
	}
	u->n = n;
	return LSQ_OK;
}

int lsq_image_units(struct lsq_image *img, struct lsq_unit **out,
		    size_t *count, char *err, size_t errlen)
{
	struct units *u = calloc(1, sizeof(*u));
	char *text;
	size_t len;
	int ret;

	if (!u)
		return LSQ_ERR_NOMEM;
	u->img = img;
	u->err = err;
	u->errlen = errlen;
	if (err && errlen)
		err[0] = '\0';

	ret = add(u, 0, SQUASHFS_SUPERBLOCK_SIZE, LSQ_UNIT_SUPERBLOCK);
	if (!ret && img->comp_opts_block)
		ret = add(u, SQUASHFS_SUPERBLOCK_SIZE, img->comp_opts_block,
			  LSQ_UNIT_COMP_OPTS);
	/* The stored profile, read as the mount reads it: a missing or
	 * damaged record is no record, and then not a unit. */
	if (!ret) {
		ret = lsq_image_stored_profile(img, &text, &len);
		if (!ret) {
			free(text);
			ret = add(u, lsq_profile_record_offset(img->comp_opts_block),
				  LSQ_PROFILE_RECORD_HEADER + (uint64_t)len,
				  LSQ_UNIT_PROFILE);
		} else if (ret == LSQ_ERR_NOT_FOUND ||
			   ret == LSQ_ERR_CORRUPT) {
			ret = LSQ_OK;
		} else {
			ret = fail(u, ret, "cannot read the startup profile: %s",
				   lsq_strerror(ret));
		}
	}
	if (!ret)
		ret = table_units(u);
	if (!ret)
		ret = fragment_units(u);
	if (!ret)
		ret = file_units(u);
	if (!ret)
		ret = finish(u);
	if (ret) {
		if (err && errlen && !err[0])
			snprintf(err, errlen, "%s", lsq_strerror(ret));
		free(u->v);
	} else {
		*out = u->v;
		*count = u->n;
	}
	free(u);
	return ret;
}
