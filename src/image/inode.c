/* SPDX-License-Identifier: MIT */
/*
 * inode.c - decode every SquashFS inode kind into struct lsq_inode and
 * present it as the kernel's squashfs driver does (fs/squashfs/inode.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "common/endian.h"
#include "image/image_internal.h"
#include "lsq/error.h"

/* ref of the cursor's position, for data that follows an inode. */
static uint64_t cursor_ref(const struct meta_cursor *cur)
{
	return ((cur->block - cur->table->start) << 16) | cur->offset;
}

static int bad_inode(struct lsq_image *img, lsq_inode_ref ref,
		     const char *what)
{
	return lsq_image_corrupt(img, LSQ_ERR_CORRUPT,
				 img->inode_table.start + (ref >> 16),
				 "inode 0x%llx: %s", (unsigned long long)ref,
				 what);
}

static int resolve_id(struct lsq_image *img, lsq_inode_ref ref, uint16_t idx,
		      uint32_t *out)
{
	if (idx >= img->sb.id_count)
		return bad_inode(img, ref, "id index beyond the id table");
	*out = img->ids[idx];
	return LSQ_OK;
}

/* The kernel's new_decode_dev(): 12-bit major, 20-bit minor split. */
static uint64_t decode_dev(uint32_t dev)
{
	unsigned major = (dev & 0xfff00u) >> 8;
	unsigned minor = (dev & 0xffu) | ((dev >> 12) & 0xfff00u);

	return makedev(major, minor);
}

static int decode_inode(struct lsq_image *img, lsq_inode_ref ref,
			struct meta_cursor *cur, struct lsq_inode *out);

int lsq_image_inode(struct lsq_image *img, lsq_inode_ref ref,
		    struct lsq_inode *out)
{
	struct meta_cursor cur = { 0 };
	int ret = decode_inode(img, ref, &cur, out);

	lsq_meta_cursor_fini(&cur);
	return ret;
}

/* The fixed part of each inode type after the common header (the
 * extended symlink's xattr index comes after its target). */
static const uint8_t body_size[SQUASHFS_LSOCKET_TYPE + 1] = {
	[SQUASHFS_DIR_TYPE] = 16, [SQUASHFS_REG_TYPE] = 16,
	[SQUASHFS_SYMLINK_TYPE] = 8, [SQUASHFS_BLKDEV_TYPE] = 8,
	[SQUASHFS_CHRDEV_TYPE] = 8, [SQUASHFS_FIFO_TYPE] = 4,
	[SQUASHFS_SOCKET_TYPE] = 4, [SQUASHFS_LDIR_TYPE] = 24,
	[SQUASHFS_LREG_TYPE] = 40, [SQUASHFS_LSYMLINK_TYPE] = 8,
	[SQUASHFS_LBLKDEV_TYPE] = 12, [SQUASHFS_LCHRDEV_TYPE] = 12,
	[SQUASHFS_LFIFO_TYPE] = 8, [SQUASHFS_LSOCKET_TYPE] = 8,
};

/* cur is borrowed: positioned here, finished by the caller. */
static int decode_inode(struct lsq_image *img, lsq_inode_ref ref,
			struct meta_cursor *cur, struct lsq_inode *out)
{
	struct lsq_inode ino;
	uint8_t b[40];
	unsigned type, basic;
	int ret;

	if ((ref & 0xffff) >= SQUASHFS_METADATA_SIZE ||
	    (ref >> 16) >= img->inode_table.limit - img->inode_table.start)
		return bad_inode(img, ref, "reference outside the inode table");
	lsq_meta_cursor_init(cur, &img->inode_table, ref >> 16, ref & 0xffff);
	ret = lsq_meta_read(img, cur, b, SQUASHFS_BASE_INODE_SIZE);
	if (ret)
		return ret;

