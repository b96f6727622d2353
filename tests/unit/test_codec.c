/* SPDX-License-Identifier: MIT */
/*
 * test_codec.c - every SquashFS codec against its own library's encoder:
 * round trips of assorted sizes, exact and short output buffers, truncated,
 * bit-flipped and padded input, random garbage, the memory limit of the
 * liblzma codecs, compressor option validation, and many threads sharing
 * one codec with fewer context slots than threads. Built without LZO, the
 * test checks that LZO is refused, then exits 77 (skipped) rather than
 * passing with LZO untested.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lz4.h>
#include <lz4hc.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include "lsq_config.h"
#if LSQ_HAVE_LZO
#include <lzo/lzo1x.h>
#endif

#include "lsq/error.h"
#include "codec/codec.h"
#include "common/log.h"
#include "../harness/check.h"

#define BLOCK_SIZE (1u << 20)

/* ---- test data ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, so a failure reproduces */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void fill_random(uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(rng() >> 56);
}

/* Text-like bytes: words from a small vocabulary, so every codec finds
 * matches at many distances. */
static void fill_text(uint8_t *buf, size_t len)
{
	static const char *const words[] = {
		"squashfs ", "block ", "fragment ", "inode ", "directory ",
		"xattr ", "lazy ", "mount ", "http ", "range ", "cache ",
		"zstd ", "the ", "of ", "\n", "0123456789 ",
	};
	size_t n = sizeof(words) / sizeof(words[0]);
	size_t i = 0;

	while (i < len) {
		const char *w = words[rng() % n];

		for (size_t k = 0; w[k] && i < len; k++)
			buf[i++] = (uint8_t)w[k];
	}
}

struct sample {
	const char *what;
	size_t len;
	uint8_t *data;
};

static struct sample samples[16];
static size_t n_samples;

static void add_sample(const char *what, size_t len, int kind)
{
	struct sample *s = &samples[n_samples++];

	s->what = what;
	s->len = len;
	s->data = malloc(len ? len : 1);
	CHECK(s->data);
	if (kind == 0)
		fill_text(s->data, len);
	else if (kind == 1)
		fill_random(s->data, len);
	else
		memset(s->data, 0, len);
}

static void make_samples(void)
{
	add_sample("empty", 0, 0);
	add_sample("1 byte", 1, 0);
	add_sample("7 bytes text", 7, 0);
	add_sample("4 KiB text", 4096, 0);
	add_sample("4 KiB random", 4096, 1);
	add_sample("128 KiB text", 128 << 10, 0);
	add_sample("128 KiB random", 128 << 10, 1);
	add_sample("1 MiB text", 1 << 20, 0);
	add_sample("1 MiB random", 1 << 20, 1);
	add_sample("1 MiB zeros", 1 << 20, 2);
}

/* ---- encoders: each returns the compressed size ---- */

typedef size_t (*encode_fn)(const uint8_t *in, size_t len, uint8_t *out,
			    size_t cap);

static size_t enc_zlib(const uint8_t *in, size_t len, uint8_t *out,
		       size_t cap, int level)
{
	uLongf n = cap;

	CHECK_EQ_INT(compress2(out, &n, in, len, level), Z_OK);
	return n;
}

static size_t enc_zlib1(const uint8_t *in, size_t len, uint8_t *out,
			size_t cap)
{
	return enc_zlib(in, len, out, cap, 1);
}

static size_t enc_zlib9(const uint8_t *in, size_t len, uint8_t *out,
			size_t cap)
{
	return enc_zlib(in, len, out, cap, 9);
}

/* liblzma's .lzma encoder: unknown size in the header, end marker */
static size_t enc_lzma_alone(const uint8_t *in, size_t len, uint8_t *out,
			     size_t cap)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	lzma_options_lzma opt;
	lzma_ret ret;

	CHECK(!lzma_lzma_preset(&opt, 2));
	opt.dict_size = BLOCK_SIZE;
	CHECK_EQ_INT(lzma_alone_encoder(&strm, &opt), LZMA_OK);
	strm.next_in = in;
	strm.avail_in = len;
	strm.next_out = out;
	strm.avail_out = cap;
	ret = lzma_code(&strm, LZMA_FINISH);
	CHECK_EQ_INT(ret, LZMA_STREAM_END);
	lzma_end(&strm);
	return cap - strm.avail_out;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The same, with the real size patched into the header (size and marker) */
static size_t enc_lzma_alone_sized(const uint8_t *in, size_t len,
				   uint8_t *out, size_t cap)
{
	size_t n = enc_lzma_alone(in, len, out, cap);

	put_le64(out + 5, len);
	return n;
}

