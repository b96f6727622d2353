/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the FUSE low-level operations of a read-only SquashFS mount.
 *
 * Every operation is a thin translation onto include/lsq/image.h. Node ids
 * are inode references (fuse/inode_map.h), so there is no inode table to
 * lock and forget has nothing to do. Open files and directories carry a
 * handle with their decoded inode in fi->fh, so reads skip the inode
 * decode.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/histogram.h"
#include "common/log.h"
#include "common/scratch.h"
#include "fuse/inode_map.h"
#include "fuse/mount.h"
#include "fuse/reply.h"
#include "fuse/spread.h"
#include "fuse/stats.h"
#include "fuse/uring.h"
#include "lsq/error.h"
#include "profile/recorder.h"

/* FUSE requests being answered now (the timed operations below). */
static atomic_uint_least64_t requests_in_flight;

/* SquashFS stores names of up to 256 bytes (the kernel driver's
 * SQUASHFS_NAME_LEN); fuse_add_direntry() wants them NUL-terminated. */
#define LSQ_DIRENT_NAME_MAX 256

/* What this request thread is, learned on its first request: the
 * listener its reads tell of their long work (lsq_image_read). */
static _Thread_local struct {
	bool known;
	lsq_long_work_fn long_work;
} request_thread;

/* libfuse starts its workers unnamed (they inherit the main thread's
 * name); name each on its first request so ps and top tell them apart,
 * and let it spread its decompressions (fuse/spread.h). Ring threads are
 * named already and float for theirs (fuse/uring.h); with -s the main
 * thread answers, and stays put. */
static void name_request_thread(void)
{
	char name[16] = "";

	if (request_thread.known)
		return;
	request_thread.known = true;
	request_thread.long_work = lsq_uring_long_work();
	if (request_thread.long_work || gettid() == getpid() ||
	    prctl(PR_GET_NAME, name) != 0 || strcmp(name, "sqfs-ring") == 0)
		return;
	prctl(PR_SET_NAME, "sqfs-worker");
	request_thread.long_work = lsq_spread_long_work();
}

static struct lsq_mount *mount_of(fuse_req_t req)
{
	name_request_thread();
	return fuse_req_userdata(req);
}

static int inode_of(struct lsq_mount *m, fuse_ino_t ino, struct lsq_inode *out)
{
	lsq_inode_ref ref;

	if (!lsq_ref_from_nodeid(ino, m->root, &ref))
		return LSQ_ERR_INVALID;
	return lsq_image_inode(m->img, ref, out);
}

/* What fi->fh points to for an open file or directory. */
struct lsq_handle {
	struct lsq_inode inode;
	struct lsq_handle *prev, *next; /* protected by mount->handles_lock */
};

static struct lsq_handle *fh_handle(const struct fuse_file_info *fi)
{
	return (struct lsq_handle *)(uintptr_t)fi->fh;
}

static const struct lsq_inode *fh_inode(const struct fuse_file_info *fi)
{
	return &fh_handle(fi)->inode;
}

/* The inode of an open file: from its handle, or decoded from the node id
 * when opens are zero-message (fi->fh is 0 then). */
static int open_inode(struct lsq_mount *m, fuse_ino_t ino,
		      const struct fuse_file_info *fi, struct lsq_inode *buf,
		      const struct lsq_inode **out)
{
	int err;

	if (fi && fi->fh) {
		*out = fh_inode(fi);
		return LSQ_OK;
	}
	err = inode_of(m, ino, buf);
	if (!err)
		*out = buf;
	return err;
}

static void handle_link(struct lsq_mount *m, struct lsq_handle *h)
{
	pthread_mutex_lock(&m->handles_lock);
	h->prev = NULL;
	h->next = m->handles;
	if (h->next)
		h->next->prev = h;
	m->handles = h;
	pthread_mutex_unlock(&m->handles_lock);
}

