/* SPDX-License-Identifier: MIT */
/*
 * page_store.h - fill the kernel's page cache with whole decompressed
 * blocks.
 *
 * A 4 KiB read that misses the page cache costs a whole block to read and
 * decompress; the kernel's squashfs then keeps every page of that block,
 * FUSE keeps only the pages asked for. After such a read is answered, the
 * block's range is queued here, and one thread pushes it into the page
 * cache with fuse_lowlevel_notify_store(), so the neighbouring reads never
 * reach the daemon.
 *
 * The same for small files: a READ of a file that lies wholly in a
 * fragment block also queues the other files listed in that block
 * (frag_neighbours.h), whole, so a walk that reads a directory's files
 * in turn sends one READ per fragment block, not one per file.
 *
 * Why a thread: notify_store waits on page locks, and a page may be locked
 * by a read that is queued for a worker. Workers therefore never block on
 * the store: they queue and go on (a full queue drops the request); the
 * store thread may wait, the workers serve the read that unblocks it.
 */
#ifndef LSQ_FUSE_PAGE_STORE_H
#define LSQ_FUSE_PAGE_STORE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fuse/frag_neighbours.h"
#include "lsq/image.h"

#define LSQ_PAGE_STORE_QUEUE 256

struct lsq_page_store_req {
	fuse_ino_t ino;
	struct lsq_inode inode;  /* whole: only .ref, decoded by the thread */
	uint64_t offset;
	uint64_t len;
	bool whole;              /* the whole file, a fragment neighbour */
};

struct lsq_page_store {
	struct lsq_image *img;
	struct fuse_session *se;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* protected by lock: */
	struct lsq_page_store_req queue[LSQ_PAGE_STORE_QUEUE];
	unsigned head, count;
	bool initialised;
	bool abandoned; /* stop gave up joining the thread */
	bool started, stop;
	pthread_t thread;
	struct lsq_frag_neighbours *neighbours;  /* NULL: none noted */
	/* read without the lock (lsq_page_store_counters) */
	atomic_uint_least64_t pushed_bytes, pushed_files, dropped;
};

/* img and se are borrowed for the store's life. Starts no thread.
 * neighbours: push a small file's fragment-block neighbours (off while
 * recording a profile, which must see every file a start reads). */
void lsq_page_store_init(struct lsq_page_store *ps, struct lsq_image *img,
			 struct fuse_session *se, bool neighbours);

/* page_store_bytes, page_store_files (neighbours pushed whole),
 * page_store_dropped (requests a full queue dropped). */
void lsq_page_store_counters(const struct lsq_page_store *ps,
			     lsq_counter_fn fn, void *ctx);

/* Queue the block-aligned range around a read of [offset, offset+len) of
 * file. Never blocks on the store thread (started on first use). */
void lsq_page_store_after_read(struct lsq_page_store *ps, fuse_ino_t ino,
			       const struct lsq_inode *file, uint64_t offset,
			       uint64_t len);

/* A listing handed the kernel file as node ino: note it if it lies wholly
 * in a fragment block. Cheap, never blocks on the store. */
void lsq_page_store_listed(struct lsq_page_store *ps, fuse_ino_t ino,
			   const struct lsq_inode *file);

/* Stop and join the thread; pending requests are dropped and later ones
 * ignored. Idempotent; a no-op on a store that was never initialised
 * (zeroed memory). handing_over: the daemon leaves the connection to
 * the next one, which alone can answer a READ the thread may wait on,
 * and only once this process has gone: wait 0.1 s, not 2 s. */
void lsq_page_store_stop(struct lsq_page_store *ps, bool handing_over);

/* Stop, then release the store's resources. Idempotent like stop. */
void lsq_page_store_fini(struct lsq_page_store *ps);

#endif
