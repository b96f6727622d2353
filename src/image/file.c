/* SPDX-License-Identifier: MIT */
/*
 * file.c - the regular file read path: block list walk, data blocks through
 * the data cache, sparse blocks, and the fragment tail.
 *
 * A file's block list (one u32 size word per block, in the inode table)
 * gives each block's on-disk size; a block's offset is blocks_start plus
 * the sizes before it. For large files a checkpoint every CHECKPOINT_STRIDE
 * blocks (offset + metadata position) is built once and cached, so a read
 * anywhere in the file walks at most CHECKPOINT_STRIDE size words.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/checked_math.h"
#include "common/endian.h"
#include "common/long_work.h"
#include "common/scratch.h"
#include "image/image_internal.h"
#include "lsq/error.h"

#define CHECKPOINT_STRIDE 256u

struct checkpoint {
	uint64_t data_offset; /* absolute offset of the block */
	uint64_t meta_block;  /* cursor position of its size word */
	uint32_t meta_offset;
	uint32_t pad;
};

/* Load arguments for the data block loader (one call's stack). */
struct data_load {
	struct lsq_image *img;
	uint32_t size_word;
	size_t out_cap;
	struct lsq_run *run;
	lsq_long_work_fn long_work;
};

/* Decode the data block at offset (on-disk size word size_word) into
 * out[0..out_cap): read it, and decompress it unless stored raw. run,
 * long_work: as for lsq_data_block_load. */
static int data_block_decode(struct lsq_image *img, uint64_t offset,
			     uint32_t size_word, uint8_t *out, size_t out_cap,
			     struct lsq_run *run, lsq_long_work_fn long_work,
			     size_t *out_len)
{
	size_t disk = SQUASHFS_BLOCK_ONDISK_SIZE(size_word);
	struct lsq_read rq;
	uint8_t *raw;
	int ret;

	if (disk == 0 || disk > img->sb.block_size)
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, offset,
					 "data block size word 0x%x invalid",
					 size_word);
	if (lsq_range_outside(offset, disk, img->sb.bytes_used))
		return lsq_image_corrupt(img, LSQ_ERR_OUT_OF_BOUNDS, offset,
					 "data block of %zu bytes past the end of the image",
					 disk);
	if (SQUASHFS_BLOCK_IS_RAW(size_word)) {
		if (disk > out_cap)
			return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, offset,
						 "uncompressed block larger than expected");
		rq = lsq_read_of(out, disk, offset);
		rq.run = run;
		rq.long_work = long_work;
		ret = lsq_image_read_source(img, &rq);
		if (!ret)
			*out_len = disk;
		return ret;
	}
	raw = lsq_scratch(LSQ_SCRATCH_RAW, disk);
	if (!raw)
		return LSQ_ERR_NOMEM;
	rq = lsq_read_of(raw, disk, offset);
	rq.run = run;
	rq.long_work = long_work;
	ret = lsq_image_read_source(img, &rq);
	if (!ret) {
		lsq_long_work_ahead(long_work, LSQ_WORK_DECOMPRESS);
		ret = lsq_codec_decompress(img->codec, raw, disk, out, out_cap,
					   out_len);
		lsq_long_work_done(long_work, LSQ_WORK_DECOMPRESS);
		if (ret)
			lsq_image_corrupt(img, ret, offset,
					  "data block of %zu bytes", disk);
	}
	return ret;
}

int lsq_data_block_load(struct lsq_image *img, uint64_t offset,
			uint32_t size_word, size_t out_cap,
			struct lsq_run *run, lsq_long_work_fn long_work,
			struct lsq_block **out)
{
	struct lsq_block *blk = lsq_block_alloc(out_cap);
	int ret;

	if (!blk)
		return LSQ_ERR_NOMEM;
	blk->key = offset;
	atomic_store_explicit(&img->read_pos, offset + 1,
			      memory_order_relaxed);
	lsq_background_note_load(
		__atomic_load_n(&img->background, __ATOMIC_ACQUIRE), offset);
	ret = data_block_decode(img, offset, size_word, blk->data, out_cap,
				run, long_work, &blk->size);
	if (ret) {
		lsq_block_put(blk);
		return ret;
	}
	*out = blk;
	return LSQ_OK;
}

