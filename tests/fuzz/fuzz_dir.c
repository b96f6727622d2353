/* SPDX-License-Identifier: MIT */
/*
 * fuzz_dir.c - libFuzzer target: metadata blocks and directory decoding.
 * For every directory: readdir from the start, readdir resumed from every
 * cookie it handed out (which seeks through the directory index), lookup
 * of every listed name, and lookups of names that are not there (before,
 * between and after the listed ones, so the index search runs to every
 * end). Must never crash, hang or leak.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

#define MAX_ENTRIES 300

struct listing {
	uint64_t cookies[MAX_ENTRIES];
	char names[MAX_ENTRIES][8];
	size_t name_lens[MAX_ENTRIES];
	size_t n;
};

static int list_cb(void *ctx, const struct lsq_dirent *e)
{
	struct listing *l = ctx;
	size_t len = e->name_len < 8 ? e->name_len : 8;

	if (l->n >= MAX_ENTRIES)
		return 1;
	l->cookies[l->n] = e->next_cookie;
	memcpy(l->names[l->n], e->name, len);
	l->name_lens[l->n] = e->is_dot ? 0 : e->name_len;
	l->n++;
	return 0;
}

/* Stop after the first entry: checks resumption one step at a time. */
static int one_cb(void *ctx, const struct lsq_dirent *e)
{
	(void)e;
	return ++*(unsigned *)ctx > 1;
}

static void visit(struct lsq_image *img, const struct lsq_inode *dir,
		  void *ctx)
{
	static const char *absent[] = { "", "!", "0", "M", "zzzz", "~~~~~~~~" };
	struct listing *l;
	struct lsq_inode found;

	(void)ctx;
	if (!S_ISDIR(dir->mode))
		return;
	l = calloc(1, sizeof(*l));
	if (!l)
		return;
	(void)lsq_image_readdir(img, dir, 0, list_cb, l);
	for (size_t i = 0; i < l->n; i++) {
		unsigned seen = 0;

		(void)lsq_image_readdir(img, dir, l->cookies[i], one_cb, &seen);
	}
	/* cookies the listing never handed out */
	for (uint64_t c = 2; c < 40; c += 7) {
		unsigned seen = 0;

		(void)lsq_image_readdir(img, dir, c, one_cb, &seen);
	}
	{
		unsigned seen = 0;

		(void)lsq_image_readdir(img, dir, UINT64_MAX, one_cb, &seen);
	}
	for (size_t i = 0; i < l->n; i++) {
		char name[9];
		size_t len = l->name_lens[i] < 8 ? l->name_lens[i] : 8;

		if (!l->name_lens[i])
			continue;
		memcpy(name, l->names[i], len);
		/* a prefix of a listed name, usually absent */
		(void)lsq_image_lookup(img, dir, name, len, &found);
		name[len] = '\x7f';
		(void)lsq_image_lookup(img, dir, name, len + 1, &found);
	}
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		(void)lsq_image_lookup(img, dir, absent[i], strlen(absent[i]),
				       &found);
	free(l);
}

/* full names need the real lookup too: the walk's own readdir gives them */
struct full_ctx {
	struct lsq_image *img;
	const struct lsq_inode *dir;
	unsigned left;
};

static int full_cb(void *ctx, const struct lsq_dirent *e)
{
	struct full_ctx *fc = ctx;
	struct lsq_inode found;

	if (e->is_dot)
		return 0;
	if (fc->left == 0)
		return 1;
	fc->left--;
	(void)lsq_image_lookup(fc->img, fc->dir, e->name, e->name_len, &found);
	return 0;
}

static void visit_full(struct lsq_image *img, const struct lsq_inode *ino,
		       void *ctx)
{
	struct full_ctx fc = { img, ino, MAX_ENTRIES };

	visit(img, ino, ctx);
	if (S_ISDIR(ino->mode))
		(void)lsq_image_readdir(img, ino, 0, full_cb, &fc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsq_image *img = fuzz_open(data, size);

	if (!img)
		return 0;
	fuzz_walk(img, 200, visit_full, NULL);
	lsq_image_close(img);
	return 0;
}
