/* SPDX-License-Identifier: MIT */
/*
 * image.h - an opened SquashFS 4.0 image: the only interface the FUSE layer
 * and the tools use to read one.
 *
 * Thread safety: after lsq_image_open() returns, every function here may be
 * called from any number of threads at once on the same image. Caches inside
 * are bounded and shared; no call holds a lock across I/O or decompression.
 *
 * Errors are enum lsq_err values (include/lsq/error.h). Corruption found in a
 * table or block fails only the call that met it (LSQ_ERR_CORRUPT,
 * LSQ_ERR_CODEC, LSQ_ERR_OUT_OF_BOUNDS, ...) and is logged once with the
 * image offset; the image stays usable.
 */
#ifndef LSQ_IMAGE_H
#define LSQ_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "lsq/source.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lsq_image;
struct lsq_verifier;

/* An inode reference as SquashFS stores it: (metadata block offset relative
 * to the inode table start) << 16 | (offset inside the decompressed block).
 * Unique per inode (hardlinked names share it); always < 2^48. */
typedef uint64_t lsq_inode_ref;

#define LSQ_NO_XATTR 0xFFFFFFFFu

/* A decoded inode. Public fields are stat material; 'priv' belongs to the
 * image layer (block list location, directory location, ...). Plain value:
 * copy it freely, nothing inside needs freeing. */
struct lsq_inode {
	lsq_inode_ref ref;
	uint32_t inode_number; /* SquashFS inode number: st_ino, as the kernel */
	uint32_t mode;         /* S_IFMT type bits | permission bits */
	uint32_t uid, gid;     /* resolved through the id table */
	uint32_t mtime;
	uint32_t nlink;
	uint64_t size;         /* st_size exactly as the kernel reports it */
	uint64_t rdev;         /* makedev() value for block/char devices */
	uint32_t xattr_index;  /* LSQ_NO_XATTR when the inode has none */
	struct {
		/* dir: start_block, offset, listing size, parent number;
		 * reg: blocks_start, fragment, frag_offset, block list ref;
		 * symlink: target location */
		uint64_t a, b, c, d, g;
		uint32_t e;
		uint32_t xattr_size; /* bytes of xattrs, for st_blocks */
		uint32_t disk_type;  /* on-disk inode type, 1..14 */
	} priv;
};

struct lsq_image_options {
	uint64_t metadata_cache_bytes; /* decompressed metadata blocks */
	uint64_t data_cache_bytes;     /* decompressed data blocks */
	uint32_t fragment_cache_blocks;/* decompressed fragment blocks */
	unsigned decomp_contexts;      /* 0: one per online CPU */
	/* Every unit read is checked against this signed manifest
	 * (image/verify.h); NULL: none. The image owns it once open
	 * succeeds. */
	struct lsq_verifier *verifier;
};

/* Fill with the documented defaults. */
void lsq_image_options_default(struct lsq_image_options *opt);

/* Open and validate an image on src. On success *out owns src. On failure
 * the caller still owns src and errbuf (if not NULL) holds a one-line
 * message naming what is wrong and where, e.g.
 * "bad superblock: inode table offset 0x1234 beyond image size 0x1000". */
int lsq_image_open(struct lsq_source *src, const struct lsq_image_options *opt,
		   struct lsq_image **out, char *errbuf, size_t errlen);

/* Close an image and its source; NULL is ignored. */
void lsq_image_close(struct lsq_image *img);

/* Facts from the superblock, for statfs, --version style output and tools. */
struct lsq_image_info {
	uint64_t bytes_used;
	uint32_t inode_count;
	uint32_t block_size;
	uint16_t compression_id;
	const char *compression_name;
	uint32_t mkfs_time;
	uint32_t fragment_count;
	uint16_t flags;
	bool has_export_table;
	bool has_xattrs;
};
const struct lsq_image_info *lsq_image_info(const struct lsq_image *img);

