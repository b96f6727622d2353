/* SPDX-License-Identifier: MIT */
/*
 * options.h - the command line of sqfs-lazy-mount.
 *
 * Our own -o options are consumed here; everything else given with -o is
 * handed to libfuse (fuse_parse_conn_info_opts(), then fuse_session_new()),
 * which rejects what it does not know, still before anything is mounted.
 */
#ifndef LSQ_DAEMON_OPTIONS_H
#define LSQ_DAEMON_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "fuse/mount.h"
#include "lsq/image.h"
#include "lsq/source.h"

/* FUSE workers per online CPU: most of a worker's time over HTTP is spent
 * waiting on the network, and the kernel sends a sequential reader's
 * readahead as several requests at once. */
#define LSQ_THREADS_PER_CPU 8
#define LSQ_MAX_THREADS 1024u
#define LSQ_MAX_DECOMP_CONTEXTS 4096u
/* The image is immutable: names and attributes can be cached for as long
 * as the kernel likes. */
#define LSQ_DEFAULT_TIMEOUT 86400.0
#define LSQ_MAX_HTTP_CONNECTIONS 64u
#define LSQ_MAX_HTTP_READAHEAD (64u * 1024u * 1024u)
/* Caching layer defaults (docs/caching.md): remote images get a RAM cache
 * of what was fetched and their metadata prefetched; local files have the
 * kernel's page cache under them and get neither unless asked. */
#define LSQ_DEFAULT_REMOTE_BLOCK_CACHE (256u * 1024u * 1024u)
#define LSQ_DEFAULT_CACHE_SIZE (1024ull * 1024u * 1024u)

enum lsq_mount_mode {
	LSQ_MODE_MOUNT,
	LSQ_MODE_HELP,
	LSQ_MODE_VERSION,
	LSQ_MODE_STATS,  /* --stats MOUNTPOINT */
	LSQ_MODE_STATUS, /* --status MOUNTPOINT */
	LSQ_MODE_TAKEOVER, /* --takeover MOUNTPOINT */
};

#define LSQ_OFFSET_AUTO UINT64_MAX

/* -o verify= may name this many keys. */
#define LSQ_MAX_VERIFY_KEYS 16

struct lsq_mount_options {
	enum lsq_mount_mode mode;
	const char *image;      /* borrowed from argv */
	/* owned; made absolute for a mount, since the daemon moves to "/"
	 * and must still find it to unmount */
	char *mountpoint;
	bool foreground;
	bool debug;
	bool single_thread;
	enum lsq_log_level log_level;  /* -o loglevel=, default info */
	bool ignored_rw;        /* -o rw was given (and is ignored) */
	/* -o offset=; LSQ_OFFSET_AUTO: 0, or a SIF file's partition
	 * (-o sif_partition=ID, 0: the primary system partition) */
	uint64_t offset;
	unsigned sif_partition;
	unsigned threads;
	/* FUSE over io_uring where the kernel offers it: 1 asked for, -1 by
	 * default (used, and quiet where absent), 0 off */
	int io_uring;
	struct lsq_image_options image_opts;
	double entry_timeout;
	double attr_timeout;
	unsigned max_read;      /* 0: not given */
	/* -o uid=, -o gid=: the owners of every entry, as squashfuse's
	 * options set them; LSQ_KEEP_OWNER: the image's */
	uint32_t uid, gid;
	bool dev;
	bool suid;
	bool allow_other;
	/* for http://, https:// and file:// images; strings owned */
	struct lsq_http_options http_opts;
	/* caching layer; dir owned. block_cache and prefetch_metadata have
	 * per-source defaults, so "not given" is kept apart. */
	struct lsq_cache_options cache_opts;
	bool block_cache_given;
	int prefetch_metadata;  /* -1 not given, 0, 1 */
	char *record;           /* -o record=PATH, owned; NULL: off */
	char *metrics;          /* -o metrics=HOST:PORT|unix:PATH, owned */
	char *prefetch;         /* -o prefetch=, owned; NULL: auto */
	/* -o background=: the fraction of the image to fetch behind the
	 * readers, 0 off, -1 auto (all of it, for URLs) */
	double background;
	/* -o learn=: with cache_dir, learn what starts read (default on) */
	bool learn;
	/* -o takeover: a dead daemon's mount is taken over by a new one;
	 * -1 auto (the default): unless requests come over io_uring rings */
	int takeover;
	/* -o verify=: the public keys given (owned), or -1 auto (the keys
	 * in LSQ_KEYS_DIR, if any), 0 off; -o manifest=PATH (owned) */
	char *verify_keys[LSQ_MAX_VERIFY_KEYS];
	unsigned nverify_keys;
	int verify;
	char *manifest;
	/* argv for libfuse: argv[0], then -o options (owned) */
	struct fuse_args fuse_args;
};

/* Parse argv into opt. On a usage error a one-line message has been printed
 * and LSQ_ERR_INVALID is returned; LSQ_ERR_NOMEM otherwise. opt must be
 * released with lsq_mount_options_fini() in every case. */
int lsq_mount_options_parse(struct lsq_mount_options *opt, int argc,
			    char **argv);

void lsq_mount_options_fini(struct lsq_mount_options *opt);

/* The caching options for this image, defaults resolved by its kind
 * (remote or local file). */
struct lsq_cache_options
lsq_mount_cache_options(const struct lsq_mount_options *opt, bool remote);

/* The --help text. */
void lsq_mount_options_help(FILE *out);

/* A size or offset: decimal or 0x hex, optional K/M/G/T suffix (powers of
 * 1024). LSQ_ERR_INVALID for anything else, LSQ_ERR_OVERFLOW past 2^64. */
int lsq_parse_size(const char *s, uint64_t *out);

/* The default of -o threads: LSQ_THREADS_PER_CPU per online CPU, at least
 * 8, at most LSQ_MAX_THREADS. */
unsigned lsq_default_threads(void);

#endif
