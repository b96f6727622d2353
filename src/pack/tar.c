/* SPDX-License-Identifier: MIT */
/*
 * tar.c - SOURCE as a tar archive, read once, front to back, through
 * libarchive (every tar dialect it knows: ustar, pax with SCHILY.xattr and
 * LIBARCHIVE.xattr, GNU long names and sparse files; every compression it
 * detects: gzip, xz, zstd, bzip2, lz4, ...). "-" is stdin.
 *
 * The archive is streamed: each entry becomes a node of the same tree a
 * directory scan builds, and a regular file's bytes go straight to the
 * block processor, so file data lands in the image in archive order and
 * nothing is spooled. Afterwards the children of every directory are
 * sorted bytewise and the directory link counts computed, exactly as the
 * scan of a directory does. A tar listed in the scan's order (bytewise
 * sorted, depth first, each directory before its contents, e.g. GNU tar
 * --sort=name) therefore gives the very image of the directory it was made
 * from (docs/packer-determinism.md, "Tar input").
 *
 * Paths: leading "/" and "./" and empty or "." components are dropped; a
 * ".." component is an error (it would leave the image's root), and so is
 * a path of PATH_MAX bytes or more (it bounds the recursion depth). A
 * directory that entries imply but the archive does not list is created
 * with mode 0755, owner 0:0 and mtime --mtime, else SOURCE_DATE_EPOCH,
 * else 0; a later entry for it sets its real attributes. Any other path
 * that appears twice is an error, as is a hardlink to a path not seen
 * before.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/array.h"
#include "pack/encode.h"
#include "format/ondisk.h"
#include "lsq/error.h"
#include "pack/pack.h"

struct tar {
	struct pk_ctx *ctx;
	struct pk_bp *bp;
	struct archive *a;
	/* every node by its normalized path, open addressing */
	struct pk_node **tab;
	size_t tab_cap, tab_n;
	bool root_listed;     /* the archive has an entry for "." */
	struct pk_xattr *xattrs;
	size_t xattrs_cap;
};

static const char *tar_err(struct tar *t)
{
	const char *s = archive_error_string(t->a);

	return s ? s : "unknown error";
}

/* ---- the path table ---- */

static uint64_t path_hash(const char *path)
{
	return pk_hash(11, path, strlen(path));
}

static uint64_t node_hash(const void *slot)
{
	return path_hash((*(struct pk_node *const *)slot)->path);
}

static struct pk_node *find(const struct tar *t, const char *path)
{
	size_t i = path_hash(path) & (t->tab_cap - 1);

	for (; t->tab[i]; i = (i + 1) & (t->tab_cap - 1))
		if (!strcmp(t->tab[i]->path, path))
			return t->tab[i];
	return NULL;
}

static int remember(struct tar *t, struct pk_node *n)
{
	size_t i;

	if (pk_table_reserve(&t->tab, &t->tab_cap, t->tab_n, sizeof(*t->tab),
			     1024, node_hash))
		return LSQ_ERR_NOMEM;
	i = path_hash(n->path) & (t->tab_cap - 1);
	while (t->tab[i])
		i = (i + 1) & (t->tab_cap - 1);
	t->tab[i] = n;
	t->tab_n++;
	return LSQ_OK;
}

/* ---- paths ---- */

/* Normalize an archive path into a fresh string ("" is the root).
 * Returns an lsq_err after printing what is wrong with it. */
static int normalize(const char *raw, char **out)
{
	size_t len = strlen(raw), o = 0;
	char *p = malloc(len + 1);
	const char *s = raw;

	*out = NULL;
	if (!p)
		return LSQ_ERR_NOMEM;
	while (*s) {
		const char *e = strchr(s, '/');
		size_t n = e ? (size_t)(e - s) : strlen(s);

		if (n == 0 || (n == 1 && s[0] == '.')) {
			/* empty or "." component */
		} else if (n == 2 && s[0] == '.' && s[1] == '.') {
			pk_error("%s: path with a '..' component would leave "
				 "the image", raw);
			free(p);
			return LSQ_ERR_INVALID;
		} else if (n > PK_NAME_MAX) {
			pk_error("%s: name longer than %d bytes", raw,
				 PK_NAME_MAX);
			free(p);
			return LSQ_ERR_NAME_TOO_LONG;
		} else {
			if (o)
				p[o++] = '/';
			memcpy(p + o, s, n);
			o += n;
		}
		s += n;
		if (*s == '/')
			s++;
	}
	p[o] = '\0';
	/* bounds the depth of every walk of the tree (recursive) as
	 * PATH_MAX bounds a directory source */
	if (o >= PATH_MAX) {
		pk_error("%.64s...: path longer than %d bytes", raw,
			 PATH_MAX - 1);
		free(p);
		return LSQ_ERR_NAME_TOO_LONG;
	}
	*out = p;
	return LSQ_OK;
}

