/* SPDX-License-Identifier: MIT */
#include "fuse/page_store.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "common/histogram.h"
#include "common/log.h"

void lsq_page_store_init(struct lsq_page_store *ps, struct lsq_image *img,
			 struct fuse_session *se, bool neighbours)
{
	memset(ps, 0, sizeof(*ps));
	ps->img = img;
	ps->se = se;
	pthread_mutex_init(&ps->lock, NULL);
	pthread_cond_init(&ps->cond, NULL);
	if (neighbours)
		ps->neighbours = lsq_frag_neighbours_new();
	ps->initialised = true;
}

static void store_one(struct lsq_page_store *ps, uint8_t *buf,
		      const struct lsq_page_store_req *r)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(0);
	struct lsq_inode whole;
	const struct lsq_inode *file = &r->inode;
	uint64_t len = r->len;
	size_t n = 0;

	if (r->whole) {
		if (lsq_image_inode(ps->img, r->inode.ref, &whole) ||
		    lsq_file_only_fragment(ps->img, &whole) == UINT32_MAX)
			return;
		file = &whole;
		len = whole.size;  /* under a block: fits the buffer */
	}
	if (lsq_image_read(ps->img, file, buf, (size_t)len, r->offset,
			   NULL, &n) || n == 0)
		return; /* the read path reports image errors */
	bv.buf[0].mem = buf;
	bv.buf[0].size = n;
	/* ENOENT when the kernel forgot the inode meanwhile: harmless */
	if (fuse_lowlevel_notify_store(ps->se, r->ino, (off_t)r->offset, &bv,
				       0) == 0) {
		atomic_fetch_add(&ps->pushed_bytes, n);
		if (r->whole)
			atomic_fetch_add(&ps->pushed_files, 1);
	}
}

static void *store_thread(void *arg)
{
	struct lsq_page_store *ps = arg;
	uint8_t *buf = malloc(lsq_image_info(ps->img)->block_size);

	pthread_setname_np(pthread_self(), "sqfs-store");
	if (!buf)
		return NULL;
	pthread_mutex_lock(&ps->lock);
	for (;;) {
		struct lsq_page_store_req r;

		while (!ps->stop && ps->count == 0)
			pthread_cond_wait(&ps->cond, &ps->lock);
		if (ps->stop)
			break;
		r = ps->queue[ps->head];
		ps->head = (ps->head + 1) % LSQ_PAGE_STORE_QUEUE;
		ps->count--;
		pthread_mutex_unlock(&ps->lock);
		store_one(ps, buf, &r);
		pthread_mutex_lock(&ps->lock);
	}
	pthread_mutex_unlock(&ps->lock);
	free(buf);
	return NULL;
}

/* The store's thread, started on first use (after the daemon forked);
 * false when it is stopped or cannot start. Under ps->lock. */
static bool running(struct lsq_page_store *ps)
{
	if (ps->stop)
		return false;
	if (!ps->started) {
		if (pthread_create(&ps->thread, NULL, store_thread, ps) != 0) {
			ps->stop = true;
			lsq_log(LSQ_LOG_WARNING, "page store disabled: cannot start its thread");
			return false;
		}
		ps->started = true;
	}
	return true;
}

/* Queue one request, or count it dropped. Under ps->lock. */
static void enqueue(struct lsq_page_store *ps,
		    const struct lsq_page_store_req *req)
{
	if (ps->count == LSQ_PAGE_STORE_QUEUE) {
		atomic_fetch_add(&ps->dropped, 1);
		return;
	}
	ps->queue[(ps->head + ps->count) % LSQ_PAGE_STORE_QUEUE] = *req;
	ps->count++;
	pthread_cond_signal(&ps->cond);
}

void lsq_page_store_listed(struct lsq_page_store *ps, fuse_ino_t ino,
			   const struct lsq_inode *file)
{
	if (ps->se && ps->neighbours)
		lsq_frag_neighbours_note(ps->neighbours,
					 lsq_file_only_fragment(ps->img, file),
					 ino, file->ref);
}

/* Queue the neighbours a read handed out (whole files), while a quarter
 * of the queue stays for the block ranges of reads; the rest are dropped
 * (their readers fetch them). Under ps->lock. */