/* What squashfs-tools writes: known size in the header, no end marker. */
static size_t enc_lzma_squashfs(const uint8_t *in, size_t len, uint8_t *out,
				size_t cap)
{
	lzma_options_lzma opt;
	lzma_filter filters[2];
	size_t pos = 13;

	CHECK(!lzma_lzma_preset(&opt, 5));
	opt.dict_size = BLOCK_SIZE;
	opt.ext_flags = 0;
	filters[0].id = LZMA_FILTER_LZMA1;
	filters[0].options = &opt;
	filters[1].id = LZMA_VLI_UNKNOWN;
	CHECK_EQ_INT(lzma_properties_encode(&filters[0], out), LZMA_OK);
	put_le64(out + 5, len);
	filters[0].id = LZMA_FILTER_LZMA1EXT;
	CHECK_EQ_INT(lzma_raw_buffer_encode(filters, NULL, in, len, out, &pos,
					    cap), LZMA_OK);
	return pos;
}

static size_t enc_xz_preset(const uint8_t *in, size_t len, uint8_t *out,
			    size_t cap, uint32_t preset, lzma_check check)
{
	size_t pos = 0;

	CHECK_EQ_INT(lzma_easy_buffer_encode(preset, check, NULL, in, len, out,
					     &pos, cap), LZMA_OK);
	return pos;
}

static size_t enc_xz0(const uint8_t *in, size_t len, uint8_t *out,
		      size_t cap)
{
	return enc_xz_preset(in, len, out, cap, 0, LZMA_CHECK_CRC32);
}

static size_t enc_xz1_crc64(const uint8_t *in, size_t len, uint8_t *out,
			    size_t cap)
{
	return enc_xz_preset(in, len, out, cap, 1, LZMA_CHECK_CRC64);
}

/* mksquashfs style: BCJ filter, then LZMA2 with the block size as dict */
static size_t enc_xz_bcj(const uint8_t *in, size_t len, uint8_t *out,
			 size_t cap, lzma_vli bcj)
{
	lzma_options_lzma opt;
	lzma_filter filters[3];
	size_t pos = 0;

	CHECK(!lzma_lzma_preset(&opt, 6));
	opt.dict_size = BLOCK_SIZE;
	filters[0].id = bcj;
	filters[0].options = NULL;
	filters[1].id = LZMA_FILTER_LZMA2;
	filters[1].options = &opt;
	filters[2].id = LZMA_VLI_UNKNOWN;
	CHECK_EQ_INT(lzma_stream_buffer_encode(filters, LZMA_CHECK_CRC32, NULL,
					       in, len, out, &pos, cap),
		     LZMA_OK);
	return pos;
}

static size_t enc_xz_x86(const uint8_t *in, size_t len, uint8_t *out,
			 size_t cap)
{
	return enc_xz_bcj(in, len, out, cap, LZMA_FILTER_X86);
}

static size_t enc_xz_arm(const uint8_t *in, size_t len, uint8_t *out,
			 size_t cap)
{
	return enc_xz_bcj(in, len, out, cap, LZMA_FILTER_ARM);
}

static size_t enc_lz4(const uint8_t *in, size_t len, uint8_t *out,
		      size_t cap)
{
	int n = LZ4_compress_default((const char *)in, (char *)out, (int)len,
				     (int)cap);

	CHECK(n > 0);
	return (size_t)n;
}

static size_t enc_lz4hc(const uint8_t *in, size_t len, uint8_t *out,
			size_t cap)
{
	int n = LZ4_compress_HC((const char *)in, (char *)out, (int)len,
				(int)cap, LZ4HC_CLEVEL_MAX);

	CHECK(n > 0);
	return (size_t)n;
}

static size_t enc_zstd(const uint8_t *in, size_t len, uint8_t *out,
		       size_t cap, int level)
{
	size_t n = ZSTD_compress(out, cap, in, len, level);

	CHECK(!ZSTD_isError(n));
	return n;
}

static size_t enc_zstd1(const uint8_t *in, size_t len, uint8_t *out,
			size_t cap)
{
	return enc_zstd(in, len, out, cap, 1);
}

static size_t enc_zstd15(const uint8_t *in, size_t len, uint8_t *out,
			 size_t cap)
{
	return enc_zstd(in, len, out, cap, 15);
}

/* with a content checksum, so every corruption is detectable */
static size_t enc_zstd_checksum(const uint8_t *in, size_t len, uint8_t *out,
				size_t cap)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	size_t n;

	CHECK(cctx);
	CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag,
						   1)));
	n = ZSTD_compress2(cctx, out, cap, in, len);
	CHECK(!ZSTD_isError(n));
	ZSTD_freeCCtx(cctx);
	return n;
}

#if LSQ_HAVE_LZO
static size_t enc_lzo(const uint8_t *in, size_t len, uint8_t *out,
		      size_t cap, int algorithm)
{
	static lzo_align_t wrkmem[(LZO1X_999_MEM_COMPRESS +
				   sizeof(lzo_align_t) - 1) /
				  sizeof(lzo_align_t)];
	lzo_uint n = cap;
	int ret = LZO_E_ERROR;

	switch (algorithm) {
	case 0: ret = lzo1x_1_compress(in, len, out, &n, wrkmem); break;
	case 1: ret = lzo1x_1_11_compress(in, len, out, &n, wrkmem); break;
	case 2: ret = lzo1x_1_12_compress(in, len, out, &n, wrkmem); break;
	case 3: ret = lzo1x_1_15_compress(in, len, out, &n, wrkmem); break;
	case 4: ret = lzo1x_999_compress(in, len, out, &n, wrkmem); break;
	}
	CHECK_EQ_INT(ret, LZO_E_OK);
	return n;
}