	memset(&ino, 0, sizeof(ino));
	ino.ref = ref;
	type = lsq_le16(b);
	if (type < SQUASHFS_DIR_TYPE || type > SQUASHFS_LSOCKET_TYPE)
		return bad_inode(img, ref, "unknown inode type");
	basic = type > SQUASHFS_SOCKET_TYPE ? type - 7 : type;
	ino.mode = lsq_type_mode(basic) | (lsq_le16(b + 2) & 07777u);
	ret = resolve_id(img, ref, lsq_le16(b + 4), &ino.uid);
	if (ret)
		return ret;
	ret = resolve_id(img, ref, lsq_le16(b + 6), &ino.gid);
	if (ret)
		return ret;
	ino.mtime = lsq_le32(b + 8);
	ino.inode_number = lsq_le32(b + 12);
	ino.xattr_index = LSQ_NO_XATTR;
	ino.priv.disk_type = type;
	if (ino.inode_number == 0 || ino.inode_number > img->sb.inode_count)
		return bad_inode(img, ref, "inode number out of range");
	ret = lsq_meta_read(img, cur, b, body_size[type]);
	if (ret)
		return ret;

	switch (type) {
	case SQUASHFS_DIR_TYPE:
		ino.priv.a = ((uint64_t)lsq_le32(b) << 16) | lsq_le16(b + 10);
		ino.nlink = lsq_le32(b + 4);
		ino.size = lsq_le16(b + 8);
		ino.priv.c = lsq_le32(b + 12);
		break;
	case SQUASHFS_LDIR_TYPE:
		ino.nlink = lsq_le32(b);
		ino.size = lsq_le32(b + 4);
		ino.priv.a = ((uint64_t)lsq_le32(b + 8) << 16) | lsq_le16(b + 18);
		ino.priv.c = lsq_le32(b + 12);
		ino.priv.e = lsq_le16(b + 16);
		ino.xattr_index = lsq_le32(b + 20);
		ino.priv.d = cursor_ref(cur); /* directory index follows */
		break;
	case SQUASHFS_REG_TYPE:
		ino.nlink = 1;
		ino.priv.a = lsq_le32(b);
		ino.priv.c = lsq_le32(b + 4);
		ino.priv.d = lsq_le32(b + 8);
		ino.size = lsq_le32(b + 12);
		ino.priv.b = cursor_ref(cur); /* block list follows */
		break;
	case SQUASHFS_LREG_TYPE:
		ino.priv.a = lsq_le64(b);
		ino.size = lsq_le64(b + 8);
		ino.nlink = lsq_le32(b + 24);
		ino.priv.c = lsq_le32(b + 28);
		ino.priv.d = lsq_le32(b + 32);
		ino.xattr_index = lsq_le32(b + 36);
		ino.priv.b = cursor_ref(cur);
		ino.priv.g = lsq_le64(b + 16); /* sparse bytes */
		break;
	case SQUASHFS_SYMLINK_TYPE:
	case SQUASHFS_LSYMLINK_TYPE:
		ino.nlink = lsq_le32(b);
		ino.size = lsq_le32(b + 4);
		/* The kernel refuses targets longer than a page. */
		if (ino.size > 4096)
			return bad_inode(img, ref, "symlink target too long");
		ino.priv.b = cursor_ref(cur);
		if (type == SQUASHFS_LSYMLINK_TYPE) {
			ret = lsq_meta_skip(img, cur, (size_t)ino.size);
			if (!ret)
				ret = lsq_meta_read(img, cur, b, 4);
			if (ret)
				return ret;
			ino.xattr_index = lsq_le32(b);
		}
		break;
	case SQUASHFS_BLKDEV_TYPE:
	case SQUASHFS_CHRDEV_TYPE:
	case SQUASHFS_LBLKDEV_TYPE:
	case SQUASHFS_LCHRDEV_TYPE:
		ino.nlink = lsq_le32(b);
		ino.rdev = decode_dev(lsq_le32(b + 4));
		if (type > 7)
			ino.xattr_index = lsq_le32(b + 8);
		break;
	default: /* fifo, socket */
		ino.nlink = lsq_le32(b);
		if (type > 7)
			ino.xattr_index = lsq_le32(b + 4);
		break;
	}