static void queue_neighbours(struct lsq_page_store *ps,
			     const struct lsq_frag_neighbour *nb, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct lsq_page_store_req r = {
			.ino = nb[i].ino, .inode = { .ref = nb[i].ref },
			.whole = true,
		};

		if (ps->count >= LSQ_PAGE_STORE_QUEUE / 4 * 3) {
			atomic_fetch_add(&ps->dropped, n - i);
			return;
		}
		enqueue(ps, &r);
	}
}

void lsq_page_store_after_read(struct lsq_page_store *ps, fuse_ino_t ino,
			       const struct lsq_inode *file, uint64_t offset,
			       uint64_t len)
{
	uint64_t bs = lsq_image_info(ps->img)->block_size;
	uint64_t start = offset & ~(bs - 1);
	uint64_t end = (offset + len + bs - 1) & ~(bs - 1);
	struct lsq_frag_neighbour nb[LSQ_NB_PER_SLOT];
	size_t n = 0;
	bool own;

	if (!ps->se || len == 0)
		return;
	if (end > file->size)
		end = file->size;
	/* A read that already covered its blocks left nothing of its own
	 * to store; a small file's first read hands out the files listed
	 * in its fragment block (once each; striped locks, not ours). */
	own = !(start == offset && end <= offset + len);
	if (offset == 0 && ps->neighbours)
		n = lsq_frag_neighbours_take(
			ps->neighbours, lsq_file_only_fragment(ps->img, file),
			ino, nb, LSQ_NB_PER_SLOT);
	if (!own && n == 0)
		return;
	/* one block at a time keeps the thread's buffer at a block */
	if (end - start > bs)
		end = start + bs;

	pthread_mutex_lock(&ps->lock);
	if (!running(ps)) {
		pthread_mutex_unlock(&ps->lock);
		return;
	}
	if (own && ps->count > 0) {
		/* neighbouring 4 KiB reads of one block queue it once */
		const struct lsq_page_store_req *last =
			&ps->queue[(ps->head + ps->count - 1) % LSQ_PAGE_STORE_QUEUE];

		if (!last->whole && last->ino == ino && last->offset == start)
			own = false;
	}
	if (own) {
		struct lsq_page_store_req r = {
			.ino = ino, .inode = *file, .offset = start,
			.len = end - start,
		};

		enqueue(ps, &r);
	}
	queue_neighbours(ps, nb, n);
	pthread_mutex_unlock(&ps->lock);
}

void lsq_page_store_counters(const struct lsq_page_store *ps,
			     lsq_counter_fn fn, void *ctx)
{
	fn(ctx, "page_store_bytes", atomic_load(&ps->pushed_bytes),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "page_store_files", atomic_load(&ps->pushed_files),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "page_store_dropped", atomic_load(&ps->dropped),
	   LSQ_COUNTER_TOTAL);
}

void lsq_page_store_stop(struct lsq_page_store *ps, bool handing_over)
{
	bool join;

	if (!ps->initialised)
		return;
	pthread_mutex_lock(&ps->lock);
	ps->stop = true;
	join = ps->started;
	ps->started = false;
	pthread_cond_broadcast(&ps->cond);
	pthread_mutex_unlock(&ps->lock);
	if (join) {
		/* The thread can be stuck on the page lock of a read that
		 * no worker will answer any more; the unmount that follows
		 * aborts that read and frees it, so do not wait forever. */
		struct timespec deadline = lsq_realtime_after_ns(
			handing_over ? 100000000ull : 2000000000ull);

		if (pthread_timedjoin_np(ps->thread, NULL, &deadline) != 0) {
			/* handing over, expected: its READ is the next
			 * daemon's */
			lsq_log(handing_over ? LSQ_LOG_DEBUG : LSQ_LOG_WARNING,
				"page store thread still busy at shutdown");
			ps->abandoned = true;
		}
	}
}

void lsq_page_store_fini(struct lsq_page_store *ps)
{
	if (!ps->initialised)
		return;
	lsq_page_store_stop(ps, false);
	/* only request threads use it, and none runs any more; the store's
	 * thread never does */
	lsq_frag_neighbours_free(ps->neighbours);
	ps->neighbours = NULL;
	if (ps->abandoned)
		return; /* it may still take the lock once; keep it valid */
	pthread_cond_destroy(&ps->cond);
	pthread_mutex_destroy(&ps->lock);
	ps->initialised = false;
}