static size_t enc_lzo1(const uint8_t *in, size_t len, uint8_t *out,
		       size_t cap)
{
	return enc_lzo(in, len, out, cap, 0);
}

static size_t enc_lzo1_11(const uint8_t *in, size_t len, uint8_t *out,
			  size_t cap)
{
	return enc_lzo(in, len, out, cap, 1);
}

static size_t enc_lzo1_12(const uint8_t *in, size_t len, uint8_t *out,
			  size_t cap)
{
	return enc_lzo(in, len, out, cap, 2);
}

static size_t enc_lzo1_15(const uint8_t *in, size_t len, uint8_t *out,
			  size_t cap)
{
	return enc_lzo(in, len, out, cap, 3);
}

static size_t enc_lzo999(const uint8_t *in, size_t len, uint8_t *out,
			 size_t cap)
{
	return enc_lzo(in, len, out, cap, 4);
}
#endif

struct encoder {
	unsigned id;
	const char *name;
	encode_fn fn;
	/* every corruption is detected (integrity check in the format) */
	bool checked;
	/* bytes after the end of the data are detected whatever out_cap */
	bool terminated;
};

static const struct encoder encoders[] = {
	{ LSQ_CODEC_GZIP, "zlib level 1", enc_zlib1, true, true },
	{ LSQ_CODEC_GZIP, "zlib level 9", enc_zlib9, true, true },
	{ LSQ_CODEC_LZMA, "lzma alone", enc_lzma_alone, false, true },
	{ LSQ_CODEC_LZMA, "lzma alone sized", enc_lzma_alone_sized, false,
	  true },
	{ LSQ_CODEC_LZMA, "lzma squashfs-tools", enc_lzma_squashfs, false,
	  true },
	{ LSQ_CODEC_XZ, "xz preset 0", enc_xz0, true, true },
	{ LSQ_CODEC_XZ, "xz preset 1 crc64", enc_xz1_crc64, true, true },
	{ LSQ_CODEC_XZ, "xz x86 bcj", enc_xz_x86, true, true },
	{ LSQ_CODEC_XZ, "xz arm bcj", enc_xz_arm, true, true },
	/* LZ4 blocks have no end mark: see codec_lz4.c */
	{ LSQ_CODEC_LZ4, "lz4", enc_lz4, false, false },
	{ LSQ_CODEC_LZ4, "lz4 hc", enc_lz4hc, false, false },
	{ LSQ_CODEC_ZSTD, "zstd 1", enc_zstd1, false, true },
	{ LSQ_CODEC_ZSTD, "zstd 15", enc_zstd15, false, true },
	{ LSQ_CODEC_ZSTD, "zstd checksum", enc_zstd_checksum, true, true },
#if LSQ_HAVE_LZO
	{ LSQ_CODEC_LZO, "lzo1x_1", enc_lzo1, false, true },
	{ LSQ_CODEC_LZO, "lzo1x_1_11", enc_lzo1_11, false, true },
	{ LSQ_CODEC_LZO, "lzo1x_1_12", enc_lzo1_12, false, true },
	{ LSQ_CODEC_LZO, "lzo1x_1_15", enc_lzo1_15, false, true },
	{ LSQ_CODEC_LZO, "lzo1x_999", enc_lzo999, false, true },
#endif
};

#define N_ENCODERS (sizeof(encoders) / sizeof(encoders[0]))

static const unsigned all_ids[] = {
	LSQ_CODEC_GZIP, LSQ_CODEC_LZMA, LSQ_CODEC_XZ, LSQ_CODEC_LZ4,
	LSQ_CODEC_ZSTD,
#if LSQ_HAVE_LZO
	LSQ_CODEC_LZO,
#endif
};

#define N_IDS (sizeof(all_ids) / sizeof(all_ids[0]))

/* ---- helpers ---- */

static size_t comp_cap(size_t len)
{
	return len + len / 8 + 4096;
}

static struct lsq_codec *make_codec(unsigned id, unsigned contexts)
{
	struct lsq_codec *codec = NULL;

	CHECK_EQ_INT(lsq_codec_create(id, NULL, 0, BLOCK_SIZE, contexts,
				      &codec), LSQ_OK);
	CHECK(codec);
	return codec;
}

/* Decompress and demand the result of a hostile input be sane: either an
 * error, or a success that stayed within out_cap (ASan checks the rest). */
static int decode(struct lsq_codec *codec, const uint8_t *in, size_t in_len,
		  uint8_t *out, size_t out_cap, size_t *out_len)
{
	size_t n = (size_t)-1;
	int err = lsq_codec_decompress(codec, in, in_len, out, out_cap, &n);

	if (err == LSQ_OK)
		CHECK(n <= out_cap);
	else
		CHECK_EQ_INT(err, LSQ_ERR_CODEC);
	*out_len = n;
	return err;
}

