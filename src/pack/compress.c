/* SPDX-License-Identifier: MIT */
/*
 * compress.c - gzip (zlib stream), xz (LZMA2, optional BCJ: the smallest of
 * the plain and each filtered encoding wins, as mksquashfs does), lz4
 * (fast or HC), zstd and lzo (lzo1x_999) compressors. Contexts are created
 * once per thread and reset per block.
 */
#include <lz4.h>
#include <lz4hc.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "pack/encode.h"
#include "lsq/error.h"
#include "lsq_config.h"
#include "pack/compress.h"

#if LSQ_HAVE_LZO
#include <lzo/lzo1x.h>
#endif

enum {
	ID_GZIP = 1,
	ID_LZO = 3,
	ID_XZ = 4,
	ID_LZ4 = 5,
	ID_ZSTD = 6,
};

static const struct {
	const char *name;
	uint32_t bit;
	lzma_vli filter;
} bcj_filters[] = {
	{ "x86", 1, LZMA_FILTER_X86 },
	{ "powerpc", 2, LZMA_FILTER_POWERPC },
	{ "ia64", 4, LZMA_FILTER_IA64 },
	{ "arm", 8, LZMA_FILTER_ARM },
	{ "armthumb", 16, LZMA_FILTER_ARMTHUMB },
	{ "sparc", 32, LZMA_FILTER_SPARC },
};
#define N_BCJ (sizeof(bcj_filters) / sizeof(bcj_filters[0]))

const char *lsq_comp_available(void)
{
#if LSQ_HAVE_LZO
	return "gzip xz lz4 lzo zstd";
#else
	return "gzip xz lz4 zstd";
#endif
}

int lsq_comp_cfg_init(struct lsq_comp_cfg *cfg, const char *name,
		      uint32_t block_size)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->block_size = block_size;
	if (!strcmp(name, "gzip"))
		cfg->id = ID_GZIP;
	else if (!strcmp(name, "xz"))
		cfg->id = ID_XZ;
	else if (!strcmp(name, "lz4"))
		cfg->id = ID_LZ4;
	else if (!strcmp(name, "zstd"))
		cfg->id = ID_ZSTD;
	else if (!strcmp(name, "lzo"))
		cfg->id = ID_LZO;
	else
		return LSQ_ERR_INVALID;
#if LSQ_HAVE_LZO
	if (cfg->id == ID_LZO && lzo_init() != LZO_E_OK)
		return LSQ_ERR_UNSUPPORTED;
#else
	if (cfg->id == ID_LZO)
		return LSQ_ERR_UNSUPPORTED;
#endif
	return LSQ_OK;
}

int lsq_comp_cfg_check(struct lsq_comp_cfg *cfg, char *err, size_t errlen)
{
	int lo = 0, hi = 0, def = 0;

	switch (cfg->id) {
	case ID_GZIP: lo = 1; hi = 9; def = 9; break;
	case ID_ZSTD: lo = 1; hi = 22; def = 15; break;
	case ID_LZO: lo = 1; hi = 9; def = 8; break;
	default: break;
	}
	if (cfg->level && !hi) {
		snprintf(err, errlen, "this compressor has no levels");
		return LSQ_ERR_INVALID;
	}
	if (hi && cfg->level == 0)
		cfg->level = def;
	if (hi && (cfg->level < lo || cfg->level > hi)) {
		snprintf(err, errlen, "level %d outside %d..%d", cfg->level, lo,
			 hi);
		return LSQ_ERR_INVALID;
	}
	if (cfg->xz_filters && cfg->id != ID_XZ) {
		snprintf(err, errlen, "BCJ filters need -c xz");
		return LSQ_ERR_INVALID;
	}
	if (cfg->lz4_hc && cfg->id != ID_LZ4) {
		snprintf(err, errlen, "--lz4-hc needs -c lz4");
		return LSQ_ERR_INVALID;
	}
	return LSQ_OK;
}