static int data_loader(void *ctx, uint64_t key, struct lsq_block **out)
{
	struct data_load *dl = ctx;

	return lsq_data_block_load(dl->img, key, dl->size_word, dl->out_cap,
				   dl->run, dl->long_work, out);
}

/* Fragment blocks a hint may reach past the one being loaded, at most. */
#define FRAGMENT_RUN_MAX 32u
/* A load at most this many blocks before the last one (parallel workers
 * starting one reader's loads out of order) leaves the state alone. */
#define FRAGMENT_SEQ_SLACK 2u

/* How many fragment blocks past 'index' a source may read ahead over.
 *
 * Why not always the whole run: a reader of small files in directory
 * order (tar of a tree) loads fragment blocks in index order and wants the
 * adjacent ones next, but a reader of some files of a directory (every
 * third file, a build reading some headers) skips blocks that only hold
 * other files' tails, and a fixed 32-block run fetched those whole (the
 * repeated-read bench: 1.053x the touched bytes on xz, 90% of the excess
 * untouched fragment blocks). So, as the kernel's readahead does,
 * earn it: a load of the block right after the last one loaded extends
 * the sequential streak, the hint reaches 1, 2, 4, ... up to
 * FRAGMENT_RUN_MAX blocks further; any other load (a skip or a jump back)
 * resets it to this block alone. Fragment cache hits do not come here, so
 * the state follows the loads, which is what the source sees.
 *
 * One atomic per image, updated only on fragment cache misses (which do
 * I/O anyway). Two readers at once break each other's streaks: they get
 * no fragment readahead, never wrong data. */
static uint32_t fragment_ahead(struct lsq_image *img, uint32_t index)
{
	uint_fast64_t old = atomic_load_explicit(&img->frag_seq,
						 memory_order_relaxed);
	uint_fast64_t next;
	uint32_t streak, ahead;

	do {
		uint64_t last1 = old >> 32;  /* last index + 1; 0: none yet */

		streak = (uint32_t)old;
		if (last1 && index == last1) {
			if (streak < 16)
				streak++;
		} else if (last1 && index < last1 &&
			   last1 - 1 - index <= FRAGMENT_SEQ_SLACK) {
			break;  /* finished out of order: keep the state */
		} else {
			streak = 0;
		}
		next = ((uint_fast64_t)index + 1) << 32 | streak;
	} while (!atomic_compare_exchange_weak_explicit(
		&img->frag_seq, &old, next, memory_order_relaxed,
		memory_order_relaxed));
	ahead = streak ? 1u << (streak - 1) : 0;
	return ahead < FRAGMENT_RUN_MAX ? ahead : FRAGMENT_RUN_MAX;
}

/* The run-end hint of a fragment block: the end of the run of up to
 * 'ahead' fragment blocks adjacent to it in the image (packers write them
 * in index order, next to each other when no file's data blocks came in
 * between). A source may read ahead over those, but not into the data
 * blocks of other files, nor over a block the caching layer's shared
 * store holds (another version of the image fetched it). */
static uint64_t fragment_run_end(struct lsq_image *img, uint32_t index,
				 uint64_t start, uint32_t size_word,
				 uint32_t ahead)
{
	uint64_t end = start + SQUASHFS_BLOCK_ONDISK_SIZE(size_word);
	uint8_t e[SQUASHFS_FRAGMENT_ENTRY_SIZE];

	for (uint32_t n = 0; n < ahead; n++) {
		uint32_t next = index + 1 + n;

		if (next >= img->frag_table.count ||
		    lsq_lookup_table_read(img, &img->frag_table, next, e) ||
		    lsq_le64(e) != end ||
		    lsq_source_held(img->src, end,
				SQUASHFS_BLOCK_ONDISK_SIZE(lsq_le32(e + 8)),
				LSQ_HELD_SHARED))
			break;
		end += SQUASHFS_BLOCK_ONDISK_SIZE(lsq_le32(e + 8));
	}
	return end;
}

/* Fragment block index into a new block; long_work as for
 * lsq_data_block_load. */
