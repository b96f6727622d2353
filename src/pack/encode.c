/* SPDX-License-Identifier: MIT */
/* encode.c - SquashFS 4.0 encoders, field for field the decoders' mirror. */
#include <string.h>

#include "pack/encode.h"
#include "format/ondisk.h"

void lsq_superblock_encode(const struct lsq_superblock *sb, uint8_t *b)
{
	lsq_put32(b + 0, sb->magic);
	lsq_put32(b + 4, sb->inode_count);
	lsq_put32(b + 8, sb->mkfs_time);
	lsq_put32(b + 12, sb->block_size);
	lsq_put32(b + 16, sb->fragment_count);
	lsq_put16(b + 20, sb->compression_id);
	lsq_put16(b + 22, sb->block_log);
	lsq_put16(b + 24, sb->flags);
	lsq_put16(b + 26, sb->id_count);
	lsq_put16(b + 28, sb->version_major);
	lsq_put16(b + 30, sb->version_minor);
	lsq_put64(b + 32, sb->root_inode_ref);
	lsq_put64(b + 40, sb->bytes_used);
	lsq_put64(b + 48, sb->id_table_start);
	lsq_put64(b + 56, sb->xattr_id_table_start);
	lsq_put64(b + 64, sb->inode_table_start);
	lsq_put64(b + 72, sb->directory_table_start);
	lsq_put64(b + 80, sb->fragment_table_start);
	lsq_put64(b + 88, sb->export_table_start);
}

int lsq_encode_dev(unsigned major, unsigned minor, uint32_t *out)
{
	if (major > 0xfffu || minor > 0xfffffu)
		return -1;
	*out = (minor & 0xffu) | (major << 8) | ((minor & ~0xffu) << 12);
	return 0;
}

void lsq_dir_header_encode(uint8_t *b, uint32_t count, uint32_t start_block,
			   uint32_t inode_number)
{
	lsq_put32(b, count - 1);
	lsq_put32(b + 4, start_block);
	lsq_put32(b + 8, inode_number);
}

size_t lsq_dir_entry_encode(uint8_t *b, uint16_t offset, int16_t inode_delta,
			    uint16_t basic_type, const char *name,
			    size_t name_len)
{
	lsq_put16(b, offset);
	lsq_put16(b + 2, (uint16_t)inode_delta);
	lsq_put16(b + 4, basic_type);
	lsq_put16(b + 6, (uint16_t)(name_len - 1));
	memcpy(b + 8, name, name_len);
	return SQUASHFS_DIR_ENTRY_SIZE + name_len;
}

size_t lsq_dir_index_encode(uint8_t *b, uint32_t index, uint32_t start_block,
			    const char *name, size_t name_len)
{
	lsq_put32(b, index);
	lsq_put32(b + 4, start_block);
	lsq_put32(b + 8, (uint32_t)(name_len - 1));
	memcpy(b + 12, name, name_len);
	return SQUASHFS_DIR_INDEX_SIZE + name_len;
}

void lsq_inode_base_encode(uint8_t *b, uint16_t type, uint16_t perm,
			   uint16_t uid_idx, uint16_t gid_idx, uint32_t mtime,
			   uint32_t inode_number)
{
	lsq_put16(b, type);
	lsq_put16(b + 2, perm);
	lsq_put16(b + 4, uid_idx);
	lsq_put16(b + 6, gid_idx);
	lsq_put32(b + 8, mtime);
	lsq_put32(b + 12, inode_number);
}
