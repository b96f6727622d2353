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

#include "common/array.h"
#include "pack/encode.h"
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

static bool slot_empty(const uint8_t *slot, size_t size)
{
	for (size_t i = 0; i < size; i++)
		if (slot[i])
			return false;
	return true;
}

int pk_table_reserve(void *tab, size_t *cap, size_t n, size_t size,
		     size_t first, uint64_t (*hash)(const void *entry))
{
	uint8_t *old = *(uint8_t **)tab, *t;
	size_t ncap = *cap ? *cap * 2 : first;

	if (n * 2 < *cap)
		return LSQ_OK;
	t = calloc(ncap, size);
	if (!t)
		return LSQ_ERR_NOMEM;
	for (size_t i = 0; i < *cap; i++) {
		const uint8_t *e = old + i * size;
		size_t j;

		if (slot_empty(e, size))
			continue;
		j = (size_t)hash(e) & (ncap - 1);
		while (!slot_empty(t + j * size, size))
			j = (j + 1) & (ncap - 1);
		memcpy(t + j * size, e, size);
	}
	free(old);
	*(uint8_t **)tab = t;
	*cap = ncap;
	return LSQ_OK;
}

int pk_id_index(struct pk_ctx *ctx, uint32_t id, uint32_t *out)
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
	if (!LSQ_ARRAY_RESERVE(ctx->ids, ctx->ids_cap, ctx->nids, 16))
		return LSQ_ERR_NOMEM;
	ctx->ids[ctx->nids] = id;
	*out = (uint32_t)ctx->nids++;
	return LSQ_OK;
}

uint32_t pk_map_time(struct pk_ctx *ctx, int64_t t)
{
	const struct pk_opts *o = ctx->opt;

	if (o->have_mtime)
		return o->mtime;
	if (t < 0)
		t = 0;
	if (t > (int64_t)UINT32_MAX)
		t = UINT32_MAX;
	if (o->have_clamp && (uint32_t)t > o->clamp)
		t = o->clamp;
	return (uint32_t)t;
}

/* ---- xattrs ---- */

static int cmp_xattr(const void *a, const void *b)
{
	return strcmp(((const struct pk_xattr *)a)->name,
		      ((const struct pk_xattr *)b)->name);
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
	if (!LSQ_ARRAY_RESERVE(ctx->xsets, ctx->xsets_cap, ctx->nxsets, 16)) {
		free(data);
		return LSQ_ERR_NOMEM;
	}
	ctx->xsets[ctx->nxsets] = (struct pk_xattr_set){
		.data = data, .len = len, .count = count, .size = size,
		.hash = h
	};
	*out = (uint32_t)ctx->nxsets++;
	return LSQ_OK;
}

static const char *const xprefixes[] = { "user.", "trusted.", "security." };

int pk_xattrs_intern(struct pk_ctx *ctx, const char *path,
		     struct pk_xattr *x, size_t n, uint32_t *out)
{
	size_t keep = 0, total = 0, size = 0;
	unsigned *prefix;
	uint8_t *data, *p;

	*out = SQUASHFS_INVALID_XATTR;
	if (n == 0)
		return LSQ_OK;
	prefix = calloc(n, sizeof(*prefix));
	if (!prefix)
		return LSQ_ERR_NOMEM;
	qsort(x, n, sizeof(*x), cmp_xattr);
	for (size_t i = 0; i < n; i++) {
		unsigned pi;
		size_t nl;

		for (pi = 0; pi < 3; pi++)
			if (!strncmp(x[i].name, xprefixes[pi],
				     strlen(xprefixes[pi])))
				break;
		if (pi == 3) {
			pk_warn(ctx, "%s: xattr %s not stored (SquashFS holds "
				"user., trusted. and security. only)", path,
				x[i].name);
			continue;
		}
		nl = strlen(x[i].name) - strlen(xprefixes[pi]);
		if (nl == 0 || nl > 255 || x[i].vlen > UINT32_MAX / 2) {
			pk_error("%s: xattr %s: %s", path, x[i].name,
				 nl == 0 ? "empty name after the prefix" :
				 nl > 255 ? "name longer than 255 bytes" :
					    "value too large");
			free(prefix);
			return LSQ_ERR_NAME_TOO_LONG;
		}
		prefix[i] = pi + 1;
		total += 8 + nl + x[i].vlen;
		size += strlen(x[i].name) + 1 + x[i].vlen;
		keep++;
	}
	if (keep == 0 || size > UINT32_MAX) {
		free(prefix);
		if (keep == 0)
			return LSQ_OK;
		pk_error("%s: xattrs larger than 4 GiB", path);
		return LSQ_ERR_OVERFLOW;
	}
	data = malloc(total);
	if (!data) {
		free(prefix);
		return LSQ_ERR_NOMEM;
	}
	p = data;
	for (size_t i = 0; i < n; i++) {
		size_t pl, nl;

		if (!prefix[i])
			continue;
		pl = strlen(xprefixes[prefix[i] - 1]);
		nl = strlen(x[i].name) - pl;
		lsq_put16(p, (uint16_t)(prefix[i] - 1));
		lsq_put16(p + 2, (uint16_t)nl);
		memcpy(p + 4, x[i].name + pl, nl);
		p += 4 + nl;
		lsq_put32(p, (uint32_t)x[i].vlen);
		if (x[i].vlen)
			memcpy(p + 4, x[i].value, x[i].vlen);
		p += 4 + x[i].vlen;
	}
	free(prefix);
	return intern_xset(ctx, data, total, (uint32_t)keep, (uint32_t)size,
			   out);
}

