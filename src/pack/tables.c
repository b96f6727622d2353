/* SPDX-License-Identifier: MIT */
/*
 * tables.c - everything after the data: inode table, directory table (with
 * a directory index for listings that span metadata blocks, placed as
 * mksquashfs places it), fragment, export, id and xattr tables, then the
 * superblock. All metadata is built in memory, 8 KiB blocks compressed
 * with the main thread's compressor (kept raw when that does not shrink
 * them), and appended at ctx->pos in mksquashfs's table order, which is
 * the order the kernel's next_table bounds expect.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/endian.h"
#include "pack/encode.h"
#include "format/ondisk.h"
#include "lsq/error.h"
#include "pack/pack.h"

/* ---- metadata writer ---- */

struct mw {
	uint8_t *out;
	size_t out_len, out_cap;
	uint8_t buf[SQUASHFS_METADATA_SIZE];
	size_t buf_len;
	uint8_t cbuf[SQUASHFS_METADATA_SIZE];
	struct lsq_compressor *comp;
	int err;
};

static void mw_append(struct mw *m, const void *p, size_t n)
{
	if (m->err)
		return;
	if (m->out_len + n > m->out_cap) {
		size_t cap = m->out_cap ? m->out_cap * 2 : 65536;
		uint8_t *o;

		while (cap < m->out_len + n)
			cap *= 2;
		o = realloc(m->out, cap);
		if (!o) {
			m->err = LSQ_ERR_NOMEM;
			return;
		}
		m->out = o;
		m->out_cap = cap;
	}
	memcpy(m->out + m->out_len, p, n);
	m->out_len += n;
}

static void mw_flush(struct mw *m)
{
	uint8_t h[2];
	long r;

	if (m->buf_len == 0 || m->err)
		return;
	r = lsq_compress(m->comp, m->buf, m->buf_len, m->cbuf);
	if (r < 0) {
		m->err = (int)r;
		return;
	}
	if (r > 0) {
		lsq_put16(h, (uint16_t)r);
		mw_append(m, h, 2);
		mw_append(m, m->cbuf, (size_t)r);
	} else {
		lsq_put16(h, (uint16_t)(m->buf_len | SQUASHFS_COMPRESSED_BIT));
		mw_append(m, h, 2);
		mw_append(m, m->buf, m->buf_len);
	}
	m->buf_len = 0;
}

static void mw_write(struct mw *m, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n && !m->err) {
		size_t k = SQUASHFS_METADATA_SIZE - m->buf_len;

		if (k > n)
			k = n;
		memcpy(m->buf + m->buf_len, b, k);
		m->buf_len += k;
		b += k;
		n -= k;
		if (m->buf_len == SQUASHFS_METADATA_SIZE)
			mw_flush(m);
	}
}

static uint64_t mw_ref(const struct mw *m)
{
	return ((uint64_t)m->out_len << 16) | m->buf_len;
}

static void mw_free(struct mw *m)
{
	free(m->out);
	m->out = NULL;
}

/* ---- inodes ---- */

struct tw {
	struct pk_ctx *ctx;
	struct mw inodes, dirs;
	uint64_t *export_refs;
	uint32_t count;
	uint8_t *scratch;
	size_t scratch_cap;
	uint8_t *listing;
	size_t listing_cap;
};

static uint8_t *scratch(struct tw *t, size_t n)
{
	if (n > t->scratch_cap) {
		uint8_t *p = realloc(t->scratch, n);

		if (!p)
			return NULL;
		t->scratch = p;
		t->scratch_cap = n;
	}
	return t->scratch;
}

static unsigned basic_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return SQUASHFS_DIR_TYPE;
	case S_IFREG: return SQUASHFS_REG_TYPE;
	case S_IFLNK: return SQUASHFS_SYMLINK_TYPE;
	case S_IFBLK: return SQUASHFS_BLKDEV_TYPE;
	case S_IFCHR: return SQUASHFS_CHRDEV_TYPE;
	case S_IFIFO: return SQUASHFS_FIFO_TYPE;
	default: return SQUASHFS_SOCKET_TYPE;
	}
}

