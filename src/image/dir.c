/* SPDX-License-Identifier: MIT */
/*
 * dir.c - directory listings: readdir with resumable cookies and lookup,
 * both seeking through the directory index of large directories.
 *
 * A listing is a run of headers (count, inode block, base inode number),
 * each followed by up to 256 entries. Cookies follow the kernel's readdir
 * positions: 0 before ".", 1 before "..", and 3 + the byte position in the
 * listing for real entries.
 */
#include <string.h>
#include <sys/stat.h>

#include "common/endian.h"
#include "image/image_internal.h"
#include "lsq/error.h"

struct dir_iter {
	struct lsq_image *img;
	const struct lsq_inode *dir;
	struct meta_cursor cur;
	uint64_t pos;       /* bytes of the listing consumed */
	uint64_t size;      /* listing size (inode size - 3) */
	uint32_t left;      /* entries left under the current header */
	uint32_t inode_block;
	uint32_t base_number;
};

struct dir_entry {
	char name[SQUASHFS_NAME_LEN + 1];
	size_t name_len;
	lsq_inode_ref ref;
	uint32_t inode_number;
	unsigned type;
};

static int dir_corrupt(struct dir_iter *it, const char *what)
{
	return lsq_image_corrupt(it->img, LSQ_ERR_CORRUPT, it->cur.block,
				 "directory of inode %u: %s",
				 it->dir->inode_number, what);
}

static void dir_iter_init(struct dir_iter *it, struct lsq_image *img,
			  const struct lsq_inode *dir)
{
	memset(it, 0, sizeof(*it));
	it->img = img;
	it->dir = dir;
	it->size = dir->size - 3;
	lsq_meta_cursor_init(&it->cur, &img->dir_table, dir->priv.a >> 16,
			     dir->priv.a & 0xffff);
}

/* Jump ahead using the directory index (extended directories only): to the
 * last indexed header at or before position 'target', or, when name is
 * given, the last one whose first name sorts at or before name. */
static int dir_iter_seek(struct dir_iter *it, uint64_t target,
			 const char *name, size_t name_len)
{
	struct lsq_image *img = it->img;
	const struct lsq_inode *dir = it->dir;
	struct meta_cursor icur;
	uint64_t best_pos = 0, best_block = 0;
	bool found = false;
	int ret;

	if (!S_ISDIR(dir->mode) || dir->priv.e == 0)
		return LSQ_OK;
	lsq_meta_cursor_init(&icur, &img->inode_table, dir->priv.d >> 16,
			     dir->priv.d & 0xffff);
	ret = LSQ_OK;
	for (uint32_t i = 0; i < dir->priv.e; i++) {
		uint8_t b[SQUASHFS_DIR_INDEX_SIZE];
		char iname[SQUASHFS_NAME_LEN];
		uint32_t index, start, len;

		ret = lsq_meta_read(img, &icur, b, sizeof(b));
		if (ret)
			break;
		index = lsq_le32(b);
		start = lsq_le32(b + 4);
		len = lsq_le32(b + 8) + 1;
		if (len > SQUASHFS_NAME_LEN) {
			ret = dir_corrupt(it, "index name too long");
			break;
		}
		ret = lsq_meta_read(img, &icur, iname, len);
		if (ret)
			break;
		/* Indexes must move forward inside the listing, else ignore
		 * the rest of the index and scan. */
		if (index >= it->size || (found && index <= best_pos))
			break;
		if (name) {
			size_t n = len < name_len ? len : name_len;
			int c = memcmp(iname, name, n);

			if (c > 0 || (c == 0 && len > name_len))
				break;
		} else if (index > target) {
			break;
		}
		best_pos = index;
		best_block = start;
		found = true;
	}
	lsq_meta_cursor_fini(&icur);
	if (ret)
		return ret;
	if (found) {
		uint64_t off = (dir->priv.a & 0xffff) + best_pos;

		lsq_meta_cursor_fini(&it->cur);
		lsq_meta_cursor_init(&it->cur, &img->dir_table, best_block,
				     (uint32_t)(off % SQUASHFS_METADATA_SIZE));
		it->pos = best_pos;
		it->left = 0;
	}
	return LSQ_OK;
}

/* Next entry; returns 1 at the end of the listing. */
static int dir_iter_next(struct dir_iter *it, struct dir_entry *e)
{
	uint8_t b[SQUASHFS_DIR_HEADER_SIZE];
	unsigned type;
	int ret;

	for (;;) {
		if (it->left == 0) {
			uint32_t count;

			/* Writers may leave padding smaller than a header. */
			if (it->pos + SQUASHFS_DIR_HEADER_SIZE > it->size)
				return 1;
			ret = lsq_meta_read(it->img, &it->cur, b,
					    SQUASHFS_DIR_HEADER_SIZE);
			if (ret)
				return ret;
			it->pos += SQUASHFS_DIR_HEADER_SIZE;
			count = lsq_le32(b) + 1;
			if (count == 0 || count > SQUASHFS_DIR_COUNT)
				return dir_corrupt(it, "header entry count out of range");
			it->left = count;
			it->inode_block = lsq_le32(b + 4);
			it->base_number = lsq_le32(b + 8);
			continue;
		}
		if (it->pos + SQUASHFS_DIR_ENTRY_SIZE > it->size)
			return dir_corrupt(it, "entry past the listing size");
		ret = lsq_meta_read(it->img, &it->cur, b, SQUASHFS_DIR_ENTRY_SIZE);
		if (ret)
			return ret;
		e->name_len = (size_t)lsq_le16(b + 6) + 1;
		type = lsq_le16(b + 4);
		if (e->name_len > SQUASHFS_NAME_LEN)
			return dir_corrupt(it, "name too long");
		if (it->pos + SQUASHFS_DIR_ENTRY_SIZE + e->name_len > it->size)
			return dir_corrupt(it, "name past the listing size");
		ret = lsq_meta_read(it->img, &it->cur, e->name, e->name_len);
		if (ret)
			return ret;
		e->name[e->name_len] = '\0';
		it->pos += SQUASHFS_DIR_ENTRY_SIZE + e->name_len;
		it->left--;
		if (type < SQUASHFS_DIR_TYPE || type > SQUASHFS_LSOCKET_TYPE)
			return dir_corrupt(it, "unknown entry type");
		e->type = type > SQUASHFS_SOCKET_TYPE ? type - 7 : type;
		e->ref = ((uint64_t)it->inode_block << 16) | lsq_le16(b);
		e->inode_number = it->base_number + (uint32_t)(int32_t)(int16_t)lsq_le16(b + 2);
		/* Names the VFS could not represent are not served. */
		if (memchr(e->name, '/', e->name_len) ||
		    memchr(e->name, '\0', e->name_len) ||
		    (e->name_len == 1 && e->name[0] == '.') ||
		    (e->name_len == 2 && e->name[0] == '.' && e->name[1] == '.')) {
			lsq_image_corrupt(it->img, LSQ_ERR_CORRUPT, it->cur.block,
					  "directory of inode %u: invalid name skipped",
					  it->dir->inode_number);
			continue;
		}
		return 0;
	}
}

