/* SPDX-License-Identifier: MIT */
/* superblock.h - decode and validate the 96-byte SquashFS 4.0 superblock. */
#ifndef LSQ_SUPERBLOCK_H
#define LSQ_SUPERBLOCK_H

#include <stddef.h>
#include <stdint.h>

struct lsq_superblock {
	uint32_t magic;
	uint32_t inode_count;
	uint32_t mkfs_time;
	uint32_t block_size;
	uint32_t fragment_count;
	uint16_t compression_id;
	uint16_t block_log;
	uint16_t flags;
	uint16_t id_count;
	uint16_t version_major;
	uint16_t version_minor;
	uint64_t root_inode_ref;
	uint64_t bytes_used;
	uint64_t id_table_start;
	uint64_t xattr_id_table_start;
	uint64_t inode_table_start;
	uint64_t directory_table_start;
	uint64_t fragment_table_start;
	uint64_t export_table_start;
};

/* Decode buf (SQUASHFS_SUPERBLOCK_SIZE bytes) and check it against the
 * source size. On failure returns LSQ_ERR_CORRUPT / LSQ_ERR_UNSUPPORTED and
 * writes a one-line reason ("bad superblock: ...") into err; *out is then
 * untouched. */
int lsq_superblock_decode(const uint8_t *buf, uint64_t source_size,
			  struct lsq_superblock *out, char *err, size_t errlen);

#endif
