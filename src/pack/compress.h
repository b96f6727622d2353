/* SPDX-License-Identifier: MIT */
/*
 * compress.h - block compressors for the packer (the core only decodes).
 * One struct lsq_compressor per thread; each call is independent of the
 * previous ones, so output depends only on the input block and the
 * settings, never on which worker compressed it.
 */
#ifndef LSQ_PACK_COMPRESS_H
#define LSQ_PACK_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lsq_comp_cfg {
	uint16_t id;          /* SquashFS compressor id */
	int level;            /* 0 = the compressor's default */
	uint32_t xz_filters;  /* BCJ filter bits as mksquashfs stores them */
	bool lz4_hc;
	uint32_t block_size;
};

/* Fill cfg for a compressor name (gzip, xz, lz4, lzo, zstd); returns an
 * lsq_err (LSQ_ERR_UNSUPPORTED when not built in). */
int lsq_comp_cfg_init(struct lsq_comp_cfg *cfg, const char *name,
		      uint32_t block_size);

/* Check the level / filters; writes a message into err on failure. */
int lsq_comp_cfg_check(struct lsq_comp_cfg *cfg, char *err, size_t errlen);

/* Parse a comma list of BCJ filter names (x86,powerpc,ia64,arm,armthumb,
 * sparc) into cfg->xz_filters. */
int lsq_comp_parse_bcj(struct lsq_comp_cfg *cfg, const char *list);

/* The compressor options block mksquashfs writes for these settings, into
 * out (at least 16 bytes); returns its length, 0 when none is written. */
size_t lsq_comp_options(const struct lsq_comp_cfg *cfg, uint8_t *out);

/* Names of the compressors built in, space separated. */
const char *lsq_comp_available(void);

struct lsq_compressor;

struct lsq_compressor *lsq_compressor_create(const struct lsq_comp_cfg *cfg);
void lsq_compressor_destroy(struct lsq_compressor *c);

/* Compress len bytes into out (room for len bytes). Returns the
 * compressed size when it is smaller than len, 0 when the block does not
 * shrink (store it raw), or a negative lsq_err. */
long lsq_compress(struct lsq_compressor *c, const uint8_t *in, size_t len,
		  uint8_t *out);

#endif