/* ---- nodes ---- */

static int add_child(struct pk_node *dir, struct pk_node *c)
{
	/* capacity: 4, then doubled whenever nchildren reaches a power of
	 * two */
	size_t n = dir->nchildren;

	if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
		size_t cap = n ? n * 2 : 4;
		struct pk_node **p = realloc(dir->children, cap * sizeof(*p));

		if (!p)
			return LSQ_ERR_NOMEM;
		dir->children = p;
	}
	dir->children[dir->nchildren++] = c;
	c->parent = dir;
	return LSQ_OK;
}

static void set_implicit_dir(struct pk_ctx *ctx, struct pk_inode *ino)
{
	const struct pk_opts *o = ctx->opt;

	ino->mode = S_IFDIR | 0755;
	ino->mtime = o->have_mtime ? o->mtime : o->have_clamp ? o->clamp : 0;
	ino->xattr_id = SQUASHFS_INVALID_XATTR;
	ino->frag_index = SQUASHFS_INVALID_FRAG;
	ino->nlink = 1;
}

/* A new node at path (normalized, not the root) under its parent, made
 * (as implicit directories) when missing. */
static int new_node(struct tar *t, const char *path, struct pk_node **out)
{
	const char *slash = strrchr(path, '/');
	struct pk_node *parent, *n;
	int ret;

	*out = NULL;
	if (slash) {
		char *pp = strndup(path, (size_t)(slash - path));

		if (!pp)
			return LSQ_ERR_NOMEM;
		parent = find(t, pp);
		if (!parent) {
			ret = new_node(t, pp, &parent);
			if (!ret) {
				uint32_t zero;

				set_implicit_dir(t->ctx, parent->ino);
				parent->ino->dir = parent;
				ret = pk_id_index(t->ctx, 0, &zero);
				parent->ino->uid_idx = zero;
				parent->ino->gid_idx = zero;
			}
			if (ret) {
				free(pp);
				return ret;
			}
		}
		free(pp);
		if (!S_ISDIR(parent->ino->mode)) {
			pk_error("%s: its parent %s is not a directory", path,
				 parent->path);
			return LSQ_ERR_NOT_DIR;
		}
	} else {
		parent = t->ctx->root;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return LSQ_ERR_NOMEM;
	n->path = strdup(path);
	n->ino = calloc(1, sizeof(*n->ino));
	n->name = strdup(slash ? slash + 1 : path);
	if (!n->path || !n->ino || !n->name || add_child(parent, n)) {
		free(n->name);
		free(n->path);
		free(n->ino);
		free(n);
		return LSQ_ERR_NOMEM;
	}
	n->name_len = strlen(n->name);
	ret = remember(t, n);
	if (!ret)
		*out = n;
	return ret;
}

/* ---- attributes ---- */

static int entry_xattrs(struct tar *t, struct archive_entry *e,
			const char *path, uint32_t *out)
{
	size_t n = 0;
	const char *name;
	const void *value;
	size_t size;

	*out = SQUASHFS_INVALID_XATTR;
	if (t->ctx->opt->no_xattrs || archive_entry_xattr_reset(e) == 0)
		return LSQ_OK;
	while (archive_entry_xattr_next(e, &name, &value, &size) ==
	       ARCHIVE_OK) {
		size_t i;

		/* bsdtar stores each one twice (LIBARCHIVE.xattr and
		 * SCHILY.xattr): the last one of a name wins */
		for (i = 0; i < n; i++)
			if (!strcmp(t->xattrs[i].name, name))
				break;
		if (i < n) {
			t->xattrs[i].value = value;
			t->xattrs[i].vlen = size;
			continue;
		}
		if (!LSQ_ARRAY_RESERVE(t->xattrs, t->xattrs_cap, n, 16))
			return LSQ_ERR_NOMEM;
		t->xattrs[n++] = (struct pk_xattr){
			.name = name, .value = value, .vlen = size
		};
	}
	return pk_xattrs_intern(t->ctx, path, t->xattrs, n, out);
}

/* Fill ino from the entry (the same fields fill_inode() takes from
 * lstat in scan.c). */
static int fill(struct tar *t, struct archive_entry *e, const char *path,
		struct pk_inode *ino)
{
	struct pk_ctx *ctx = t->ctx;
	mode_t type = archive_entry_filetype(e);
	uint32_t uid = 0, gid = 0;
	int ret;

	if (!ctx->opt->all_root) {
		la_int64_t u = archive_entry_uid(e), g = archive_entry_gid(e);

		if (u < 0 || u > UINT32_MAX || g < 0 || g > UINT32_MAX) {
			pk_error("%s: uid/gid %lld/%lld does not fit SquashFS",
				 path, (long long)u, (long long)g);
			return LSQ_ERR_OVERFLOW;
		}
		uid = (uint32_t)u;
		gid = (uint32_t)g;
	}
	ino->mode = type | (archive_entry_perm(e) & 07777);
	ino->nlink = 1;
	ino->frag_index = SQUASHFS_INVALID_FRAG;
	ino->mtime = pk_map_time(ctx, archive_entry_mtime(e));
	if (ino->mtime > ctx->max_mtime)
		ctx->max_mtime = ino->mtime;
	ret = pk_id_index(ctx, uid, &ino->uid_idx);
	if (!ret)
		ret = pk_id_index(ctx, gid, &ino->gid_idx);
	if (ret)
		return ret;

	switch (type) {
	case AE_IFREG:
		if (!archive_entry_size_is_set(e) ||
		    archive_entry_size(e) < 0) {
			pk_error("%s: no file size in the archive", path);
			return LSQ_ERR_CORRUPT;
		}
		ino->size = (uint64_t)archive_entry_size(e);
		ctx->files++;
		break;
	case AE_IFLNK: {
		const char *target = archive_entry_symlink(e);
		size_t n = target ? strlen(target) : 0;

		if (n == 0 || n > 4096) {
			pk_error("%s: symlink target %s", path,
				 n ? "longer than 4096 bytes" : "missing");
			return n ? LSQ_ERR_NAME_TOO_LONG : LSQ_ERR_CORRUPT;
		}
		ino->target = strdup(target);
		if (!ino->target)
			return LSQ_ERR_NOMEM;
		ino->size = n;
		break;
	}
	case AE_IFCHR:
	case AE_IFBLK: {
		unsigned long ma = (unsigned long)archive_entry_rdevmajor(e);
		unsigned long mi = (unsigned long)archive_entry_rdevminor(e);

		if (ma > UINT32_MAX || mi > UINT32_MAX ||
		    lsq_encode_dev((uint32_t)ma, (uint32_t)mi, &ino->rdev)) {
			pk_error("%s: device number %lu:%lu does not fit "
				 "SquashFS", path, ma, mi);
			return LSQ_ERR_OVERFLOW;
		}
		break;
	}
	case AE_IFDIR:
	case AE_IFIFO:
	case AE_IFSOCK:
		break;
	default:
		pk_error("%s: file type 0%o cannot be stored", path,
			 (unsigned)type);
		return LSQ_ERR_UNSUPPORTED;
	}
	return entry_xattrs(t, e, path, &ino->xattr_id);
}

/* ---- file data ---- */

/* A regular file's bytes, by libarchive's data blocks: the gaps between
 * blocks, and the end of the file after the last one, are holes of a
 * sparse entry and read as zeros. */
struct ar_reader {
	struct pk_reader r; /* first */
	struct tar *t;
	const char *path;
	uint64_t size;        /* the entry's size */
	uint64_t pos;         /* next byte to hand out */
	const uint8_t *blk;   /* current data block */
	uint64_t blk_off;
	size_t blk_len;
	bool eof;
};

static int ar_read(struct pk_reader *r, void *buf, size_t len, size_t *got)
{
	struct ar_reader *ar = (struct ar_reader *)r;
	uint8_t *out = buf;
	size_t done = 0;

	while (done < len) {
		uint64_t end = ar->blk_off + ar->blk_len;
		size_t n;

		if (ar->blk && ar->pos >= ar->blk_off && ar->pos < end) {
			n = (size_t)(end - ar->pos);
			if (n > len - done)
				n = len - done;
			memcpy(out + done, ar->blk + (ar->pos - ar->blk_off), n);
		} else if (ar->blk && ar->pos < ar->blk_off) {
			n = (size_t)(ar->blk_off - ar->pos); /* a hole */
			if (n > len - done)
				n = len - done;
			memset(out + done, 0, n);
		} else if (!ar->eof) {
			const void *p;
			size_t l;
			la_int64_t o;
			int ret = archive_read_data_block(ar->t->a, &p, &l, &o);

			if (ret == ARCHIVE_EOF) {
				ar->eof = true;
				ar->blk = NULL;
				continue;
			}
			if (ret < ARCHIVE_WARN || o < 0 ||
			    (uint64_t)o < ar->pos) {
				pk_error("%s: %s", ar->path,
					 ret < ARCHIVE_WARN ?
						 tar_err(ar->t) :
						 "data blocks out of order");
				return LSQ_ERR_IO;
			}
			ar->blk = p;
			ar->blk_len = l;
			ar->blk_off = (uint64_t)o;
			continue;
		} else if (ar->pos < ar->size) {
			n = (size_t)(ar->size - ar->pos); /* trailing hole */
			if (n > len - done)
				n = len - done;
			memset(out + done, 0, n);
		} else {
			break;
		}
		done += n;
		ar->pos += n;
	}
	*got = done;
	return LSQ_OK;
}

/* ---- entries ---- */

static int add_entry(struct tar *t, struct archive_entry *e)
{
	struct pk_ctx *ctx = t->ctx;
	const char *raw = archive_entry_pathname(e);
	const char *link = archive_entry_hardlink(e);
	char *path = NULL;
	struct pk_node *n;
	int ret;

	if (!raw) {
		pk_error("an archive entry has no path");
		return LSQ_ERR_CORRUPT;
	}
	ret = normalize(raw, &path);
	if (ret)
		return ret;
	n = *path ? find(t, path) : ctx->root;

	if (link) {
		char *target = NULL;
		struct pk_node *to;

		ret = normalize(link, &target);
		if (ret)
			goto out;
		to = *target ? find(t, target) : NULL;
		free(target);
		if (!to || S_ISDIR(to->ino->mode)) {
			pk_error("%s: hardlink to %s, %s", raw, link,
				 to ? "a directory" :
				      "which is not earlier in the archive");
			ret = LSQ_ERR_CORRUPT;
			goto out;
		}
		if (n) {
			pk_error("%s: appears twice in the archive", raw);
			ret = LSQ_ERR_CORRUPT;
			goto out;
		}
		ret = new_node(t, path, &n);
		if (ret)
			goto out;
		free(n->ino);
		n->ino = to->ino;
		n->ino->nlink++;
		/* data after a hardlink entry (some writers) repeats the
		 * target's; it is skipped with the entry */
		goto out;
	}

	if (n) {
		/* only a directory may be named again (an implied one, or
		 * the root, gets its real attributes) */
		if (!S_ISDIR(n->ino->mode) ||
		    archive_entry_filetype(e) != AE_IFDIR) {
			pk_error("%s: appears twice in the archive", raw);
			ret = LSQ_ERR_CORRUPT;
			goto out;
		}
	} else {
		if (!*path) {
			pk_error("%s: the archive's root is not a directory",
				 raw);
			ret = LSQ_ERR_NOT_DIR;
			goto out;
		}
		ret = new_node(t, path, &n);
		if (ret)
			goto out;
	}
	ret = fill(t, e, raw, n->ino);
	if (ret)
		goto out;
	if (n == ctx->root)
		t->root_listed = true;
	if (S_ISDIR(n->ino->mode)) {
		n->ino->dir = n;
	} else if (S_ISREG(n->ino->mode)) {
		struct ar_reader ar = {
			.r = { .read = ar_read },
			.t = t,
			.path = raw,
			.size = n->ino->size,
		};

		ret = pk_bp_add_file(t->bp, n->ino, raw, n->path, &ar.r);
		ctx->files_done++;
		pk_progress(ctx, false);
	}
out:
	free(path);
	return ret;
}

static int cmp_node(const void *a, const void *b)
{
	return strcmp((*(struct pk_node *const *)a)->name,
		      (*(struct pk_node *const *)b)->name);
}

/* Sort every listing bytewise and count subdirectories into nlink, as
 * scan_dir() does for a directory source. */
static void finish_dir(struct pk_node *d)
{
	uint32_t subdirs = 0;

	if (d->nchildren > 1)
		qsort(d->children, d->nchildren, sizeof(*d->children),
		      cmp_node);
	for (size_t i = 0; i < d->nchildren; i++)
		if (S_ISDIR(d->children[i]->ino->mode)) {
			finish_dir(d->children[i]);
			subdirs++;
		}
	d->ino->nlink = 2 + subdirs;
}

/* Switch this thread to the C.UTF-8 locale (libarchive converts header
 * strings to the current locale's charset). */
static bool newlocale_utf8(locale_t *loc, locale_t *old)
{
	*loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (!*loc)
		return false;
	*old = uselocale(*loc);
	return true;
}

int pk_tar_read(struct pk_ctx *ctx, struct pk_bp *bp)
{
	struct tar t = { .ctx = ctx, .bp = bp, .tab_cap = 1024 };
	const char *src = ctx->opt->source;
	struct archive_entry *e;
	struct pk_node *root;
	locale_t loc = (locale_t)0, old_loc = (locale_t)0;
	uint32_t zero;
	int ret = LSQ_OK, r;

	root = calloc(1, sizeof(*root));
	if (!root)
		return LSQ_ERR_NOMEM;
	ctx->root = root;
	root->path = strdup(".");
	root->ino = calloc(1, sizeof(*root->ino));
	t.tab = calloc(t.tab_cap, sizeof(*t.tab));
	t.a = archive_read_new();
	if (!root->path || !root->ino || !t.tab || !t.a) {
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	set_implicit_dir(ctx, root->ino);
	root->ino->dir = root;

	/* names are taken as bytes: pax headers hold UTF-8, which a UTF-8
	 * locale passes through unchanged whatever the caller's locale is */
	if (!newlocale_utf8(&loc, &old_loc))
		pk_warn(ctx, "no C.UTF-8 locale: non-ASCII names follow the "
			"current locale");
	archive_read_support_filter_all(t.a);
	archive_read_support_format_tar(t.a);
	archive_read_support_format_gnutar(t.a);
	if (!strcmp(src, "-"))
		r = archive_read_open_fd(t.a, 0, 1 << 16);
	else
		r = archive_read_open_filename(t.a, src, 1 << 20);
	if (r != ARCHIVE_OK) {
		pk_error("%s: %s", src, tar_err(&t));
		ret = LSQ_ERR_IO;
		goto out;
	}
	for (;;) {
		r = archive_read_next_header(t.a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r == ARCHIVE_WARN && !ctx->opt->quiet)
			pk_warn(ctx, "%s: %s", src, tar_err(&t));
		if (r < ARCHIVE_WARN) {
			pk_error("%s: %s", src, tar_err(&t));
			ret = LSQ_ERR_CORRUPT;
			goto out;
		}
		ret = add_entry(&t, e);
		if (ret)
			goto out;
	}
	if (!t.root_listed) {
		/* ids are numbered in first-use order: the implied root's 0
		 * is interned last so that it does not move the others */
		ret = pk_id_index(ctx, 0, &zero);
		if (ret)
			goto out;
		root->ino->uid_idx = zero;
		root->ino->gid_idx = zero;
	}
	finish_dir(root);
out:
	if (t.a)
		archive_read_free(t.a);
	if (loc) {
		uselocale(old_loc);
		freelocale(loc);
	}
	free(t.tab);
	free(t.xattrs);
	return ret;
}
