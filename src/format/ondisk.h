/* SPDX-License-Identifier: MIT */
/*
 * ondisk.h - SquashFS 4.0 on-disk constants and layouts (little-endian),
 * named as in the kernel's fs/squashfs/squashfs_fs.h so the two can be
 * compared. The decoders in this folder take byte buffers; they never do I/O.
 */
#ifndef LSQ_ONDISK_H
#define LSQ_ONDISK_H

#include <stdint.h>

#define SQUASHFS_MAGIC 0x73717368u
#define SQUASHFS_SUPERBLOCK_SIZE 96
#define SQUASHFS_METADATA_SIZE 8192
#define SQUASHFS_COMPRESSED_BIT 0x8000u          /* metadata header */
#define SQUASHFS_COMPRESSED_BIT_BLOCK (1u << 24)  /* data/fragment size */
#define SQUASHFS_INVALID_BLK UINT64_C(0xFFFFFFFFFFFFFFFF)
#define SQUASHFS_INVALID_FRAG 0xFFFFFFFFu
#define SQUASHFS_INVALID_XATTR 0xFFFFFFFFu
#define SQUASHFS_MIN_BLOCK_LOG 12
#define SQUASHFS_MAX_BLOCK_LOG 20
#define SQUASHFS_NAME_LEN 256
#define SQUASHFS_DIR_COUNT 256

/* superblock flags */
#define SQUASHFS_NOI 0x0001
#define SQUASHFS_NOD 0x0002
#define SQUASHFS_CHECK 0x0004
#define SQUASHFS_NOF 0x0008
#define SQUASHFS_NO_FRAG 0x0010
#define SQUASHFS_ALWAYS_FRAG 0x0020
#define SQUASHFS_DUPLICATE 0x0040
#define SQUASHFS_EXPORT 0x0080
#define SQUASHFS_NOX 0x0100
#define SQUASHFS_NO_XATTR 0x0200
#define SQUASHFS_COMP_OPT 0x0400
#define SQUASHFS_NOID 0x0800

/* inode types */
enum {
	SQUASHFS_DIR_TYPE = 1,
	SQUASHFS_REG_TYPE = 2,
	SQUASHFS_SYMLINK_TYPE = 3,
	SQUASHFS_BLKDEV_TYPE = 4,
	SQUASHFS_CHRDEV_TYPE = 5,
	SQUASHFS_FIFO_TYPE = 6,
	SQUASHFS_SOCKET_TYPE = 7,
	SQUASHFS_LDIR_TYPE = 8,
	SQUASHFS_LREG_TYPE = 9,
	SQUASHFS_LSYMLINK_TYPE = 10,
	SQUASHFS_LBLKDEV_TYPE = 11,
	SQUASHFS_LCHRDEV_TYPE = 12,
	SQUASHFS_LFIFO_TYPE = 13,
	SQUASHFS_LSOCKET_TYPE = 14,
};

/* xattr types */
#define SQUASHFS_XATTR_USER 0
#define SQUASHFS_XATTR_TRUSTED 1
#define SQUASHFS_XATTR_SECURITY 2
#define SQUASHFS_XATTR_VALUE_OOL 0x100
#define SQUASHFS_XATTR_PREFIX_MASK 0xff

/* Sizes of fixed parts, in bytes. */
#define SQUASHFS_BASE_INODE_SIZE 16
#define SQUASHFS_DIR_HEADER_SIZE 12
#define SQUASHFS_DIR_ENTRY_SIZE 8
#define SQUASHFS_DIR_INDEX_SIZE 12
#define SQUASHFS_FRAGMENT_ENTRY_SIZE 16
#define SQUASHFS_ID_SIZE 4
#define SQUASHFS_EXPORT_ENTRY_SIZE 8
#define SQUASHFS_XATTR_ID_SIZE 16
#define SQUASHFS_XATTR_ID_TABLE_HEADER 16

/* An inode/xattr reference: metadata block offset (relative to its table)
 * in the high 32+ bits, offset inside the decompressed block in the low 16. */
#define SQUASHFS_REF_BLOCK(ref) ((ref) >> 16)
#define SQUASHFS_REF_OFFSET(ref) ((uint32_t)((ref) & 0xffff))

/* Data / fragment block size word. Size 0 means a sparse (all-zero) block. */
#define SQUASHFS_BLOCK_ONDISK_SIZE(w) ((w) & ~SQUASHFS_COMPRESSED_BIT_BLOCK)
#define SQUASHFS_BLOCK_IS_RAW(w) (((w) & SQUASHFS_COMPRESSED_BIT_BLOCK) != 0)

#endif
