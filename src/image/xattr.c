/* SPDX-License-Identifier: MIT */
/*
 * xattr.c - extended attributes: the xattr id table maps an inode's index to
 * a run of key/value pairs in the xattr metadata stream; a value may live
 * out of line (shared between inodes), reached through a reference.
 *
 * Prefixes are served as the kernel does: type 0 user., 1 trusted.,
 * 2 security.; an empty value is a value.
 */
#include <string.h>
#include <sys/stat.h>

#include "common/endian.h"
#include "image/image_internal.h"
#include "lsq/error.h"

static const char *const prefixes[] = { "user.", "trusted.", "security." };

struct xattr_run {
	struct meta_cursor cur;
	uint32_t count;
};

static int xattr_open(struct lsq_image *img, const struct lsq_inode *inode,
		      struct xattr_run *run)
{
	uint8_t e[SQUASHFS_XATTR_ID_SIZE];
	uint64_t ref;
	int ret;

	memset(run, 0, sizeof(*run));
	if (inode->xattr_index == LSQ_NO_XATTR || !img->xattr_ids.count)
		return LSQ_OK;
	ret = lsq_lookup_table_read(img, &img->xattr_ids, inode->xattr_index, e);
	if (ret)
		return ret;
	ref = lsq_le64(e);
	run->count = lsq_le32(e + 8);
	lsq_meta_cursor_init(&run->cur, &img->xattr_table, ref >> 16,
			     ref & 0xffff);
	return LSQ_OK;
}

struct xattr_key {
	unsigned prefix;   /* index into prefixes, or >= 3 for unknown */
	bool out_of_line;
	char name[256];
	size_t name_len;
};

static int read_key(struct lsq_image *img, struct meta_cursor *cur,
		    struct xattr_key *k)
{
	uint8_t b[4];
	uint16_t type;
	int ret;

	ret = lsq_meta_read(img, cur, b, 4);
	if (ret)
		return ret;
	type = lsq_le16(b);
	k->name_len = lsq_le16(b + 2);
	k->prefix = type & SQUASHFS_XATTR_PREFIX_MASK;
	k->out_of_line = (type & SQUASHFS_XATTR_VALUE_OOL) != 0;
	if (k->name_len >= sizeof(k->name))
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, cur->block,
					 "xattr name of %zu bytes", k->name_len);
	ret = lsq_meta_read(img, cur, k->name, k->name_len);
	if (ret)
		return ret;
	k->name[k->name_len] = '\0';
	return LSQ_OK;
}

/* Step cur over the value that follows key k. */
static int skip_value(struct lsq_image *img, struct meta_cursor *cur,
		      const struct xattr_key *k)
{
	uint8_t b[4];
	uint32_t vsize;
	int ret;

	ret = lsq_meta_read(img, cur, b, 4);
	if (ret)
		return ret;
	vsize = lsq_le32(b);
	if (k->out_of_line && vsize != 8)
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, cur->block,
					 "out-of-line xattr reference of %u bytes",
					 vsize);
	return lsq_meta_skip(img, cur, vsize);
}

/* A value cannot be longer than its whole table decompresses to: every
 * metadata block takes at least 3 bytes on disk and holds at most 8 KiB.
 * Without this check a corrupt size (up to 4 GiB) went to the caller as
 * the size to allocate for getxattr. */
static int check_value_size(struct lsq_image *img, uint64_t block,
			    uint32_t vsize)
{
	const struct meta_table *t = &img->xattr_table;
	uint64_t max_blocks = (t->limit - t->start) / 3 + 1;

	if (vsize > max_blocks * SQUASHFS_METADATA_SIZE)
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, block,
					 "xattr value of %u bytes larger than the xattr table",
					 vsize);
	return LSQ_OK;
}

/* Position vcur (a fresh cursor the caller finishes) at the bytes of the
 * value that follows key k at cur, following an out-of-line reference. */
static int open_value(struct lsq_image *img, struct meta_cursor *cur,
		      const struct xattr_key *k, struct meta_cursor *vcur,
		      uint32_t *vsize)
{
	uint8_t b[12];
	uint64_t ref;
	int ret;

	ret = lsq_meta_read(img, cur, b, 4);
	if (ret)
		return ret;
	*vsize = lsq_le32(b);
	if (!k->out_of_line) {
		ret = check_value_size(img, cur->block, *vsize);
		if (ret)
			return ret;
		lsq_meta_cursor_init(vcur, cur->table, 0, cur->offset);
		vcur->block = cur->block;
		return LSQ_OK;
	}
	if (*vsize != 8)
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, cur->block,
					 "out-of-line xattr reference of %u bytes",
					 *vsize);
	ret = lsq_meta_read(img, cur, b, 8);
	if (ret)
		return ret;
	ref = lsq_le64(b);
	lsq_meta_cursor_init(vcur, &img->xattr_table, ref >> 16, ref & 0xffff);
	ret = lsq_meta_read(img, vcur, b, 4);
	if (ret)
		return ret;
	*vsize = lsq_le32(b);
	return check_value_size(img, vcur->block, *vsize);
}

