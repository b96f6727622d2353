/* SPDX-License-Identifier: MIT */
/*
 * sqfs-lazy-cat - read an image without mounting it: print a file, list a
 * directory, or walk the whole tree (--walk) printing one line per path
 * with its attributes and a content checksum. A debugging and testing aid
 * that exercises the same reader as the daemon.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lsq/error.h"
#include "lsq/image.h"
#include "image/walk.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqfs-lazy-cat [--offset N] IMAGE [PATH]\n"
		"       sqfs-lazy-cat [--offset N] --walk IMAGE\n"
		"Print a file, list a directory, or walk the whole tree.\n"
		"IMAGE is a path or an http(s):// URL.\n");
}

static int resolve(struct lsq_image *img, const char *path,
		   struct lsq_inode *out)
{
	struct lsq_inode cur;
	int ret = lsq_image_inode(img, lsq_image_root(img), &cur);

	while (!ret && *path) {
		struct lsq_inode child;
		const char *end;

		while (*path == '/')
			path++;
		if (!*path)
			break;
		end = strchrnul(path, '/');
		ret = lsq_image_lookup(img, &cur, path, (size_t)(end - path),
				       &child);
		if (!ret)
			cur = child;
		path = end;
	}
	if (!ret)
		*out = cur;
	return ret;
}

static int list_cb(void *ctx, const struct lsq_dirent *e)
{
	printf("%.*s\n", (int)e->name_len, e->name);
	return 0;
}

int main(int argc, char **argv)
{
	struct lsq_source_stack_options so = { 0 };
	struct lsq_source *src;
	struct lsq_image *img;
	struct lsq_inode ino;
	unsigned long long offset = 0;
	bool walk = false;
	char err[512];
	int i = 1, ret;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--walk")) {
			walk = true;
		} else if (!strcmp(argv[i], "--offset") && i + 1 < argc) {
			char *end;

			errno = 0;
			offset = strtoull(argv[++i], &end, 0);
			if (errno || *end) {
				fprintf(stderr, "sqfs-lazy-cat: bad offset\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (i >= argc || argc - i > 2) {
		usage(stderr);
		return 2;
	}
	so.offset = offset;
	ret = lsq_source_open_stack(argv[i], &so, &src, err, sizeof(err),
				    NULL, 0);
	if (ret) {
		fprintf(stderr, "sqfs-lazy-cat: %s\n", err);
		return 1;
	}
	ret = lsq_image_open(src, NULL, &img, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "sqfs-lazy-cat: %s: %s\n", argv[i], err);
		lsq_source_destroy(src);
		return 1;
	}
	ret = resolve(img, argc - i == 2 ? argv[i + 1] : "/", &ino);
	if (!ret) {
		if (walk) {
			ret = lsq_walk(img, &ino, "", stdout, true, ~0ul);
		} else if (S_ISDIR(ino.mode)) {
			ret = lsq_image_readdir(img, &ino, 0, list_cb, NULL);
		} else if (S_ISLNK(ino.mode)) {
			char *t;

			ret = lsq_image_readlink(img, &ino, &t);
			if (!ret) {
				printf("%s\n", t);
				free(t);
			}
		} else {
			static uint8_t buf[1 << 20];
			uint64_t off = 0;
			size_t n;

			do {
				ret = lsq_image_read(img, &ino, buf, sizeof(buf),
						     off, NULL, &n);
				if (!ret && fwrite(buf, 1, n, stdout) != n)
					ret = LSQ_ERR_IO;
				off += n;
			} while (!ret && n);
		}
	}
	if (ret)
		fprintf(stderr, "sqfs-lazy-cat: %s\n", lsq_strerror(ret));
	lsq_image_close(img);
	return ret ? 1 : 0;
}