static void handle_free(struct lsq_mount *m, struct lsq_handle *h)
{
	pthread_mutex_lock(&m->handles_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		m->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&m->handles_lock);
	free(h);
}

/* The attributes the kernel gets: the image's, but for the owners
 * -o uid=/gid= set (as squashfuse's options do). */
static void stat_of(const struct lsq_mount *m, const struct lsq_inode *inode,
		    struct stat *st)
{
	lsq_image_stat(m->img, inode, st);
	if (m->uid != LSQ_KEEP_OWNER)
		st->st_uid = m->uid;
	if (m->gid != LSQ_KEEP_OWNER)
		st->st_gid = m->gid;
}

static void fill_entry(struct lsq_mount *m, const struct lsq_inode *inode,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = lsq_nodeid_from_ref(inode->ref, m->root);
	e->generation = 0;
	e->entry_timeout = m->entry_timeout;
	e->attr_timeout = m->attr_timeout;
	stat_of(m, inode, &e->attr);
}

static void lsq_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct lsq_mount *m = userdata;
	unsigned want = FUSE_CAP_READDIRPLUS |
			FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_READ |
			FUSE_CAP_PARALLEL_DIROPS;

	conn->want |= want & conn->capable;
	/* Every listing READDIRPLUS: "auto" lists the rest of a directory
	 * after its first 32 KiB with plain READDIR, and a walk that stats
	 * what it lists (find -printf, ls -l, du) then sends a LOOKUP per
	 * entry (45k entries: 32k requests, against 6.3k). Attributes cost
	 * us an inode decode from cached metadata. */
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
	/* Zero-message opens: answering ENOSYS to open/opendir makes the
	 * kernel stop sending open and release at all, with the page and
	 * directory caches kept (FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR are
	 * its defaults then). Nothing is per-open here, so every open and
	 * close becomes free. */
	lsq_page_store_init(&m->page_store, m->img, m->se,
			    !m->no_neighbour_push);
	m->zero_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
	m->zero_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
	/* Cached pages can never be stale: skip the kernel's mtime/size
	 * checks that would drop them. */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	/* Splice only helps replies that come from a file descriptor; ours
	 * come from memory, so FUSE_CAP_SPLICE_* stay as libfuse left them.
	 * conn->max_readahead already holds the most the kernel offers, and
	 * libfuse sizes max_pages from max_write (1 MiB requests by default),
	 * so both are left alone unless the user asked otherwise. */
	if (m->max_read)
		conn->max_read = m->max_read;
	if (m->conn_opts)
		fuse_apply_conn_info_opts(m->conn_opts, conn);
	conn->want &= conn->capable;
}

/* The kernel drops releases still queued at unmount; free what is left
 * once no worker runs any more. */
static void lsq_op_destroy(void *userdata)
{
	struct lsq_mount *m = userdata;

	lsq_page_store_fini(&m->page_store);
	while (m->handles)
		handle_free(m, m->handles);
}

static void lsq_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct lsq_mount *m = mount_of(req);
	struct lsq_inode dir, inode;
	struct fuse_entry_param e;
	int err;

	err = inode_of(m, parent, &dir);
	if (err)
		goto fail;
	err = lsq_image_lookup(m->img, &dir, name, strlen(name), &inode);
	if (err == LSQ_ERR_NOT_FOUND) {
		/* A negative entry: the kernel remembers the name is absent
		 * (path searches probe many), which the image guarantees. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = m->entry_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	if (err)
		goto fail;
	fill_entry(m, &inode, &e);
	if (m->recorder)
		lsq_recorder_name(m->recorder, parent, name, strlen(name),
				  e.ino);
	fuse_reply_entry(req, &e);
	return;
fail:
	lsq_reply_err(req, err);
}

/* Node ids are stateless, so the kernel's lookup counts need no tracking. */
static void lsq_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fuse_reply_none(req);
}

static void lsq_op_forget_multi(fuse_req_t req, size_t count,
				struct fuse_forget_data *forgets)
{
	fuse_reply_none(req);
}