int lsq_comp_parse_bcj(struct lsq_comp_cfg *cfg, const char *list)
{
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, ",");
		bool found = false;

		for (size_t i = 0; i < N_BCJ; i++)
			if (strlen(bcj_filters[i].name) == n &&
			    !strncmp(bcj_filters[i].name, p, n)) {
				cfg->xz_filters |= bcj_filters[i].bit;
				found = true;
			}
		if (!found)
			return LSQ_ERR_INVALID;
		p += n;
		if (*p == ',')
			p++;
	}
	return LSQ_OK;
}

size_t lsq_comp_options(const struct lsq_comp_cfg *cfg, uint8_t *out)
{
	switch (cfg->id) {
	case ID_GZIP:
		if (cfg->level == 9)
			return 0;
		lsq_put32(out, (uint32_t)cfg->level);
		lsq_put16(out + 4, 15);
		lsq_put16(out + 6, 0);
		return 8;
	case ID_XZ:
		if (!cfg->xz_filters)
			return 0;
		lsq_put32(out, cfg->block_size);
		lsq_put32(out + 4, cfg->xz_filters);
		return 8;
	case ID_LZ4:
		lsq_put32(out, 1); /* LZ4_LEGACY, the only version */
		lsq_put32(out + 4, cfg->lz4_hc ? 1 : 0);
		return 8;
	case ID_ZSTD:
		if (cfg->level == 15)
			return 0;
		lsq_put32(out, (uint32_t)cfg->level);
		return 4;
	case ID_LZO:
		if (cfg->level == 8)
			return 0;
		lsq_put32(out, 4); /* lzo1x_999 */
		lsq_put32(out + 4, (uint32_t)cfg->level);
		return 8;
	default:
		return 0;
	}
}

struct lsq_compressor {
	struct lsq_comp_cfg cfg;
	z_stream zs;
	bool zs_init;
	ZSTD_CCtx *zctx;
	void *state;   /* lz4 state, lzo work memory */
	uint8_t *scratch; /* lzo / xz candidates: worst-case output */
	size_t scratch_size;
	lzma_options_lzma xz_opt;
};

void lsq_compressor_destroy(struct lsq_compressor *c)
{
	if (!c)
		return;
	if (c->zs_init)
		deflateEnd(&c->zs);
	ZSTD_freeCCtx(c->zctx);
	free(c->state);
	free(c->scratch);
	free(c);
}

struct lsq_compressor *lsq_compressor_create(const struct lsq_comp_cfg *cfg)
{
	struct lsq_compressor *c = calloc(1, sizeof(*c));
	size_t bs = cfg->block_size < 8192 ? 8192 : cfg->block_size;

	if (!c)
		return NULL;
	c->cfg = *cfg;
	c->scratch_size = bs + bs / 16 + 64 + 3 + 4096;
	c->scratch = malloc(c->scratch_size);
	if (!c->scratch)
		goto fail;
	switch (cfg->id) {
	case ID_GZIP:
		if (deflateInit2(&c->zs, cfg->level, Z_DEFLATED, 15, 8,
				 Z_DEFAULT_STRATEGY) != Z_OK)
			goto fail;
		c->zs_init = true;
		break;
	case ID_ZSTD:
		c->zctx = ZSTD_createCCtx();
		if (!c->zctx)
			goto fail;
		break;
	case ID_LZ4:
		c->state = malloc(cfg->lz4_hc ? (size_t)LZ4_sizeofStateHC() :
						(size_t)LZ4_sizeofState());
		if (!c->state)
			goto fail;
		break;
	case ID_XZ:
		if (lzma_lzma_preset(&c->xz_opt, LZMA_PRESET_DEFAULT))
			goto fail;
		c->xz_opt.dict_size = cfg->block_size;
		break;
#if LSQ_HAVE_LZO
	case ID_LZO:
		c->state = malloc(LZO1X_999_MEM_COMPRESS);
		if (!c->state)
			goto fail;
		break;
#endif
	default:
		goto fail;
	}
	return c;
fail:
	lsq_compressor_destroy(c);
	return NULL;
}