/* Round trip, exact and spare output room, and one byte short. */
static void check_round_trip(struct lsq_codec *codec, const uint8_t *comp,
			     size_t comp_len, const struct sample *s,
			     uint8_t *out)
{
	size_t n;

	CHECK_EQ_INT(decode(codec, comp, comp_len, out, s->len, &n), LSQ_OK);
	CHECK_EQ_INT(n, s->len);
	CHECK(memcmp(out, s->data, s->len) == 0);

	memset(out, 0xa5, s->len + 4096);
	CHECK_EQ_INT(decode(codec, comp, comp_len, out, s->len + 4096, &n),
		     LSQ_OK);
	CHECK_EQ_INT(n, s->len);
	CHECK(memcmp(out, s->data, s->len) == 0);

	if (s->len > 0)
		CHECK_EQ_INT(decode(codec, comp, comp_len, out, s->len - 1, &n),
			     LSQ_ERR_CODEC);
}

static void check_truncated(const struct encoder *e, struct lsq_codec *codec,
			    const uint8_t *comp, size_t comp_len,
			    const struct sample *s, uint8_t *out)
{
	size_t cuts[] = { comp_len - 1, comp_len / 2, 1, 0 };
	size_t n;

	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		if (cuts[i] >= comp_len)
			continue;
		if (decode(codec, comp, cuts[i], out, s->len, &n) != LSQ_OK)
			continue;
		fprintf(stderr, "%s, %s: truncated to %zu of %zu decoded\n",
			e->name, s->what, cuts[i], comp_len);
		CHECK(!"truncated input accepted");
	}
}

static void check_trailing(const struct encoder *e, struct lsq_codec *codec,
			   uint8_t *comp, size_t comp_len,
			   const struct sample *s, uint8_t *out)
{
	static const size_t pads[] = { 1, 3, 16 };
	size_t n;

	for (size_t i = 0; i < sizeof(pads) / sizeof(pads[0]); i++) {
		size_t len = comp_len + pads[i];

		fill_random(comp + comp_len, pads[i]);
		if (i == 0)
			comp[comp_len] = 0;
		/* with no room for more output, every codec must notice */
		CHECK_EQ_INT(decode(codec, comp, len, out, s->len, &n),
			     LSQ_ERR_CODEC);
		if (decode(codec, comp, len, out, s->len + 4096, &n) ==
		    LSQ_OK && e->terminated) {
			fprintf(stderr, "%s, %s: %zu trailing bytes accepted\n",
				e->name, s->what, pads[i]);
			CHECK(!"trailing garbage accepted");
		}
	}
}

static void check_flips(const struct encoder *e, struct lsq_codec *codec,
			uint8_t *comp, size_t comp_len,
			const struct sample *s, uint8_t *out)
{
	/* every byte of small streams; a few dozen decodes of large ones */
	size_t stride = comp_len <= 64 ? 1 :
			comp_len / (comp_len <= (64 << 10) ? 32 : 8);
	size_t n;

	for (size_t pos = 0; pos < comp_len; pos += stride) {
		for (int bit = 0; bit < 8; bit += 7) {
			int err;

			comp[pos] ^= (uint8_t)(1u << bit);
			err = decode(codec, comp, comp_len, out, s->len + 64,
				     &n);
			comp[pos] ^= (uint8_t)(1u << bit);
			if (err != LSQ_OK || !e->checked)
				continue;
			/* an ignored bit may flip; wrong data may not pass */
			if (n != s->len || memcmp(out, s->data, s->len) != 0) {
				fprintf(stderr, "%s, %s: flip at %zu bit %d "
					"gave wrong data\n", e->name, s->what,
					pos, bit);
				CHECK(!"corruption not detected");
			}
		}
	}
}

static void test_encoders(void)
{
	size_t cap = comp_cap(BLOCK_SIZE) + 64;
	uint8_t *comp = malloc(cap);
	uint8_t *out = malloc(BLOCK_SIZE + 4096);

	CHECK(comp && out);
	for (size_t i = 0; i < N_ENCODERS; i++) {
		const struct encoder *e = &encoders[i];
		struct lsq_codec *codec = make_codec(e->id, 2);

		for (size_t k = 0; k < n_samples; k++) {
			const struct sample *s = &samples[k];
			size_t len = e->fn(s->data, s->len, comp,
					   comp_cap(s->len));

			if (getenv("TEST_CODEC_VERBOSE"))
				fprintf(stderr, "%s, %s: %zu -> %zu bytes\n",
					e->name, s->what, s->len, len);
			check_round_trip(codec, comp, len, s, out);
			check_truncated(e, codec, comp, len, s, out);
			check_flips(e, codec, comp, len, s, out);
			check_trailing(e, codec, comp, len, s, out);
		}
		lsq_codec_destroy(codec);
	}
	free(comp);
	free(out);
}

