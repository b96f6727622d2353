/* SPDX-License-Identifier: MIT */
/*
 * codec_lzma.c - SquashFS "lzma" (id 2): the legacy .lzma "alone" format
 * as squashfs-tools writes it, a 13-byte header (properties byte,
 * little-endian u32 dictionary size, u64 uncompressed size) followed by raw
 * LZMA data. The kernel never supported this id; the tools do.
 */
#include "lsq/error.h"
#include "codec/codec_liblzma.h"

static void lzma_default_options(struct lsq_codec_cfg *cfg)
{
	/* squashfs-tools sets the dictionary to the block size */
	cfg->memlimit = lsq_liblzma_memlimit(cfg->block_size, cfg->block_size);
}

static int lzma_decompress(const struct lsq_codec_cfg *cfg, void *ctx,
			   const uint8_t *in, size_t in_len, uint8_t *out,
			   size_t out_cap, size_t *out_len)
{
	lzma_stream *strm = ctx;
	lzma_ret ret;

	/* Takes both a known uncompressed size in the header (what the
	 * tools write) and an unknown one with an end marker. */
	ret = lzma_alone_decoder(strm, cfg->memlimit);
	if (ret != LZMA_OK)
		return ret == LZMA_MEM_ERROR ? LSQ_ERR_NOMEM : LSQ_ERR_CODEC;
	return lsq_liblzma_run(strm, in, in_len, out, out_cap, out_len);
}

/* options_len 0: this compressor has no options, so any block is corrupt */
const struct lsq_codec_ops lsq_codec_lzma_ops = {
	.name = "lzma",
	.options_len = 0,
	.default_options = lzma_default_options,
	.ctx_create = lsq_liblzma_ctx_create,
	.ctx_destroy = lsq_liblzma_ctx_destroy,
	.decompress = lzma_decompress,
};