static void number_inodes(struct tw *t, struct pk_node *d)
{
	for (size_t i = 0; i < d->nchildren; i++)
		if (S_ISDIR(d->children[i]->ino->mode))
			number_inodes(t, d->children[i]);
	for (size_t i = 0; i < d->nchildren; i++) {
		struct pk_inode *c = d->children[i]->ino;

		if (!S_ISDIR(c->mode) && c->number == 0)
			c->number = ++t->count;
	}
	d->ino->number = ++t->count;
}

static void base(uint8_t *b, const struct pk_inode *ino, unsigned type)
{
	lsq_inode_base_encode(b, (uint16_t)type, (uint16_t)(ino->mode & 07777),
			      (uint16_t)ino->uid_idx, (uint16_t)ino->gid_idx,
			      ino->mtime, ino->number);
}

static int write_inode(struct tw *t, struct pk_inode *ino)
{
	bool has_x = ino->xattr_id != SQUASHFS_INVALID_XATTR;
	unsigned type = basic_type(ino->mode);
	uint32_t frag_offset = ino->frag_index == SQUASHFS_INVALID_FRAG ?
			       0 : ino->frag_offset;
	size_t n = 0;
	uint8_t *b;

	b = scratch(t, 64 + (size_t)ino->nblocks * 4 +
			       (type == SQUASHFS_SYMLINK_TYPE ?
					(size_t)ino->size : 0));
	if (!b)
		return LSQ_ERR_NOMEM;
	/* all but files start alike; their extended forms (type + 7) end in
	 * the xattr id */
	if (type != SQUASHFS_REG_TYPE) {
		base(b, ino, has_x ? type + 7 : type);
		lsq_put32(b + 16, ino->nlink);
	}
	switch (type) {
	case SQUASHFS_REG_TYPE:
		if (ino->start > UINT32_MAX || ino->size > UINT32_MAX ||
		    ino->sparse || ino->nlink > 1 || has_x) {
			base(b, ino, SQUASHFS_LREG_TYPE);
			lsq_put64(b + 16, ino->start);
			lsq_put64(b + 24, ino->size);
			lsq_put64(b + 32, ino->sparse);
			lsq_put32(b + 40, ino->nlink);
			lsq_put32(b + 44, ino->frag_index);
			lsq_put32(b + 48, frag_offset);
			lsq_put32(b + 52, ino->xattr_id);
			n = 56;
		} else {
			base(b, ino, SQUASHFS_REG_TYPE);
			lsq_put32(b + 16, (uint32_t)ino->start);
			lsq_put32(b + 20, ino->frag_index);
			lsq_put32(b + 24, frag_offset);
			lsq_put32(b + 28, (uint32_t)ino->size);
			n = 32;
		}
		for (uint32_t i = 0; i < ino->nblocks; i++, n += 4)
			lsq_put32(b + n, ino->blocks[i]);
		break;
	case SQUASHFS_SYMLINK_TYPE:
		lsq_put32(b + 20, (uint32_t)ino->size);
		memcpy(b + 24, ino->target, (size_t)ino->size);
		n = 24 + (size_t)ino->size;
		break;
	case SQUASHFS_BLKDEV_TYPE:
	case SQUASHFS_CHRDEV_TYPE:
		lsq_put32(b + 20, ino->rdev);
		n = 24;
		break;
	default: /* fifo, socket */
		n = 20;
		break;
	}
	if (has_x && type != SQUASHFS_REG_TYPE) {
		lsq_put32(b + n, ino->xattr_id);
		n += 4;
	}
	ino->ref = mw_ref(&t->inodes);
	ino->written = true;
	t->export_refs[ino->number - 1] = ino->ref;
	mw_write(&t->inodes, b, n);
	return t->inodes.err;
}

struct dir_index {
	uint32_t pos;          /* header position in the listing */
	uint32_t start_block;  /* filled while the listing is written */
	const char *name;
	size_t name_len;
};

