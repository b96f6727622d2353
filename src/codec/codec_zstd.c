/* SPDX-License-Identifier: MIT */
/*
 * codec_zstd.c - SquashFS "zstd" (id 6): one zstd frame per block.
 */
#include <zstd.h>

#include "lsq/error.h"
#include "common/endian.h"
#include "common/log.h"
#include "codec/codec_i.h"

static int zstd_parse_options(const uint8_t *opt, struct lsq_codec_cfg *cfg)
{
	uint32_t level = lsq_le32(opt);

	/* the compression level is the only option; 1..22 like zstd's CLI */
	if (level < 1 || level > 22) {
		lsq_debug("zstd: bad options: level %u", (unsigned)level);
		return LSQ_ERR_CORRUPT;
	}
	return LSQ_OK;
}

static int zstd_ctx_create(const struct lsq_codec_cfg *cfg, void **out)
{
	ZSTD_DCtx *dctx = ZSTD_createDCtx();

	if (!dctx)
		return LSQ_ERR_NOMEM;
	*out = dctx;
	return LSQ_OK;
}

static void zstd_ctx_destroy(void *ctx)
{
	ZSTD_freeDCtx(ctx);
}

static int zstd_decompress(const struct lsq_codec_cfg *cfg, void *ctx,
			   const uint8_t *in, size_t in_len, uint8_t *out,
			   size_t out_cap, size_t *out_len)
{
	size_t frame, n;

	/* ZSTD_decompressDCtx would go on to decode further frames; a block
	 * is exactly one, and anything after it is garbage. */
	frame = ZSTD_findFrameCompressedSize(in, in_len);
	if (ZSTD_isError(frame) || frame != in_len)
		return LSQ_ERR_CODEC;
	/* One shot into the caller's buffer: no window allocation, and a
	 * frame whose content does not fit in out_cap is an error. */
	n = ZSTD_decompressDCtx(ctx, out, out_cap, in, in_len);
	if (ZSTD_isError(n))
		return LSQ_ERR_CODEC;
	*out_len = n;
	return LSQ_OK;
}

const struct lsq_codec_ops lsq_codec_zstd_ops = {
	.name = "zstd",
	.options_len = 4,
	.parse_options = zstd_parse_options,
	.ctx_create = zstd_ctx_create,
	.ctx_destroy = zstd_ctx_destroy,
	.decompress = zstd_decompress,
};