static int list_names(struct lsq_image *img, struct xattr_run *run,
		      char *buf, size_t size, size_t *needed)
{
	size_t total = 0;
	int ret;

	for (uint32_t i = 0; i < run->count; i++) {
		struct xattr_key k;
		size_t plen, n;

		ret = read_key(img, &run->cur, &k);
		if (!ret)
			ret = skip_value(img, &run->cur, &k);
		if (ret)
			return ret;
		if (k.prefix >= 3)
			continue; /* unknown namespace: not listed, as the kernel */
		plen = strlen(prefixes[k.prefix]);
		n = plen + k.name_len + 1;
		if (size) {
			if (total + n > size)
				return LSQ_ERR_RANGE;
			memcpy(buf + total, prefixes[k.prefix], plen);
			memcpy(buf + total + plen, k.name, k.name_len);
			buf[total + n - 1] = '\0';
		}
		total += n;
	}
	*needed = total;
	return LSQ_OK;
}

int lsq_image_listxattr(struct lsq_image *img, const struct lsq_inode *inode,
			char *buf, size_t size, size_t *needed)
{
	struct xattr_run run;
	int ret;

	/* Without an xattr table the kernel has no xattr handlers; inodes
	 * whose inode_operations carry listxattr (dirs, symlinks, extended
	 * inodes) then fail with EOPNOTSUPP, the others list nothing. */
	if (img->sb.xattr_id_table_start == SQUASHFS_INVALID_BLK &&
	    (S_ISDIR(inode->mode) || S_ISLNK(inode->mode) ||
	     inode->priv.disk_type > SQUASHFS_SOCKET_TYPE))
		return LSQ_ERR_UNSUPPORTED;
	ret = xattr_open(img, inode, &run);
	if (ret)
		return ret;
	ret = list_names(img, &run, buf, size, needed);
	lsq_meta_cursor_fini(&run.cur);
	return ret;
}

static int find_value(struct lsq_image *img, struct xattr_run *run,
		      unsigned prefix, const char *suffix, size_t suffix_len,
		      void *buf, size_t size, size_t *needed)
{
	int ret;

	for (uint32_t i = 0; i < run->count; i++) {
		struct meta_cursor vcur;
		struct xattr_key k;
		uint32_t vsize;

		ret = read_key(img, &run->cur, &k);
		if (ret)
			return ret;
		if (k.prefix != prefix || k.name_len != suffix_len ||
		    memcmp(k.name, suffix, suffix_len)) {
			ret = skip_value(img, &run->cur, &k);
			if (ret)
				return ret;
			continue;
		}
		lsq_meta_cursor_init(&vcur, run->cur.table, 0, 0);
		ret = open_value(img, &run->cur, &k, &vcur, &vsize);
		if (!ret && size) {
			if (vsize > size)
				ret = LSQ_ERR_RANGE;
			else
				ret = lsq_meta_read(img, &vcur, buf, vsize);
		}
		lsq_meta_cursor_fini(&vcur);
		if (!ret)
			*needed = vsize;
		return ret;
	}
	return LSQ_ERR_NO_XATTR;
}

int lsq_image_getxattr(struct lsq_image *img, const struct lsq_inode *inode,
		       const char *name, void *buf, size_t size,
		       size_t *needed)
{
	struct xattr_run run;
	unsigned prefix;
	const char *suffix = NULL;
	size_t suffix_len;
	int ret;

	for (prefix = 0; prefix < 3; prefix++) {
		size_t plen = strlen(prefixes[prefix]);

		if (!strncmp(name, prefixes[prefix], plen)) {
			suffix = name + plen;
			break;
		}
	}
	/* As the kernel's xattr handlers: an unknown namespace is not
	 * supported, a known prefix with no name is invalid. */
	if (!suffix)
		return LSQ_ERR_UNSUPPORTED;
	suffix_len = strlen(suffix);
	if (suffix_len == 0)
		return LSQ_ERR_INVALID;

	ret = xattr_open(img, inode, &run);
	if (ret)
		return ret;
	ret = find_value(img, &run, prefix, suffix, suffix_len, buf, size,
			 needed);
	lsq_meta_cursor_fini(&run.cur);
	return ret;
}
