/* SPDX-License-Identifier: MIT */
/* sif.c - see sif.h. Layout, as the SIF format's reference code writes it:
 *
 *   header     launch script [32], "SIF_MAGIC\0" [10], version [3],
 *              arch [3], uuid [16], then int64s: created, modified,
 *              descriptors free, descriptors total, descriptors offset,
 *              descriptors size, data offset, data size
 *   descriptor int32 data type, uint8 used, uint32 id, group, link,
 *              int64 offset, size, size with padding, created, modified,
 *              uid, gid, name [128], extra [384]; a partition's extra
 *              starts int32 fs type, int32 partition type, arch [3]
 */
#include "format/sif.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/endian.h"
#include "lsq/error.h"

#define MAGIC_AT 32
#define TOTAL_AT 88      /* descriptors total, then offset, size */
#define DATA_PARTITION 0x4004
#define FS_SQUASHFS 1
#define FS_ENCRYPTED_SQUASHFS 5
#define PART_PRIMARY_SYSTEM 2

/* descriptor field offsets */
#define D_TYPE 0
#define D_USED 4
#define D_ID 5
#define D_OFFSET 17
#define D_SIZE 25
#define D_EXTRA 201

bool lsq_sif_is(const uint8_t *head, size_t len)
{
	return len >= LSQ_SIF_HEADER_SIZE &&
	       memcmp(head + MAGIC_AT, "SIF_MAGIC", 10) == 0;
}

/* A signed int64 field as an offset or size: negative is a lie. */
static bool field_u64(const uint8_t *p, uint64_t *out)
{
	uint64_t v = lsq_le64(p);

	if (v > INT64_MAX)
		return false;
	*out = v;
	return true;
}

int lsq_sif_descriptors(const uint8_t *header, uint64_t file_size,
			uint64_t *offset, uint64_t *size, uint32_t *count,
			char *err, size_t errlen)
{
	uint64_t total, off, bytes;

	if (!field_u64(header + TOTAL_AT, &total) ||
	    !field_u64(header + TOTAL_AT + 8, &off) ||
	    total == 0 || total > LSQ_SIF_MAX_DESCRIPTORS) {
		snprintf(err, errlen, "SIF header: %" PRIu64 " descriptors "
			 "(1 to %u expected)", lsq_le64(header + TOTAL_AT),
			 LSQ_SIF_MAX_DESCRIPTORS);
		return LSQ_ERR_CORRUPT;
	}
	bytes = total * LSQ_SIF_DESCRIPTOR_SIZE;
	if (off < LSQ_SIF_HEADER_SIZE || off > file_size ||
	    bytes > file_size - off) {
		snprintf(err, errlen, "SIF header: descriptors at offset %"
			 PRIu64 " (%" PRIu64 " bytes) lie outside the %" PRIu64
			 "-byte file", lsq_le64(header + TOTAL_AT + 8), bytes,
			 file_size);
		return LSQ_ERR_CORRUPT;
	}
	*offset = off;
	*size = bytes;
	*count = (uint32_t)total;
	return LSQ_OK;
}

int lsq_sif_partition(const uint8_t *descriptors, uint32_t count,
		      uint64_t descriptors_offset, uint64_t file_size,
		      uint32_t want_id, struct lsq_sif_partition *out,
		      char *err, size_t errlen)
{
	uint64_t dend = descriptors_offset +
			(uint64_t)count * LSQ_SIF_DESCRIPTOR_SIZE;

	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *d = descriptors +
				   (size_t)i * LSQ_SIF_DESCRIPTOR_SIZE;
		uint32_t id = lsq_le32(d + D_ID);
		uint32_t fs = lsq_le32(d + D_EXTRA);
		uint32_t part = lsq_le32(d + D_EXTRA + 4);
		uint64_t off, size;

		if (!d[D_USED] || lsq_le32(d + D_TYPE) != DATA_PARTITION)
			continue;
		if (want_id ? id != want_id : part != PART_PRIMARY_SYSTEM)
			continue;
		/* data objects follow the header and the descriptors */
		if (!field_u64(d + D_OFFSET, &off) ||
		    !field_u64(d + D_SIZE, &size) || size == 0 ||
		    off < dend || off > file_size || size > file_size - off) {
			snprintf(err, errlen, "SIF descriptor %u (object %u): "
				 "partition at offset %" PRIu64 " (%" PRIu64
				 " bytes) lies outside the data of the %"
				 PRIu64 "-byte file", i, id,
				 lsq_le64(d + D_OFFSET), lsq_le64(d + D_SIZE),
				 file_size);
			return LSQ_ERR_CORRUPT;
		}
		if (fs != FS_SQUASHFS) {
			snprintf(err, errlen, "SIF descriptor %u (object %u): "
				 "%s partition, not SquashFS", i, id,
				 fs == FS_ENCRYPTED_SQUASHFS ? "an encrypted"
							     : "another kind of");
			return LSQ_ERR_UNSUPPORTED;
		}
		out->offset = off;
		out->size = size;
		out->id = id;
		return LSQ_OK;
	}
	if (want_id)
		snprintf(err, errlen, "SIF: no partition with object id %u "
			 "among %u descriptors", want_id, count);
	else
		snprintf(err, errlen, "SIF: no primary system partition among "
			 "%u descriptors (pick one with -o sif_partition=ID)",
			 count);
	return LSQ_ERR_NOT_FOUND;
}
