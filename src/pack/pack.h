/* SPDX-License-Identifier: MIT */
/*
 * pack.h - the packer's internal model, shared by its parts:
 *
 *   scan.c    walk SOURCE (names sorted bytewise) into a tree of nodes;
 *             hardlinks share one struct pk_inode; xattrs and ids interned
 *   data.c    block processor: chop files into blocks, compress/hash them
 *             in the ordered pool, dedup, write (main thread only)
 *   tables.c  metadata writer, inodes, directories, lookup tables, xattrs,
 *             superblock
 *   main.c    options, temp file + rename, signals
 *
 * Everything is owned by struct pk_ctx and freed by pk_ctx_fini().
 */
#ifndef LSQ_PACK_H
#define LSQ_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pack/compress.h"

struct pk_opts {
	const char *source;
	const char *output;
	uint32_t block_size;
	unsigned block_log;
	unsigned jobs;        /* worker threads; 0 = serial reference pool */
	bool serial;          /* use the serial pool (the reference) */
	bool no_fragments;
	bool always_fragments;
	bool no_xattrs;
	bool no_exports;
	bool all_root;
	bool force;
	bool quiet;
	bool have_mtime;      /* --mtime: every time becomes mtime */
	uint32_t mtime;
	bool have_clamp;      /* SOURCE_DATE_EPOCH: times clamped to it */
	uint32_t clamp;
	struct lsq_comp_cfg comp;
};

/* One file-system object; several nodes share it when hardlinked. */
struct pk_inode {
	uint32_t mode;        /* S_IFMT | permission bits */
	uint32_t uid_idx, gid_idx;
	uint32_t mtime;
	uint32_t nlink;       /* links inside the tree (dirs: 2 + subdirs) */
	uint32_t rdev;        /* encoded device number */
	uint64_t size;        /* file size, symlink target length */
	char *target;         /* symlink target */
	uint32_t xattr_id;    /* SQUASHFS_INVALID_XATTR when none */
	uint32_t number;      /* inode number, 1..inode_count */
	bool written;
	uint64_t ref;         /* inode table reference once written */
	dev_t st_dev;
	ino_t st_ino;
	/* regular files */
	uint64_t start;       /* first data block in the image */
	uint32_t *blocks;     /* size words */
	uint32_t nblocks;
	uint32_t frag_index;  /* SQUASHFS_INVALID_FRAG when no tail */
	uint32_t frag_offset;
	uint64_t sparse;      /* bytes in sparse blocks */
	uint64_t digest;      /* running hash of (size word, block hash) */
	bool data_done;
	/* directories */
	struct pk_node *dir;  /* the directory's node */
};

struct pk_node {
	char *name;           /* NULL for the root */
	size_t name_len;
	char *path;           /* full source path, for reading and errors */
	struct pk_node *parent;
	struct pk_inode *ino;
	struct pk_node **children; /* sorted bytewise by name */
	size_t nchildren;
};

struct pk_xattr_set {
	uint8_t *data;        /* serialized entries, as in the xattr table */
	size_t len;
	uint32_t count;
	uint32_t size;        /* names with prefix + NUL + values, as mksquashfs */
	uint64_t hash;
};

struct pk_ctx {
	struct pk_opts *opt;
	struct pk_node *root;
	uint32_t inode_count;
	/* id table */
	uint32_t *ids;
	size_t nids, ids_cap;
	/* xattr sets, in first-use order */
	struct pk_xattr_set *xsets;
	size_t nxsets, xsets_cap;
	/* hardlink map: (st_dev, st_ino) -> inode, open addressing */
	struct pk_inode **links;
	size_t links_cap, nlinks;
	/* output */
	int fd;
	uint64_t pos;         /* next write offset */
	/* fragment table */
	uint64_t *frag_start;
	uint32_t *frag_size;
	size_t nfrags, frags_cap;
	/* statistics */
	uint64_t files, bytes_in, dedup_bytes;
	uint64_t files_done;
	bool progress;        /* a progress line on stderr (a terminal) */
	double start_time, last_progress;
	uint32_t max_mtime;
	/* an existing OUTPUT inside SOURCE is not packed into itself */
	bool skip_valid;
	dev_t skip_dev;
	ino_t skip_ino;
};

/* Print "sqfs-lazy-pack: ..." to stderr. */
void pk_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pk_warn(const struct pk_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Redraw the progress line (at most 4 times a second unless force). */
void pk_progress(struct pk_ctx *ctx, bool force);
double pk_now(void);

/* scan.c */
int pk_scan(struct pk_ctx *ctx);
void pk_tree_free(struct pk_node *node);

/* data.c: write all file data and fragments from ctx->pos on. */
int pk_write_data(struct pk_ctx *ctx);
int pk_pwrite_all(struct pk_ctx *ctx, const void *buf, size_t len,
		  uint64_t off);

/* tables.c: inodes, directories and tables after the data, superblock
 * last. comp_opts/comp_len: the compressor options block. */
int pk_write_tables(struct pk_ctx *ctx, const uint8_t *comp_opts,
		    size_t comp_len);

/* A 64-bit hash (not cryptographic) for dedup keys. */
uint64_t pk_hash(uint64_t seed, const void *p, size_t n);

#endif
