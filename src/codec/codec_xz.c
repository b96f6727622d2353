/* SPDX-License-Identifier: MIT */
/*
 * codec_xz.c - SquashFS "xz" (id 4): one .xz stream per block, possibly
 * with a BCJ filter before LZMA2. liblzma's stream decoder reads the filter
 * chain from the block header, so the options only need validating.
 */
#include <stdbool.h>

#include "lsq/error.h"
#include "common/endian.h"
#include "common/log.h"
#include "codec/codec_liblzma.h"

/* executable_filters: x86, powerpc, ia64, arm, armthumb, sparc */
#define XZ_FILTERS_ALL 0x3fu

/* The kernel's rule: 2^n or 2^n + 2^(n+1), the sizes LZMA2 can encode. */
static bool dict_size_valid(uint32_t dict)
{
	uint64_t low;

	if (dict == 0)
		return false;
	low = dict & (~dict + 1); /* lowest set bit */
	return dict == low || dict == 3 * low;
}

static int xz_parse_options(const uint8_t *opt, struct lsq_codec_cfg *cfg)
{
	uint32_t dict = lsq_le32(opt);
	uint32_t filters = lsq_le32(opt + 4);

	if (!dict_size_valid(dict) || (filters & ~XZ_FILTERS_ALL)) {
		lsq_debug("xz: bad options: dictionary %u, filters 0x%x",
			  (unsigned)dict, (unsigned)filters);
		return LSQ_ERR_CORRUPT;
	}
	cfg->memlimit = lsq_liblzma_memlimit(dict, cfg->block_size);
	if (cfg->memlimit < dict)
		lsq_warn("xz: dictionary of %u bytes is above the decoder's "
			 "memory limit; blocks that need it will fail",
			 (unsigned)dict);
	return LSQ_OK;
}

static void xz_default_options(struct lsq_codec_cfg *cfg)
{
	/* without options mksquashfs uses a dictionary of the block size */
	cfg->memlimit = lsq_liblzma_memlimit(cfg->block_size, cfg->block_size);
}

static int xz_decompress(const struct lsq_codec_cfg *cfg, void *ctx,
			 const uint8_t *in, size_t in_len, uint8_t *out,
			 size_t out_cap, size_t *out_len)
{
	lzma_stream *strm = ctx;
	lzma_ret ret;

	/* No LZMA_CONCATENATED: one stream, nothing after it. The integrity
	 * check (CRC32 from mksquashfs) is verified by liblzma. */
	ret = lzma_stream_decoder(strm, cfg->memlimit, 0);
	if (ret != LZMA_OK)
		return ret == LZMA_MEM_ERROR ? LSQ_ERR_NOMEM : LSQ_ERR_CODEC;
	return lsq_liblzma_run(strm, in, in_len, out, out_cap, out_len);
}

const struct lsq_codec_ops lsq_codec_xz_ops = {
	.name = "xz",
	.options_len = 8,
	.parse_options = xz_parse_options,
	.default_options = xz_default_options,
	.ctx_create = lsq_liblzma_ctx_create,
	.ctx_destroy = lsq_liblzma_ctx_destroy,
	.decompress = xz_decompress,
};
