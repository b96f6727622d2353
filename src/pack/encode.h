/* SPDX-License-Identifier: MIT */
/*
 * encode.h - SquashFS 4.0 structure encoders (stores: common/endian.h), the
 * mirror of the decoders in this folder and in src/image/. Pure functions
 * over byte buffers: no I/O, no allocation, no locks. Used by src/pack/.
 */
#ifndef LSQ_ENCODE_H
#define LSQ_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/endian.h"
#include "format/superblock.h"

/* Write the 96-byte superblock (SQUASHFS_SUPERBLOCK_SIZE) of sb into buf. */
void lsq_superblock_encode(const struct lsq_superblock *sb, uint8_t *buf);

/* The kernel's new_encode_dev(): returns -1 when major/minor do not fit the
 * 32-bit on-disk word (12-bit major, 20-bit minor), else 0. */
int lsq_encode_dev(unsigned major, unsigned minor, uint32_t *out);

/* Directory header (12 bytes): count is the number of entries (1..256). */
void lsq_dir_header_encode(uint8_t *buf, uint32_t count, uint32_t start_block,
			   uint32_t inode_number);

/* Directory entry (8 bytes + name): returns the bytes written. */
size_t lsq_dir_entry_encode(uint8_t *buf, uint16_t offset, int16_t inode_delta,
			    uint16_t basic_type, const char *name,
			    size_t name_len);

/* Directory index entry (12 bytes + name): returns the bytes written. */
size_t lsq_dir_index_encode(uint8_t *buf, uint32_t index, uint32_t start_block,
			    const char *name, size_t name_len);

/* The common 16-byte inode header. */
void lsq_inode_base_encode(uint8_t *buf, uint16_t type, uint16_t perm,
			   uint16_t uid_idx, uint16_t gid_idx, uint32_t mtime,
			   uint32_t inode_number);

#endif
