/* SPDX-License-Identifier: MIT */
/*
 * profile_record.h - a startup profile stored inside an image.
 *
 * `sqfs-lazy-pack --order` writes the profile (src/profile/profile.h text)
 * between the superblock (and compressor options) and the first data
 * block, a gap every SquashFS reader skips: the kernel, unsquashfs and
 * squashfs-tools-ng reach data only through offsets stored in inodes and
 * tables. It lies inside the first 64 KiB, which a remote mount fetches
 * anyway, so finding it costs no request.
 *
 * At lsq_profile_record_offset() (the end of the superblock and the
 * compressor options block, rounded up to 8):
 *
 *     8 bytes  magic "sqlzPRF1"
 *     u32 LE   text length in bytes (at most LSQ_PROFILE_RECORD_MAX)
 *     u32 LE   CRC-32 (zlib's) of the text
 *     text
 *
 * The record must end at or before the inode table; a reader that finds no
 * magic, a bad length or a CRC mismatch treats the image as having none.
 */
#ifndef LSQ_PROFILE_RECORD_H
#define LSQ_PROFILE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define LSQ_PROFILE_RECORD_MAGIC "sqlzPRF1"
#define LSQ_PROFILE_RECORD_HEADER 16u
#define LSQ_PROFILE_RECORD_MAX (4u << 20)

/* Where the record starts: comp_opts_block is the on-disk size of the
 * compressor options metadata block (2 + its length), 0 when the image has
 * none (SQUASHFS_COMP_OPT unset). */
uint64_t lsq_profile_record_offset(uint64_t comp_opts_block);

/* Fill the 16-byte header for text[0..len). */
void lsq_profile_record_encode(uint8_t header[LSQ_PROFILE_RECORD_HEADER],
			       const void *text, uint32_t len);

/* Decode a header: LSQ_OK with *len and *crc, LSQ_ERR_NOT_FOUND without the
 * magic, LSQ_ERR_CORRUPT for a length over the maximum. */
int lsq_profile_record_decode(const uint8_t header[LSQ_PROFILE_RECORD_HEADER],
			      uint32_t *len, uint32_t *crc);

/* Whether text[0..len) has the CRC the header gave. */
int lsq_profile_record_check(const void *text, uint32_t len, uint32_t crc);

#endif
