/* SPDX-License-Identifier: MIT */
/*
 * fuzz_image_walk.c - libFuzzer target: the whole read path. Open the input
 * as an image through the memory source, walk every directory (lookup of
 * every name, readlink, xattrs, every file read from start to end), then
 * read every regular file again at odd offsets and lengths around block
 * edges and past EOF, checking that both reads agree. Must never crash,
 * hang or leak, whatever the bytes.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "image/walk.h"

#define READ_BUF (3u << 17)

static void read_odd(struct lsq_image *img, const struct lsq_inode *ino,
		     void *ctx)
{
	uint64_t bs = lsq_image_info(img)->block_size;
	uint64_t size = ino->size;
	const uint64_t offs[] = { 1, bs - 1, bs + 3, 2 * bs - 7, size / 2 + 5,
				  size ? size - 1 : 0, size, size + 5,
				  UINT64_MAX - 10 };
	const size_t lens[] = { 1, 4097, READ_BUF };
	uint8_t *buf = ctx;
	size_t n;

	if (!S_ISREG(ino->mode))
		return;
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			if (lsq_image_read(img, ino, buf, lens[j], offs[i], NULL, &n))
				continue;
			/* the API: short only at EOF, nothing past it */
			if (n > lens[j] ||
			    (offs[i] >= size && n != 0) ||
			    (offs[i] < size && n != lens[j] &&
			     offs[i] + n != size))
				abort();
		}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsq_image *img = fuzz_open(data, size);
	struct lsq_inode root;
	uint8_t *buf;

	if (!img)
		return 0;
	if (!lsq_image_inode(img, lsq_image_root(img), &root))
		(void)lsq_walk(img, &root, "", NULL, false, 5000);
	buf = malloc(READ_BUF);
	if (buf)
		fuzz_walk(img, 500, read_odd, buf);
	free(buf);
	lsq_image_close(img);
	return 0;
}