static int write_dir(struct tw *t, struct pk_node *d, uint32_t parent)
{
	struct pk_inode *ino = d->ino;
	struct dir_index *idx = NULL;
	size_t nidx = 0, len = 0, hdr_pos = 0, last_index = 0;
	uint32_t hdr_count = 0, hdr_block = 0, hdr_base = 0;
	uint32_t dir_block, dir_offset;
	bool has_x = ino->xattr_id != SQUASHFS_INVALID_XATTR;
	int ret;

	for (size_t i = 0; i < d->nchildren; i++) {
		struct pk_node *c = d->children[i];

		if (S_ISDIR(c->ino->mode)) {
			ret = write_dir(t, c, ino->number);
			if (ret)
				return ret;
		}
	}
	for (size_t i = 0; i < d->nchildren; i++) {
		struct pk_inode *c = d->children[i]->ino;

		if (!S_ISDIR(c->mode) && !c->written) {
			ret = write_inode(t, c);
			if (ret)
				return ret;
		}
	}

	/* the listing, in memory first */
	idx = calloc(d->nchildren ? d->nchildren : 1, sizeof(*idx));
	if (!idx)
		return LSQ_ERR_NOMEM;
	for (size_t i = 0; i < d->nchildren; i++) {
		struct pk_node *c = d->children[i];
		uint32_t blk = (uint32_t)(c->ino->ref >> 16);
		int64_t delta = (int64_t)c->ino->number - (int64_t)hdr_base;
		size_t esz = SQUASHFS_DIR_ENTRY_SIZE + c->name_len;
		bool over = len + esz - last_index > SQUASHFS_METADATA_SIZE;

		if (len + esz + SQUASHFS_DIR_HEADER_SIZE > t->listing_cap) {
			size_t cap = t->listing_cap ? t->listing_cap * 2 : 65536;
			uint8_t *p = realloc(t->listing, cap);

			if (!p) {
				free(idx);
				return LSQ_ERR_NOMEM;
			}
			t->listing = p;
			t->listing_cap = cap;
		}
		if (hdr_count == 0 || hdr_count == SQUASHFS_DIR_COUNT ||
		    blk != hdr_block || delta > 32767 || delta < -32768 ||
		    over) {
			if (hdr_count)
				lsq_put32(t->listing + hdr_pos, hdr_count - 1);
			if (over) {
				idx[nidx].pos = (uint32_t)len;
				idx[nidx].name = c->name;
				idx[nidx].name_len = c->name_len;
				nidx++;
				last_index = len;
			}
			hdr_pos = len;
			hdr_count = 0;
			hdr_block = blk;
			hdr_base = c->ino->number;
			lsq_dir_header_encode(t->listing + len, 1, blk, hdr_base);
			len += SQUASHFS_DIR_HEADER_SIZE;
			delta = 0;
		}
		len += lsq_dir_entry_encode(t->listing + len,
					    (uint16_t)(c->ino->ref & 0xffff),
					    (int16_t)delta,
					    (uint16_t)basic_type(c->ino->mode),
					    c->name, c->name_len);
		hdr_count++;
	}
	if (hdr_count)
		lsq_put32(t->listing + hdr_pos, hdr_count - 1);

	/* write it, noting the block each indexed header lands in */
	dir_block = (uint32_t)t->dirs.out_len;
	dir_offset = (uint32_t)t->dirs.buf_len;
	{
		size_t done = 0;

		for (size_t k = 0; k < nidx; k++) {
			mw_write(&t->dirs, t->listing + done, idx[k].pos - done);
			done = idx[k].pos;
			idx[k].start_block = (uint32_t)t->dirs.out_len;
		}
		mw_write(&t->dirs, t->listing + done, len - done);
	}
	if (t->dirs.err) {
		free(idx);
		return t->dirs.err;
	}
	if (t->dirs.out_len > UINT32_MAX) {
		free(idx);
		pk_error("directory table larger than 4 GiB");
		return LSQ_ERR_OVERFLOW;
	}

	/* the directory inode */
	{
		size_t need = 40;
		uint8_t *b;
		size_t n;

		for (size_t k = 0; k < nidx; k++)
			need += SQUASHFS_DIR_INDEX_SIZE + idx[k].name_len;
		b = scratch(t, need);
		if (!b) {
			free(idx);
			return LSQ_ERR_NOMEM;
		}
		if (nidx == 0 && !has_x && len + 3 <= 0xffff) {
			base(b, ino, SQUASHFS_DIR_TYPE);
			lsq_put32(b + 16, dir_block);
			lsq_put32(b + 20, ino->nlink);
			lsq_put16(b + 24, (uint16_t)(len + 3));
			lsq_put16(b + 26, (uint16_t)dir_offset);
			lsq_put32(b + 28, parent);
			n = 32;
		} else {
			base(b, ino, SQUASHFS_LDIR_TYPE);
			lsq_put32(b + 16, ino->nlink);
			lsq_put32(b + 20, (uint32_t)(len + 3));
			lsq_put32(b + 24, dir_block);
			lsq_put32(b + 28, parent);
			lsq_put16(b + 32, (uint16_t)nidx);
			lsq_put16(b + 34, (uint16_t)dir_offset);
			lsq_put32(b + 36, ino->xattr_id);
			n = 40;
			for (size_t k = 0; k < nidx; k++)
				n += lsq_dir_index_encode(b + n, idx[k].pos,
							  idx[k].start_block,
							  idx[k].name,
							  idx[k].name_len);
		}
		free(idx);
		ino->ref = mw_ref(&t->inodes);
		ino->written = true;
		t->export_refs[ino->number - 1] = ino->ref;
		mw_write(&t->inodes, b, n);
	}
	return t->inodes.err;
}

