/* SPDX-License-Identifier: MIT */
/*
 * pack.h - the packer's internal model, shared by its parts:
 *
 *   scan.c    walk a SOURCE directory (names sorted bytewise) into a tree
 *             of nodes; hardlinks share one struct pk_inode; xattrs and
 *             ids interned
 *   tar.c     the same tree from a tar archive (libarchive), streamed:
 *             each file's data goes to the block processor as it is read
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

/* Longest name stored: the format allows 256 bytes, but Linux (NAME_MAX)
 * could not look a 256-byte name up, so such an image would be unusable. */
#define PK_NAME_MAX 255

struct pk_opts {
	const char *source;
	const char *output;
	uint32_t block_size;
	unsigned block_log;
	unsigned jobs;        /* compressing worker threads, >= 1 */
	bool serial;          /* use the serial pool (the reference) */
	bool no_fragments;
	bool always_fragments;
	bool no_xattrs;
	bool no_exports;
	bool all_root;
	bool force;
	bool quiet;
	bool skip_unreadable; /* warn and leave out what cannot be read */
	bool tar;             /* SOURCE is a tar archive ("-" = stdin) */
	const char *order;    /* --order PROFILE, or NULL */
	const char *sign_key; /* --sign KEY.pem, or NULL */
	uint32_t reuse_target; /* --reuse-layout[=SIZE]: mean bytes of tails
				  between content-defined fragment block
				  ends (docs/packer-determinism.md); 0: off */
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
	bool data_written;    /* a block of this file reached the output */
	uint64_t own_start;   /* where its blocks began before any dedup */
	bool skipped;         /* unreadable under --skip-unreadable: every
				 link to it is left out of the image */
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
	uint64_t skipped;     /* entries left out by --skip-unreadable */
	uint64_t skipped_files; /* of them regular files found by the scan */
	bool progress;        /* a progress line on stderr (a terminal) */
	bool streaming;       /* tar input: the file total is not known */
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

/* A source object could not be read (open, read, readdir, readlink,
 * xattrs). Prints one line naming it: an error, or under
 * --skip-unreadable a warning that it is left out. Returns LSQ_ERR_IO or
 * PK_UNREADABLE (skip it) accordingly. */
#define PK_UNREADABLE 1
int pk_read_fail(const struct pk_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Drop the nodes whose inode was skipped (--skip-unreadable). */
void pk_tree_prune(struct pk_node *dir);

/* Redraw the progress line (at most 4 times a second unless force). */
void pk_progress(struct pk_ctx *ctx, bool force);
double pk_now(void);

/* scan.c */
int pk_scan(struct pk_ctx *ctx);
void pk_tree_free(struct pk_node *node);

/* Shared by scan.c and tar.c: the index of id in the id table (added in
 * first-use order); a source time mapped by --mtime / SOURCE_DATE_EPOCH. */
int pk_id_index(struct pk_ctx *ctx, uint32_t id, uint32_t *out);
uint32_t pk_map_time(struct pk_ctx *ctx, int64_t t);

/* One extended attribute as a source reports it (full name). */
struct pk_xattr {
	const char *name;
	const void *value;
	size_t vlen;
};

/* Turn a file's xattrs into an xattr id (SQUASHFS_INVALID_XATTR when none
 * is stored): names outside user./trusted./security. are skipped with a
 * warning, a name SquashFS cannot hold is an error naming path. Sorts x. */
int pk_xattrs_intern(struct pk_ctx *ctx, const char *path,
		     struct pk_xattr *x, size_t n, uint32_t *out);

/* data.c: the block processor, writing from ctx->pos on. */
struct pk_bp;

/* Where a file's bytes come from. read() fills up to len bytes and sets
 * *got (less than len only at the end of the data); on failure it prints
 * one line naming the file and returns an lsq_err, or PK_UNREADABLE when
 * the file is to be skipped (see pk_read_fail). hole() (optional) says
 * that [off, off + len) holds no data, so nothing needs reading. */
struct pk_reader {
	int (*read)(struct pk_reader *r, void *buf, size_t len, size_t *got);
	bool (*hole)(struct pk_reader *r, uint64_t off, uint32_t len);
};

int pk_bp_create(struct pk_ctx *ctx, struct pk_bp **out);
/* Every regular file below node (a directory), in tree order, read from
 * its path. */
int pk_bp_add_tree(struct pk_bp *bp, struct pk_node *node);
/* One regular file of f->size bytes from r (path names it in errors; rel
 * is its path below the root, "a/b", which --reuse-layout hashes). When r
 * says PK_UNREADABLE, f is marked skipped, what was written for it is
 * taken back, and the result is LSQ_OK. */
int pk_bp_add_file(struct pk_bp *bp, struct pk_inode *f, const char *path,
		   const char *rel, struct pk_reader *r);

/* --reuse-layout (docs/packer-determinism.md): the seed of the path hash
 * that ends fragment blocks, and the default mean length of tails between
 * two ends. */
#define PK_LAYOUT_SEED 0x72657573656c6179ull /* "reuselay" */
#define PK_REUSE_TARGET_DEFAULT 4096
/* One regular file node of the tree, read from its path, unless its data
 * is already placed (a hardlink) or it was left out. */
int pk_bp_add_node(struct pk_bp *bp, struct pk_node *node);
/* Close the fragment block being filled: the next tail starts a new one. */
int pk_bp_flush_fragments(struct pk_bp *bp);
/* Write the last fragment block and everything still in flight. */
int pk_bp_finish(struct pk_bp *bp);
void pk_bp_destroy(struct pk_bp *bp);

int pk_pwrite_all(struct pk_ctx *ctx, const void *buf, size_t len,
		  uint64_t off);

/* order.c: --order PROFILE (docs/packer-determinism.md, "--order"). */
struct pk_order {
	struct pk_node **nodes; /* the listed regular files, in list order */
	size_t count;
	char *text;             /* the profile of those, to store */
	size_t len;
};
/* Read and resolve the profile against the scanned tree; one warning for
 * what is skipped. */
int pk_order_prepare(struct pk_ctx *ctx, const char *path,
		     struct pk_order *ord);
/* Store the profile after the superblock (and compressor options block of
 * comp_opts_block bytes) and move ctx->pos past it. */
int pk_order_write_record(struct pk_ctx *ctx, const struct pk_order *ord,
			  uint64_t comp_opts_block);
/* The listed files' data and tails, then the fragment block is closed. */
int pk_order_add_files(struct pk_bp *bp, const struct pk_order *ord);
void pk_order_fini(struct pk_order *ord);

/* tar.c: read the archive at ctx->opt->source ("-": stdin) into the tree
 * and its file data into bp. */
int pk_tar_read(struct pk_ctx *ctx, struct pk_bp *bp);

/* tables.c: inodes, directories and tables after the data, superblock
 * last. comp_opts/comp_len: the compressor options block. */
int pk_write_tables(struct pk_ctx *ctx, const uint8_t *comp_opts,
		    size_t comp_len);

/* A 64-bit hash (not cryptographic) for dedup keys. */
uint64_t pk_hash(uint64_t seed, const void *p, size_t n);

/* The packer's hash tables: open addressing, linear probing, a power of
 * two of slots of size bytes each, an all-zero slot empty. Before an
 * insert into *tab (*cap slots, n used): once half full, double it
 * (first slots, when none) and place every entry again at hash(entry).
 * LSQ_ERR_NOMEM leaves the table as it was. */
int pk_table_reserve(void *tab, size_t *cap, size_t n, size_t size,
		     size_t first, uint64_t (*hash)(const void *entry));

#endif