/* Random bytes, and a valid stream's start followed by random bytes. */
static void test_garbage(void)
{
	uint8_t in[8192], valid[8192 + 4096], out[16384];
	size_t n;

	for (size_t i = 0; i < N_ENCODERS; i++) {
		const struct encoder *e = &encoders[i];
		struct lsq_codec *codec = make_codec(e->id, 1);
		size_t vlen = e->fn(samples[3].data, samples[3].len, valid,
				    sizeof(valid));

		for (int round = 0; round < 300; round++) {
			size_t len = 1 + (size_t)(rng() % sizeof(in));
			size_t keep = (size_t)(rng() % vlen);

			fill_random(in, len);
			if (round & 1)
				memcpy(in, valid, keep < len ? keep : len);
			decode(codec, in, len, out, rng() % sizeof(out), &n);
		}
		lsq_codec_destroy(codec);
	}
}

/* ---- liblzma memory limit ---- */

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Rewrite the dictionary size in the first block header of an xz stream
 * (the data stays decodable: a larger dictionary changes nothing). */
static void xz_set_dict(uint8_t *xz, uint32_t dict)
{
	lzma_stream_flags flags;
	lzma_filter filters[LZMA_FILTERS_MAX + 1];
	lzma_block block;
	lzma_options_lzma *opt;
	uint32_t old_size;
	size_t nf;

	CHECK_EQ_INT(lzma_stream_header_decode(&flags, xz), LZMA_OK);
	memset(&block, 0, sizeof(block));
	block.version = 1;
	block.check = flags.check;
	block.filters = filters;
	block.header_size = lzma_block_header_size_decode(xz[12]);
	CHECK_EQ_INT(lzma_block_header_decode(&block, NULL, xz + 12), LZMA_OK);
	for (nf = 0; filters[nf].id != LZMA_VLI_UNKNOWN; nf++)
		;
	CHECK_EQ_INT(filters[nf - 1].id, LZMA_FILTER_LZMA2);
	opt = filters[nf - 1].options;
	opt->dict_size = dict;
	old_size = block.header_size;
	CHECK_EQ_INT(lzma_block_header_size(&block), LZMA_OK);
	CHECK_EQ_INT(block.header_size, old_size);
	CHECK_EQ_INT(lzma_block_header_encode(&block, xz + 12), LZMA_OK);
	for (size_t i = 0; i < nf; i++)
		free(filters[i].options);
}

static void test_lzma_memlimit(void)
{
	const struct sample *s = &samples[5]; /* 128 KiB text */
	uint8_t *comp = malloc(comp_cap(s->len));
	uint8_t *out = malloc(s->len);
	uint8_t opts[8];
	struct lsq_codec *codec, *big, *huge;
	size_t len, n;

	CHECK(comp && out);

	/* lzma: the dictionary is in bytes 1..4 of the header */
	codec = make_codec(LSQ_CODEC_LZMA, 1);
	len = enc_lzma_squashfs(s->data, s->len, comp, comp_cap(s->len));
	put_le32(comp + 1, 4u << 20);
	CHECK_EQ_INT(decode(codec, comp, len, out, s->len, &n), LSQ_OK);
	put_le32(comp + 1, 256u << 20);
	CHECK_EQ_INT(decode(codec, comp, len, out, s->len, &n), LSQ_ERR_CODEC);
	put_le32(comp + 1, 0xffffffffu);
	CHECK_EQ_INT(decode(codec, comp, len, out, s->len, &n), LSQ_ERR_CODEC);
	lsq_codec_destroy(codec);

	/* xz: the limit follows the dictionary option, up to a ceiling */
	codec = make_codec(LSQ_CODEC_XZ, 1);
	put_le32(opts, 32u << 20);
	put_le32(opts + 4, 0x1);
	CHECK_EQ_INT(lsq_codec_create(LSQ_CODEC_XZ, opts, 8, BLOCK_SIZE, 1,
				      &big), LSQ_OK);
	len = enc_xz_x86(s->data, s->len, comp, comp_cap(s->len));
	xz_set_dict(comp, 4u << 20);
	CHECK_EQ_INT(decode(codec, comp, len, out, s->len, &n), LSQ_OK);
	CHECK(memcmp(out, s->data, s->len) == 0);
	xz_set_dict(comp, 24u << 20);
	CHECK_EQ_INT(decode(codec, comp, len, out, s->len, &n), LSQ_ERR_CODEC);
	CHECK_EQ_INT(decode(big, comp, len, out, s->len, &n), LSQ_OK);
	CHECK(memcmp(out, s->data, s->len) == 0);
	xz_set_dict(comp, 96u << 20);
	CHECK_EQ_INT(decode(big, comp, len, out, s->len, &n), LSQ_ERR_CODEC);
	/* a 1 GiB dictionary option does not lift the limit that far */
	put_le32(opts, 1u << 30);
	CHECK_EQ_INT(lsq_codec_create(LSQ_CODEC_XZ, opts, 8, BLOCK_SIZE, 1,
				      &huge), LSQ_OK);
	CHECK_EQ_INT(decode(huge, comp, len, out, s->len, &n), LSQ_ERR_CODEC);
	xz_set_dict(comp, 48u << 20);
	CHECK_EQ_INT(decode(huge, comp, len, out, s->len, &n), LSQ_OK);
	CHECK(memcmp(out, s->data, s->len) == 0);
	lsq_codec_destroy(huge);
	lsq_codec_destroy(big);
	lsq_codec_destroy(codec);

	free(comp);
	free(out);
}

