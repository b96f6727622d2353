/* SPDX-License-Identifier: MIT */
/*
 * scan.c - the deterministic tree walk: names sorted bytewise, lstat,
 * symlink targets, device numbers, xattrs (user., trusted., security.),
 * hardlinks by (st_dev, st_ino), uid/gid interning in first-use order.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "format/encode.h"
#include "format/ondisk.h"
#include "lsq/error.h"
#include "pack/pack.h"

uint64_t pk_hash(uint64_t seed, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);

	while (n >= 8) {
		uint64_t w;

		memcpy(&w, b, 8);
		h ^= w * 0xff51afd7ed558ccdull;
		h = (h << 27 | h >> 37) * 0xc4ceb9fe1a85ec53ull + 0x52dce729;
		b += 8;
		n -= 8;
	}
	while (n--) {
		h ^= *b++;
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static int id_index(struct pk_ctx *ctx, uint32_t id, uint32_t *out)
{
	for (size_t i = 0; i < ctx->nids; i++)
		if (ctx->ids[i] == id) {
			*out = (uint32_t)i;
			return LSQ_OK;
		}
	if (ctx->nids == 65536) {
		pk_error("more than 65536 distinct uids/gids");
		return LSQ_ERR_OVERFLOW;
	}
	if (ctx->nids == ctx->ids_cap) {
		size_t cap = ctx->ids_cap ? ctx->ids_cap * 2 : 16;
		uint32_t *n = realloc(ctx->ids, cap * sizeof(*n));

		if (!n)
			return LSQ_ERR_NOMEM;
		ctx->ids = n;
		ctx->ids_cap = cap;
	}
	ctx->ids[ctx->nids] = id;
	*out = (uint32_t)ctx->nids++;
	return LSQ_OK;
}

static uint32_t map_time(struct pk_ctx *ctx, time_t t)
{
	const struct pk_opts *o = ctx->opt;

	if (o->have_mtime)
		return o->mtime;
	if (t < 0)
		t = 0;
	if ((uint64_t)t > UINT32_MAX)
		t = (time_t)UINT32_MAX;
	if (o->have_clamp && (uint32_t)t > o->clamp)
		t = (time_t)o->clamp;
	return (uint32_t)t;
}

/* ---- xattrs ---- */

struct xent {
	const char *name; /* full name */
	unsigned prefix;
	size_t plen;
	char *value;
	size_t vlen;
};

static int cmp_xent(const void *a, const void *b)
{
	return strcmp(((const struct xent *)a)->name,
		      ((const struct xent *)b)->name);
}

static int intern_xset(struct pk_ctx *ctx, uint8_t *data, size_t len,
		       uint32_t count, uint32_t size, uint32_t *out)
{
	uint64_t h = pk_hash(1, data, len);

	for (size_t i = 0; i < ctx->nxsets; i++) {
		struct pk_xattr_set *s = &ctx->xsets[i];

		if (s->hash == h && s->len == len && s->count == count &&
		    !memcmp(s->data, data, len)) {
			free(data);
			*out = (uint32_t)i;
			return LSQ_OK;
		}
	}
	if (ctx->nxsets == ctx->xsets_cap) {
		size_t cap = ctx->xsets_cap ? ctx->xsets_cap * 2 : 16;
		struct pk_xattr_set *n = realloc(ctx->xsets, cap * sizeof(*n));

		if (!n) {
			free(data);
			return LSQ_ERR_NOMEM;
		}
		ctx->xsets = n;
		ctx->xsets_cap = cap;
	}
	ctx->xsets[ctx->nxsets] = (struct pk_xattr_set){
		.data = data, .len = len, .count = count, .size = size,
		.hash = h
	};
	*out = (uint32_t)ctx->nxsets++;
	return LSQ_OK;
}