/* ---- xattr values stored out of line ---- */

/* A value longer than its 8-byte reference that was written before is
 * stored as that reference (type | SQUASHFS_XATTR_VALUE_OOL, size 8), as
 * mksquashfs does; the reference points at the first copy's size field.
 * Values are looked up by hash and compared byte for byte. */
struct ool_val {
	const uint8_t *p;     /* the value, inside its set's data */
	uint32_t len;
	uint64_t hash;
	uint64_t ref;         /* kv stream reference of its size field */
};

struct ool_tab {
	struct ool_val *v;    /* open addressing, len 0 = empty */
	size_t cap, n;
};

static uint64_t ool_hash(const void *slot)
{
	return ((const struct ool_val *)slot)->hash;
}

/* Is p[0..len) in the table? Sets *slot to where it is, or would go. */
static const struct ool_val *ool_find(struct ool_tab *t, const uint8_t *p,
				      uint32_t len, uint64_t h, size_t *slot)
{
	size_t j;

	for (j = (size_t)h & (t->cap - 1); t->v[j].len;
	     j = (j + 1) & (t->cap - 1))
		if (t->v[j].hash == h && t->v[j].len == len &&
		    !memcmp(t->v[j].p, p, len))
			break;
	*slot = j;
	return t->v[j].len ? &t->v[j] : NULL;
}

/* Write one serialized set (scan.c's layout per entry: u16 type, u16 name
 * length, name, u32 value length, value) into the kv stream. */
static void write_xset(struct mw *kv, struct ool_tab *ool,
		       const struct pk_xattr_set *set)
{
	const uint8_t *p = set->data, *end = set->data + set->len;

	while (p < end && !kv->err) {
		uint16_t type = lsq_le16(p), nl = lsq_le16(p + 2);
		uint32_t vl = lsq_le32(p + 4 + nl);
		const uint8_t *val = p + 8 + nl;
		const struct ool_val *prev = NULL;
		uint64_t h = 0;
		size_t slot = 0;
		uint8_t b[12];

		if (vl > 8) {
			kv->err = pk_table_reserve(&ool->v, &ool->cap, ool->n,
						   sizeof(*ool->v), 256,
						   ool_hash);
			if (kv->err)
				return;
			h = pk_hash(13, val, vl);
			prev = ool_find(ool, val, vl, h, &slot);
		}
		lsq_put16(b, (uint16_t)(prev ? type | SQUASHFS_XATTR_VALUE_OOL :
					       type));
		lsq_put16(b + 2, nl);
		mw_write(kv, b, 4);
		mw_write(kv, p + 4, nl);
		if (prev) {
			lsq_put32(b, 8);
			lsq_put64(b + 4, prev->ref);
			mw_write(kv, b, 12);
		} else {
			if (vl > 8) {
				/* the first copy: refer to its size field */
				ool->v[slot] = (struct ool_val){
					.p = val, .len = vl, .hash = h,
					.ref = mw_ref(kv)
				};
				ool->n++;
			}
			mw_write(kv, p + 4 + nl, 4 + (size_t)vl);
		}
		p = val + vl;
	}
}

/* ---- tables ---- */

static int write_blob(struct pk_ctx *ctx, const void *p, size_t n)
{
	int ret = pk_pwrite_all(ctx, p, n, ctx->pos);

	ctx->pos += n;
	return ret;
}

/* A lookup table: entries in metadata blocks, then the list of their
 * absolute start offsets, optionally preceded by header (xattr ids).
 * *table_start receives the offset of the header / list. Takes entries,
 * malloc'd by the caller (NULL when that failed), and frees them. */