static int frag_load(struct lsq_image *img, uint64_t index,
		     lsq_long_work_fn long_work, struct lsq_block **out)
{
	uint8_t e[SQUASHFS_FRAGMENT_ENTRY_SIZE];
	struct lsq_run run = { 0 };
	uint64_t start;
	uint32_t word;
	int ret;

	ret = lsq_lookup_table_read(img, &img->frag_table, (uint32_t)index, e);
	if (ret)
		return ret;
	start = lsq_le64(e);
	word = lsq_le32(e + 8);
	if (!img->src->reads_ahead)
		return lsq_data_block_load(img, start, word,
					   img->sb.block_size, NULL, long_work,
					   out);
	run.end = fragment_run_end(img, (uint32_t)index, start, word,
				   fragment_ahead(img, (uint32_t)index));
	return lsq_data_block_load(img, start, word, img->sb.block_size, &run,
				   long_work, out);
}

int lsq_frag_loader(void *ctx, uint64_t index, struct lsq_block **out)
{
	return frag_load(ctx, index, NULL, out);
}

struct frag_load_args {
	struct lsq_image *img;
	lsq_long_work_fn long_work;
};

static int frag_loader_for(void *ctx, uint64_t index, struct lsq_block **out)
{
	const struct frag_load_args *fa = ctx;

	return frag_load(fa->img, index, fa->long_work, out);
}

struct blockidx_load {
	struct lsq_image *img;
	const struct lsq_inode *file;
};

/* Build the checkpoint table of a large file by walking its block list. */
static int blockidx_loader(void *ctx, uint64_t key, struct lsq_block **out)
{
	const struct blockidx_load *bl = ctx;
	const struct lsq_inode *file = bl->file;
	struct lsq_image *img = bl->img;
	uint32_t nblocks = file->priv.e;
	uint32_t ncp = (nblocks + CHECKPOINT_STRIDE - 1) / CHECKPOINT_STRIDE;
	struct checkpoint *cp;
	struct meta_cursor cur;
	struct lsq_block *blk;
	uint64_t data = file->priv.a;
	uint8_t words[4 * 64];
	int ret;

	blk = lsq_block_alloc((size_t)ncp * sizeof(*cp));
	if (!blk)
		return LSQ_ERR_NOMEM;
	cp = (struct checkpoint *)blk->data;
	lsq_meta_cursor_init(&cur, &img->inode_table, file->priv.b >> 16,
			     file->priv.b & 0xffff);
	for (uint32_t i = 0; i < nblocks;) {
		uint32_t n = nblocks - i < 64 ? nblocks - i : 64;

		if (i % CHECKPOINT_STRIDE == 0) {
			cp[i / CHECKPOINT_STRIDE] = (struct checkpoint){
				.data_offset = data,
				.meta_block = cur.block,
				.meta_offset = cur.offset,
			};
			/* stay aligned to the stride */
			if (n > CHECKPOINT_STRIDE - i % CHECKPOINT_STRIDE)
				n = CHECKPOINT_STRIDE - i % CHECKPOINT_STRIDE;
		} else if (n > CHECKPOINT_STRIDE - i % CHECKPOINT_STRIDE) {
			n = CHECKPOINT_STRIDE - i % CHECKPOINT_STRIDE;
		}
		ret = lsq_meta_read(img, &cur, words, 4 * (size_t)n);
		if (ret) {
			lsq_meta_cursor_fini(&cur);
			lsq_block_put(blk);
			return ret;
		}
		for (uint32_t j = 0; j < n; j++)
			data += SQUASHFS_BLOCK_ONDISK_SIZE(lsq_le32(words + 4 * j));
		i += n;
	}
	lsq_meta_cursor_fini(&cur);
	blk->key = key;
	blk->size = (size_t)ncp * sizeof(*cp);
	*out = blk;
	return LSQ_OK;
}

/* Position cur (holding no block) at the size word of block 'index' and
 * return that block's absolute offset. The caller finishes cur. */