/* ---- compressor options ---- */

static int create_with(unsigned id, const void *opt, size_t len)
{
	struct lsq_codec *codec = NULL;
	int err = lsq_codec_create(id, opt, len, BLOCK_SIZE, 1, &codec);

	if (err == LSQ_OK)
		CHECK(codec);
	lsq_codec_destroy(codec);
	return err;
}

static void check_opts8(unsigned id, uint32_t a, uint32_t b, int want)
{
	uint8_t opt[8];

	put_le32(opt, a);
	put_le32(opt + 4, b);
	CHECK_EQ_INT(create_with(id, opt, 8), want);
}

static void check_gzip_opts(uint32_t level, uint16_t window,
			    uint16_t strategies, int want)
{
	uint8_t opt[8];

	put_le32(opt, level);
	opt[4] = (uint8_t)window;
	opt[5] = (uint8_t)(window >> 8);
	opt[6] = (uint8_t)strategies;
	opt[7] = (uint8_t)(strategies >> 8);
	CHECK_EQ_INT(create_with(LSQ_CODEC_GZIP, opt, 8), want);
}

static void test_options(void)
{
	uint8_t opt[16] = { 0 };
	struct lsq_codec *codec = (struct lsq_codec *)&opt;

	/* no options: defaults, for every codec */
	for (size_t i = 0; i < N_IDS; i++)
		CHECK_EQ_INT(create_with(all_ids[i], NULL, 0), LSQ_OK);

	/* wrong length for every codec */
	for (size_t i = 0; i < N_IDS; i++) {
		for (size_t len = 0; len <= 9; len++) {
			size_t good = all_ids[i] == LSQ_CODEC_ZSTD ? 4 :
				      all_ids[i] == LSQ_CODEC_LZMA ? 99 : 8;

			if (len == good)
				continue;
			CHECK_EQ_INT(create_with(all_ids[i], opt, len),
				     LSQ_ERR_CORRUPT);
		}
	}

	/* gzip: level 1..9, window 8..15, strategy bits 0x1f */
	check_gzip_opts(9, 15, 0x1, LSQ_OK);
	check_gzip_opts(1, 8, 0x1f, LSQ_OK);
	check_gzip_opts(6, 12, 0, LSQ_OK);
	check_gzip_opts(0, 15, 0x1, LSQ_ERR_CORRUPT);
	check_gzip_opts(10, 15, 0x1, LSQ_ERR_CORRUPT);
	check_gzip_opts(9, 7, 0x1, LSQ_ERR_CORRUPT);
	check_gzip_opts(9, 16, 0x1, LSQ_ERR_CORRUPT);
	check_gzip_opts(9, 15, 0x20, LSQ_ERR_CORRUPT);
	check_gzip_opts(9, 15, 0x8001, LSQ_ERR_CORRUPT);

	/* xz: dictionary 2^n or 3 * 2^n, filter bits 0x3f */
	check_opts8(LSQ_CODEC_XZ, 1u << 17, 0, LSQ_OK);
	check_opts8(LSQ_CODEC_XZ, 3u << 16, 0x3f, LSQ_OK);
	check_opts8(LSQ_CODEC_XZ, 8192, 0x1, LSQ_OK);
	check_opts8(LSQ_CODEC_XZ, 1u << 20, 0x20, LSQ_OK);
	check_opts8(LSQ_CODEC_XZ, 3u << 30, 0, LSQ_OK);
	check_opts8(LSQ_CODEC_XZ, 1u << 31, 0, LSQ_OK);
	check_opts8(LSQ_CODEC_XZ, 0, 0, LSQ_ERR_CORRUPT);
	check_opts8(LSQ_CODEC_XZ, 5u << 16, 0, LSQ_ERR_CORRUPT);
	check_opts8(LSQ_CODEC_XZ, (1u << 20) + 1, 0, LSQ_ERR_CORRUPT);
	check_opts8(LSQ_CODEC_XZ, 0xffffffffu, 0, LSQ_ERR_CORRUPT);
	check_opts8(LSQ_CODEC_XZ, 1u << 20, 0x40, LSQ_ERR_CORRUPT);
	check_opts8(LSQ_CODEC_XZ, 1u << 20, 0x80000000u, LSQ_ERR_CORRUPT);

	/* lz4: version 1, flag HC */
	check_opts8(LSQ_CODEC_LZ4, 1, 0, LSQ_OK);
	check_opts8(LSQ_CODEC_LZ4, 1, 1, LSQ_OK);
	check_opts8(LSQ_CODEC_LZ4, 0, 0, LSQ_ERR_CORRUPT);
	check_opts8(LSQ_CODEC_LZ4, 2, 0, LSQ_ERR_CORRUPT);
	check_opts8(LSQ_CODEC_LZ4, 1, 2, LSQ_ERR_CORRUPT);

	/* zstd: level 1..22 */
	for (uint32_t level = 0; level <= 30; level++) {
		put_le32(opt, level);
		CHECK_EQ_INT(create_with(LSQ_CODEC_ZSTD, opt, 4),
			     level >= 1 && level <= 22 ? LSQ_OK :
			     LSQ_ERR_CORRUPT);
	}
	put_le32(opt, 0xffffffffu);
	CHECK_EQ_INT(create_with(LSQ_CODEC_ZSTD, opt, 4), LSQ_ERR_CORRUPT);

	/* lzma: no options exist, so any are corrupt */
	CHECK_EQ_INT(create_with(LSQ_CODEC_LZMA, opt, 0), LSQ_ERR_CORRUPT);
	CHECK_EQ_INT(create_with(LSQ_CODEC_LZMA, opt, 8), LSQ_ERR_CORRUPT);

#if LSQ_HAVE_LZO
	/* lzo: algorithms 0..4, level only for lzo1x_999 */
	for (uint32_t alg = 0; alg <= 5; alg++) {
		for (uint32_t level = 0; level <= 10; level++) {
			bool ok = alg == 4 ? level >= 1 && level <= 9 :
				  alg < 4 && level == 0;

			check_opts8(LSQ_CODEC_LZO, alg, level,
				    ok ? LSQ_OK : LSQ_ERR_CORRUPT);
		}
	}
	check_opts8(LSQ_CODEC_LZO, 0xffffffffu, 0, LSQ_ERR_CORRUPT);
#else
	CHECK_EQ_INT(create_with(LSQ_CODEC_LZO, NULL, 0), LSQ_ERR_UNSUPPORTED);
#endif

	/* unknown ids; bad arguments leave *out alone */
	CHECK_EQ_INT(create_with(0, NULL, 0), LSQ_ERR_UNSUPPORTED);
	CHECK_EQ_INT(create_with(7, NULL, 0), LSQ_ERR_UNSUPPORTED);
	CHECK_EQ_INT(create_with(0xffffffffu, NULL, 0), LSQ_ERR_UNSUPPORTED);
	CHECK_EQ_INT(lsq_codec_create(LSQ_CODEC_GZIP, NULL, 8, BLOCK_SIZE, 1,
				      &codec), LSQ_ERR_INVALID);
	put_le32(opt, 0);
	CHECK_EQ_INT(lsq_codec_create(LSQ_CODEC_ZSTD, opt, 4, BLOCK_SIZE, 1,
				      &codec), LSQ_ERR_CORRUPT);
	CHECK(codec == (struct lsq_codec *)&opt);
}

