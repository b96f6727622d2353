/* SPDX-License-Identifier: MIT */
/*
 * codec_lzo.c - SquashFS "lzo" (id 3): one raw LZO1X block.
 *
 * Every lzo1x compressor (1, 1_11, 1_12, 1_15, 999) writes the same
 * format, which lzo1x_decompress_safe reads. It needs no work memory or
 * state, so there is no context and no pool slot.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <lzo/lzo1x.h>

#include "lsq/error.h"
#include "common/endian.h"
#include "common/log.h"
#include "codec/codec_i.h"

enum lzo_algorithm {
	LZO1X_1,
	LZO1X_1_11,
	LZO1X_1_12,
	LZO1X_1_15,
	LZO1X_999,
};

static pthread_once_t lzo_once = PTHREAD_ONCE_INIT;
static int lzo_init_status = LZO_E_ERROR;

static void lzo_init_once(void)
{
	/* checks that the library matches the headers we were built with */
	lzo_init_status = lzo_init();
}

static int lzo_global_init(void)
{
	if (pthread_once(&lzo_once, lzo_init_once) != 0 ||
	    lzo_init_status != LZO_E_OK) {
		lsq_err_log("lzo: lzo_init() failed: library does not match "
			    "its headers");
		return LSQ_ERR_UNSUPPORTED;
	}
	return LSQ_OK;
}

static int lzo_parse_options(const uint8_t *opt, struct lsq_codec_cfg *cfg)
{
	uint32_t algorithm = lsq_le32(opt);
	uint32_t level = lsq_le32(opt + 4);
	bool ok;

	/* only lzo1x_999 has levels; the tools store 0 for the others */
	if (algorithm == LZO1X_999)
		ok = level >= 1 && level <= 9;
	else
		ok = algorithm < LZO1X_999 && level == 0;
	if (!ok) {
		lsq_debug("lzo: bad options: algorithm %u, level %u",
			  (unsigned)algorithm, (unsigned)level);
		return LSQ_ERR_CORRUPT;
	}
	return LSQ_OK;
}

static int lzo_decompress(const struct lsq_codec_cfg *cfg, void *ctx,
			  const uint8_t *in, size_t in_len, uint8_t *out,
			  size_t out_cap, size_t *out_len)
{
	lzo_uint n = out_cap;
	int ret;

	/* Bounds-checked on input and output. Input left over after the
	 * end-of-stream marker is LZO_E_INPUT_NOT_CONSUMED, an error. The
	 * cast drops const only because lzo's prototype lacks it. */
	ret = lzo1x_decompress_safe((lzo_bytep)(uintptr_t)in, in_len, out, &n,
				    NULL);
	if (ret != LZO_E_OK || n > out_cap)
		return LSQ_ERR_CODEC;
	*out_len = n;
	return LSQ_OK;
}

const struct lsq_codec_ops lsq_codec_lzo_ops = {
	.name = "lzo",
	.global_init = lzo_global_init,
	.options_len = 8,
	.parse_options = lzo_parse_options,
	.decompress = lzo_decompress,
};