static int read_xattrs(struct pk_ctx *ctx, const char *path, uint32_t *out)
{
	static const char *const prefixes[] = { "user.", "trusted.",
						"security." };
	ssize_t n = llistxattr(path, NULL, 0);
	char *names = NULL;
	struct xent *ents = NULL;
	size_t nents = 0, total = 0, size = 0;
	uint8_t *data = NULL, *p;
	int ret = LSQ_OK;

	*out = SQUASHFS_INVALID_XATTR;
	if (n < 0) {
		if (errno == ENOTSUP || errno == ENODATA)
			return LSQ_OK;
		pk_error("%s: cannot list xattrs: %s", path, strerror(errno));
		return LSQ_ERR_IO;
	}
	if (n == 0)
		return LSQ_OK;
	names = malloc((size_t)n + 1);
	if (!names)
		return LSQ_ERR_NOMEM;
	n = llistxattr(path, names, (size_t)n);
	if (n < 0) {
		pk_error("%s: xattrs changed while packing", path);
		ret = LSQ_ERR_IO;
		goto out;
	}
	names[n] = '\0';
	ents = calloc((size_t)n, sizeof(*ents));
	if (!ents) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	for (char *q = names; q < names + n; q += strlen(q) + 1) {
		unsigned pi;
		ssize_t vl;

		for (pi = 0; pi < 3; pi++)
			if (!strncmp(q, prefixes[pi], strlen(prefixes[pi])))
				break;
		if (pi == 3) {
			pk_warn(ctx, "%s: xattr %s not stored (SquashFS holds "
				"user., trusted. and security. only)", path, q);
			continue;
		}
		if (strlen(q) - strlen(prefixes[pi]) > 255) {
			pk_error("%s: xattr name %s too long", path, q);
			ret = LSQ_ERR_NAME_TOO_LONG;
			goto out;
		}
		vl = lgetxattr(path, q, NULL, 0);
		if (vl < 0)
			goto xfail;
		ents[nents].value = malloc((size_t)vl + 1);
		if (!ents[nents].value) {
			ret = LSQ_ERR_NOMEM;
			goto out;
		}
		vl = lgetxattr(path, q, ents[nents].value, (size_t)vl);
		if (vl < 0)
			goto xfail;
		ents[nents].name = q;
		ents[nents].prefix = pi;
		ents[nents].plen = strlen(prefixes[pi]);
		ents[nents].vlen = (size_t)vl;
		total += 8 + strlen(q) - ents[nents].plen + (size_t)vl;
		size += strlen(q) + 1 + (size_t)vl;
		nents++;
	}
	if (nents == 0)
		goto out;
	qsort(ents, nents, sizeof(*ents), cmp_xent);
	data = malloc(total);
	if (!data) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	p = data;
	for (size_t i = 0; i < nents; i++) {
		size_t nl = strlen(ents[i].name) - ents[i].plen;

		lsq_put16(p, (uint16_t)ents[i].prefix);
		lsq_put16(p + 2, (uint16_t)nl);
		memcpy(p + 4, ents[i].name + ents[i].plen, nl);
		p += 4 + nl;
		lsq_put32(p, (uint32_t)ents[i].vlen);
		memcpy(p + 4, ents[i].value, ents[i].vlen);
		p += 4 + ents[i].vlen;
	}
	ret = intern_xset(ctx, data, total, (uint32_t)nents, (uint32_t)size,
			  out);
	goto out;
xfail:
	pk_error("%s: cannot read xattrs: %s", path, strerror(errno));
	ret = LSQ_ERR_IO;
out:
	if (ents)
		for (size_t i = 0; i <= nents && i < (size_t)n; i++)
			free(ents[i].value);
	free(ents);
	free(names);
	return ret;
}

/* ---- hardlinks ---- */

static size_t link_slot(const struct pk_ctx *ctx, dev_t dev, ino_t ino)
{
	uint64_t k[2] = { (uint64_t)dev, (uint64_t)ino };

	return (size_t)pk_hash(7, k, sizeof(k)) & (ctx->links_cap - 1);
}

static int link_lookup(struct pk_ctx *ctx, const struct stat *st,
		       struct pk_inode **found, struct pk_inode *fresh)
{
	size_t i;