static void lsq_op_getattr(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_file_info *fi)
{
	struct lsq_mount *m = mount_of(req);
	struct lsq_inode inode;
	struct stat st;
	int err;

	err = inode_of(m, ino, &inode);
	if (err) {
		lsq_reply_err(req, err);
		return;
	}
	stat_of(m, &inode, &st);
	fuse_reply_attr(req, &st, m->attr_timeout);
}

static void lsq_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct lsq_mount *m = mount_of(req);
	struct lsq_inode inode;
	char *target;
	int err;

	err = inode_of(m, ino, &inode);
	if (!err)
		err = lsq_image_readlink(m->img, &inode, &target);
	if (err) {
		lsq_reply_err(req, err);
		return;
	}
	fuse_reply_readlink(req, target);
	free(target);
}

/* Decode the inode once per open and keep it in fi->fh. */
static int open_common(struct lsq_mount *m, fuse_ino_t ino,
		       struct fuse_file_info *fi, bool want_dir)
{
	struct lsq_handle *h;
	int err;

	h = malloc(sizeof(*h));
	if (!h)
		return LSQ_ERR_NOMEM;
	err = inode_of(m, ino, &h->inode);
	if (err)
		goto fail_free;
	if (want_dir && !S_ISDIR(h->inode.mode)) {
		err = LSQ_ERR_NOT_DIR;
		goto fail_free;
	}
	if (!want_dir && S_ISDIR(h->inode.mode)) {
		err = LSQ_ERR_IS_DIR;
		goto fail_free;
	}
	handle_link(m, h);
	fi->fh = (uintptr_t)h;
	/* Contents never change: keep the page cache across opens. */
	fi->keep_cache = 1;
	return LSQ_OK;
fail_free:
	free(h);
	return err;
}

static void lsq_op_open(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	int err;

	/* The VFS refuses writes on a read-only mount first; this is for
	 * anything that gets past it. (O_APPEND alone is harmless, and the
	 * kernel squashfs driver accepts it with O_RDONLY.) */
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		lsq_reply_errno(req, EROFS);
		return;
	}
	if (mount_of(req)->zero_open) {
		lsq_reply_errno(req, ENOSYS);
		return;
	}
	err = open_common(mount_of(req), ino, fi, false);
	if (err) {
		lsq_reply_err(req, err);
		return;
	}
	/* Nothing is ever dirty: spare the kernel a FLUSH on every close. */
	fi->noflush = 1;
	if (fuse_reply_open(req, fi) != 0) /* interrupted: no release */
		handle_free(mount_of(req), fh_handle(fi));
}

static void lsq_op_read(fuse_req_t req, fuse_ino_t ino, size_t size,
			off_t off, struct fuse_file_info *fi)
{
	struct lsq_mount *m = mount_of(req);
	const struct lsq_inode *file;
	struct lsq_inode decoded;
	size_t nread = 0;
	char *buf, *owned;
	int err;

	if (off < 0) {
		lsq_reply_err(req, LSQ_ERR_INVALID);
		return;
	}
	err = open_inode(m, ino, fi, &decoded, &file);
	if (err) {
		lsq_reply_err(req, err);
		return;
	}
	owned = NULL;
	buf = lsq_scratch(LSQ_SCRATCH_REPLY, size ? size : 1);
	if (!buf)
		buf = owned = malloc(size ? size : 1);
	if (!buf) {
		lsq_reply_err(req, LSQ_ERR_NOMEM);
		return;
	}
	err = lsq_image_read(m->img, file, buf, size, (uint64_t)off,
			     request_thread.long_work, &nread);
	if (err) {
		lsq_reply_err(req, err);
	} else {
		/* before the reply: once it is out, the reader's next read
		 * (of another file) could be recorded first */
		if (m->recorder)
			lsq_recorder_read(m->recorder, ino, file->size,
					  (uint64_t)off, nread);
		fuse_reply_buf(req, buf, nread);
		/* only after the reply: until then the kernel holds the
		 * pages of this request locked */
		lsq_page_store_after_read(&m->page_store, ino, file,
					  (uint64_t)off, nread);
	}
	free(owned);
}