static int write_lookup(struct pk_ctx *ctx, struct lsq_compressor *comp,
			uint8_t *entries, size_t len,
			const uint8_t *header, size_t header_len,
			uint64_t *table_start)
{
	struct mw m = { .comp = comp };
	size_t nblocks = (len + SQUASHFS_METADATA_SIZE - 1) /
			 SQUASHFS_METADATA_SIZE;
	uint8_t *list = entries ? calloc(nblocks ? nblocks : 1, 8) : NULL;
	uint64_t base_pos = ctx->pos;
	int ret;

	if (!list) {
		free(entries);
		return LSQ_ERR_NOMEM;
	}
	for (size_t i = 0; i < nblocks; i++) {
		size_t off = i * SQUASHFS_METADATA_SIZE;
		size_t n = len - off < SQUASHFS_METADATA_SIZE ?
				   len - off : SQUASHFS_METADATA_SIZE;

		lsq_put64(list + 8 * i, base_pos + m.out_len);
		mw_write(&m, entries + off, n);
		mw_flush(&m);
	}
	ret = m.err;
	if (!ret)
		ret = write_blob(ctx, m.out, m.out_len);
	*table_start = ctx->pos;
	if (!ret && header_len)
		ret = write_blob(ctx, header, header_len);
	if (!ret)
		ret = write_blob(ctx, list, nblocks * 8);
	mw_free(&m);
	free(list);
	free(entries);
	return ret;
}