	if (S_ISREG(ino.mode)) {
		uint64_t bs = img->sb.block_size;
		uint64_t nblocks = ino.priv.c == SQUASHFS_INVALID_FRAG ?
					   (ino.size + bs - 1) >> img->sb.block_log :
					   ino.size >> img->sb.block_log;

		if (nblocks > UINT32_MAX)
			return bad_inode(img, ref, "file too large");
		ino.priv.e = (uint32_t)nblocks;
		if (ino.priv.c != SQUASHFS_INVALID_FRAG &&
		    (ino.priv.c >= img->sb.fragment_count ||
		     ino.priv.d + (ino.size & (bs - 1)) > bs))
			return bad_inode(img, ref, "fragment reference out of range");
	}
	if (S_ISDIR(ino.mode) && ino.size < 3)
		return bad_inode(img, ref, "directory size below 3");
	if (ino.xattr_index != LSQ_NO_XATTR && img->xattr_ids.count) {
		uint8_t x[SQUASHFS_XATTR_ID_SIZE];

		if (ino.xattr_index >= img->xattr_ids.count)
			return bad_inode(img, ref, "xattr index out of range");
		ret = lsq_lookup_table_read(img, &img->xattr_ids,
					    ino.xattr_index, x);
		if (ret)
			return ret;
		ino.priv.xattr_size = lsq_le32(x + 12);
	} else {
		ino.xattr_index = LSQ_NO_XATTR;
	}

	*out = ino;
	return LSQ_OK;
}

void lsq_image_stat(const struct lsq_image *img, const struct lsq_inode *ino,
		    struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino->inode_number;
	st->st_mode = ino->mode;
	st->st_nlink = ino->nlink;
	st->st_uid = ino->uid;
	st->st_gid = ino->gid;
	st->st_size = (off_t)ino->size;
	/* The kernel's squashfs uses 1 KiB device blocks and reports them. */
	st->st_blksize = 1024;
	st->st_atime = st->st_mtime = st->st_ctime = ino->mtime;
	if (S_ISBLK(ino->mode) || S_ISCHR(ino->mode))
		st->st_rdev = (dev_t)ino->rdev;
	if (S_ISREG(ino->mode)) {
		/* fs/squashfs/inode.c: basic files round up the size,
		 * extended ones subtract the sparse bytes first. Unsigned,
		 * clamped: a corrupt image can claim more sparse bytes than
		 * the file has, or sizes near 2^64 (signed overflow before). */
		uint64_t size = ino->size, sparse = ino->priv.g, blocks;

		if (ino->priv.disk_type == SQUASHFS_LREG_TYPE)
			size = sparse >= size ? 0 : size - sparse;
		blocks = (size >> 9) + (size & 511 ? 1 : 0);
		st->st_blocks = (blkcnt_t)(blocks < INT64_MAX / 2 ? blocks : INT64_MAX / 2);
	}
	/* The kernel charges xattrs to st_blocks too. */
	if (ino->xattr_index != LSQ_NO_XATTR)
		st->st_blocks += ((blkcnt_t)ino->priv.xattr_size + 511) >> 9;
}

int lsq_image_readlink(struct lsq_image *img, const struct lsq_inode *link,
		       char **target)
{
	struct meta_cursor cur;
	char *buf;
	int ret;

	if (!S_ISLNK(link->mode))
		return LSQ_ERR_NOT_LINK;
	buf = malloc((size_t)link->size + 1);
	if (!buf)
		return LSQ_ERR_NOMEM;
	lsq_meta_cursor_init(&cur, &img->inode_table, link->priv.b >> 16,
			     link->priv.b & 0xffff);
	ret = lsq_meta_read(img, &cur, buf, (size_t)link->size);
	lsq_meta_cursor_fini(&cur);
	if (ret) {
		free(buf);
		return ret;
	}
	buf[link->size] = '\0';
	*target = buf;
	return LSQ_OK;
}