static int block_list_seek(struct lsq_image *img, const struct lsq_inode *file,
			   uint32_t index, struct meta_cursor *cur,
			   uint64_t *data_offset)
{
	uint64_t data = file->priv.a;
	uint32_t from = 0;
	uint8_t words[4 * 64];
	int ret;

	lsq_meta_cursor_init(cur, &img->inode_table, file->priv.b >> 16,
			     file->priv.b & 0xffff);
	if (index >= CHECKPOINT_STRIDE) {
		struct blockidx_load arg = { img, file };
		struct lsq_block *blk;
		const struct checkpoint *cp;

		ret = lsq_block_cache_get_with(img->blockidx_cache, file->ref,
					       blockidx_loader, &arg, &blk);
		if (ret)
			return ret;
		cp = (const struct checkpoint *)blk->data + index / CHECKPOINT_STRIDE;
		if ((size_t)(index / CHECKPOINT_STRIDE + 1) * sizeof(*cp) > blk->size) {
			lsq_block_put(blk);
			return LSQ_ERR_CORRUPT;
		}
		data = cp->data_offset;
		cur->block = cp->meta_block;
		cur->offset = cp->meta_offset;
		from = index - index % CHECKPOINT_STRIDE;
		lsq_block_put(blk);
	}
	while (from < index) {
		uint32_t n = index - from < 64 ? index - from : 64;

		ret = lsq_meta_read(img, cur, words, 4 * (size_t)n);
		if (ret)
			return ret;
		for (uint32_t j = 0; j < n; j++)
			data += SQUASHFS_BLOCK_ONDISK_SIZE(lsq_le32(words + 4 * j));
		from += n;
	}
	*data_offset = data;
	return LSQ_OK;
}

uint32_t lsq_file_only_fragment(const struct lsq_image *img,
				const struct lsq_inode *file)
{
	/* priv.c is the fragment index; no fragment is 0xffffffff */
	if (!S_ISREG(file->mode) || file->size == 0 ||
	    file->size >= img->sb.block_size || file->priv.c >= UINT32_MAX)
		return UINT32_MAX;
	return (uint32_t)file->priv.c;
}

static int read_fragment_tail(struct lsq_image *img,
			      const struct lsq_inode *file, uint8_t *dst,
			      uint64_t in_block, size_t n,
			      lsq_long_work_fn long_work)
{
	uint64_t tail = file->size & (img->sb.block_size - 1);
	struct frag_load_args fa = { img, long_work };
	struct lsq_block *blk;
	int ret;

	ret = lsq_block_cache_get_with(img->frag_cache, file->priv.c,
				       frag_loader_for, &fa, &blk);
	if (ret)
		return ret;
	if (file->priv.d + tail > blk->size) {
		lsq_block_put(blk);
		return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, 0,
					 "fragment %llu too short for inode %u",
					 (unsigned long long)file->priv.c,
					 file->inode_number);
	}
	memcpy(dst, blk->data + file->priv.d + in_block, n);
	lsq_block_put(blk);
	return LSQ_OK;
}

static int read_blocks(struct lsq_image *img, const struct lsq_inode *file,
		       uint8_t *dst, uint64_t offset, uint64_t end,
		       struct meta_cursor *cur, lsq_long_work_fn long_work);

int lsq_file_read(struct lsq_image *img, const struct lsq_inode *file,
		  void *buf, size_t len, uint64_t offset,
		  lsq_long_work_fn long_work, size_t *nread)
{
	struct meta_cursor cur = { 0 };
	int ret;

	if (offset >= file->size || len == 0) {
		*nread = 0;
		return LSQ_OK;
	}
	if (len > file->size - offset)
		len = (size_t)(file->size - offset);
	ret = read_blocks(img, file, buf, offset, offset + len, &cur,
			  long_work);
	lsq_meta_cursor_fini(&cur);
	if (ret)
		return ret;
	*nread = len;
	return LSQ_OK;
}

/* The size words of a file's blocks, taken from its block list in order.
 * For a source that reads ahead they are read well ahead of the block being
 * loaded, so the run-end hint can tell it where the file's data stops, or
 * at least that it goes on for WORD_REFILL more blocks. */
#define WORD_WINDOW 256u
#define WORD_REFILL 128u