int pk_write_tables(struct pk_ctx *ctx, const uint8_t *comp_opts,
		    size_t comp_len)
{
	const struct pk_opts *o = ctx->opt;
	struct tw t = { .ctx = ctx };
	struct lsq_superblock sb;
	struct lsq_compressor *comp = lsq_compressor_create(&o->comp);
	uint8_t *entries, sbuf[SQUASHFS_SUPERBLOCK_SIZE];
	uint64_t padded;
	int ret;

	if (!comp)
		return LSQ_ERR_NOMEM;
	t.inodes.comp = comp;
	t.dirs.comp = comp;
	memset(&sb, 0, sizeof(sb));

	number_inodes(&t, ctx->root);
	ctx->inode_count = t.count;
	t.export_refs = calloc(t.count, sizeof(*t.export_refs));
	if (!t.export_refs) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	ret = write_dir(&t, ctx->root, t.count + 1);
	if (ret)
		goto out;
	sb.root_inode_ref = ctx->root->ino->ref;
	mw_flush(&t.inodes);
	mw_flush(&t.dirs);
	ret = t.inodes.err ? t.inodes.err : t.dirs.err;
	if (ret)
		goto out;

	sb.inode_table_start = ctx->pos;
	ret = write_blob(ctx, t.inodes.out, t.inodes.out_len);
	if (ret)
		goto out;
	sb.directory_table_start = ctx->pos;
	ret = write_blob(ctx, t.dirs.out, t.dirs.out_len);
	if (ret)
		goto out;

	/* fragments */
	sb.fragment_count = (uint32_t)ctx->nfrags;
	entries = calloc(ctx->nfrags ? ctx->nfrags : 1,
			 SQUASHFS_FRAGMENT_ENTRY_SIZE);
	for (size_t i = 0; entries && i < ctx->nfrags; i++) {
		lsq_put64(entries + 16 * i, ctx->frag_start[i]);
		lsq_put32(entries + 16 * i + 8, ctx->frag_size[i]);
	}
	/* none: an empty table, which writes nothing */
	ret = write_lookup(ctx, comp, entries, ctx->nfrags * 16, NULL, 0,
			   &sb.fragment_table_start);
	if (ret)
		goto out;

	/* export table */
	sb.export_table_start = SQUASHFS_INVALID_BLK;
	if (!o->no_exports) {
		entries = malloc((size_t)t.count * 8);
		for (uint32_t i = 0; entries && i < t.count; i++)
			lsq_put64(entries + 8 * (size_t)i, t.export_refs[i]);
		ret = write_lookup(ctx, comp, entries, (size_t)t.count * 8,
				   NULL, 0, &sb.export_table_start);
		if (ret)
			goto out;
	}

	/* ids */
	entries = malloc(ctx->nids * 4 + 4);
	for (size_t i = 0; entries && i < ctx->nids; i++)
		lsq_put32(entries + 4 * i, ctx->ids[i]);
	ret = write_lookup(ctx, comp, entries, ctx->nids * 4, NULL, 0,
			   &sb.id_table_start);
	if (ret)
		goto out;

	/* xattrs: key/value stream, then the id table with its header */
	sb.xattr_id_table_start = SQUASHFS_INVALID_BLK;
	if (ctx->nxsets) {
		struct mw kv = { .comp = comp };
		uint8_t hdr[SQUASHFS_XATTR_ID_TABLE_HEADER];
		uint64_t kv_start = ctx->pos;
		struct ool_tab ool = { 0 };

		entries = malloc(ctx->nxsets * SQUASHFS_XATTR_ID_SIZE);
		for (size_t i = 0; entries && i < ctx->nxsets && !kv.err; i++) {
			uint8_t *e = entries + i * SQUASHFS_XATTR_ID_SIZE;

			lsq_put64(e, mw_ref(&kv));
			lsq_put32(e + 8, ctx->xsets[i].count);
			lsq_put32(e + 12, ctx->xsets[i].size);
			write_xset(&kv, &ool, &ctx->xsets[i]);
		}
		free(ool.v);
		mw_flush(&kv);
		ret = kv.err;
		if (!ret)
			ret = write_blob(ctx, kv.out, kv.out_len);
		mw_free(&kv);
		if (ret) {
			free(entries);
			goto out;
		}
		lsq_put64(hdr, kv_start);
		lsq_put32(hdr + 8, (uint32_t)ctx->nxsets);
		lsq_put32(hdr + 12, 0);
		ret = write_lookup(ctx, comp, entries,
				   ctx->nxsets * SQUASHFS_XATTR_ID_SIZE, hdr,
				   sizeof(hdr), &sb.xattr_id_table_start);
		if (ret)
			goto out;
	}

	/* superblock, options, padding */
	sb.magic = SQUASHFS_MAGIC;
	sb.inode_count = t.count;
	sb.mkfs_time = o->have_mtime ? o->mtime :
		       o->have_clamp ? o->clamp : ctx->max_mtime;
	sb.block_size = o->block_size;
	sb.block_log = (uint16_t)o->block_log;
	sb.compression_id = o->comp.id;
	sb.id_count = (uint16_t)ctx->nids;
	sb.version_major = 4;
	sb.version_minor = 0;
	sb.bytes_used = ctx->pos;
	sb.flags = SQUASHFS_DUPLICATE;
	if (!o->no_exports)
		sb.flags |= SQUASHFS_EXPORT;
	if (o->no_fragments)
		sb.flags |= SQUASHFS_NO_FRAG;
	if (o->always_fragments)
		sb.flags |= SQUASHFS_ALWAYS_FRAG;
	if (o->no_xattrs)
		sb.flags |= SQUASHFS_NO_XATTR;
	if (comp_len)
		sb.flags |= SQUASHFS_COMP_OPT;
	lsq_superblock_encode(&sb, sbuf);
	ret = pk_pwrite_all(ctx, sbuf, sizeof(sbuf), 0);
	if (!ret && comp_len) {
		uint8_t h[2];

		lsq_put16(h, (uint16_t)(comp_len | SQUASHFS_COMPRESSED_BIT));
		ret = pk_pwrite_all(ctx, h, 2, SQUASHFS_SUPERBLOCK_SIZE);
		if (!ret)
			ret = pk_pwrite_all(ctx, comp_opts, comp_len,
					    SQUASHFS_SUPERBLOCK_SIZE + 2);
	}
	if (ret)
		goto out;
	padded = (ctx->pos + 4095) & ~(uint64_t)4095;
	/* drop whatever a rewind left behind, then pad with zeros */
	if (ftruncate(ctx->fd, (off_t)ctx->pos) ||
	    ftruncate(ctx->fd, (off_t)padded)) {
		pk_error("%s: cannot set the image size", o->output);
		ret = LSQ_ERR_IO;
		goto out;
	}
	ctx->pos = padded;
out:
	free(t.export_refs);
	free(t.scratch);
	free(t.listing);
	mw_free(&t.inodes);
	mw_free(&t.dirs);
	lsq_compressor_destroy(comp);
	return ret;
}