static void lsq_op_release(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_file_info *fi)
{
	if (fi->fh)
		handle_free(mount_of(req), fh_handle(fi));
	lsq_reply_ok(req);
}

static void lsq_op_opendir(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_file_info *fi)
{
	int err;

	if (mount_of(req)->zero_opendir) {
		lsq_reply_errno(req, ENOSYS);
		return;
	}
	err = open_common(mount_of(req), ino, fi, true);
	if (err) {
		lsq_reply_err(req, err);
		return;
	}
	/* Listings never change: let the kernel cache them, across opens
	 * too (keep_cache, set above, also applies to that cache). */
	fi->cache_readdir = 1;
	if (fuse_reply_open(req, fi) != 0)
		handle_free(mount_of(req), fh_handle(fi));
}

struct dir_fill {
	fuse_req_t req;
	struct lsq_mount *m;
	fuse_ino_t dir_ino;
	const struct lsq_inode *dir;
	bool plus;
	char *buf;
	size_t size;
	size_t used;
	int err;  /* failure that stopped the listing early */
};

/* lsq_dirent_fn: add one entry, or stop (1) without consuming it when it
 * does not fit; the kernel resumes at its cookie with the next request. */
static int fill_dirent(void *ctx, const struct lsq_dirent *ent)
{
	struct dir_fill *f = ctx;
	char name[LSQ_DIRENT_NAME_MAX + 1];
	struct fuse_entry_param e;
	struct lsq_inode inode;
	size_t need, room = f->size - f->used;
	off_t next = (off_t)ent->next_cookie;

	if (ent->name_len == 0 || ent->name_len > LSQ_DIRENT_NAME_MAX ||
	    memchr(ent->name, '/', ent->name_len) ||
	    memchr(ent->name, '\0', ent->name_len)) {
		/* The kernel would reject such a name anyway; hide it. */
		lsq_log_once(ent->ref, LSQ_LOG_WARNING,
			     "skipping directory entry with an invalid name "
			     "(inode %u)", (unsigned)ent->inode_number);
		return 0;
	}
	memcpy(name, ent->name, ent->name_len);
	name[ent->name_len] = '\0';

	if (!f->plus) {
		struct stat st = {
			.st_ino = ent->inode_number,
			.st_mode = ent->type,
		};

		need = fuse_add_direntry(f->req, f->buf + f->used, room, name,
					 &st, next);
		if (need > room)
			return 1;
		f->used += need;
		return 0;
	}

	need = fuse_add_direntry_plus(f->req, NULL, 0, name, NULL, 0);
	if (need > room)
		return 1;
	if (ent->is_dot) {
		/* The kernel takes no lookup reference for "." and "..";
		 * a zero node id tells it there is no entry to cache. */
		memset(&e, 0, sizeof(e));
		e.attr.st_ino = ent->inode_number;
		e.attr.st_mode = ent->type;
	} else {
		int err = lsq_image_inode(f->m->img, ent->ref, &inode);

		if (err) {
			f->err = err;
			return 1;
		}
		fill_entry(f->m, &inode, &e);
		if (f->m->recorder)
			lsq_recorder_name(f->m->recorder, f->dir_ino, name,
					  ent->name_len, e.ino);
		lsq_page_store_listed(&f->m->page_store, e.ino, &inode);
	}
	f->used += fuse_add_direntry_plus(f->req, f->buf + f->used, room, name,
					  &e, next);
	return 0;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi, bool plus)
{
	struct dir_fill f = {
		.req = req,
		.m = mount_of(req),
		.dir_ino = ino,
		.plus = plus,
		.size = size,
	};
	struct lsq_inode decoded;
	int err;

	err = open_inode(f.m, ino, fi, &decoded, &f.dir);
	if (!err && !S_ISDIR(f.dir->mode))
		err = LSQ_ERR_NOT_DIR;
	if (err) {
		lsq_reply_err(req, err);
		return;
	}
	if (off < 0) {
		lsq_reply_err(req, LSQ_ERR_INVALID);
		return;
	}
	f.buf = malloc(size ? size : 1);
	if (!f.buf) {
		lsq_reply_err(req, LSQ_ERR_NOMEM);
		return;
	}
	err = lsq_image_readdir(f.m->img, f.dir, (uint64_t)off, fill_dirent,
				&f);
	if (!err)
		err = f.err;
	/* What was listed before a failure is good; the failure is reported
	 * when the kernel asks again from where this reply stops. */
	if (err && f.used == 0)
		lsq_reply_err(req, err);
	else
		fuse_reply_buf(req, f.buf, f.used);
	free(f.buf);
}

