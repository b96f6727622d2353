/* SPDX-License-Identifier: MIT */
/*
 * units.h - the compressed units of an image: every (offset, length) a
 * SquashFS reader fetches and uses as a whole. The signed manifest
 * (docs/manifest.md) holds one digest per unit, so a mount can check each
 * fetch on its own.
 */
#ifndef LSQ_UNITS_H
#define LSQ_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "lsq/image.h"

enum lsq_unit_kind {
	LSQ_UNIT_SUPERBLOCK,
	LSQ_UNIT_COMP_OPTS,     /* compressor options metadata block */
	LSQ_UNIT_PROFILE,       /* startup profile record (our packer's) */
	LSQ_UNIT_INODE_BLOCK,   /* metadata blocks of the inode table */
	LSQ_UNIT_DIR_BLOCK,     /* ... of the directory table */
	LSQ_UNIT_FRAG_BLOCK,    /* ... of the fragment table */
	LSQ_UNIT_EXPORT_BLOCK,  /* ... of the export table */
	LSQ_UNIT_ID_BLOCK,      /* ... of the id table */
	LSQ_UNIT_XATTR_BLOCK,   /* ... of the xattr key/value area */
	LSQ_UNIT_XATTR_ID_BLOCK,/* ... of the xattr id table */
	LSQ_UNIT_FRAG_INDEX,    /* index arrays of u64 block offsets */
	LSQ_UNIT_EXPORT_INDEX,
	LSQ_UNIT_ID_INDEX,
	LSQ_UNIT_XATTR_HEADER,  /* the 16-byte xattr id table header */
	LSQ_UNIT_XATTR_INDEX,
	LSQ_UNIT_FRAGMENT,      /* fragment block */
	LSQ_UNIT_DATA,          /* data block of a regular file */
	LSQ_UNIT_KINDS
};

struct lsq_unit {
	uint64_t offset;
	uint32_t length;
	uint32_t kind; /* enum lsq_unit_kind */
};

/* "superblock", "inode table block", "data block", ... */
const char *lsq_unit_kind_name(uint32_t kind);

/* List the units of img, sorted by offset, each once (blocks shared by
 * deduplicated files, hard links). File blocks come from the block lists
 * of every regular file reachable from the root, not from decompressing
 * data. On success *out is a malloc'd array the caller frees.
 *
 * Refused with a one-line reason in err: a metadata block whose header is
 * bad or that crosses the end of its table, units that overlap or reach
 * past bytes_used, inode numbers outside the superblock's count. Errors
 * are lsq_err values (LSQ_ERR_CORRUPT, LSQ_ERR_OUT_OF_BOUNDS,
 * LSQ_ERR_NOMEM, or the reader's). Thread-safe as every image call is;
 * it reads metadata through the image's caches. */
int lsq_image_units(struct lsq_image *img, struct lsq_unit **out,
		    size_t *count, char *err, size_t errlen);

#endif
