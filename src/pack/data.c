/* SPDX-License-Identifier: MIT */
/*
 * data.c - the block processor. The main thread reads files in tree order
 * and submits full blocks to the ordered pool; workers detect all-zero
 * blocks (stored sparse), hash and compress the rest (stored raw when
 * compression does not shrink them). The main thread takes blocks back in
 * submit order and is the only writer of the output: it appends each
 * block, and at the end of a file looks for an earlier file with the same
 * block sizes and hashes and, if its bytes are equal too, rewinds and
 * points the file at the earlier copy (whole-file dedup).
 *
 * Tails go into the fragment block being filled (on the main thread, after
 * the file's blocks were submitted, so a fragment block never splits a
 * file's blocks); equal tails (size + 128-bit hash) share one fragment. A
 * full fragment block is submitted like a data block and written when it
 * comes back, in the same ticket order. So every decision depends only on
 * the input, never on the worker count or timing.
 *
 * --reuse-layout also closes the fragment block after a tail whose path
 * (relative to the root) hashes below a threshold proportional to the
 * tail's length: fragment blocks then end at places chosen by the files
 * themselves, and a changed, added or removed small file disturbs only
 * the block it lands in (docs/packer-determinism.md, "Reuse across
 * versions").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_io.h"
#include "format/ondisk.h"
#include "lsq/error.h"
#include "pack/ordered_pool.h"
#include "pack/pack.h"

enum { JOB_DATA, JOB_FRAG };

struct blk_job {
	struct lsq_opool_item item; /* first */
	int kind;
	struct pk_inode *file;
	uint32_t index;
	uint32_t frag_index;
	bool last;
	bool sparse;
	bool raw;
	uint32_t in_len, out_len, size_word;
	uint64_t hash;
	uint8_t *in, *out;
	struct blk_job *free_next;
};

struct frag_key {
	uint64_t h1, h2;
	uint32_t len, index, offset;
	bool used;
};

struct pk_bp { /* the block processor (pack.h) */
	struct pk_ctx *ctx;
	uint32_t bs;
	struct lsq_opool *pool;
	struct blk_job *jobs;
	size_t njobs;
	struct blk_job *free_list;
	uint8_t *frag_buf;
	uint32_t frag_len;
	uint32_t frag_cur;        /* index of the fragment being filled */
	uint32_t frag_target;     /* --reuse-layout: mean bytes of tails
				     between content-defined ends, else 0 */
	struct frag_key *ftab;    /* open addressing */
	size_t ftab_cap, ftab_n;
	struct pk_inode **dtab;   /* whole-file dedup, open addressing */
	size_t dtab_cap, dtab_n;
	uint8_t *cmp_a, *cmp_b;   /* dedup verification buffers */
	uint8_t *tail_buf;        /* the tail being added */
	int err;
};

#define CMP_CHUNK 65536

/* ---- workers ---- */

static void *worker_create(void *arg)
{
	return lsq_compressor_create(arg);
}

static void worker_destroy(void *w)
{
	lsq_compressor_destroy(w);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	static const uint8_t zero[256];

	while (n >= sizeof(zero)) {
		if (memcmp(p, zero, sizeof(zero)))
			return false;
		p += sizeof(zero);
		n -= sizeof(zero);
	}
	return memcmp(p, zero, n) == 0;
}

static int worker_process(void *w, struct lsq_opool_item *item)
{
	struct blk_job *job = (struct blk_job *)item;
	long r;

	job->sparse = false;
	job->raw = false;
	if (job->kind == JOB_DATA) {
		if (all_zero(job->in, job->in_len)) {
			job->sparse = true;
			job->size_word = 0;
			job->out_len = 0;
			job->hash = 0;
			return LSQ_OK;
		}
		job->hash = pk_hash(0, job->in, job->in_len);
	}
	r = lsq_compress(w, job->in, job->in_len, job->out);
	if (r < 0)
		return (int)r;
	if (r == 0) {
		job->raw = true;
		job->out_len = job->in_len;
		job->size_word = job->in_len | SQUASHFS_COMPRESSED_BIT_BLOCK;
	} else {
		job->out_len = (uint32_t)r;
		job->size_word = (uint32_t)r;
	}
	return LSQ_OK;
}

static const struct lsq_opool_ops pool_ops = {
	.worker_create = worker_create,
	.worker_destroy = worker_destroy,
	.process = worker_process,
};

/* ---- output ---- */

