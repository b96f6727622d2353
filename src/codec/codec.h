/* SPDX-License-Identifier: MIT */
/*
 * codec.h - decompressors for the SquashFS compressor ids, with a pool of
 * reusable per-CPU contexts.
 *
 * One struct lsq_codec exists per opened image. lsq_codec_decompress() is
 * thread-safe: it borrows one of the codec's context slots (picked from the
 * calling CPU, falling back to any free slot) for the duration of the call.
 * Contexts are created lazily and reused, never created per block.
 */
#ifndef LSQ_CODEC_H
#define LSQ_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SquashFS compressor ids (superblock 'compression_id'). */
enum lsq_codec_id {
	LSQ_CODEC_GZIP = 1,
	LSQ_CODEC_LZMA = 2,
	LSQ_CODEC_LZO = 3,
	LSQ_CODEC_XZ = 4,
	LSQ_CODEC_LZ4 = 5,
	LSQ_CODEC_ZSTD = 6,
};

struct lsq_codec;

/* Name of a compressor id ("gzip", "xz", ...), "unknown" otherwise. */
const char *lsq_codec_name(unsigned id);

/* Whether this build can decompress id. */
bool lsq_codec_supported(unsigned id);

/* Create a codec for id. options/options_len are the compressor options
 * from the superblock (options NULL when the image has none); they are
 * validated (e.g. lz4 version, gzip window size, xz filter bits) and bad
 * ones are LSQ_ERR_CORRUPT. contexts is the number of context slots
 * (0 = number of online CPUs). block_size bounds the output of every
 * decompress call and is used to cap decoder memory.
 * Errors: LSQ_ERR_UNSUPPORTED (unknown id, or not built in),
 * LSQ_ERR_CORRUPT, LSQ_ERR_NOMEM. */
int lsq_codec_create(unsigned id, const void *options, size_t options_len,
		     uint32_t block_size, unsigned contexts,
		     struct lsq_codec **out);

/* NULL is ignored. No call may be in progress. */
void lsq_codec_destroy(struct lsq_codec *codec);

/* Decompress in[0..in_len) into out[0..out_cap). On success *out_len is the
 * decompressed size (<= out_cap). Input that is malformed, or decompresses
 * to more than out_cap, is LSQ_ERR_CODEC; never reads or writes out of
 * bounds. */
int lsq_codec_decompress(struct lsq_codec *codec, const void *in,
			 size_t in_len, void *out, size_t out_cap,
			 size_t *out_len);

/* Blocks decompressed and the time spent on them (wall clock, summed
 * over threads). Thread-safe. */
void lsq_codec_get_stats(struct lsq_codec *codec, uint64_t *calls,
			 uint64_t *nanoseconds);

/* Space-separated list of compressors this build supports, for --version. */
const char *lsq_codec_list(void);

#endif