static void lsq_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void lsq_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			       off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void lsq_op_releasedir(fuse_req_t req, fuse_ino_t ino,
			      struct fuse_file_info *fi)
{
	if (fi->fh)
		handle_free(mount_of(req), fh_handle(fi));
	lsq_reply_ok(req);
}

static void lsq_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;

	lsq_image_statfs(mount_of(req)->img, &st);
	fuse_reply_statfs(req, &st);
}

/* Reply to a getxattr/listxattr: size 0 asks only for the length. The
 * kernel caps size at XATTR_SIZE_MAX, so the buffer stays small. */
static void reply_xattr_value(fuse_req_t req, const void *buf, size_t size,
			      size_t needed)
{
	if (size == 0)
		fuse_reply_xattr(req, needed);
	else
		fuse_reply_buf(req, buf, needed);
}

/* VmRSS and VmHWM of this process in bytes, and its threads (0 when
 * unknown) */
static void read_process(uint64_t *rss, uint64_t *peak, uint64_t *threads)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];

	*rss = *peak = *threads = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "VmRSS: %llu kB", &v) == 1)
			*rss = (uint64_t)v * 1024u;
		else if (sscanf(line, "VmHWM: %llu kB", &v) == 1)
			*peak = (uint64_t)v * 1024u;
		else if (sscanf(line, "Threads: %llu", &v) == 1)
			*threads = v;
	}
	fclose(f);
}

/* Descriptors this process has open (0 when unknown), not counting the
 * one that lists them. */
static uint64_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	uint64_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n - 1 : 0;
}

void lsq_mount_counters(const struct lsq_mount *m, lsq_counter_fn fn,
			void *ctx)
{
	uint64_t rings = 0, requests = 0, rss = 0, peak = 0, threads = 0;

	lsq_image_counters(m->img, fn, ctx);
	lsq_uring_get_stats(m->uring, &rings, &requests);
	fn(ctx, "fuse_ring_threads", rings, LSQ_COUNTER_GAUGE);
	fn(ctx, "fuse_ring_requests", requests, LSQ_COUNTER_TOTAL);
	fn(ctx, "fuse_in_flight", atomic_load(&requests_in_flight),
	   LSQ_COUNTER_GAUGE);
	lsq_page_store_counters(&m->page_store, fn, ctx);
	read_process(&rss, &peak, &threads);
	fn(ctx, "process_rss_bytes", rss, LSQ_COUNTER_GAUGE);
	fn(ctx, "process_rss_peak_bytes", peak, LSQ_COUNTER_GAUGE);
	fn(ctx, "process_threads", threads, LSQ_COUNTER_GAUGE);
	fn(ctx, "process_open_fds", open_fds(), LSQ_COUNTER_GAUGE);
	fn(ctx, "buffer_pool_bytes", lsq_bufpool_pooled_bytes(),
	   LSQ_COUNTER_GAUGE);
	fn(ctx, "daemon_pid", (uint64_t)getpid(), LSQ_COUNTER_GAUGE);
	fn(ctx, "takeovers", m->takeovers_crash + m->takeovers_upgrade,
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "takeovers_crash", m->takeovers_crash, LSQ_COUNTER_TOTAL);
	fn(ctx, "takeovers_upgrade", m->takeovers_upgrade, LSQ_COUNTER_TOTAL);
	fn(ctx, "takeover_ready", atomic_load(&m->takeover_ready),
	   LSQ_COUNTER_GAUGE);
}