struct size_words {
	struct meta_cursor *cur; /* at the word of block next_index */
	uint32_t next_index;
	uint32_t nblocks;
	bool lookahead;
	uint32_t head, count;    /* buffered: w[head .. head + count) */
	uint64_t ahead_bytes;    /* on-disk bytes of the buffered blocks */
	/* on-disk bytes of up to RUN_SCAN_WORDS words past the buffered
	 * ones (data_run_end), worked out once per fill; UINT64_MAX: not
	 * yet */
	uint64_t beyond_bytes;
	uint32_t w[WORD_WINDOW];
};

static int words_fill(struct lsq_image *img, struct size_words *sw)
{
	uint8_t raw[4 * WORD_WINDOW];
	uint32_t n, want = sw->lookahead ? WORD_WINDOW : 1;
	int ret;

	if (sw->count >= (sw->lookahead ? WORD_REFILL : 1))
		return LSQ_OK;
	memmove(sw->w, sw->w + sw->head, 4 * (size_t)sw->count);
	sw->head = 0;
	n = want - sw->count;
	if (n > sw->nblocks - sw->next_index)
		n = sw->nblocks - sw->next_index;
	ret = lsq_meta_read(img, sw->cur, raw, 4 * (size_t)n);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t word = lsq_le32(raw + 4 * i);

		sw->w[sw->count++] = word;
		sw->ahead_bytes += SQUASHFS_BLOCK_ONDISK_SIZE(word);
	}
	sw->next_index += n;
	sw->beyond_bytes = UINT64_MAX;
	return LSQ_OK;
}

static int words_next(struct lsq_image *img, struct size_words *sw,
		      uint32_t *word)
{
	int ret = words_fill(img, sw);

	if (ret)
		return ret;
	if (sw->count == 0)  /* the caller asked past nblocks */
		return LSQ_ERR_CORRUPT;
	*word = sw->w[sw->head++];
	sw->count--;
	sw->ahead_bytes -= SQUASHFS_BLOCK_ONDISK_SIZE(*word);
	return LSQ_OK;
}

/* The run after a data block: its end is worked out only if a read
 * reaches the network (lsq_run_end). */
struct data_run {
	struct lsq_image *img;
	struct size_words *sw;
	uint64_t pos;  /* where the block after this one starts */
};

/* How far past the buffered words a run end looks: a long round trip
 * keeps two bandwidth-delay products in flight (10 MB and more), and the
 * buffered words may be as few as WORD_REFILL blocks (4 MB of on-disk
 * bytes at 4:1); this many more words cost one metadata read, and only
 * when a read reaches the network. */
#define RUN_SCAN_WORDS 1024u
#define RUN_SCAN_BYTES (64ull << 20)

/* On-disk bytes of the file's words past the buffered ones, read with a
 * cursor of its own, stopping at max_bytes; 0 when there are none or
 * they cannot be read (the read that reaches them will say why). Once
 * per fill of the buffered words: every block of a read asks. */
static uint64_t unbuffered_run_bytes(struct lsq_image *img,
				     struct size_words *sw)
{
	struct meta_cursor c = { .table = sw->cur->table,
				 .block = sw->cur->block,
				 .offset = sw->cur->offset };
	uint8_t raw[4 * RUN_SCAN_WORDS];
	uint32_t n = sw->nblocks - sw->next_index;
	uint64_t bytes = 0;

	if (sw->beyond_bytes != UINT64_MAX)
		return sw->beyond_bytes;
	if (n > RUN_SCAN_WORDS)
		n = RUN_SCAN_WORDS;
	if (n == 0 || lsq_meta_read(img, &c, raw, 4 * (size_t)n) != LSQ_OK)
		n = 0;
	for (uint32_t i = 0; i < n && bytes < RUN_SCAN_BYTES; i++)
		bytes += SQUASHFS_BLOCK_ONDISK_SIZE(lsq_le32(raw + 4 * i));
	lsq_meta_cursor_fini(&c);
	sw->beyond_bytes = bytes;
	return bytes;
}

/* The end of the file's blocks after the block (the buffered ones, then
 * up to RUN_SCAN_WORDS more), up to the first one the caching layer's
 * shared store holds (another version of the image fetched it). */
