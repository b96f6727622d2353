/* SPDX-License-Identifier: MIT */
/*
 * codec_lz4.c - SquashFS "lz4" (id 5): one raw LZ4 block (no frame).
 *
 * LZ4 block decoding keeps no state between calls, so there is no context
 * and no pool slot: LZ4_decompress_safe works on the caller's buffers only.
 * HC-compressed images use the same block format.
 */
#include <limits.h>
#include <lz4.h>

#include "lsq/error.h"
#include "common/endian.h"
#include "common/log.h"
#include "codec/codec_i.h"

#define LZ4_LEGACY_VERSION 1 /* the only format version squashfs defines */
#define LZ4_FLAGS_ALL 0x1u /* 0x1: compressed with LZ4 HC */

static int lz4_parse_options(const uint8_t *opt, struct lsq_codec_cfg *cfg)
{
	uint32_t version = lsq_le32(opt);
	uint32_t flags = lsq_le32(opt + 4);

	if (version != LZ4_LEGACY_VERSION || (flags & ~LZ4_FLAGS_ALL)) {
		lsq_debug("lz4: bad options: version %u, flags 0x%x",
			  (unsigned)version, (unsigned)flags);
		return LSQ_ERR_CORRUPT;
	}
	return LSQ_OK;
}

static int lz4_decompress(const struct lsq_codec_cfg *cfg, void *ctx,
			  const uint8_t *in, size_t in_len, uint8_t *out,
			  size_t out_cap, size_t *out_len)
{
	int n;

	/* LZ4 counts in int; see codec_zlib.c for why clamping is safe */
	if (in_len > INT_MAX)
		return LSQ_ERR_CODEC;
	if (out_cap > INT_MAX)
		out_cap = INT_MAX;

	/*
	 * Bounds-checked on both sides; it also fails unless the last
	 * literals end exactly at in_len. The block format has no end mark,
	 * though, so bytes appended to a valid block can parse as more
	 * sequences; they are only caught when they overflow out_cap.
	 */
	n = LZ4_decompress_safe((const char *)in, (char *)out, (int)in_len,
				(int)out_cap);
	if (n < 0)
		return LSQ_ERR_CODEC;
	*out_len = (size_t)n;
	return LSQ_OK;
}

const struct lsq_codec_ops lsq_codec_lz4_ops = {
	.name = "lz4",
	.options_len = 8,
	.parse_options = lz4_parse_options,
	.decompress = lz4_decompress,
};
