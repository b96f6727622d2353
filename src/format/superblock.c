/* SPDX-License-Identifier: MIT */
/*
 * superblock.c - decode into a local, validate every field a later read
 * depends on, then commit. The checks follow what the kernel's
 * fs/squashfs/super.c refuses, plus table offsets against the image size.
 */
#include <stdio.h>

#include "common/endian.h"
#include "common/errmsg.h"
#include "format/ondisk.h"
#include "format/superblock.h"
#include "lsq/error.h"


#define BAD(...) lsq_fail(LSQ_ERR_CORRUPT, err, errlen, "bad superblock: " __VA_ARGS__)

int lsq_superblock_decode(const uint8_t *buf, uint64_t source_size,
			  struct lsq_superblock *out, char *err, size_t errlen)
{
	struct lsq_superblock sb;
	unsigned long long size = source_size;

	sb.magic = lsq_le32(buf + 0);
	sb.inode_count = lsq_le32(buf + 4);
	sb.mkfs_time = lsq_le32(buf + 8);
	sb.block_size = lsq_le32(buf + 12);
	sb.fragment_count = lsq_le32(buf + 16);
	sb.compression_id = lsq_le16(buf + 20);
	sb.block_log = lsq_le16(buf + 22);
	sb.flags = lsq_le16(buf + 24);
	sb.id_count = lsq_le16(buf + 26);
	sb.version_major = lsq_le16(buf + 28);
	sb.version_minor = lsq_le16(buf + 30);
	sb.root_inode_ref = lsq_le64(buf + 32);
	sb.bytes_used = lsq_le64(buf + 40);
	sb.id_table_start = lsq_le64(buf + 48);
	sb.xattr_id_table_start = lsq_le64(buf + 56);
	sb.inode_table_start = lsq_le64(buf + 64);
	sb.directory_table_start = lsq_le64(buf + 72);
	sb.fragment_table_start = lsq_le64(buf + 80);
	sb.export_table_start = lsq_le64(buf + 88);

	if (sb.magic != SQUASHFS_MAGIC)
		return lsq_fail(LSQ_ERR_CORRUPT, err, errlen,
			    "not a SquashFS image: bad magic 0x%08x at offset 0",
			    sb.magic);
	if (sb.version_major != 4 || sb.version_minor != 0)
		return lsq_fail(LSQ_ERR_UNSUPPORTED, err, errlen,
			    "unsupported SquashFS version %u.%u (only 4.0)",
			    sb.version_major, sb.version_minor);
	if (sb.block_log < SQUASHFS_MIN_BLOCK_LOG ||
	    sb.block_log > SQUASHFS_MAX_BLOCK_LOG)
		return BAD("block log %u outside 12..20", sb.block_log);
	if (sb.block_size != (1u << sb.block_log))
		return BAD("block size %u does not match block log %u",
			   sb.block_size, sb.block_log);
	if (sb.bytes_used < SQUASHFS_SUPERBLOCK_SIZE)
		return BAD("bytes used 0x%llx smaller than the superblock",
			   (unsigned long long)sb.bytes_used);
	if (sb.bytes_used > source_size)
		return BAD("image truncated: bytes used 0x%llx beyond image size 0x%llx",
			   (unsigned long long)sb.bytes_used, size);
	if (sb.inode_count == 0)
		return BAD("inode count is 0");
	if (sb.id_count == 0)
		return BAD("id count is 0");
	if (sb.inode_table_start < SQUASHFS_SUPERBLOCK_SIZE ||
	    sb.inode_table_start >= sb.bytes_used)
		return BAD("inode table offset 0x%llx outside 0x60..0x%llx",
			   (unsigned long long)sb.inode_table_start,
			   (unsigned long long)sb.bytes_used);
	if (sb.directory_table_start <= sb.inode_table_start ||
	    sb.directory_table_start >= sb.bytes_used)
		return BAD("directory table offset 0x%llx not between inode table 0x%llx and image size 0x%llx",
			   (unsigned long long)sb.directory_table_start,
			   (unsigned long long)sb.inode_table_start,
			   (unsigned long long)sb.bytes_used);
	if (sb.id_table_start <= sb.directory_table_start ||
	    sb.id_table_start >= sb.bytes_used)
		return BAD("id table offset 0x%llx outside 0x%llx..0x%llx",
			   (unsigned long long)sb.id_table_start,
			   (unsigned long long)sb.directory_table_start,
			   (unsigned long long)sb.bytes_used);
	if (sb.fragment_count != 0 &&
	    (sb.fragment_table_start <= sb.directory_table_start ||
	     sb.fragment_table_start >= sb.bytes_used))
		return BAD("fragment table offset 0x%llx outside 0x%llx..0x%llx",
			   (unsigned long long)sb.fragment_table_start,
			   (unsigned long long)sb.directory_table_start,
			   (unsigned long long)sb.bytes_used);
	if ((sb.flags & SQUASHFS_EXPORT) &&
	    sb.export_table_start != SQUASHFS_INVALID_BLK &&
	    (sb.export_table_start <= sb.directory_table_start ||
	     sb.export_table_start >= sb.bytes_used))
		return BAD("export table offset 0x%llx outside 0x%llx..0x%llx",
			   (unsigned long long)sb.export_table_start,
			   (unsigned long long)sb.directory_table_start,
			   (unsigned long long)sb.bytes_used);
	if (sb.xattr_id_table_start != SQUASHFS_INVALID_BLK &&
	    (sb.xattr_id_table_start <= sb.directory_table_start ||
	     sb.xattr_id_table_start >= sb.bytes_used))
		return BAD("xattr id table offset 0x%llx outside 0x%llx..0x%llx",
			   (unsigned long long)sb.xattr_id_table_start,
			   (unsigned long long)sb.directory_table_start,
			   (unsigned long long)sb.bytes_used);
	if ((sb.root_inode_ref >> 16) >=
	    sb.directory_table_start - sb.inode_table_start)
		return BAD("root inode reference 0x%llx outside the inode table",
			   (unsigned long long)sb.root_inode_ref);
	if ((sb.root_inode_ref & 0xffff) >= SQUASHFS_METADATA_SIZE)
		return BAD("root inode reference 0x%llx has offset past 8 KiB",
			   (unsigned long long)sb.root_inode_ref);

	*out = sb;
	return LSQ_OK;
}