static void test_registry(void)
{
	size_t n = (size_t)-1;
	uint8_t byte = 0, out[4];
	struct lsq_codec *codec;

	CHECK(strcmp(lsq_codec_name(LSQ_CODEC_GZIP), "gzip") == 0);
	CHECK(strcmp(lsq_codec_name(LSQ_CODEC_LZMA), "lzma") == 0);
	CHECK(strcmp(lsq_codec_name(LSQ_CODEC_LZO), "lzo") == 0);
	CHECK(strcmp(lsq_codec_name(LSQ_CODEC_XZ), "xz") == 0);
	CHECK(strcmp(lsq_codec_name(LSQ_CODEC_LZ4), "lz4") == 0);
	CHECK(strcmp(lsq_codec_name(LSQ_CODEC_ZSTD), "zstd") == 0);
	CHECK(strcmp(lsq_codec_name(0), "unknown") == 0);
	CHECK(strcmp(lsq_codec_name(7), "unknown") == 0);

	for (size_t i = 0; i < N_IDS; i++)
		CHECK(lsq_codec_supported(all_ids[i]));
	CHECK(!lsq_codec_supported(0));
	CHECK(!lsq_codec_supported(7));
	CHECK_EQ_INT(lsq_codec_supported(LSQ_CODEC_LZO), LSQ_HAVE_LZO);
#if LSQ_HAVE_LZO
	CHECK(strcmp(lsq_codec_list(), "gzip lzma lzo xz lz4 zstd") == 0);
#else
	CHECK(strcmp(lsq_codec_list(), "gzip lzma xz lz4 zstd") == 0);
#endif

	lsq_codec_destroy(NULL);

	/* contexts 0: one per CPU */
	codec = make_codec(LSQ_CODEC_ZSTD, 0);
	CHECK_EQ_INT(lsq_codec_decompress(codec, &byte, 0, out, sizeof(out),
					  &n), LSQ_ERR_CODEC);
	CHECK_EQ_INT(lsq_codec_decompress(codec, &byte, 1, out, sizeof(out),
					  NULL), LSQ_ERR_INVALID);
	CHECK_EQ_INT(lsq_codec_decompress(codec, NULL, 1, out, sizeof(out),
					  &n), LSQ_ERR_INVALID);
	CHECK_EQ_INT(lsq_codec_decompress(NULL, &byte, 1, out, sizeof(out),
					  &n), LSQ_ERR_INVALID);
	CHECK(n == (size_t)-1);
	lsq_codec_destroy(codec);
}

