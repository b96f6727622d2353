/* SPDX-License-Identifier: MIT */
/*
 * test_image.c - the reader against the kernel, without FUSE.
 *
 * 1. Every fixture image in tests/fixtures/ is walked through the real
 *    reader and must print exactly the manifest that make_fixtures.sh
 *    recorded from the kernel's loop mount of the same image.
 * 2. Chunked reads at odd offsets equal the whole-file read.
 * 3. Hostile variants (every truncation, byte flips across the metadata
 *    area, random garbage) open with a one-line error or walk with errors,
 *    never crash (the ASan build runs this too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../harness/check.h"
#include "lsq/error.h"
#include "common/counter_set.h"
#include "common/log.h"
#include "lsq/image.h"
#include "image/walk.h"

static const char *const fixtures[] = {
	"gzip", "gzip_w8", "xz", "xz_bcj", "lz4_hc", "lzo", "zstd", "lzma",
	"raw", "nofrag_noxattr", "always_frag", "ngzstd",
};

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	CHECK(buf);
	CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static struct lsq_image *open_mem(const void *data, size_t len, char *err,
				  size_t errlen, int *ret_out)
{
	struct lsq_source *src;
	struct lsq_image *img = NULL;
	int ret;

	CHECK_EQ_INT(lsq_source_mem_create(data, len, "mem", &src), 0);
	ret = lsq_image_open(src, NULL, &img, err, errlen);
	if (ret)
		lsq_source_destroy(src);
	*ret_out = ret;
	return ret ? NULL : img;
}

static void check_against_kernel(const char *name)
{
	char path[512], err[512];
	char *manifest, *out = NULL;
	size_t mlen, outlen = 0, ilen;
	struct lsq_image *img;
	struct lsq_inode root;
	char *data;
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "fixtures/%s.manifest", name);
	manifest = slurp(path, &mlen);
	CHECK(manifest);
	snprintf(path, sizeof(path), "fixtures/%s.sqfs", name);
	data = slurp(path, &ilen);
	CHECK(data);
	img = open_mem(data, ilen, err, sizeof(err), &ret);
	if (!img)
		fprintf(stderr, "%s: %s\n", name, err);
	CHECK(img);
	CHECK_EQ_INT(lsq_image_inode(img, lsq_image_root(img), &root), 0);
	f = open_memstream(&out, &outlen);
	CHECK(f);
	CHECK_EQ_INT(lsq_walk(img, &root, "", f, true, 100000), 0);
	fclose(f);
	if (outlen != mlen || memcmp(out, manifest, mlen)) {
		fprintf(stderr, "%s: walk differs from the kernel manifest\n", name);
		fprintf(stderr, "--- ours ---\n%.2000s\n", out);
		CHECK(0);
	}
	lsq_image_close(img);
	free(out);
	free(manifest);
	free(data);
}

/* The image's data_direct counter, as --stats reports it. */
static uint64_t data_direct(const struct lsq_image *img)
{
	struct lsq_counter_set set;
	const struct lsq_counter *c;

	lsq_counter_set_init(&set);
	lsq_image_counters(img, lsq_counter_set_add, &set);
	c = lsq_counter_set_find(&set, "data_direct");
	CHECK(c != NULL);
	CHECK_EQ_INT(set.dropped, 0);
	return c->value;
}

/* What a read told its long-work listener: [what][done]. */
static unsigned long work_told[2][2];

static void count_work(enum lsq_long_work what, bool done)
{
	CHECK(what == LSQ_WORK_READ || what == LSQ_WORK_DECOMPRESS);
	work_told[what][done]++;
	/* each "done" follows its "ahead": nothing is left open */
	CHECK(work_told[what][1] <= work_told[what][0]);
}