/* The counters as the value of LSQ_STATS_XATTR on the root. */
static void reply_stats(fuse_req_t req, struct lsq_mount *m, size_t size)
{
	struct lsq_counter_set set;
	size_t len;
	char *buf;

	lsq_stats_collect(m, &set);
	if (size == 0) {
		/* Counters grow between the probe and the read; promise
		 * room for any values so the read cannot get ERANGE. */
		fuse_reply_xattr(req, lsq_stats_max_len(&set));
		return;
	}
	len = lsq_stats_format(&set, NULL, 0);
	if (len > size) {
		lsq_reply_err(req, LSQ_ERR_RANGE);
		return;
	}
	buf = malloc(len + 1);
	if (!buf) {
		lsq_reply_err(req, LSQ_ERR_NOMEM);
		return;
	}
	lsq_stats_format(&set, buf, len + 1);
	fuse_reply_buf(req, buf, len);
	free(buf);
}

/* What --status shows beside the counters, as the value of
 * LSQ_INFO_XATTR on the root. */
static void reply_info(fuse_req_t req, struct lsq_mount *m, size_t size)
{
	size_t len = 0, room;
	char *text = lsq_stats_info(m, &len);

	if (!text) {
		lsq_reply_err(req, LSQ_ERR_NOMEM);
		return;
	}
	/* the last problem can change between the probe and the read */
	room = strlen(m->shown_image ? m->shown_image : "") +
	       strlen(m->mountpoint ? m->mountpoint : "") + LSQ_STATS_INFO_MAX;
	if (size == 0)
		fuse_reply_xattr(req, len > room ? len : room);
	else if (len > size)
		lsq_reply_err(req, LSQ_ERR_RANGE);
	else
		fuse_reply_buf(req, text, len);
	free(text);
}

static void lsq_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			    size_t size)
{
	struct lsq_mount *m = mount_of(req);
	struct lsq_inode inode;
	size_t needed = 0;
	char *buf = NULL;
	int err;

	err = inode_of(m, ino, &inode);
	if (err)
		goto out;
	if (size) {
		buf = malloc(size);
		if (!buf) {
			err = LSQ_ERR_NOMEM;
			goto out;
		}
	}
	err = lsq_image_getxattr(m->img, &inode, name, buf, size, &needed);
	/* UNSUPPORTED: an image without xattrs, where the kernel would say
	 * EOPNOTSUPP; the stats are ours, not the image's, so still serve. */
	if ((err == LSQ_ERR_NO_XATTR || err == LSQ_ERR_UNSUPPORTED) &&
	    ino == FUSE_ROOT_ID && strcmp(name, LSQ_STATS_XATTR) == 0) {
		reply_stats(req, m, size);
		goto out_free;
	}
	if ((err == LSQ_ERR_NO_XATTR || err == LSQ_ERR_UNSUPPORTED) &&
	    ino == FUSE_ROOT_ID && strcmp(name, LSQ_INFO_XATTR) == 0) {
		reply_info(req, m, size);
		goto out_free;
	}
	if (!err)
		reply_xattr_value(req, buf, size, needed);
out:
	if (err)
		lsq_reply_err(req, err);
out_free:
	free(buf);
}

/* Drop "trusted." names from a listxattr buffer; returns the new length. */
static size_t drop_trusted(char *buf, size_t len)
{
	size_t in = 0, out = 0;

	while (in < len) {
		size_t n = strnlen(buf + in, len - in) + 1;

		if (strncmp(buf + in, "trusted.", 8) != 0) {
			memmove(buf + out, buf + in, n);
			out += n;
		}
		in += n;
	}
	return out;
}