int pk_pwrite_all(struct pk_ctx *ctx, const void *buf, size_t len,
		  uint64_t off)
{
	int ret = lsq_pwrite_full(ctx->fd, buf, len, off);

	if (ret)
		pk_error("%s: write failed: %s", ctx->opt->output,
			 strerror(errno));
	return ret;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off,
		     size_t *got)
{
	uint8_t *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, p + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

/* ---- whole-file dedup ---- */

static bool same_bytes(struct pk_bp *bp, uint64_t a, uint64_t b, uint64_t len)
{
	while (len) {
		size_t n = len < CMP_CHUNK ? (size_t)len : CMP_CHUNK, g1, g2;

		if (pread_all(bp->ctx->fd, bp->cmp_a, n, a, &g1) ||
		    pread_all(bp->ctx->fd, bp->cmp_b, n, b, &g2) || g1 != n ||
		    g2 != n || memcmp(bp->cmp_a, bp->cmp_b, n))
			return false;
		a += n;
		b += n;
		len -= n;
	}
	return true;
}

static uint64_t dtab_hash(const void *slot)
{
	return (*(struct pk_inode *const *)slot)->digest;
}

static int dedup_file(struct pk_bp *bp, struct pk_inode *f)
{
	struct pk_ctx *ctx = bp->ctx;
	uint64_t len = ctx->pos - f->start;
	size_t j;
	int ret;

	ret = pk_table_reserve(&bp->dtab, &bp->dtab_cap, bp->dtab_n,
			       sizeof(*bp->dtab), 1024, dtab_hash);
	if (ret)
		return ret;
	j = (size_t)f->digest & (bp->dtab_cap - 1);
	for (; bp->dtab[j]; j = (j + 1) & (bp->dtab_cap - 1)) {
		struct pk_inode *c = bp->dtab[j];

		if (c->skipped || c->digest != f->digest ||
		    c->nblocks != f->nblocks ||
		    memcmp(c->blocks, f->blocks,
			   f->nblocks * sizeof(*f->blocks)))
			continue;
		if (len && !same_bytes(bp, c->start, f->start, len))
			continue;
		ctx->pos = f->start;
		f->start = c->start;
		ctx->dedup_bytes += f->size < (uint64_t)f->nblocks * bp->bs ?
					    f->size :
					    (uint64_t)f->nblocks * bp->bs;
		return LSQ_OK;
	}
	bp->dtab[j] = f;
	bp->dtab_n++;
	return LSQ_OK;
}

/* ---- the main thread's side ---- */

static int frag_slot_add(struct pk_ctx *ctx, uint32_t index)
{
	if (index >= ctx->frags_cap) {
		size_t cap = ctx->frags_cap ? ctx->frags_cap * 2 : 64;
		uint64_t *s = realloc(ctx->frag_start, cap * sizeof(*s));
		uint32_t *z;

		if (!s)
			return LSQ_ERR_NOMEM;
		ctx->frag_start = s;
		z = realloc(ctx->frag_size, cap * sizeof(*z));
		if (!z)
			return LSQ_ERR_NOMEM;
		ctx->frag_size = z;
		ctx->frags_cap = cap;
	}
	return LSQ_OK;
}

static int handle(struct pk_bp *bp, struct blk_job *job)
{
	struct pk_ctx *ctx = bp->ctx;
	const uint8_t *data = job->raw ? job->in : job->out;
	int ret;

	if (job->item.err) {
		pk_error("compression failed: %s", lsq_strerror(job->item.err));
		return job->item.err;
	}
	if (job->kind == JOB_FRAG) {
		ret = frag_slot_add(ctx, job->frag_index);
		if (ret)
			return ret;
		ctx->frag_start[job->frag_index] = ctx->pos;
		ctx->frag_size[job->frag_index] = job->size_word;
		ret = pk_pwrite_all(ctx, data, job->out_len, ctx->pos);
		ctx->pos += job->out_len;
		return ret;
	}
	struct pk_inode *f = job->file;
	uint64_t mix[2] = { job->size_word, job->hash };

	if (job->index == 0) {
		f->start = ctx->pos;
		f->own_start = ctx->pos;
		f->data_written = true;
	}
	if (job->out_len) {
		ret = pk_pwrite_all(ctx, data, job->out_len, ctx->pos);
		if (ret)
			return ret;
		ctx->pos += job->out_len;
	}
	f->blocks[job->index] = job->size_word;
	if (job->sparse)
		f->sparse += job->in_len;
	f->digest = pk_hash(f->digest, mix, sizeof(mix));
	if (job->last)
		return dedup_file(bp, f);
	return LSQ_OK;
}

static int handle_one(struct pk_bp *bp)
{
	struct blk_job *job = (struct blk_job *)lsq_opool_dequeue(bp->pool);
	int ret;

	if (!job)
		return LSQ_OK;
	ret = handle(bp, job);
	job->free_next = bp->free_list;
	bp->free_list = job;
	return ret;
}

static int get_job(struct pk_bp *bp, struct blk_job **out)
{
	while (!bp->free_list) {
		int ret = handle_one(bp);

		if (ret)
			return ret;
	}
	*out = bp->free_list;
	bp->free_list = (*out)->free_next;
	return LSQ_OK;
}

static int submit(struct pk_bp *bp, struct blk_job *job)
{
	int ret = lsq_opool_submit(bp->pool, &job->item);

	if (ret) {
		job->free_next = bp->free_list;
		bp->free_list = job;
	}
	return ret;
}

static int flush_frag(struct pk_bp *bp)
{
	struct blk_job *job;
	int ret;

	if (bp->frag_len == 0)
		return LSQ_OK;
	ret = get_job(bp, &job);
	if (ret)
		return ret;
	memcpy(job->in, bp->frag_buf, bp->frag_len);
	job->kind = JOB_FRAG;
	job->file = NULL;
	job->in_len = bp->frag_len;
	job->frag_index = bp->frag_cur++;
	bp->ctx->nfrags = bp->frag_cur;
	bp->frag_len = 0;
	return submit(bp, job);
}

static uint64_t ftab_hash(const void *slot)
{
	return ((const struct frag_key *)slot)->h1;
}

/* --reuse-layout: whether the fragment block ends after a new tail of
 * len bytes of the file whose relative path hashes to key. The top 32 bits
 * of the key are a uniform u in [0, 2^32); the block ends when
 * u / 2^32 < len / frag_target, so on average every frag_target bytes of
 * tails, at places that depend only on each file's own path and length. */
static bool frag_ends_here(const struct pk_bp *bp, uint64_t key, uint32_t len)
{
	return bp->frag_target &&
	       (key >> 32) * bp->frag_target < (uint64_t)len << 32;
}

static int add_tail(struct pk_bp *bp, struct pk_inode *f, const uint8_t *data,
		    uint32_t len, uint64_t key)
{
	uint64_t h1 = pk_hash(3, data, len), h2 = pk_hash(5, data, len);
	size_t j;
	int ret;

	ret = pk_table_reserve(&bp->ftab, &bp->ftab_cap, bp->ftab_n,
			       sizeof(*bp->ftab), 1024, ftab_hash);
	if (ret)
		return ret;
	j = (size_t)h1 & (bp->ftab_cap - 1);
	for (; bp->ftab[j].used; j = (j + 1) & (bp->ftab_cap - 1)) {
		struct frag_key *k = &bp->ftab[j];

		if (k->h1 == h1 && k->h2 == h2 && k->len == len) {
			f->frag_index = k->index;
			f->frag_offset = k->offset;
			bp->ctx->dedup_bytes += len;
			return LSQ_OK;
		}
	}
	if (bp->frag_len + len > bp->bs) {
		ret = flush_frag(bp);
		if (ret)
			return ret;
	}
	f->frag_index = bp->frag_cur;
	f->frag_offset = bp->frag_len;
	memcpy(bp->frag_buf + bp->frag_len, data, len);
	bp->frag_len += len;
	bp->ftab[j] = (struct frag_key){ .h1 = h1, .h2 = h2, .len = len,
					 .index = f->frag_index,
					 .offset = f->frag_offset,
					 .used = true };
	bp->ftab_n++;
	if (frag_ends_here(bp, key, len))
		return flush_frag(bp);
	return LSQ_OK;
}

/* ---- reading a file from the source directory ---- */

struct fd_reader {
	struct pk_reader r;   /* first */
	const struct pk_ctx *ctx;
	int fd;
	uint64_t off;
	const char *path;
};

static int fd_read(struct pk_reader *r, void *buf, size_t len, size_t *got)
{
	struct fd_reader *fr = (struct fd_reader *)r;
	int ret = pread_all(fr->fd, buf, len, fr->off, got);

	if (ret)
		return pk_read_fail(fr->ctx, "%s: read failed: %s", fr->path,
				    strerror(-ret));
	fr->off += *got;
	return LSQ_OK;
}

/* Is [off, off + len) inside a hole? Filesystems without SEEK_DATA
 * report everything as data. */
static bool fd_hole(struct pk_reader *r, uint64_t off, uint32_t len)
{
	struct fd_reader *fr = (struct fd_reader *)r;
	off_t d = lseek(fr->fd, (off_t)off, SEEK_DATA);

	if (d < 0 && errno != ENXIO)
		return false;
	if (d >= 0 && (uint64_t)d < off + len)
		return false;
	fr->off = off + len;
	return true;
}

static int changed(const char *path)
{
	pk_error("%s: file changed size while being packed", path);
	return LSQ_ERR_IO;
}

/* The file's reads failed under --skip-unreadable: write out what is in
 * flight (nothing after this file was submitted), then take back the
 * file's own blocks. A tail already in the fragment block stays there: it
 * is real data that later files may share. */
static int skip_file(struct pk_bp *bp, struct pk_inode *f)
{
	int ret = LSQ_OK;

	while (!ret && lsq_opool_pending(bp->pool))
		ret = handle_one(bp);
	if (ret)
		return ret;
	if (f->data_written)
		bp->ctx->pos = f->own_start;
	f->skipped = true;
	f->nblocks = 0;
	bp->ctx->skipped++;
	bp->ctx->skipped_files++;
	return LSQ_OK;
}

static int read_exact(struct pk_reader *r, void *buf, size_t len,
		      const char *path)
{
	size_t got;
	int ret = r->read(r, buf, len, &got);

	if (ret)
		return ret;
	if (got != len)
		return changed(path);
	return LSQ_OK;
}

int pk_bp_add_file(struct pk_bp *bp, struct pk_inode *f, const char *path,
		   const char *rel, struct pk_reader *r)
{
	const struct pk_opts *o = bp->ctx->opt;
	uint64_t size = f->size, off = 0;
	uint32_t tail = (uint32_t)(size & (bp->bs - 1));
	uint64_t nfull = size >> o->block_log;
	bool use_frag = !o->no_fragments && tail &&
			(o->always_fragments || size < bp->bs);
	uint64_t nblocks = nfull + (tail && !use_frag);
	uint8_t probe;
	size_t got;
	int ret = LSQ_OK;

	f->data_done = true;
	if (nblocks > UINT32_MAX)
		return LSQ_ERR_OVERFLOW;
	f->nblocks = (uint32_t)nblocks;
	if (nblocks) {
		f->blocks = calloc(nblocks, sizeof(*f->blocks));
		if (!f->blocks)
			return LSQ_ERR_NOMEM;
	}
	for (uint64_t i = 0; i < nblocks; i++) {
		struct blk_job *job;
		uint32_t len = size - off < bp->bs ? (uint32_t)(size - off) :
						     bp->bs;

		ret = get_job(bp, &job);
		if (ret)
			goto out;
		if (r->hole && r->hole(r, off, len))
			/* nothing to read: the worker sees zeros, as it
			 * would after reading the hole */
			memset(job->in, 0, len);
		else
			ret = read_exact(r, job->in, len, path);
		if (ret) {
			job->free_next = bp->free_list;
			bp->free_list = job;
			goto out;
		}
		job->kind = JOB_DATA;
		job->file = f;
		job->index = (uint32_t)i;
		job->last = i + 1 == nblocks;
		job->in_len = len;
		ret = submit(bp, job);
		if (ret)
			goto out;
		off += len;
	}
	if (use_frag) {
		ret = read_exact(r, bp->tail_buf, tail, path);
		if (!ret)
			ret = add_tail(bp, f, bp->tail_buf, tail,
				       pk_hash(PK_LAYOUT_SEED, rel,
					       strlen(rel)));
		if (ret)
			goto out;
		off += tail;
	}
	/* one more byte must not be there */
	ret = r->read(r, &probe, 1, &got);
	if (!ret && got)
		ret = changed(path);
	if (!ret)
		bp->ctx->bytes_in += size;
out:
	if (ret == PK_UNREADABLE)
		return skip_file(bp, f);
	return ret;
}

static int add_from_path(struct pk_bp *bp, struct pk_node *node)
{
	struct pk_inode *f = node->ino;
	struct fd_reader fr = {
		.r = { .read = fd_read, .hole = fd_hole },
		.ctx = bp->ctx,
		.path = node->path,
	};
	struct stat st;
	int ret;

	fr.fd = open(node->path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (fr.fd < 0) {
		f->data_done = true;
		ret = pk_read_fail(bp->ctx, "%s: cannot open: %s", node->path,
				   strerror(errno));
		return ret == PK_UNREADABLE ? skip_file(bp, f) : ret;
	}
	if (fstat(fr.fd, &st) || !S_ISREG(st.st_mode)) {
		pk_error("%s: changed while being packed", node->path);
		ret = LSQ_ERR_IO;
	} else if ((uint64_t)st.st_size != f->size) {
		ret = changed(node->path);
	} else {
		/* the path below SOURCE, as a tar names it */
		ret = pk_bp_add_file(bp, f, node->path,
				     node->path +
					     strlen(bp->ctx->root->path) + 1,
				     &fr.r);
		if (!ret && !f->skipped &&
		    (fstat(fr.fd, &st) || (uint64_t)st.st_size != f->size))
			ret = changed(node->path);
	}
	close(fr.fd);
	return ret;
}

int pk_bp_add_node(struct pk_bp *bp, struct pk_node *node)
{
	int ret;

	if (node->ino->skipped || !S_ISREG(node->ino->mode) ||
	    node->ino->data_done)
		return LSQ_OK;
	ret = add_from_path(bp, node);
	bp->ctx->files_done++;
	pk_progress(bp->ctx, false);
	return ret;
}

int pk_bp_flush_fragments(struct pk_bp *bp)
{
	return flush_frag(bp);
}

int pk_bp_add_tree(struct pk_bp *bp, struct pk_node *node)
{
	for (size_t i = 0; i < node->nchildren; i++) {
		struct pk_node *c = node->children[i];
		int ret = LSQ_OK;

		if (c->ino->skipped)
			continue;
		if (S_ISREG(c->ino->mode)) {
			ret = pk_bp_add_node(bp, c);
		} else if (S_ISDIR(c->ino->mode)) {
			ret = pk_bp_add_tree(bp, c);
		}
		if (ret)
			return ret;
	}
	return LSQ_OK;
}

int pk_bp_create(struct pk_ctx *ctx, struct pk_bp **out)
{
	const struct pk_opts *o = ctx->opt;
	struct pk_bp *bp = calloc(1, sizeof(*bp));
	/* -j N: N worker threads compress next to this one, which reads,
	 * orders and writes (as mksquashfs -processors N), so even -j 1
	 * overlaps I/O with compression */
	unsigned jobs = o->jobs ? o->jobs : 1;
	size_t budget = (size_t)256 << 20;

	*out = NULL;
	if (!bp)
		return LSQ_ERR_NOMEM;
	bp->ctx = ctx;
	bp->bs = o->block_size;
	bp->frag_target = o->reuse_target;
	bp->njobs = 4 * (size_t)jobs + 4;
	if (bp->njobs * 2 * bp->bs > budget)
		bp->njobs = budget / (2 * (size_t)bp->bs);
	if (bp->njobs < 4)
		bp->njobs = 4;
	bp->jobs = calloc(bp->njobs, sizeof(*bp->jobs));
	bp->frag_buf = malloc(bp->bs);
	bp->tail_buf = malloc(bp->bs);
	bp->cmp_a = malloc(CMP_CHUNK);
	bp->cmp_b = malloc(CMP_CHUNK);
	*out = bp;
	if (!bp->jobs || !bp->frag_buf || !bp->cmp_a || !bp->cmp_b ||
	    !bp->tail_buf)
		return LSQ_ERR_NOMEM;
	for (size_t i = 0; i < bp->njobs; i++) {
		bp->jobs[i].in = malloc(bp->bs);
		bp->jobs[i].out = malloc(bp->bs);
		if (!bp->jobs[i].in || !bp->jobs[i].out)
			return LSQ_ERR_NOMEM;
		bp->jobs[i].free_next = bp->free_list;
		bp->free_list = &bp->jobs[i];
	}
	if (o->serial)
		bp->pool = lsq_opool_serial_create(bp->njobs, &pool_ops,
						   (void *)&o->comp);
	else
		bp->pool = lsq_opool_create(jobs, bp->njobs, &pool_ops,
					    (void *)&o->comp);
	if (!bp->pool) {
		pk_error("cannot start the compressor pool");
		return LSQ_ERR_NOMEM;
	}
	return LSQ_OK;
}

int pk_bp_finish(struct pk_bp *bp)
{
	int ret = flush_frag(bp);

	while (!ret && lsq_opool_pending(bp->pool))
		ret = handle_one(bp);
	return ret;
}

void pk_bp_destroy(struct pk_bp *bp)
{
	if (!bp)
		return;
	lsq_opool_destroy(bp->pool);
	if (bp->jobs)
		for (size_t i = 0; i < bp->njobs; i++) {
			free(bp->jobs[i].in);
			free(bp->jobs[i].out);
		}
	free(bp->jobs);
	free(bp->frag_buf);
	free(bp->cmp_a);
	free(bp->cmp_b);
	free(bp->tail_buf);
	free(bp->ftab);
	free(bp->dtab);
	free(bp);
}
