/* SPDX-License-Identifier: MIT */
/*
 * sif.h - the SquashFS partition of a SIF file (the Singularity Image
 * Format of Apptainer and SingularityCE): a 128-byte header, an array of
 * 585-byte descriptors, then the data objects they point at, one of them
 * the container's root file system. No I/O here: the caller reads the
 * header (LSQ_SIF_HEADER_SIZE bytes at offset 0), then the descriptors
 * where lsq_sif_descriptors() says, and hands both over. All fields are
 * little-endian; every offset and size is checked against the file.
 */
#ifndef LSQ_FORMAT_SIF_H
#define LSQ_FORMAT_SIF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LSQ_SIF_HEADER_SIZE 128
#define LSQ_SIF_DESCRIPTOR_SIZE 585
/* More descriptors than any SIF tool makes (48 by default). */
#define LSQ_SIF_MAX_DESCRIPTORS 4096

struct lsq_sif_partition {
	uint64_t offset, size;  /* of the SquashFS bytes in the file */
	uint32_t id;            /* the descriptor's object id */
};

/* Whether head (len bytes from offset 0) starts like a SIF file. */
bool lsq_sif_is(const uint8_t *head, size_t len);

/* From the header (LSQ_SIF_HEADER_SIZE bytes): where the descriptors are,
 * [*offset, *offset + *size), and how many. LSQ_ERR_CORRUPT with one
 * line in err when the header lies (past file_size, too many). */
int lsq_sif_descriptors(const uint8_t *header, uint64_t file_size,
			uint64_t *offset, uint64_t *size, uint32_t *count,
			char *err, size_t errlen);

/* The partition to mount among count descriptors: the one with object id
 * want_id, or with want_id 0 the primary system partition. LSQ_ERR_CORRUPT
 * (a descriptor that lies: out of the file, over the header or the
 * descriptors), LSQ_ERR_NOT_FOUND (no such partition) or
 * LSQ_ERR_UNSUPPORTED (not SquashFS, or encrypted), each with one line in
 * err naming the descriptor. descriptors_offset: where they were read,
 * as the partition must lie past them. */
int lsq_sif_partition(const uint8_t *descriptors, uint32_t count,
		      uint64_t descriptors_offset, uint64_t file_size,
		      uint32_t want_id, struct lsq_sif_partition *out,
		      char *err, size_t errlen);

#endif