/* ---- threads ---- */

#define N_THREADS 8
#define N_CALLS 2000
#define N_INPUTS 8

struct mt_shared {
	struct lsq_codec *codec;
	const uint8_t *comp[N_INPUTS];
	size_t comp_len[N_INPUTS];
	const uint8_t *plain[N_INPUTS];
	size_t plain_len[N_INPUTS];
	atomic_uint failures;
};

struct mt_arg {
	struct mt_shared *shared;
	unsigned index;
};

static void *mt_worker(void *p)
{
	struct mt_arg *arg = p;
	struct mt_shared *sh = arg->shared;
	uint8_t *out = malloc(64 << 10);

	if (!out) {
		atomic_fetch_add(&sh->failures, 1);
		return NULL;
	}
	for (unsigned k = 0; k < N_CALLS; k++) {
		unsigned i = (arg->index + k) % N_INPUTS;
		size_t n = 0;
		int err = lsq_codec_decompress(sh->codec, sh->comp[i],
					       sh->comp_len[i], out, 64 << 10,
					       &n);

		if (err != LSQ_OK || n != sh->plain_len[i] ||
		    memcmp(out, sh->plain[i], n) != 0)
			atomic_fetch_add(&sh->failures, 1);
	}
	free(out);
	return NULL;
}

static void test_threads(void)
{
	/* the first encoder of each id */
	for (size_t id_i = 0; id_i < N_IDS; id_i++) {
		const struct encoder *e = NULL;
		struct mt_shared sh;
		struct mt_arg args[N_THREADS];
		pthread_t tids[N_THREADS];
		uint8_t *bufs[N_INPUTS];

		for (size_t i = 0; i < N_ENCODERS && !e; i++)
			if (encoders[i].id == all_ids[id_i])
				e = &encoders[i];
		CHECK(e);

		memset(&sh, 0, sizeof(sh));
		atomic_init(&sh.failures, 0);
		sh.codec = make_codec(e->id, 2);
		for (unsigned i = 0; i < N_INPUTS; i++) {
			/* 1..32 KiB slices of the text and random samples */
			const struct sample *s = &samples[i & 1 ? 8 : 7];
			size_t len = (size_t)1024 << (i % 6);

			bufs[i] = malloc(comp_cap(len));
			CHECK(bufs[i]);
			sh.plain[i] = s->data + i * 1000;
			sh.plain_len[i] = len;
			sh.comp[i] = bufs[i];
			sh.comp_len[i] = e->fn(sh.plain[i], len, bufs[i],
					       comp_cap(len));
		}
		for (unsigned t = 0; t < N_THREADS; t++) {
			args[t].shared = &sh;
			args[t].index = t;
			CHECK_EQ_INT(pthread_create(&tids[t], NULL, mt_worker,
						    &args[t]), 0);
		}
		for (unsigned t = 0; t < N_THREADS; t++)
			CHECK_EQ_INT(pthread_join(tids[t], NULL), 0);
		CHECK_EQ_INT(atomic_load(&sh.failures), 0);

		lsq_codec_destroy(sh.codec);
		for (unsigned i = 0; i < N_INPUTS; i++)
			free(bufs[i]);
	}
}

#define RUN(fn)                                                            \
	do {                                                               \
		struct timespec t0_, t1_;                                  \
		clock_gettime(CLOCK_MONOTONIC, &t0_);                      \
		fn();                                                      \
		clock_gettime(CLOCK_MONOTONIC, &t1_);                      \
		printf("%-20s %.2f s\n", #fn,                              \
		       (double)(t1_.tv_sec - t0_.tv_sec) +                 \
			       (double)(t1_.tv_nsec - t0_.tv_nsec) / 1e9); \
	} while (0)

int main(void)
{
	/* valid but oversized xz dictionaries are warned about; expected */
	lsq_log_set_level(LSQ_LOG_ERROR);
	make_samples();
	RUN(test_registry);
	RUN(test_options);
	RUN(test_encoders);
	RUN(test_garbage);
	RUN(test_lzma_memlimit);
	RUN(test_threads);
	for (size_t i = 0; i < n_samples; i++)
		free(samples[i].data);
#if !LSQ_HAVE_LZO
	/* the other codecs passed, but LZO's checks were compiled out: say
	 * so (a skip) instead of passing; tests/run.sh forces -Dlzo=enabled */
	CHECK_SKIP_BECAUSE("LZO not built in (liblzo2 missing at configure; "
			   "-Dlzo=enabled makes that an error): its checks "
			   "did not run");
#endif
	printf("codec: all checks passed (%s)\n", lsq_codec_list());
	return 0;
}
