/* SPDX-License-Identifier: MIT */
/*
 * sqfs-lazy-cat - read an image without mounting it: print a file, list a
 * directory, or walk the whole tree (--walk) printing one line per path
 * with its attributes and a content checksum. A debugging and testing aid
 * that exercises the same reader as the daemon.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "codec/codec.h"
#include "lsq/error.h"
#include "lsq/image.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sqfs-lazy-cat [--offset N] IMAGE [PATH]\n"
		"       sqfs-lazy-cat [--offset N] --walk IMAGE\n"
		"Print a file, list a directory, or walk the whole tree.\n");
}

static int resolve(struct lsq_image *img, const char *path,
		   struct lsq_inode *out)
{
	struct lsq_inode cur;
	int ret = lsq_image_inode(img, lsq_image_root(img), &cur);

	while (!ret && *path) {
		const char *end;

		while (*path == '/')
			path++;
		if (!*path)
			break;
		end = strchrnul(path, '/');
		ret = lsq_image_lookup(img, &cur, path, (size_t)(end - path), &cur);
		path = end;
	}
	if (!ret)
		*out = cur;
	return ret;
}

struct list_ctx {
	struct lsq_image *img;
	const char *prefix;
	bool walk;
	int err;
};

static int walk_dir(struct lsq_image *img, const struct lsq_inode *dir,
		    const char *path);

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static int print_one(struct lsq_image *img, const struct lsq_inode *ino,
		     const char *path)
{
	struct stat st;
	uint64_t h = 0xcbf29ce484222325ull;
	char xbuf[65536];
	size_t xlen = 0;
	int ret;

	lsq_image_stat(img, ino, &st);
	printf("%s mode=%o ino=%llu uid=%u gid=%u size=%lld mtime=%lld nlink=%u blocks=%lld",
	       path, st.st_mode, (unsigned long long)st.st_ino, st.st_uid,
	       st.st_gid, (long long)st.st_size, (long long)st.st_mtime,
	       (unsigned)st.st_nlink, (long long)st.st_blocks);
	if (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode))
		printf(" rdev=%u:%u", major(st.st_rdev), minor(st.st_rdev));
	if (S_ISLNK(st.st_mode)) {
		char *t;

		ret = lsq_image_readlink(img, ino, &t);
		if (ret)
			return ret;
		printf(" target=%s", t);
		free(t);
	}
	if (S_ISREG(st.st_mode)) {
		static uint8_t buf[1 << 20];
		uint64_t off = 0;
		size_t n;

		do {
			ret = lsq_image_read(img, ino, buf, sizeof(buf), off, &n);
			if (ret)
				return ret;
			h = fnv1a(h, buf, n);
			off += n;
		} while (n);
		printf(" fnv=%016llx", (unsigned long long)h);
	}
	ret = lsq_image_listxattr(img, ino, xbuf, sizeof(xbuf), &xlen);
	if (ret)
		return ret;
	for (size_t i = 0; i < xlen; i += strlen(xbuf + i) + 1) {
		uint8_t val[65536];
		size_t vlen;

		ret = lsq_image_getxattr(img, ino, xbuf + i, val, sizeof(val), &vlen);
		if (ret)
			return ret;
		printf(" xattr:%s=%zu:%016llx", xbuf + i, vlen,
		       (unsigned long long)fnv1a(0xcbf29ce484222325ull, val, vlen));
	}
	printf("\n");
	if (S_ISDIR(st.st_mode))
		return walk_dir(img, ino, path);
	return LSQ_OK;
}

static int list_cb(void *ctx, const struct lsq_dirent *e)
{
	struct list_ctx *lc = ctx;

	if (!lc->walk) {
		printf("%.*s\n", (int)e->name_len, e->name);
		return 0;
	}
	if (e->is_dot)
		return 0;
	{
		char path[8192];
		struct lsq_inode child;
		int ret;

		snprintf(path, sizeof(path), "%s/%.*s", lc->prefix,
			 (int)e->name_len, e->name);
		ret = lsq_image_inode(lc->img, e->ref, &child);
		if (!ret)
			ret = print_one(lc->img, &child, path);
		if (ret) {
			fprintf(stderr, "%s: %s\n", path, lsq_strerror(ret));
			lc->err = ret;
		}
	}
	return 0;
}

static int walk_dir(struct lsq_image *img, const struct lsq_inode *dir,
		    const char *path)
{
	struct list_ctx lc = { img, path, true, 0 };
	int ret = lsq_image_readdir(img, dir, 0, list_cb, &lc);

	return ret ? ret : lc.err;
}

int main(int argc, char **argv)
{
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
	ret = lsq_source_file_open(argv[i], offset, &src);
	if (ret) {
		fprintf(stderr, "sqfs-lazy-cat: %s: %s\n", argv[i], strerror(errno));
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
			ret = print_one(img, &ino, "");
		} else if (S_ISDIR(ino.mode)) {
			struct list_ctx lc = { img, "", false, 0 };

			ret = lsq_image_readdir(img, &ino, 0, list_cb, &lc);
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
				ret = lsq_image_read(img, &ino, buf, sizeof(buf), off, &n);
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
