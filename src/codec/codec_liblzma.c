/* SPDX-License-Identifier: MIT */
/*
 * codec_liblzma.c - context handling and the decode loop shared by the
 * lzma and xz codecs.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "lsq/error.h"
#include "codec/codec_liblzma.h"

/*
 * liblzma allocates the dictionary a stream's header asks for, whatever the
 * output size, so the limit is what bounds memory per context. mksquashfs
 * uses the block size (or the xz dictionary option, itself at most the block
 * size); the floor also admits writers that kept liblzma's default preset
 * (8 MiB), and the ceiling keeps a hostile superblock from raising the
 * limit without bound, since a block never needs more than 1 MiB of history.
 * The slack covers the decoder state besides the dictionary.
 */
#define DICT_FLOOR (8ull << 20)
#define DICT_CEIL (64ull << 20)
#define STATE_SLACK (1ull << 20)

uint64_t lsq_liblzma_memlimit(uint64_t dict_size, uint32_t block_size)
{
	uint64_t dict = dict_size;

	if (dict < block_size)
		dict = block_size;
	if (dict < DICT_FLOOR)
		dict = DICT_FLOOR;
	if (dict > DICT_CEIL)
		dict = DICT_CEIL;
	return dict + STATE_SLACK;
}

int lsq_liblzma_ctx_create(const struct lsq_codec_cfg *cfg, void **out)
{
	lzma_stream *strm = malloc(sizeof(*strm));

	if (!strm)
		return LSQ_ERR_NOMEM;
	/* the decoder itself is set up per call, reusing this stream */
	*strm = (lzma_stream)LZMA_STREAM_INIT;
	*out = strm;
	return LSQ_OK;
}

void lsq_liblzma_ctx_destroy(void *ctx)
{
	lzma_stream *strm = ctx;

	lzma_end(strm);
	free(strm);
}

int lsq_liblzma_run(lzma_stream *strm, const uint8_t *in, size_t in_len,
		    uint8_t *out, size_t out_cap, size_t *out_len)
{
	uint8_t spare;
	bool in_spare = false;
	unsigned stalls = 0;
	lzma_ret ret;

	strm->next_in = in;
	strm->avail_in = in_len;
	strm->next_out = out;
	strm->avail_out = out_cap;

	/*
	 * liblzma only decodes while it has output room, so once the output
	 * is exactly full the end marker, LZMA2's end of chunk, or the xz
	 * index and footer are still unread. Then one spare byte is lent:
	 * a stream that ends writes nothing there; one that writes into it
	 * was longer than out_cap.
	 *
	 * liblzma returns LZMA_BUF_ERROR on the second call in a row that
	 * makes no progress (truncated input, output too small), which ends
	 * the loop; the stall counter only makes that bound explicit here.
	 */
	do {
		size_t avail_in = strm->avail_in, avail_out = strm->avail_out;

		ret = lzma_code(strm, LZMA_FINISH);
		if (strm->avail_in == avail_in && strm->avail_out == avail_out)
			stalls++;
		else
			stalls = 0;
		if (ret == LZMA_OK && strm->avail_out == 0) {
			if (in_spare) {
				ret = LZMA_BUF_ERROR; /* output too long */
				break;
			}
			in_spare = true;
			strm->next_out = &spare;
			strm->avail_out = 1;
		}
	} while (ret == LZMA_OK && stalls < 3);

	/* the stream must not keep pointers to the caller's buffers or ours */
	strm->next_in = NULL;
	strm->next_out = NULL;
	if (ret == LZMA_MEM_ERROR)
		return LSQ_ERR_NOMEM;
	/* trailing bytes after the end of the stream are garbage too */
	if (ret != LZMA_STREAM_END || strm->avail_in != 0 ||
	    (in_spare && strm->avail_out == 0))
		return LSQ_ERR_CODEC;
	*out_len = in_spare ? out_cap : out_cap - strm->avail_out;
	return LSQ_OK;
}
