/* SPDX-License-Identifier: MIT */
/*
 * codec_liblzma.h - pieces shared by the two liblzma-backed codecs,
 * "lzma" (id 2, the legacy .lzma "alone" format) and "xz" (id 4).
 */
#ifndef LSQ_CODEC_LIBLZMA_H
#define LSQ_CODEC_LIBLZMA_H

#include <lzma.h>

#include "codec/codec_i.h"

/* The memory limit for one decoder when the image says its dictionaries
 * are at most dict_size bytes (see codec_liblzma.c). */
uint64_t lsq_liblzma_memlimit(uint64_t dict_size, uint32_t block_size);

/* Context: one lzma_stream. Re-initialising a decoder of the same kind on
 * it keeps liblzma's coder and dictionary allocations, so a slot pays for
 * them once. */
int lsq_liblzma_ctx_create(const struct lsq_codec_cfg *cfg, void **out);
void lsq_liblzma_ctx_destroy(void *ctx);

/* Run a freshly initialised decoder on strm over the whole input to the
 * end of its stream. Success only when the stream ended, all input was
 * consumed and the output fit. */
int lsq_liblzma_run(lzma_stream *strm, const uint8_t *in, size_t in_len,
		    uint8_t *out, size_t out_cap, size_t *out_len);

#endif