/* Read a file's xattrs; a failure is pk_read_fail()'s. */
static int read_xattrs(struct pk_ctx *ctx, const char *path, uint32_t *out)
{
	ssize_t n = llistxattr(path, NULL, 0);
	char *names = NULL;
	struct pk_xattr *x = NULL;
	size_t nx = 0;
	int ret = LSQ_OK;

	*out = SQUASHFS_INVALID_XATTR;
	if (n < 0) {
		if (errno == ENOTSUP || errno == ENODATA)
			return LSQ_OK;
		return pk_read_fail(ctx, "%s: cannot list xattrs: %s", path,
				    strerror(errno));
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
	x = calloc((size_t)n, sizeof(*x));
	if (!x) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	for (char *q = names; q < names + n; q += strlen(q) + 1) {
		ssize_t vl;
		char *v;

		/* only what SquashFS can hold is read (the rest is warned
		 * about by pk_xattrs_intern) */
		x[nx].name = q;
		if (strncmp(q, "user.", 5) && strncmp(q, "trusted.", 8) &&
		    strncmp(q, "security.", 9)) {
			nx++;
			continue;
		}
		vl = lgetxattr(path, q, NULL, 0);
		if (vl < 0)
			goto xfail;
		v = malloc((size_t)vl + 1);
		if (!v) {
			ret = LSQ_ERR_NOMEM;
			goto out;
		}
		x[nx].value = v;
		vl = lgetxattr(path, q, v, (size_t)vl);
		if (vl < 0)
			goto xfail;
		x[nx++].vlen = (size_t)vl;
	}
	ret = pk_xattrs_intern(ctx, path, x, nx, out);
	goto out;
xfail:
	ret = pk_read_fail(ctx, "%s: cannot read xattrs: %s", path,
			   strerror(errno));
out:
	if (x)
		for (size_t i = 0; i < (size_t)n; i++)
			free((void *)x[i].value);
	free(x);
	free(names);
	return ret;
}

/* ---- hardlinks ---- */

static uint64_t link_key(dev_t dev, ino_t ino)
{
	uint64_t k[2] = { (uint64_t)dev, (uint64_t)ino };

	return pk_hash(7, k, sizeof(k));
}

static uint64_t link_hash(const void *slot)
{
	const struct pk_inode *e = *(struct pk_inode *const *)slot;

	return link_key(e->st_dev, e->st_ino);
}

static int link_lookup(struct pk_ctx *ctx, const struct stat *st,
		       struct pk_inode **found, struct pk_inode *fresh)
{
	size_t i;

	if (pk_table_reserve(&ctx->links, &ctx->links_cap, ctx->nlinks,
			     sizeof(*ctx->links), 64, link_hash))
		return LSQ_ERR_NOMEM;
	i = link_key(st->st_dev, st->st_ino) & (ctx->links_cap - 1);
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
	ino->mtime = pk_map_time(ctx, st->st_mtime);
	if (ino->mtime > ctx->max_mtime)
		ctx->max_mtime = ino->mtime;
	ret = pk_id_index(ctx, uid, &ino->uid_idx);
	if (!ret)
		ret = pk_id_index(ctx, gid, &ino->gid_idx);
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
		if (n < 0) {
			free(buf);
			return pk_read_fail(ctx, "%s: cannot read symlink: %s",
					    node->path, strerror(errno));
		}
		if (n > 4096) {
			pk_error("%s: symlink target longer than 4096 bytes",
				 node->path);
			free(buf);
			return LSQ_ERR_NAME_TOO_LONG;
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

	if (!d)
		return pk_read_fail(ctx, "%s: cannot open directory: %s",
				    dir->path, strerror(errno));
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!LSQ_ARRAY_RESERVE(names, cap, n, 16) ||
		    !(names[n] = strdup(de->d_name))) {
			ret = LSQ_ERR_NOMEM;
			goto out;
		}
		n++;
		errno = 0;
	}
	if (errno) {
		ret = pk_read_fail(ctx, "%s: cannot read directory: %s",
				   dir->path, strerror(errno));
		/* under --skip-unreadable the whole directory goes */
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		n = 0;
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
		if (c->name_len > PK_NAME_MAX) {
			pk_error("%s: name longer than %d bytes", c->path,
				 PK_NAME_MAX);
			ret = LSQ_ERR_NAME_TOO_LONG;
			goto out;
		}
		if (lstat(c->path, &st)) {
			ret = pk_read_fail(ctx, "%s: %s", c->path,
					   strerror(errno));
			if (ret == PK_UNREADABLE) {
				/* no inode to hang it on: drop the node */
				dir->nchildren--;
				free(c->path);
				free(c->name);
				free(c);
				ctx->skipped++;
				ret = LSQ_OK;
				continue;
			}
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
		if (!ret && S_ISDIR(st.st_mode)) {
			c->ino->dir = c;
			ret = scan_dir(ctx, c);
			if (!ret)
				subdirs++;
		}
		if (ret == PK_UNREADABLE) {
			/* left out with every other link to it */
			c->ino->skipped = true;
			ctx->skipped++;
			if (S_ISREG(st.st_mode))
				ctx->files--;
			ret = LSQ_OK;
		}
		if (ret)
			goto out;
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
	if (!ret) {
		root->ino->dir = root;
		ret = scan_dir(ctx, root);
	}
	if (ret == PK_UNREADABLE) {
		pk_error("%s: the source directory cannot be read",
			 root->path);
		ret = LSQ_ERR_IO;
	}
	return ret;
}

void pk_tree_prune(struct pk_node *dir)
{
	size_t k = 0;

	for (size_t i = 0; i < dir->nchildren; i++) {
		struct pk_node *c = dir->children[i];

		if (c->ino->skipped) {
			pk_tree_free(c);
			continue;
		}
		if (S_ISDIR(c->ino->mode))
			pk_tree_prune(c);
		dir->children[k++] = c;
	}
	dir->nchildren = k;
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