static uint64_t data_run_end(void *ctx)
{
	const struct data_run *r = ctx;
	struct size_words *sw = r->sw;
	uint64_t pos = r->pos, beyond;

	if (!(lsq_source_keeps(r->img->src) & LSQ_HELD_SHARED)) {
		if (sw->ahead_bytes >= RUN_SCAN_BYTES)
			return pos + sw->ahead_bytes;
		beyond = unbuffered_run_bytes(r->img, sw);
		if (beyond > RUN_SCAN_BYTES - sw->ahead_bytes)
			beyond = RUN_SCAN_BYTES - sw->ahead_bytes;
		return pos + sw->ahead_bytes + beyond;
	}
	for (uint32_t i = 0; i < sw->count; i++) {
		uint32_t size = SQUASHFS_BLOCK_ONDISK_SIZE(sw->w[sw->head + i]);

		if (size && lsq_source_held(r->img->src, pos, size,
					    LSQ_HELD_SHARED))
			return pos;
		pos += size;
	}
	return pos;
}

static int short_block(struct lsq_image *img, const struct lsq_inode *file,
		       uint32_t index, uint64_t data_offset, size_t got,
		       uint64_t want)
{
	return lsq_image_corrupt(img, LSQ_ERR_CORRUPT, data_offset,
				 "block %u of inode %u decompressed to %zu bytes, expected %llu",
				 index, file->inode_number, got,
				 (unsigned long long)want);
}

/* Copy [in_block, in_block + n) of block index (block_len bytes of the
 * file) to dst. A read that wants a whole full-size block the data cache
 * does not hold gets it decompressed straight into dst: the reply is its
 * only consumer (the kernel keeps the pages), and going through the cache
 * would cost a copy as large as the block, and evict blocks that partial
 * reads still need. */
static int read_data_block(struct lsq_image *img,
			   const struct lsq_inode *file, uint32_t index,
			   uint64_t data_offset, uint32_t word,
			   uint64_t block_len, uint8_t *dst, uint64_t in_block,
			   size_t n, struct lsq_run *run,
			   lsq_long_work_fn long_work)
{
	struct data_load dl = { img, word, img->sb.block_size, run,
				long_work };
	struct lsq_block *blk;
	size_t got;
	int ret;

	if (n == img->sb.block_size) {
		ret = lsq_block_cache_lookup(img->data_cache, data_offset,
					     &blk);
		if (ret == LSQ_ERR_NOT_FOUND) {
			ret = data_block_decode(img, data_offset, word, dst, n,
						run, long_work, &got);
			if (!ret && got != n)
				ret = short_block(img, file, index,
						  data_offset, got, n);
			if (!ret)
				atomic_fetch_add_explicit(
					&img->direct_blocks, 1,
					memory_order_relaxed);
			return ret;
		}
	} else {
		ret = lsq_block_cache_get_with(img->data_cache, data_offset,
					       data_loader, &dl, &blk);
	}
	if (ret)
		return ret;
	if (blk->size < block_len) {
		got = blk->size;
		lsq_block_put(blk);
		return short_block(img, file, index, data_offset, got,
				   block_len);
	}
	memcpy(dst, blk->data + in_block, n);
	lsq_block_put(blk);
	return LSQ_OK;
}

/* Copy [offset, end) of the file to dst; cur is the caller's. */
static int read_blocks(struct lsq_image *img, const struct lsq_inode *file,
		       uint8_t *dst, uint64_t offset, uint64_t end,
		       struct meta_cursor *cur, lsq_long_work_fn long_work)
{
	uint64_t bs = img->sb.block_size;
	uint64_t data_offset = 0;
	uint32_t index, nblocks = file->priv.e;
	struct size_words sw = {
		.cur = cur,
		.nblocks = nblocks,
		.lookahead = img->src->reads_ahead,
		.beyond_bytes = UINT64_MAX,
	};
	bool positioned = false;
	int ret;

	index = (uint32_t)(offset >> img->sb.block_log);