	if (ctx->nlinks * 2 >= ctx->links_cap) {
		size_t cap = ctx->links_cap ? ctx->links_cap * 2 : 64;
		struct pk_inode **old = ctx->links;
		size_t oldcap = ctx->links_cap;

		ctx->links = calloc(cap, sizeof(*ctx->links));
		if (!ctx->links) {
			ctx->links = old;
			return LSQ_ERR_NOMEM;
		}
		ctx->links_cap = cap;
		for (size_t j = 0; j < oldcap; j++) {
			struct pk_inode *e = old[j];

			if (!e)
				continue;
			i = link_slot(ctx, e->st_dev, e->st_ino);
			while (ctx->links[i])
				i = (i + 1) & (cap - 1);
			ctx->links[i] = e;
		}
		free(old);
	}
	i = link_slot(ctx, st->st_dev, st->st_ino);
	while (ctx->links[i]) {
		if (ctx->links[i]->st_dev == st->st_dev &&
		    ctx->links[i]->st_ino == st->st_ino) {
			*found = ctx->links[i];
			return LSQ_OK;
		}
		i = (i + 1) & (ctx->links_cap - 1);
	}
	ctx->links[i] = fresh;
	ctx->nlinks++;
	*found = NULL;
	return LSQ_OK;
}

/* ---- the walk ---- */

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);

	if (!p)
		return NULL;
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

static int fill_inode(struct pk_ctx *ctx, struct pk_node *node,
		      const struct stat *st)
{
	struct pk_inode *ino = node->ino;
	uint32_t uid = ctx->opt->all_root ? 0 : st->st_uid;
	uint32_t gid = ctx->opt->all_root ? 0 : st->st_gid;
	int ret;

	ino->mode = st->st_mode;
	ino->st_dev = st->st_dev;
	ino->st_ino = st->st_ino;
	ino->nlink = 1;
	ino->frag_index = SQUASHFS_INVALID_FRAG;
	ino->xattr_id = SQUASHFS_INVALID_XATTR;
	ino->mtime = map_time(ctx, st->st_mtime);
	if (ino->mtime > ctx->max_mtime)
		ctx->max_mtime = ino->mtime;
	ret = id_index(ctx, uid, &ino->uid_idx);
	if (!ret)
		ret = id_index(ctx, gid, &ino->gid_idx);
	if (ret)
		return ret;

	switch (st->st_mode & S_IFMT) {
	case S_IFREG:
		ino->size = (uint64_t)st->st_size;
		ctx->files++;
		break;
	case S_IFLNK: {
		char *buf = malloc(SQUASHFS_METADATA_SIZE);
		ssize_t n;

		if (!buf)
			return LSQ_ERR_NOMEM;
		n = readlink(node->path, buf, 4097);
		if (n < 0 || n > 4096) {
			pk_error("%s: cannot read symlink: %s", node->path,
				 n < 0 ? strerror(errno) : "target too long");
			free(buf);
			return LSQ_ERR_IO;
		}
		buf[n] = '\0';
		ino->target = buf;
		ino->size = (uint64_t)n;
		break;
	}
	case S_IFCHR:
	case S_IFBLK:
		if (lsq_encode_dev(major(st->st_rdev), minor(st->st_rdev),
				   &ino->rdev)) {
			pk_error("%s: device number %u:%u does not fit SquashFS",
				 node->path, major(st->st_rdev),
				 minor(st->st_rdev));
			return LSQ_ERR_OVERFLOW;
		}
		break;
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	default:
		pk_error("%s: unknown file type 0%o", node->path,
			 st->st_mode & S_IFMT);
		return LSQ_ERR_UNSUPPORTED;
	}
	if (!ctx->opt->no_xattrs)
		return read_xattrs(ctx, node->path, &ino->xattr_id);
	return LSQ_OK;
}

