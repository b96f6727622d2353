/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "lsq/error.h"
#include "image/walk.h"

#define MAX_DEPTH 512

struct walk {
	struct lsq_image *img;
	FILE *out;
	bool report;
	int first_err;
	unsigned depth;
	unsigned long nodes_left; /* corrupt images can make cycles */
	uint8_t *buf; /* read buffer, 1 MiB */
};

uint64_t lsq_walk_fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static void note_err(struct walk *w, const char *path, int err)
{
	if (w->report)
		fprintf(stderr, "%s: %s\n", *path ? path : "/", lsq_strerror(err));
	if (!w->first_err)
		w->first_err = err;
}

static int walk_one(struct walk *w, const struct lsq_inode *ino,
		    const char *path);

struct dir_ctx {
	struct walk *w;
	const struct lsq_inode *dir;
	const char *path;
};

static int dir_cb(void *ctx, const struct lsq_dirent *e)
{
	struct dir_ctx *dc = ctx;
	struct lsq_inode child, found;
	size_t plen = strlen(dc->path);
	char *path;
	int ret;

	if (e->is_dot)
		return 0;
	if (dc->w->nodes_left == 0) {
		note_err(dc->w, dc->path, LSQ_ERR_CORRUPT);
		return 1;
	}
	dc->w->nodes_left--;
	path = malloc(plen + e->name_len + 2);
	if (!path) {
		note_err(dc->w, dc->path, LSQ_ERR_NOMEM);
		return 1;
	}
	memcpy(path, dc->path, plen);
	path[plen] = '/';
	memcpy(path + plen + 1, e->name, e->name_len);
	path[plen + 1 + e->name_len] = '\0';
	ret = lsq_image_inode(dc->w->img, e->ref, &child);
	/* lookup must find what readdir listed */
	if (!ret) {
		ret = lsq_image_lookup(dc->w->img, dc->dir, e->name,
				       e->name_len, &found);
		if (!ret && found.ref != child.ref)
			ret = LSQ_ERR_CORRUPT;
	}
	if (ret)
		note_err(dc->w, path, ret);
	else
		walk_one(dc->w, &child, path);
	free(path);
	return 0;
}

static int walk_one(struct walk *w, const struct lsq_inode *ino,
		    const char *path)
{
	struct stat st;
	uint64_t h = LSQ_WALK_FNV_INIT;
	char *xnames = NULL;
	size_t xlen = 0;
	int ret;

	lsq_image_stat(w->img, ino, &st);
	if (w->out)
		fprintf(w->out,
			"%s mode=%o ino=%llu uid=%u gid=%u size=%lld mtime=%lld nlink=%u blocks=%lld",
			path, st.st_mode, (unsigned long long)st.st_ino,
			st.st_uid, st.st_gid, (long long)st.st_size,
			(long long)st.st_mtime, (unsigned)st.st_nlink,
			(long long)st.st_blocks);
	if (w->out && (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode)))
		fprintf(w->out, " rdev=%u:%u", major(st.st_rdev),
			minor(st.st_rdev));
	if (S_ISLNK(st.st_mode)) {
		char *t;

		ret = lsq_image_readlink(w->img, ino, &t);
		if (ret) {
			note_err(w, path, ret);
		} else {
			if (w->out)
				fprintf(w->out, " target=%s", t);
			free(t);
		}
	}
	if (S_ISREG(st.st_mode)) {
		uint64_t off = 0;
		size_t n = 0;

		do {
			ret = lsq_image_read(w->img, ino, w->buf, 1 << 20, off,
					     NULL, &n);
			if (ret) {
				note_err(w, path, ret);
				break;
			}
			h = lsq_walk_fnv(h, w->buf, n);
			off += n;
		} while (n);
		if (!ret && w->out)
			fprintf(w->out, " fnv=%016llx", (unsigned long long)h);
	}
	ret = lsq_image_listxattr(w->img, ino, NULL, 0, &xlen);
	if (ret == LSQ_ERR_UNSUPPORTED) {
		/* a kernel-visible result, not a failure */
		if (w->out)
			fprintf(w->out, " listxattr=errno%d",
				lsq_err_to_errno(ret));
		ret = 0;
		xlen = 0;
	}
	if (!ret && xlen) {
		xnames = malloc(xlen);
		ret = xnames ? lsq_image_listxattr(w->img, ino, xnames, xlen, &xlen)
			     : LSQ_ERR_NOMEM;
	}
	if (ret)
		note_err(w, path, ret);
	for (size_t i = 0; !ret && i < xlen; i += strlen(xnames + i) + 1) {
		size_t vlen;

		ret = lsq_image_getxattr(w->img, ino, xnames + i, w->buf,
					 1 << 20, &vlen);
		if (ret) {
			note_err(w, path, ret);
			break;
		}
		if (w->out)
			fprintf(w->out, " xattr:%s=%zu:%016llx", xnames + i,
				vlen,
				(unsigned long long)lsq_walk_fnv(LSQ_WALK_FNV_INIT,
								 w->buf, vlen));
	}
	free(xnames);
	if (w->out)
		fputc('\n', w->out);
	if (S_ISDIR(st.st_mode)) {
		struct dir_ctx dc = { w, ino, path };

		/* Corrupt images can loop: bound the depth. */
		if (w->depth >= MAX_DEPTH) {
			note_err(w, path, LSQ_ERR_CORRUPT);
			return LSQ_OK;
		}
		w->depth++;
		ret = lsq_image_readdir(w->img, ino, 0, dir_cb, &dc);
		w->depth--;
		if (ret)
			note_err(w, path, ret);
	}
	return LSQ_OK;
}

int lsq_walk(struct lsq_image *img, const struct lsq_inode *ino,
	     const char *path, FILE *out, bool report, unsigned long max_nodes)
{
	struct walk w = { img, out, report, 0, 0, max_nodes, NULL };

	w.buf = malloc(1 << 20);
	if (!w.buf)
		return LSQ_ERR_NOMEM;
	walk_one(&w, ino, path);
	free(w.buf);
	return w.first_err;
}