/* The root directory's inode reference. */
lsq_inode_ref lsq_image_root(const struct lsq_image *img);

/* The source the image reads through (owned by the image). */
struct lsq_source *lsq_image_source(const struct lsq_image *img);

/* Decode the inode at ref (cached). */
int lsq_image_inode(struct lsq_image *img, lsq_inode_ref ref,
		    struct lsq_inode *out);

/* Fill st as the kernel's squashfs driver would for this inode
 * (st_ino = inode_number, st_blocks, st_blksize, times = mtime, ...). */
void lsq_image_stat(const struct lsq_image *img, const struct lsq_inode *inode,
		    struct stat *st);

/* Look a name up in directory dir. LSQ_ERR_NOT_FOUND, LSQ_ERR_NOT_DIR. */
int lsq_image_lookup(struct lsq_image *img, const struct lsq_inode *dir,
		     const char *name, size_t name_len, struct lsq_inode *out);

struct lsq_dirent {
	const char *name;      /* not NUL-terminated; valid during callback */
	size_t name_len;
	uint32_t inode_number; /* d_ino */
	uint32_t type;         /* S_IFMT bits of the entry */
	lsq_inode_ref ref;     /* undefined for "." and ".." */
	bool is_dot;           /* "." or ".." */
	uint64_t next_cookie;  /* pass as cookie to continue after this one */
};

/* Return 0 to continue, non-zero to stop: the entry just offered was then
 * NOT consumed (resume with the cookie of the previous entry). */
typedef int (*lsq_dirent_fn)(void *ctx, const struct lsq_dirent *ent);

/* List directory dir starting at cookie (0 = beginning), "." and ".." first,
 * then the entries in on-disk order, as the kernel does. Returns 0 at the end
 * of the listing or when fn stopped early. */
int lsq_image_readdir(struct lsq_image *img, const struct lsq_inode *dir,
		      uint64_t cookie, lsq_dirent_fn fn, void *ctx);

/* Read up to len bytes of regular file file at offset. *nread is short only
 * at end of file (0 at or past EOF). LSQ_ERR_IS_DIR for directories.
 * long_work: NULL, or told around each source read and decompression the
 * read does (a request thread that moves for such work). */
int lsq_image_read(struct lsq_image *img, const struct lsq_inode *file,
		   void *buf, size_t len, uint64_t offset,
		   lsq_long_work_fn long_work, size_t *nread);

/* The fragment block holding all of regular file file (it has no data
 * block: under a block and packed with others), or UINT32_MAX. A packer
 * writes a directory's small files into fragment blocks in turn. */
uint32_t lsq_file_only_fragment(const struct lsq_image *img,
				const struct lsq_inode *file);

/* Symlink target as a malloc'd NUL-terminated string the caller frees. */
int lsq_image_readlink(struct lsq_image *img, const struct lsq_inode *link,
		       char **target);

/* listxattr(2) semantics: names with their prefixes ("user.", "trusted.",
 * "security."), each NUL-terminated. size 0 only computes *needed.
 * LSQ_ERR_RANGE when size is non-zero and too small. On an image without
 * an xattr table, LSQ_ERR_UNSUPPORTED for the inodes where the kernel says
 * EOPNOTSUPP (directories, symlinks, extended inodes). */
int lsq_image_listxattr(struct lsq_image *img, const struct lsq_inode *inode,
			char *buf, size_t size, size_t *needed);

/* getxattr(2) semantics; an empty value is a valid value (needed = 0).
 * LSQ_ERR_NO_XATTR, LSQ_ERR_RANGE; as the kernel, LSQ_ERR_UNSUPPORTED for
 * a name outside user./trusted./security. and LSQ_ERR_INVALID for a bare
 * prefix. */
int lsq_image_getxattr(struct lsq_image *img, const struct lsq_inode *inode,
		       const char *name, void *buf, size_t size,
		       size_t *needed);

/* statfs as the kernel reports it for squashfs. */
void lsq_image_statfs(const struct lsq_image *img, struct statvfs *st);