static int scan_dir(struct pk_ctx *ctx, struct pk_node *dir)
{
	DIR *d = opendir(dir->path);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	uint32_t subdirs = 0;
	int ret = LSQ_OK;

	if (!d) {
		pk_error("%s: cannot open directory: %s", dir->path,
			 strerror(errno));
		return LSQ_ERR_IO;
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			char **nn;

			cap = cap ? cap * 2 : 16;
			nn = realloc(names, cap * sizeof(*nn));
			if (!nn) {
				ret = LSQ_ERR_NOMEM;
				goto out;
			}
			names = nn;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			ret = LSQ_ERR_NOMEM;
			goto out;
		}
		n++;
		errno = 0;
	}
	if (errno) {
		pk_error("%s: cannot read directory: %s", dir->path,
			 strerror(errno));
		ret = LSQ_ERR_IO;
		goto out;
	}
	closedir(d);
	d = NULL;
	if (n)
		qsort(names, n, sizeof(*names), cmp_name);
	dir->children = calloc(n ? n : 1, sizeof(*dir->children));
	if (!dir->children) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct pk_node *c = calloc(1, sizeof(*c));
		struct pk_inode *shared = NULL;
		struct stat st;

		if (!c) {
			ret = LSQ_ERR_NOMEM;
			goto out;
		}
		c->name = names[i];
		names[i] = NULL;
		c->name_len = strlen(c->name);
		c->parent = dir;
		dir->children[dir->nchildren++] = c;
		c->path = join(dir->path, c->name);
		if (!c->path) {
			ret = LSQ_ERR_NOMEM;
			goto out;
		}
		if (c->name_len > SQUASHFS_NAME_LEN) {
			pk_error("%s: name longer than %d bytes", c->path,
				 SQUASHFS_NAME_LEN);
			ret = LSQ_ERR_NAME_TOO_LONG;
			goto out;
		}
		if (lstat(c->path, &st)) {
			pk_error("%s: %s", c->path, strerror(errno));
			ret = LSQ_ERR_IO;
			goto out;
		}
		if (ctx->skip_valid && st.st_dev == ctx->skip_dev &&
		    st.st_ino == ctx->skip_ino && S_ISREG(st.st_mode)) {
			pk_warn(ctx, "%s: is OUTPUT, not packed", c->path);
			dir->nchildren--;
			free(c->path);
			free(c->name);
			free(c);
			continue;
		}
		c->ino = calloc(1, sizeof(*c->ino));
		if (!c->ino) {
			ret = LSQ_ERR_NOMEM;
			goto out;
		}
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
			c->ino->st_dev = st.st_dev;
			c->ino->st_ino = st.st_ino;
			ret = link_lookup(ctx, &st, &shared, c->ino);
			if (ret) {
				free(c->ino);
				c->ino = NULL;
				goto out;
			}
			if (shared) {
				free(c->ino);
				c->ino = shared;
				shared->nlink++;
				continue;
			}
		}
		ret = fill_inode(ctx, c, &st);
		if (ret)
			goto out;
		if (S_ISDIR(st.st_mode)) {
			c->ino->dir = c;
			subdirs++;
			ret = scan_dir(ctx, c);
			if (ret)
				goto out;
		}
	}
	dir->ino->nlink = 2 + subdirs;
out:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

int pk_scan(struct pk_ctx *ctx)
{
	struct pk_node *root = calloc(1, sizeof(*root));
	struct stat st;
	int ret;

	if (!root)
		return LSQ_ERR_NOMEM;
	ctx->root = root;
	root->path = strdup(ctx->opt->source);
	root->ino = calloc(1, sizeof(*root->ino));
	if (!root->path || !root->ino)
		return LSQ_ERR_NOMEM;
	if (stat(root->path, &st)) {
		pk_error("%s: %s", root->path, strerror(errno));
		return LSQ_ERR_IO;
	}
	if (!S_ISDIR(st.st_mode)) {
		pk_error("%s: not a directory", root->path);
		return LSQ_ERR_NOT_DIR;
	}
	ret = fill_inode(ctx, root, &st);
	if (ret)
		return ret;
	root->ino->dir = root;
	return scan_dir(ctx, root);
}

void pk_tree_free(struct pk_node *node)
{
	if (!node)
		return;
	for (size_t i = 0; i < node->nchildren; i++)
		pk_tree_free(node->children[i]);
	if (node->ino && node->ino->nlink > 0 && !S_ISDIR(node->ino->mode)) {
		/* shared inodes: the last node frees it */
		if (--node->ino->nlink == 0) {
			free(node->ino->target);
			free(node->ino->blocks);
			free(node->ino);
		}
	} else if (node->ino) {
		free(node->ino->target);
		free(node->ino->blocks);
		free(node->ino);
	}
	free(node->children);
	free(node->name);
	free(node->path);
	free(node);
}