/* One xz stream with an optional BCJ filter in front; returns its size or
 * 0 when it does not fit in cap. */
static size_t xz_one(struct lsq_compressor *c, lzma_vli bcj, const uint8_t *in,
		     size_t len, uint8_t *out, size_t cap)
{
	lzma_filter f[3];
	size_t pos = 0, n = 0;

	if (bcj != LZMA_VLI_UNKNOWN) {
		f[n].id = bcj;
		f[n++].options = NULL;
	}
	f[n].id = LZMA_FILTER_LZMA2;
	f[n++].options = &c->xz_opt;
	f[n].id = LZMA_VLI_UNKNOWN;
	f[n].options = NULL;
	if (lzma_stream_buffer_encode(f, LZMA_CHECK_CRC32, NULL, in, len, out,
				      &pos, cap) != LZMA_OK)
		return 0;
	return pos;
}

long lsq_compress(struct lsq_compressor *c, const uint8_t *in, size_t len,
		  uint8_t *out)
{
	size_t cap = len; /* result must be smaller than len */
	size_t n = 0;

	if (len == 0)
		return 0;
	switch (c->cfg.id) {
	case ID_GZIP:
		if (deflateReset(&c->zs) != Z_OK)
			return LSQ_ERR_CODEC;
		c->zs.next_in = (Bytef *)(uintptr_t)in;
		c->zs.avail_in = (uInt)len;
		c->zs.next_out = out;
		c->zs.avail_out = (uInt)cap;
		if (deflate(&c->zs, Z_FINISH) != Z_STREAM_END)
			return 0;
		n = c->zs.total_out;
		break;
	case ID_ZSTD: {
		size_t r = ZSTD_compressCCtx(c->zctx, out, cap, in, len,
					     c->cfg.level);
		if (ZSTD_isError(r))
			return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ?
				       0 : LSQ_ERR_CODEC;
		n = r;
		break;
	}
	case ID_LZ4: {
		int r;

		if (c->cfg.lz4_hc)
			r = LZ4_compress_HC_extStateHC(c->state, (const char *)in,
						       (char *)out, (int)len,
						       (int)cap, LZ4HC_CLEVEL_MAX);
		else
			r = LZ4_compress_fast_extState(c->state, (const char *)in,
						       (char *)out, (int)len,
						       (int)cap, 1);
		if (r <= 0)
			return 0;
		n = (size_t)r;
		break;
	}
	case ID_XZ: {
		size_t best = xz_one(c, LZMA_VLI_UNKNOWN, in, len, out, cap);

		for (size_t i = 0; i < N_BCJ; i++) {
			size_t r;

			if (!(c->cfg.xz_filters & bcj_filters[i].bit))
				continue;
			r = xz_one(c, bcj_filters[i].filter, in, len,
				   c->scratch, best ? best - 1 : cap);
			if (r && (!best || r < best)) {
				memcpy(out, c->scratch, r);
				best = r;
			}
		}
		n = best;
		break;
	}
#if LSQ_HAVE_LZO
	case ID_LZO: {
		lzo_uint r = (lzo_uint)c->scratch_size;

		if (len + len / 16 + 64 + 3 > c->scratch_size)
			return LSQ_ERR_CODEC;
		if (lzo1x_999_compress_level(in, len, c->scratch, &r, c->state,
					     NULL, 0, NULL, c->cfg.level) !=
		    LZO_E_OK)
			return LSQ_ERR_CODEC;
		if (r >= len)
			return 0;
		memcpy(out, c->scratch, r);
		n = r;
		break;
	}
#endif
	default:
		return LSQ_ERR_UNSUPPORTED;
	}
	return n < len ? (long)n : 0;
}
