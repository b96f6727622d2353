/* SPDX-License-Identifier: MIT */
/*
 * codec_zlib.c - SquashFS "gzip" (id 1): a zlib-wrapped deflate stream.
 */
#include <limits.h>
#include <stdlib.h>

#define ZLIB_CONST /* const next_in */
#include <zlib.h>

#include "lsq/error.h"
#include "common/endian.h"
#include "common/log.h"
#include "codec/codec_i.h"

/* strategies bitmask: default, filtered, huffman-only, rle, fixed */
#define GZIP_STRATEGIES_ALL 0x1fu

static int zlib_parse_options(const uint8_t *opt, struct lsq_codec_cfg *cfg)
{
	uint32_t level = lsq_le32(opt);
	uint16_t window = lsq_le16(opt + 4);
	uint16_t strategies = lsq_le16(opt + 6);

	if (level < 1 || level > 9 || window < 8 || window > 15 ||
	    (strategies & ~GZIP_STRATEGIES_ALL)) {
		lsq_debug("gzip: bad options: level %u, window %u, "
			  "strategies 0x%x", (unsigned)level, (unsigned)window,
			  (unsigned)strategies);
		return LSQ_ERR_CORRUPT;
	}
	/* A 15-bit window decodes every smaller one, so nothing to keep. */
	return LSQ_OK;
}

static int zlib_ctx_create(const struct lsq_codec_cfg *cfg, void **out)
{
	z_stream *zs = calloc(1, sizeof(*zs));

	if (!zs)
		return LSQ_ERR_NOMEM;
	/* zlib header, window up to 32 KiB: what mksquashfs writes */
	if (inflateInit2(zs, 15) != Z_OK) {
		free(zs);
		return LSQ_ERR_NOMEM;
	}
	*out = zs;
	return LSQ_OK;
}

static void zlib_ctx_destroy(void *ctx)
{
	z_stream *zs = ctx;

	inflateEnd(zs);
	free(zs);
}

static int zlib_decompress(const struct lsq_codec_cfg *cfg, void *ctx,
			   const uint8_t *in, size_t in_len, uint8_t *out,
			   size_t out_cap, size_t *out_len)
{
	z_stream *zs = ctx;
	int ret;

	/* zlib counts in uInt; blocks are at most 1 MiB, so larger input is
	 * not a SquashFS block and larger output room is never needed. */
	if (in_len > UINT_MAX)
		return LSQ_ERR_CODEC;
	if (out_cap > UINT_MAX)
		out_cap = UINT_MAX;

	/* also recovers a stream left in an error state by the last call */
	if (inflateReset(zs) != Z_OK)
		return LSQ_ERR_CODEC;
	zs->next_in = in;
	zs->avail_in = (uInt)in_len;
	zs->next_out = out;
	zs->avail_out = (uInt)out_cap;

	/* One call with Z_FINISH either ends the stream (adler32 checked) or
	 * fails: Z_BUF_ERROR for input that stops early or output that does
	 * not fit. It cannot loop. */
	ret = inflate(zs, Z_FINISH);
	if (ret != Z_STREAM_END || zs->avail_in != 0)
		return LSQ_ERR_CODEC;
	*out_len = out_cap - zs->avail_out;
	return LSQ_OK;
}

const struct lsq_codec_ops lsq_codec_zlib_ops = {
	.name = "gzip",
	.options_len = 8,
	.parse_options = zlib_parse_options,
	.ctx_create = zlib_ctx_create,
	.ctx_destroy = zlib_ctx_destroy,
	.decompress = zlib_decompress,
};