/* The image's counters and its source stack's, one call of fn each,
 * under the names `sqfs-lazy-mount --stats` prints (docs/caching.md and
 * docs/prefetch.md say what they count). A name may come more than once
 * (layers that count one thing each for their part): its values add up.
 * Counters of parts the image does not have (no prefetch, no verifier,
 * no RAM or disk cache) are not reported. */
void lsq_image_counters(const struct lsq_image *img, lsq_counter_fn fn,
			void *ctx);

/* ---- prefetch: startup profiles (src/profile/profile.h) ---- */

struct lsq_prefetch_options {
	unsigned workers;      /* fetches in flight, at least 1 */
	uint64_t budget_bytes; /* compressed bytes planned, at most */
};

/* Fetch, in the background, the blocks of the files a startup profile
 * lists (text[0..len) is copied), in list order: the first thread resolves
 * the paths and plans extents, coalesced into ranges of up to a few MiB,
 * then opt->workers threads fetch them, earliest-needed first, through
 * lsq_source_prefetch(). A read that needs a block in flight waits
 * for that fetch; nothing is fetched twice; a failed fetch only costs the
 * reader its own fetch. Entries missing from the image, or not regular
 * files, are skipped with one warning; an empty profile does nothing.
 * name says where the profile came from (messages only). At most one per
 * image (LSQ_ERR_INVALID after); stopped by lsq_image_close(). Start it
 * once the process will not fork any more. LSQ_ERR_NOMEM. */
int lsq_image_prefetch(struct lsq_image *img, const char *text, size_t len,
		       const char *name,
		       const struct lsq_prefetch_options *opt);

struct lsq_background_options {
	unsigned streams;      /* requests in flight, 1..8 */
	uint64_t budget_bytes; /* bytes fetched at most (0: nothing) */
	uint64_t span_bytes;   /* bytes per request (0: 2 MiB) */
	/* fetch only over a round trip this long at least, once three
	 * transfers were timed (0: always; a source that times none, such
	 * as a file: never) */
	uint64_t min_rtt_us;
};

/* Fetch the image's data in the background, behind the readers: every
 * data and fragment block, first past the last one a reader loaded, then
 * in image order, in spans of span_bytes on the source's speculative
 * connections (lsq_source_prefetch, LSQ_PREFETCH_BACKGROUND: readers
 * never wait for it), into the persistent cache when there is one, else
 * the RAM cache.
 * Waits for a profile prefetch to finish first. Stops at the budget, at
 * lsq_image_close(), or after repeated failures (one warning); drops to
 * one stream when a span is slow. Start once the process will not fork
 * any more. LSQ_ERR_NOMEM, LSQ_ERR_INVALID (started twice). */
int lsq_image_background(struct lsq_image *img,
			 const struct lsq_background_options *opt);

/* As lsq_image_prefetch, with the profile produced by load(ctx, &text,
 * &len) on the prefetch's first thread (a URL fetched off the mount's
 * critical path): text malloc'd, owned by the prefetch from then on; an
 * error there means no prefetch (load logs what it wants). ctx must
 * outlive the image. Until load returned, the prefetch counts as busy. */
typedef int (*lsq_profile_loader_fn)(void *ctx, char **text, size_t *len);
int lsq_image_prefetch_from(struct lsq_image *img, lsq_profile_loader_fn load,
			    void *ctx, const char *name,
			    const struct lsq_prefetch_options *opt);

/* The startup profile stored in the image by `sqfs-lazy-pack --order`
 * (src/profile/record.h), as malloc'd text in *text (not
 * NUL-terminated; the caller frees). LSQ_ERR_NOT_FOUND when the image has
 * none, LSQ_ERR_CORRUPT when the record is damaged, or the read's error.
 * Costs no request on a remote image: it lies in the first 64 KiB. */
int lsq_image_stored_profile(struct lsq_image *img, char **text, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
