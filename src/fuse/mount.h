/* SPDX-License-Identifier: MIT */
/*
 * mount.h - state shared by one mount's FUSE operations.
 *
 * Every request reaches it through fuse_req_userdata(); there is no other
 * mutable global in the FUSE layer. All fields but the handle list are set
 * before the session starts and read-only afterwards, so the worker threads
 * share them unlocked.
 */
#ifndef LSQ_FUSE_MOUNT_H
#define LSQ_FUSE_MOUNT_H

/* 3.12 is the first API with fuse_loop_cfg_*(); meson asks for it. */
#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "fuse/page_store.h"
#include "lsq/image.h"

/* The root xattr through which a running mount reports its counters. It is
 * served only when the image has no real attribute of that name, and is not
 * listed by listxattr. */
#define LSQ_STATS_XATTR "user.sqfs-lazy.stats"
/* The same for what --status shows beside the counters: the image, since
 * when, the last problem logged ("key value" lines, values are text). */
#define LSQ_INFO_XATTR "user.sqfs-lazy.info"

#define LSQ_KEEP_OWNER UINT32_MAX

struct lsq_handle;
struct lsq_recorder;
struct lsq_uring;

struct lsq_mount {
	struct lsq_image *img;
	/* for --status: the image as shown (no credentials), the mount
	 * point, when it was mounted; set before the mount */
	const char *shown_image;
	const char *mountpoint;
	time_t started;
	lsq_inode_ref root;
	double entry_timeout;   /* seconds; the image never changes */
	double attr_timeout;
	unsigned max_read;      /* -o max_read, 0 when not given */
	/* -o uid=, -o gid=: every entry's owners; LSQ_KEEP_OWNER: the
	 * image's */
	uint32_t uid, gid;
	struct fuse_session *se; /* set by the daemon before the loop runs */
	struct lsq_uring *uring; /* same; NULL: requests over /dev/fuse */
	/* a local file: a metadata miss is a pread, never a network wait */
	bool local_image;
	struct lsq_page_store page_store; /* initialised in init */
	struct lsq_recorder *recorder; /* -o record=; NULL: off */
	/* -o record=: each file a start reads must reach the recorder, so
	 * no small file is pushed to the page cache beside another one's
	 * read (page_store.h); a learned profile needs only the blocks */
	bool no_neighbour_push;
	/* set once in init, before any other request */
	bool zero_open;         /* answer open with ENOSYS (no open/release) */
	bool zero_opendir;      /* same for opendir/releasedir */
	/* libfuse's own connection options (max_readahead, ...), applied in
	 * init after our defaults; NULL when none were given */
	struct fuse_conn_info_opts *conn_opts;
	/* Open files and directories. Only so the ones whose release the
	 * kernel drops at unmount can be freed in destroy; reads never
	 * touch the list. */
	pthread_mutex_t handles_lock;
	struct lsq_handle *handles; /* protected by handles_lock */
	/* How often the connection changed hands before this daemon took
	 * it (src/daemon/conn_guard.c), by reason */
	unsigned takeovers_crash, takeovers_upgrade;
	/* the guard can start a new daemon on the connection now */
	atomic_bool takeover_ready;
};

extern const struct fuse_lowlevel_ops lsq_fuse_ops;

/* The image's counters (lsq_image_counters) and the daemon's: FUSE ring
 * threads and requests, resident memory, the buffer pool. */
void lsq_mount_counters(const struct lsq_mount *m, lsq_counter_fn fn,
			void *ctx);

#endif
