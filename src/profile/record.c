/* SPDX-License-Identifier: MIT */
/* profile_record.c - header of a startup profile stored in an image. */
#include "profile/record.h"

#include <string.h>
#include <zlib.h>

#include "common/endian.h"
#include "format/ondisk.h"
#include "lsq/error.h"

uint64_t lsq_profile_record_offset(uint64_t comp_opts_block)
{
	return (SQUASHFS_SUPERBLOCK_SIZE + comp_opts_block + 7) & ~(uint64_t)7;
}

static uint32_t crc_of(const void *text, uint32_t len)
{
	return (uint32_t)crc32_z(crc32_z(0, Z_NULL, 0), text, len);
}

void lsq_profile_record_encode(uint8_t header[LSQ_PROFILE_RECORD_HEADER],
			       const void *text, uint32_t len)
{
	memcpy(header, LSQ_PROFILE_RECORD_MAGIC, 8);
	lsq_put32(header + 8, len);
	lsq_put32(header + 12, crc_of(text, len));
}

int lsq_profile_record_decode(const uint8_t header[LSQ_PROFILE_RECORD_HEADER],
			      uint32_t *len, uint32_t *crc)
{
	if (memcmp(header, LSQ_PROFILE_RECORD_MAGIC, 8) != 0)
		return LSQ_ERR_NOT_FOUND;
	if (lsq_le32(header + 8) > LSQ_PROFILE_RECORD_MAX)
		return LSQ_ERR_CORRUPT;
	*len = lsq_le32(header + 8);
	*crc = lsq_le32(header + 12);
	return LSQ_OK;
}

int lsq_profile_record_check(const void *text, uint32_t len, uint32_t crc)
{
	return crc_of(text, len) == crc;
}
