/* SPDX-License-Identifier: MIT */
/*
 * order.c - --order PROFILE: the files a startup profile lists are laid
 * out first, in list order, and the profile is stored in the image.
 *
 * The listed files' data blocks go first, their tails into fragment
 * blocks in list order, and the fragment block holding the last listed
 * tail is written before any other file's data: the start set is one
 * region at the front of the image, which a remote mount fetches in a few
 * large requests. The profile (the entries that were found, re-written)
 * goes between the superblock and the first data block, where every
 * SquashFS reader skips it (src/profile/record.h) and a remote
 * mount finds it in the bytes it fetches first.
 *
 * Everything here runs on the main thread, before and between the block
 * processor's files, so the output stays the same for every -j.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lsq/error.h"
#include "pack/pack.h"
#include "profile/profile.h"
#include "profile/record.h"

static int cmp_child(const void *key, const void *elem)
{
	const struct pk_node *k = key;
	const struct pk_node *c = *(struct pk_node *const *)elem;
	size_t n = k->name_len < c->name_len ? k->name_len : c->name_len;
	int r = memcmp(k->name, c->name, n);

	if (r)
		return r;
	return k->name_len < c->name_len ? -1 : k->name_len > c->name_len;
}

/* The node at a profile path (components already checked by the parser),
 * or NULL. Children are sorted bytewise, as memcmp orders them. */
static struct pk_node *resolve(struct pk_node *root, const char *path)
{
	struct pk_node *cur = root;

	while (cur && *path) {
		const char *slash = strchr(path, '/');
		struct pk_node key = { .name = (char *)path };
		struct pk_node **hit;

		key.name_len = slash ? (size_t)(slash - path) : strlen(path);
		if (!S_ISDIR(cur->ino->mode))
			return NULL;
		hit = bsearch(&key, cur->children, cur->nchildren,
			      sizeof(*cur->children), cmp_child);
		cur = hit ? *hit : NULL;
		path += key.name_len + (slash ? 1 : 0);
	}
	return cur;
}

static bool listed_before(const struct pk_order *ord, const struct pk_node *n)
{
	for (size_t i = 0; i < ord->count; i++)
		if (ord->nodes[i] == n)
			return true;
	return false;
}

static int read_profile(const char *path, char **text, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f) {
		pk_error("--order %s: %s", path, strerror(errno));
		return LSQ_ERR_IO;
	}
	for (;;) {
		size_t got;

		if (n == cap) {
			char *nb;

			cap = cap ? 2 * cap : 65536;
			if (cap > LSQ_PROFILE_RECORD_MAX * 4)
				break;  /* far more than a record holds */
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return LSQ_ERR_NOMEM;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		pk_error("--order %s: read failed", path);
		free(buf);
		fclose(f);
		return LSQ_ERR_IO;
	}
	fclose(f);
	*text = buf;
	*len = n;
	return LSQ_OK;
}

int pk_order_prepare(struct pk_ctx *ctx, const char *path,
		     struct pk_order *ord)
{
	struct lsq_profile prof;
	const char *first_skipped = NULL;
	size_t skipped = 0, len = 0;
	char *text = NULL;
	FILE *out;
	int ret;

	memset(ord, 0, sizeof(*ord));
	ret = read_profile(path, &text, &len);
	if (ret)
		return ret;
	ret = lsq_profile_parse(text, len, &prof);
	free(text);
	if (ret)
		return ret;
	ord->nodes = calloc(prof.count ? prof.count : 1, sizeof(*ord->nodes));
	out = open_memstream(&ord->text, &ord->len);
	if (!ord->nodes || !out) {
		if (out)
			fclose(out);
		lsq_profile_free(&prof);
		return LSQ_ERR_NOMEM;
	}
	for (size_t i = 0; i < prof.count && !ret; i++) {
		const struct lsq_profile_entry *e = &prof.entries[i];
		struct pk_node *n = resolve(ctx->root, e->path);

		/* missing, not a regular file, or listed twice */
		if (!n || !S_ISREG(n->ino->mode) || listed_before(ord, n)) {
			if (!skipped++)
				first_skipped = e->path;
			continue;
		}
		ord->nodes[ord->count++] = n;
		ret = lsq_profile_write_entry(out, e->path, e->ranges,
					      e->nranges, 0);
	}
	if (fclose(out) && !ret)
		ret = LSQ_ERR_IO;
	if (!ret && ord->len > LSQ_PROFILE_RECORD_MAX) {
		pk_error("--order %s: %zu bytes of profile, more than the %u an image holds",
			 path, ord->len, LSQ_PROFILE_RECORD_MAX);
		ret = LSQ_ERR_INVALID;
	}
	if (!ret && (skipped || prof.bad_lines))
		pk_warn(ctx, "--order %s: %zu entries skipped (missing, not a regular file, or listed twice; first: %s) and %zu unreadable lines",
			path, skipped, first_skipped ? first_skipped : "-",
			prof.bad_lines);
	lsq_profile_free(&prof);
	return ret;
}

int pk_order_write_record(struct pk_ctx *ctx, const struct pk_order *ord,
			  uint64_t comp_opts_block)
{
	uint8_t h[LSQ_PROFILE_RECORD_HEADER];
	uint64_t at = lsq_profile_record_offset(comp_opts_block);
	int ret;

	lsq_profile_record_encode(h, ord->text, (uint32_t)ord->len);
	/* the alignment gap is written too: the image has no holes */
	if (at > ctx->pos) {
		static const uint8_t zero[8];

		ret = pk_pwrite_all(ctx, zero, (size_t)(at - ctx->pos),
				    ctx->pos);
		if (ret)
			return ret;
	}
	ret = pk_pwrite_all(ctx, h, sizeof(h), at);
	if (!ret && ord->len)
		ret = pk_pwrite_all(ctx, ord->text, ord->len, at + sizeof(h));
	if (!ret)
		ctx->pos = at + sizeof(h) + ord->len;
	return ret;
}

int pk_order_add_files(struct pk_bp *bp, const struct pk_order *ord)
{
	int ret = LSQ_OK;

	for (size_t i = 0; i < ord->count && !ret; i++)
		ret = pk_bp_add_node(bp, ord->nodes[i]);
	/* the last listed tails go out before any other file's data */
	return ret ? ret : pk_bp_flush_fragments(bp);
}

void pk_order_fini(struct pk_order *ord)
{
	free(ord->nodes);
	free(ord->text);
	memset(ord, 0, sizeof(*ord));
}