	while (offset < end) {
		uint64_t in_block = offset & (bs - 1);
		uint64_t block_len = file->size - ((uint64_t)index << img->sb.block_log);
		size_t n;

		if (block_len > bs)
			block_len = bs;
		n = (size_t)(block_len - in_block);
		if (n > end - offset)
			n = (size_t)(end - offset);

		if (index >= nblocks) {
			ret = read_fragment_tail(img, file, dst, in_block, n,
						 long_work);
			if (ret)
				return ret;
		} else {
			uint32_t word;

			if (!positioned) {
				ret = block_list_seek(img, file, index, cur,
						      &data_offset);
				if (ret)
					return ret;
				sw.next_index = index;
				positioned = true;
			}
			ret = words_next(img, &sw, &word);
			if (ret)
				return ret;
			if (SQUASHFS_BLOCK_ONDISK_SIZE(word) == 0) {
				memset(dst, 0, n); /* sparse block */
			} else {
				struct data_run dr = {
					img, &sw, data_offset +
					SQUASHFS_BLOCK_ONDISK_SIZE(word)
				};
				struct lsq_run run = {
					.fn = data_run_end, .ctx = &dr
				};

				ret = read_data_block(img, file, index,
						      data_offset, word,
						      block_len, dst,
						      in_block, n,
						      sw.lookahead ? &run
								   : NULL,
						      long_work);
				if (ret)
					return ret;
			}
			data_offset += SQUASHFS_BLOCK_ONDISK_SIZE(word);
		}
		dst += n;
		offset += n;
		index++;
	}
	return LSQ_OK;
}

int lsq_file_extents(struct lsq_image *img, const struct lsq_inode *file,
		     uint64_t first, uint64_t last, lsq_extent_fn fn,
		     void *ctx)
{
	uint32_t nblocks = file->priv.e, index, stop;
	struct meta_cursor cur = { 0 };
	uint64_t data;
	int ret = LSQ_OK;

	if (!S_ISREG(file->mode) || file->size == 0 || first >= file->size)
		return LSQ_OK;
	if (last >= file->size)
		last = file->size - 1;
	if (last < first)
		return LSQ_OK;
	index = (uint32_t)(first >> img->sb.block_log);
	stop = (uint32_t)(last >> img->sb.block_log);  /* inclusive */
	if (index < nblocks) {
		ret = block_list_seek(img, file, index, &cur, &data);
		for (; !ret && index <= stop && index < nblocks; index++) {
			uint8_t w[4];
			uint32_t disk;

			ret = lsq_meta_read(img, &cur, w, 4);
			if (ret)
				break;
			disk = SQUASHFS_BLOCK_ONDISK_SIZE(lsq_le32(w));
			if (disk > img->sb.block_size ||
			    lsq_range_outside(data, disk, img->sb.bytes_used)) {
				ret = LSQ_ERR_CORRUPT;
				break;
			}
			if (disk)
				ret = fn(ctx, data, disk);
			data += disk;
		}
		lsq_meta_cursor_fini(&cur);
	}
	if (!ret && stop >= nblocks && file->priv.c != SQUASHFS_INVALID_FRAG) {
		uint8_t e[SQUASHFS_FRAGMENT_ENTRY_SIZE];
		uint32_t disk;

		ret = lsq_lookup_table_read(img, &img->frag_table,
					    (uint32_t)file->priv.c, e);
		if (ret)
			return ret;
		disk = SQUASHFS_BLOCK_ONDISK_SIZE(lsq_le32(e + 8));
		if (disk == 0 || disk > img->sb.block_size ||
		    lsq_range_outside(lsq_le64(e), disk, img->sb.bytes_used))
			return LSQ_ERR_CORRUPT;
		ret = fn(ctx, lsq_le64(e), disk);
	}
	return ret;
}

int lsq_image_read(struct lsq_image *img, const struct lsq_inode *file,
		   void *buf, size_t len, uint64_t offset,
		   lsq_long_work_fn long_work, size_t *nread)
{
	if (S_ISDIR(file->mode))
		return LSQ_ERR_IS_DIR;
	if (!S_ISREG(file->mode))
		return LSQ_ERR_INVALID;
	return lsq_file_read(img, file, buf, len, offset, long_work, nread);
}
