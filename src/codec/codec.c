/* SPDX-License-Identifier: MIT */
/*
 * codec.c - registry of SquashFS compressor ids and the public entry points.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "common/bind_cpu.h"
#include "common/histogram.h"
#include "common/log.h"
#include "lsq/error.h"

#include "codec/codec.h"
#include "codec/codec_i.h"

/* More slots than this only cost memory: contention is already nil. */
#define MAX_CONTEXTS 1024u

struct lsq_codec {
	const struct lsq_codec_ops *ops;
	struct lsq_codec_cfg cfg;
	struct lsq_codec_pool *pool; /* NULL for stateless codecs */
	/* for the stats; a few relaxed adds per block are noise next to
	 * the decompression they measure */
	atomic_uint_least64_t calls, nanoseconds;
	struct lsq_histogram *seconds;
};

#define DECOMPRESS_HISTOGRAM(codec)                                       	static LSQ_HISTOGRAM(codec##_seconds, "decompress_seconds",        			     "Time to decompress one block.", "codec",     			     #codec, LSQ_HISTOGRAM_NS)
DECOMPRESS_HISTOGRAM(gzip)
DECOMPRESS_HISTOGRAM(lzma)
DECOMPRESS_HISTOGRAM(lzo)
DECOMPRESS_HISTOGRAM(xz)
DECOMPRESS_HISTOGRAM(lz4)
DECOMPRESS_HISTOGRAM(zstd)

void lsq_codec_get_stats(struct lsq_codec *codec, uint64_t *calls,
			 uint64_t *nanoseconds)
{
	*calls = atomic_load_explicit(&codec->calls, memory_order_relaxed);
	*nanoseconds = atomic_load_explicit(&codec->nanoseconds,
					    memory_order_relaxed);
}

/* By SquashFS compressor id: every one named, built in or not, so that
 * errors can name what is missing; ops NULL when not built in. */
static const struct {
	const char *name;
	const struct lsq_codec_ops *ops;
	struct lsq_histogram *seconds;
} registry[] = {
	[LSQ_CODEC_GZIP] = { "gzip", &lsq_codec_zlib_ops, &gzip_seconds },
	[LSQ_CODEC_LZMA] = { "lzma", &lsq_codec_lzma_ops, &lzma_seconds },
#if LSQ_HAVE_LZO
	[LSQ_CODEC_LZO] = { "lzo", &lsq_codec_lzo_ops, &lzo_seconds },
#else
	[LSQ_CODEC_LZO] = { "lzo", NULL, &lzo_seconds },
#endif
	[LSQ_CODEC_XZ] = { "xz", &lsq_codec_xz_ops, &xz_seconds },
	[LSQ_CODEC_LZ4] = { "lz4", &lsq_codec_lz4_ops, &lz4_seconds },
	[LSQ_CODEC_ZSTD] = { "zstd", &lsq_codec_zstd_ops, &zstd_seconds },
};

static const struct lsq_codec_ops *ops_for_id(unsigned id)
{
	return id < sizeof(registry) / sizeof(registry[0]) ? registry[id].ops
							   : NULL;
}

const char *lsq_codec_name(unsigned id)
{
	if (id < sizeof(registry) / sizeof(registry[0]) && registry[id].name)
		return registry[id].name;
	return "unknown";
}

bool lsq_codec_supported(unsigned id)
{
	return ops_for_id(id) != NULL;
}

const char *lsq_codec_list(void)
{
#if LSQ_HAVE_LZO
	return "gzip lzma lzo xz lz4 zstd";
#else
	return "gzip lzma xz lz4 zstd";
#endif
}

int lsq_codec_create(unsigned id, const void *options, size_t options_len,
		     uint32_t block_size, unsigned contexts,
		     struct lsq_codec **out)
{
	const struct lsq_codec_ops *ops = ops_for_id(id);
	struct lsq_codec *codec;
	int err;

	if (!out || (!options && options_len != 0))
		return LSQ_ERR_INVALID;
	if (!ops)
		return LSQ_ERR_UNSUPPORTED;
	if (ops->global_init) {
		err = ops->global_init();
		if (err < 0)
			return err;
	}

	codec = calloc(1, sizeof(*codec));
	if (!codec)
		return LSQ_ERR_NOMEM;
	codec->ops = ops;
	codec->cfg.block_size = block_size;
	codec->seconds = registry[id].seconds;

	if (options) {
		if (options_len != ops->options_len || ops->options_len == 0) {
			lsq_debug("%s: compressor options of %zu bytes, "
				  "expected %zu", ops->name, options_len,
				  ops->options_len);
			err = LSQ_ERR_CORRUPT;
			goto fail_free_codec;
		}
		err = ops->parse_options(options, &codec->cfg);
		if (err < 0)
			goto fail_free_codec;
	} else if (ops->default_options) {
		ops->default_options(&codec->cfg);
	}

	if (ops->ctx_create) {
		if (contexts == 0)
			contexts = lsq_online_cpus();
		if (contexts > MAX_CONTEXTS)
			contexts = MAX_CONTEXTS;
		err = lsq_codec_pool_create(ops, &codec->cfg, contexts,
					    &codec->pool);
		if (err < 0)
			goto fail_free_codec;
	}
	*out = codec;
	return LSQ_OK;

fail_free_codec:
	free(codec);
	return err;
}

void lsq_codec_destroy(struct lsq_codec *codec)
{
	if (!codec)
		return;
	lsq_codec_pool_destroy(codec->pool);
	free(codec);
}

int lsq_codec_decompress(struct lsq_codec *codec, const void *in,
			 size_t in_len, void *out, size_t out_cap,
			 size_t *out_len)
{
	struct lsq_codec_slot *slot;
	void *ctx = NULL;
	uint8_t dummy;
	uint64_t start, took;
	int err;

	if (!codec || !out_len || (!in && in_len) || (!out && out_cap))
		return LSQ_ERR_INVALID;
	/* no format here encodes anything in zero bytes */
	if (in_len == 0)
		return LSQ_ERR_CODEC;
	/* libraries may reject a NULL buffer even when it is never written */
	if (!out)
		out = &dummy;

	start = lsq_now_ns();
	if (!codec->pool) {
		err = codec->ops->decompress(&codec->cfg, NULL, in, in_len,
					     out, out_cap, out_len);
	} else {
		err = lsq_codec_pool_acquire(codec->pool, &slot, &ctx);
		if (err < 0)
			return err;
		err = codec->ops->decompress(&codec->cfg, ctx, in, in_len, out,
					     out_cap, out_len);
		lsq_codec_pool_release(slot);
	}
	took = lsq_now_ns() - start;
	atomic_fetch_add_explicit(&codec->calls, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&codec->nanoseconds, took,
				  memory_order_relaxed);
	lsq_histogram_add(codec->seconds, took);
	return err;
}