static void lsq_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct lsq_mount *m = mount_of(req);
	struct lsq_inode inode;
	size_t needed = 0;
	char *buf = NULL;
	int err;

	err = inode_of(m, ino, &inode);
	if (!err)
		err = lsq_image_listxattr(m->img, &inode, NULL, 0, &needed);
	if (err)
		goto out;
	buf = malloc(needed ? needed : 1);
	if (!buf) {
		err = LSQ_ERR_NOMEM;
		goto out;
	}
	err = lsq_image_listxattr(m->img, &inode, buf, needed, &needed);
	if (err)
		goto out;
	/* The kernel's squashfs lists trusted.* only to CAP_SYS_ADMIN; the
	 * caller's uid is what FUSE tells us, so root stands for it. */
	if (fuse_req_ctx(req)->uid != 0)
		needed = drop_trusted(buf, needed);
	if (size && needed > size)
		err = LSQ_ERR_RANGE;
	else
		reply_xattr_value(req, buf, size, needed);
out:
	if (err)
		lsq_reply_err(req, err);
	free(buf);
}

/* Each answered operation is timed, from the call to the return (its
 * reply is sent within), and counted while it runs (requests_in_flight).
 */

#define TIMED(op, params, args)                                            	static LSQ_HISTOGRAM(op##_seconds, "fuse_request_seconds",          			     "Time from a FUSE request to its answer.",    			     "op", #op, LSQ_HISTOGRAM_NS)                   	static void timed_##op params                                       	{                                                                   		uint64_t start = lsq_now_ns();                              									    		atomic_fetch_add_explicit(&requests_in_flight, 1,           					  memory_order_relaxed);            		lsq_op_##op args;                                           		atomic_fetch_sub_explicit(&requests_in_flight, 1,           					  memory_order_relaxed);            		lsq_histogram_add(&op##_seconds, lsq_now_ns() - start);     	}

TIMED(lookup, (fuse_req_t r, fuse_ino_t p, const char *n), (r, p, n))
TIMED(getattr, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f),
      (r, i, f))
TIMED(readlink, (fuse_req_t r, fuse_ino_t i), (r, i))
TIMED(open, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f), (r, i, f))
TIMED(read, (fuse_req_t r, fuse_ino_t i, size_t s, off_t o,
	     struct fuse_file_info *f), (r, i, s, o, f))
TIMED(release, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f),
      (r, i, f))
TIMED(opendir, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f),
      (r, i, f))
TIMED(readdir, (fuse_req_t r, fuse_ino_t i, size_t s, off_t o,
		struct fuse_file_info *f), (r, i, s, o, f))
TIMED(readdirplus, (fuse_req_t r, fuse_ino_t i, size_t s, off_t o,
		    struct fuse_file_info *f), (r, i, s, o, f))
TIMED(releasedir, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f),
      (r, i, f))
TIMED(statfs, (fuse_req_t r, fuse_ino_t i), (r, i))
TIMED(getxattr, (fuse_req_t r, fuse_ino_t i, const char *n, size_t s),
      (r, i, n, s))
TIMED(listxattr, (fuse_req_t r, fuse_ino_t i, size_t s), (r, i, s))

const struct fuse_lowlevel_ops lsq_fuse_ops = {
	.init = lsq_op_init,
	.destroy = lsq_op_destroy,
	.lookup = timed_lookup,
	.forget = lsq_op_forget,
	.forget_multi = lsq_op_forget_multi,
	.getattr = timed_getattr,
	.readlink = timed_readlink,
	.open = timed_open,
	.read = timed_read,
	.release = timed_release,
	.opendir = timed_opendir,
	.readdir = timed_readdir,
	.readdirplus = timed_readdirplus,
	.releasedir = timed_releasedir,
	.statfs = timed_statfs,
	.getxattr = timed_getxattr,
	.listxattr = timed_listxattr,
};