static int readdir_entries(struct dir_iter *it, uint64_t cookie,
			   lsq_dirent_fn fn, void *ctx);

int lsq_image_readdir(struct lsq_image *img, const struct lsq_inode *dir,
		      uint64_t cookie, lsq_dirent_fn fn, void *ctx)
{
	struct lsq_dirent de;
	struct dir_iter it;
	int ret;

	if (!S_ISDIR(dir->mode))
		return LSQ_ERR_NOT_DIR;
	memset(&de, 0, sizeof(de));
	de.is_dot = true;
	de.type = S_IFDIR;
	if (cookie == 0) {
		de.name = ".";
		de.name_len = 1;
		de.inode_number = dir->inode_number;
		de.ref = dir->ref;
		de.next_cookie = 1;
		if (fn(ctx, &de))
			return LSQ_OK;
		cookie = 1;
	}
	if (cookie == 1) {
		de.name = "..";
		de.name_len = 2;
		de.inode_number = (uint32_t)dir->priv.c;
		de.next_cookie = 3;
		if (fn(ctx, &de))
			return LSQ_OK;
		cookie = 3;
	}
	if (cookie < 3)
		cookie = 3;

	dir_iter_init(&it, img, dir);
	ret = readdir_entries(&it, cookie, fn, ctx);
	lsq_meta_cursor_fini(&it.cur);
	return ret;
}

static int readdir_entries(struct dir_iter *it, uint64_t cookie,
			   lsq_dirent_fn fn, void *ctx)
{
	struct lsq_dirent de;
	struct dir_entry e;
	int ret;

	memset(&de, 0, sizeof(de));
	if (cookie > 3) {
		ret = dir_iter_seek(it, cookie - 3, NULL, 0);
		if (ret)
			return ret;
	}
	for (;;) {
		ret = dir_iter_next(it, &e);
		if (ret == 1)
			return LSQ_OK;
		if (ret)
			return ret;
		if (it->pos + 3 <= cookie)
			continue; /* consumed by an earlier call */
		de.is_dot = false;
		de.name = e.name;
		de.name_len = e.name_len;
		de.inode_number = e.inode_number;
		de.type = lsq_type_mode(e.type);
		de.ref = e.ref;
		de.next_cookie = it->pos + 3;
		if (fn(ctx, &de))
			return LSQ_OK;
	}
}

static int lookup_entry(struct dir_iter *it, const char *name,
			size_t name_len, struct lsq_inode *out);

int lsq_image_lookup(struct lsq_image *img, const struct lsq_inode *dir,
		     const char *name, size_t name_len, struct lsq_inode *out)
{
	struct dir_iter it;
	int ret;

	if (!S_ISDIR(dir->mode))
		return LSQ_ERR_NOT_DIR;
	if (name_len > SQUASHFS_NAME_LEN)
		return LSQ_ERR_NAME_TOO_LONG;
	if (name_len == 0)
		return LSQ_ERR_NOT_FOUND;
	dir_iter_init(&it, img, dir);
	ret = lookup_entry(&it, name, name_len, out);
	lsq_meta_cursor_fini(&it.cur);
	return ret;
}

static int lookup_entry(struct dir_iter *it, const char *name,
			size_t name_len, struct lsq_inode *out)
{
	struct lsq_image *img = it->img;
	struct dir_entry e;
	int ret;

	ret = dir_iter_seek(it, 0, name, name_len);
	if (ret)
		return ret;
	for (;;) {
		ret = dir_iter_next(it, &e);
		if (ret == 1)
			return LSQ_ERR_NOT_FOUND;
		if (ret)
			return ret;
		if (e.name_len == name_len && !memcmp(e.name, name, name_len)) {
			struct lsq_inode child;

			ret = lsq_image_inode(img, e.ref, &child);
			if (ret)
				return ret;
			if ((child.mode & S_IFMT) != lsq_type_mode(e.type))
				return lsq_image_corrupt(img, LSQ_ERR_CORRUPT,
							 it->cur.block,
							 "entry type of '%.*s' differs from its inode",
							 (int)name_len, name);
			*out = child;
			return LSQ_OK;
		}
		/* Writers sort names bytewise; past the first byte there is
		 * nothing more to find (the kernel stops the same way). */
		if ((unsigned char)e.name[0] > (unsigned char)name[0])
			return LSQ_ERR_NOT_FOUND;
	}
}
