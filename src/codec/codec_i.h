/* SPDX-License-Identifier: MIT */
/*
 * codec_i.h - internal interface between the codec registry (codec.c), the
 * context pool (codec_pool.c) and the per-codec files (codec_<name>.c).
 *
 * Each codec file exports one const struct lsq_codec_ops. A codec whose
 * library keeps no reusable decompression state (lz4, lzo) leaves
 * ctx_create NULL and is called without a pool slot.
 */
#ifndef LSQ_CODEC_I_H
#define LSQ_CODEC_I_H

#include <stddef.h>
#include <stdint.h>

#include "lsq_config.h"

/* Settings fixed at lsq_codec_create() time, read-only afterwards. */
struct lsq_codec_cfg {
	uint32_t block_size;
	/* liblzma memory limit for one stream (lzma and xz only). */
	uint64_t memlimit;
};

struct lsq_codec_ops {
	const char *name;
	/* One-time library set-up, called by every lsq_codec_create() (may
	 * be NULL). LSQ_ERR_UNSUPPORTED when the library is unusable. */
	int (*global_init)(void);
	/* Exact size of the superblock's compressor options for this codec;
	 * 0 means the codec has none and any options block is corrupt. */
	size_t options_len;
	/* Validate options (exactly options_len bytes, never NULL) and fill
	 * the codec-specific parts of cfg. LSQ_ERR_CORRUPT for bad values. */
	int (*parse_options)(const uint8_t *options, struct lsq_codec_cfg *cfg);
	/* Fill cfg for an image without options (may be NULL). */
	void (*default_options)(struct lsq_codec_cfg *cfg);
	/* Reusable state; NULL when the library keeps none. */
	int (*ctx_create)(const struct lsq_codec_cfg *cfg, void **out);
	void (*ctx_destroy)(void *ctx);
	/* Arguments are checked by the caller: in_len > 0, out_len != NULL.
	 * ctx is the slot's state (NULL for stateless codecs), held
	 * exclusively for the duration of the call. */
	int (*decompress)(const struct lsq_codec_cfg *cfg, void *ctx,
			  const uint8_t *in, size_t in_len, uint8_t *out,
			  size_t out_cap, size_t *out_len);
};

extern const struct lsq_codec_ops lsq_codec_zlib_ops;
extern const struct lsq_codec_ops lsq_codec_lzma_ops;
extern const struct lsq_codec_ops lsq_codec_xz_ops;
extern const struct lsq_codec_ops lsq_codec_lz4_ops;
extern const struct lsq_codec_ops lsq_codec_zstd_ops;
#if LSQ_HAVE_LZO
extern const struct lsq_codec_ops lsq_codec_lzo_ops;
#endif

/*
 * Context pool: a fixed array of slots, each a mutex and one lazily
 * created context. No lock besides the slot mutexes exists.
 */
struct lsq_codec_pool;
struct lsq_codec_slot;

/* slots must be >= 1. Errors: LSQ_ERR_NOMEM. */
int lsq_codec_pool_create(const struct lsq_codec_ops *ops,
			  const struct lsq_codec_cfg *cfg, unsigned slots,
			  struct lsq_codec_pool **out);

/* NULL is ignored. No slot may be acquired. */
void lsq_codec_pool_destroy(struct lsq_codec_pool *pool);

/* Lock a slot (the calling CPU's if free, else any free one, else wait for
 * the CPU's) and return it with its context, creating the context on first
 * use. Errors: LSQ_ERR_NOMEM (nothing is held then). */
int lsq_codec_pool_acquire(struct lsq_codec_pool *pool,
			   struct lsq_codec_slot **slot, void **ctx);

void lsq_codec_pool_release(struct lsq_codec_slot *slot);

#endif