/* Reads of every odd size/offset pattern equal slices of a whole read. */
static void check_chunked_reads(const char *name, const char *file_path)
{
	char path[512], err[512];
	struct lsq_image *img;
	struct lsq_inode ino;
	size_t ilen, n;
	uint8_t *whole, *part;
	uint64_t bs, direct;
	char *data;
	int ret;

	snprintf(path, sizeof(path), "fixtures/%s.sqfs", name);
	data = slurp(path, &ilen);
	CHECK(data);
	img = open_mem(data, ilen, err, sizeof(err), &ret);
	CHECK(img);
	CHECK_EQ_INT(lsq_image_inode(img, lsq_image_root(img), &ino), 0);
	CHECK_EQ_INT(lsq_image_lookup(img, &ino, file_path, strlen(file_path), &ino), 0);
	bs = lsq_image_info(img)->block_size;
	whole = malloc(ino.size + 1);
	part = malloc(ino.size + bs + 8192);
	CHECK(whole && part);
	memset(work_told, 0, sizeof(work_told));
	CHECK_EQ_INT(lsq_image_read(img, &ino, whole, ino.size + 1, 0,
				    count_work, &n), 0);
	CHECK_EQ_INT(n, ino.size);
	/* the first read of the file's blocks reached the source and
	 * decompressed, and its listener heard of both, in pairs */
	CHECK(work_told[LSQ_WORK_READ][0] > 0);
	CHECK(work_told[LSQ_WORK_DECOMPRESS][0] > 0);
	CHECK_EQ_INT(work_told[LSQ_WORK_READ][1], work_told[LSQ_WORK_READ][0]);
	CHECK_EQ_INT(work_told[LSQ_WORK_DECOMPRESS][1],
		     work_told[LSQ_WORK_DECOMPRESS][0]);
	/* The whole read wanted every full-size block entirely: those went
	 * straight into the buffer (sparse ones are zeroes, not blocks). */
	direct = data_direct(img);
	if (strcmp(file_path, "sparse"))
		CHECK_EQ_INT(direct, ino.size / bs);
	else
		CHECK(direct < ino.size / bs);
	for (uint64_t off = 0; off <= ino.size + 2; off += 1 + off / 3) {
		static const size_t lens[] = { 1, 7, 4095, 4096, 4097, 8193 };

		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			size_t want = off >= ino.size ? 0 :
				      (ino.size - off < lens[i] ? ino.size - off : lens[i]);

			CHECK_EQ_INT(lsq_image_read(img, &ino, part, lens[i], off, NULL, &n), 0);
			CHECK_EQ_INT(n, want);
			CHECK(!memcmp(part, whole + off, n));
		}
	}
	/* Whole blocks again, now that partial reads cached them: served
	 * from the cache, not decompressed again. */
	memset(work_told, 0, sizeof(work_told));
	for (uint64_t off = 0; off + bs <= ino.size; off += bs) {
		CHECK_EQ_INT(lsq_image_read(img, &ino, part, bs, off,
					    count_work, &n), 0);
		CHECK_EQ_INT(n, bs);
		CHECK(!memcmp(part, whole + off, n));
	}
	CHECK_EQ_INT(data_direct(img), direct);
	/* ... so there was no long work to tell of */
	CHECK_EQ_INT(work_told[LSQ_WORK_READ][0], 0);
	CHECK_EQ_INT(work_told[LSQ_WORK_DECOMPRESS][0], 0);
	free(whole);
	free(part);
	lsq_image_close(img);
	free(data);
}

/* Open and walk a damaged copy; anything but a crash, hang or leak is ok,
 * and a refusal must come with a message. */
static void try_hostile(const void *data, size_t len)
{
	char err[512];
	struct lsq_image *img;
	struct lsq_inode root;
	int ret;

	err[0] = '\0';
	img = open_mem(data, len, err, sizeof(err), &ret);
	if (!img) {
		CHECK(ret < 0);
		CHECK(err[0] != '\0');
		CHECK(!strchr(err, '\n'));
		return;
	}
	if (lsq_image_inode(img, lsq_image_root(img), &root) == 0)
		(void)lsq_walk(img, &root, "", NULL, false, 600);
	lsq_image_close(img);
}

static void check_hostile(const char *name)
{
	char path[512];
	size_t ilen;
	uint8_t *data, *copy;
	uint64_t inode_start;
	unsigned seed = 12345;

	snprintf(path, sizeof(path), "fixtures/%s.sqfs", name);
	data = (uint8_t *)slurp(path, &ilen);
	CHECK(data);
	copy = malloc(ilen);
	CHECK(copy);

	for (size_t cut = 0; cut < ilen; cut += cut < 200 ? 1 : 97)
		try_hostile(data, cut);

	/* every byte of the superblock, then a stride over the tables */
	memcpy(&inode_start, data + 64, 8);
	for (size_t i = 0; i < ilen; i += i < 96 ? 1 : (i < inode_start ? 401 : 41)) {
		for (unsigned v = 0; v < 2; v++) {
			memcpy(copy, data, ilen);
			copy[i] ^= v ? 0xff : (uint8_t)(1u << (i % 8));
			try_hostile(copy, ilen);
		}
	}
	/* random multi-byte damage in the metadata area */
	for (int iter = 0; iter < 100; iter++) {
		memcpy(copy, data, ilen);
		for (int k = 0; k < 4; k++) {
			size_t at = inode_start + (size_t)rand_r(&seed) % (ilen - inode_start);

			copy[at] = (uint8_t)rand_r(&seed);
		}
		try_hostile(copy, ilen);
	}
	free(copy);
	free(data);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++)
		check_against_kernel(fixtures[i]);
	check_chunked_reads("gzip", "text");
	check_chunked_reads("zstd", "sparse");
	check_chunked_reads("nofrag_noxattr", "size_12289");
	check_chunked_reads("always_frag", "tail_a");
	lsq_log_set_level(LSQ_LOG_SILENT); /* damage is expected below */
	check_hostile("gzip");
	check_hostile("ngzstd");
	printf("image: all checks passed\n");
	return 0;
}
