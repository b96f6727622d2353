/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <sys/stat.h>

#include "common/log.h"
#include "fuzz_common.h"

#define FUZZ_MAX_DEPTH 32

struct lsq_image *fuzz_open(const uint8_t *data, size_t size)
{
	struct lsq_image_options opt;
	struct lsq_source *src;
	struct lsq_image *img;

	lsq_log_set_level(LSQ_LOG_SILENT);
	if (lsq_source_mem_create(data, size, "fuzz", &src))
		return NULL;
	lsq_image_options_default(&opt);
	opt.metadata_cache_bytes = 64 * 1024;
	opt.data_cache_bytes = 256 * 1024;
	opt.fragment_cache_blocks = 2;
	opt.decomp_contexts = 1;
	if (lsq_image_open(src, &opt, &img, NULL, 0)) {
		lsq_source_destroy(src);
		return NULL;
	}
	return img;
}

struct walk_state {
	struct lsq_image *img;
	fuzz_visit_fn fn;
	void *ctx;
	unsigned nodes_left;
};

/* Children are collected first and visited after readdir returns, so the
 * visitor may call readdir/lookup itself without nesting iterations. */
struct child_list {
	lsq_inode_ref *refs;
	size_t n, cap;
	unsigned limit;
};

static int collect_cb(void *ctx, const struct lsq_dirent *e)
{
	struct child_list *cl = ctx;

	if (e->is_dot)
		return 0;
	if (cl->n >= cl->limit)
		return 1;
	if (cl->n == cl->cap) {
		size_t cap = cl->cap ? cl->cap * 2 : 16;
		lsq_inode_ref *r = realloc(cl->refs, cap * sizeof(*r));

		if (!r)
			return 1;
		cl->refs = r;
		cl->cap = cap;
	}
	cl->refs[cl->n++] = e->ref;
	return 0;
}

static void walk_node(struct walk_state *w, const struct lsq_inode *ino,
		      unsigned depth)
{
	struct child_list cl = { NULL, 0, 0, w->nodes_left };

	if (w->nodes_left == 0)
		return;
	w->nodes_left--;
	w->fn(w->img, ino, w->ctx);
	if (!S_ISDIR(ino->mode) || depth >= FUZZ_MAX_DEPTH)
		return;
	(void)lsq_image_readdir(w->img, ino, 0, collect_cb, &cl);
	for (size_t i = 0; i < cl.n && w->nodes_left; i++) {
		struct lsq_inode child;

		if (!lsq_image_inode(w->img, cl.refs[i], &child))
			walk_node(w, &child, depth + 1);
	}
	free(cl.refs);
}

void fuzz_walk(struct lsq_image *img, unsigned max_nodes, fuzz_visit_fn fn,
	       void *ctx)
{
	struct walk_state w = { img, fn, ctx, max_nodes };
	struct lsq_inode root;

	if (!lsq_image_inode(img, lsq_image_root(img), &root))
		walk_node(&w, &root, 0);
}
