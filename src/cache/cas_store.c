/* SPDX-License-Identifier: MIT */
/* cas_store.c - see cas_store.h. */
#include "cache/cas_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/clock_shard.h"
#include "common/endian.h"
#include "common/file_io.h"
#include "common/hex.h"
#include "common/log.h"
#include "lsq/error.h"

#define CAS_SHARDS 16
#define CAS_CHARGE_UNIT 4096u  /* files take whole filesystem blocks */
#define CAS_STALE_TMP 600      /* seconds: an older temporary file is a
				* crashed writer's */
/* "XX/" + 62 hex digits: the name of a unit's file under DIR/cas */
#define CAS_NAME_LEN (3 + 2 * (LSQ_CAS_DIGEST_SIZE - 1))

/* node.key: the digest's first 8 bytes (SHA-256 output is uniform) */
struct cas_entry {
	struct lsq_clock_node node;      /* first: entries are nodes */
	uint8_t digest[LSQ_CAS_DIGEST_SIZE];
};

struct lsq_cas_store {
	int dir_fd;                      /* DIR/cas */
	char *path;                      /* DIR/cas, for messages */
	struct lsq_clock_shard shards[CAS_SHARDS];
	atomic_uint_least64_t hits, misses, writes, evictions;
	atomic_uint_least64_t tmp_seq;
	atomic_bool disabled;            /* a store failed: stop storing */
	pthread_t scanner;               /* indexes what open found */
	bool scanning;                   /* scanner was started */
	atomic_bool stop;                /* close: the scanner ends early */
};

/* "xx/" then the other digest bytes: 256 subdirectories. */
static void name_of(const uint8_t *d, char out[CAS_NAME_LEN + 1])
{
	lsq_hex_encode(d, 1, out);
	out[2] = '/';
	lsq_hex_encode(d + 1, LSQ_CAS_DIGEST_SIZE - 1, out + 3);
}

/* The digest of the file name in subdirectory first; false for any other
 * name (ours are lower-case hex only). */
static bool digest_of_name(unsigned first, const char *name, uint8_t *d)
{
	if (strlen(name) != 2 * (LSQ_CAS_DIGEST_SIZE - 1))
		return false;
	d[0] = (uint8_t)first;
	return lsq_hex_decode(name, LSQ_CAS_DIGEST_SIZE - 1, d + 1);
}

static uint32_t charge_of(uint64_t len)
{
	return (uint32_t)((len + CAS_CHARGE_UNIT - 1) / CAS_CHARGE_UNIT *
			  CAS_CHARGE_UNIT);
}

static struct lsq_clock_shard *shard_of(struct lsq_cas_store *cas,
					const uint8_t *d)
{
	return &cas->shards[lsq_clock_mix(lsq_le64(d)) >> 60];
}

/* The entry of digest d. *clash: another digest holds its key (1 in 2^64
 * a pair); such a unit is not indexed, so it is never stored. */
static struct cas_entry *find(struct lsq_clock_shard *sh, const uint8_t *d,
			      bool *clash)
{
	struct cas_entry *e =
		(struct cas_entry *)lsq_clock_find(sh, lsq_le64(d));

	*clash = e && memcmp(e->digest, d, LSQ_CAS_DIGEST_SIZE) != 0;
	return *clash ? NULL : e;
}

/* Make room for charge bytes in sh (caller holds mu): victims go on *out
 * to be unlinked after the lock is dropped. */
static void evict_for(struct lsq_cas_store *cas, struct lsq_clock_shard *sh,
		      uint64_t charge, struct lsq_clock_node **out)
{
	while (sh->bytes + charge > sh->budget && sh->hand) {
		struct lsq_clock_node *n = lsq_clock_evict_one(sh);

		n->hnext = *out;
		*out = n;
		atomic_fetch_add_explicit(&cas->evictions, 1,
					  memory_order_relaxed);
	}
}

static void unlink_victims(struct lsq_cas_store *cas,
			   struct lsq_clock_node *victims)
{
	char name[CAS_NAME_LEN + 1];

	while (victims) {
		struct cas_entry *e = (struct cas_entry *)victims;

		victims = victims->hnext;
		name_of(e->digest, name);
		(void)unlinkat(cas->dir_fd, name, 0);
		free(e);
	}
}

/* Index a unit found on disk (budget permitting); used: just read. */
static void adopt(struct lsq_cas_store *cas, const uint8_t *d, uint64_t len,
		  bool used)
{
	struct lsq_clock_shard *sh = shard_of(cas, d);
	struct lsq_clock_node *victims = NULL;
	struct cas_entry *e = calloc(1, sizeof(*e));
	bool clash;

	if (!e)
		return;
	memcpy(e->digest, d, LSQ_CAS_DIGEST_SIZE);
	e->node.key = lsq_le64(d);
	e->node.charge = charge_of(len);
	e->node.referenced = used;
	pthread_mutex_lock(&sh->mu);
	if (find(sh, d, &clash) || clash || e->node.charge > sh->budget) {
		pthread_mutex_unlock(&sh->mu);
		free(e);
		return;
	}
	evict_for(cas, sh, e->node.charge, &victims);
	if (!lsq_clock_insert(sh, &e->node))
		free(e);
	pthread_mutex_unlock(&sh->mu);
	unlink_victims(cas, victims);
}

/* The file is gone (another daemon evicted it) or damaged: forget it. */
static void forget(struct lsq_cas_store *cas, const uint8_t *d)
{
	struct lsq_clock_shard *sh = shard_of(cas, d);
	struct cas_entry *e;
	bool clash;

	pthread_mutex_lock(&sh->mu);
	e = find(sh, d, &clash);
	if (e)
		lsq_clock_remove(sh, &e->node);
	pthread_mutex_unlock(&sh->mu);
	free(e);
}

int lsq_cas_read(struct lsq_cas_store *cas,
		 const uint8_t digest[LSQ_CAS_DIGEST_SIZE], void *buf,
		 size_t len)
{
	struct lsq_clock_shard *sh = shard_of(cas, digest);
	char name[CAS_NAME_LEN + 1];
	struct cas_entry *e;
	struct stat st;
	bool clash, known = false;
	int fd, ret = LSQ_ERR_NOT_FOUND;

	name_of(digest, name);
	fd = openat(cas->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    (uint64_t)st.st_size == len)
			ret = lsq_pread_full(fd, buf, len, 0);
		else  /* a digest has one length: this file is damaged */
			(void)unlinkat(cas->dir_fd, name, 0);
		close(fd);
	}
	if (ret != LSQ_OK) {
		if (fd >= 0 || errno == ENOENT)
			forget(cas, digest);
		atomic_fetch_add_explicit(&cas->misses, 1,
					  memory_order_relaxed);
		return LSQ_ERR_NOT_FOUND;
	}
	pthread_mutex_lock(&sh->mu);
	e = find(sh, digest, &clash);
	if (e) {
		e->node.referenced = true;
		known = true;
	}
	pthread_mutex_unlock(&sh->mu);
	if (!known && !clash)  /* stored by another daemon since open */
		adopt(cas, digest, len, true);
	atomic_fetch_add_explicit(&cas->hits, 1, memory_order_relaxed);
	return LSQ_OK;
}

static void stop_storing(struct lsq_cas_store *cas, const char *what)
{
	lsq_log_once((uint64_t)(uintptr_t)cas, LSQ_LOG_WARNING,
		     "cache_dir: cannot %s in %s: %s; storing stops", what,
		     cas->path, strerror(errno));
	atomic_store(&cas->disabled, true);
}

/* Write a whole file under a temporary name in the unit's directory and
 * rename it into place: readers see the old file or the new, never part. */
static int write_file(struct lsq_cas_store *cas, const char *name,
		      const void *buf, size_t len)
{
	char tmp[CAS_NAME_LEN + 64];
	int fd, ret;

	snprintf(tmp, sizeof(tmp), "%.2s/.tmp.%ld.%llu", name, (long)getpid(),
		 (unsigned long long)atomic_fetch_add(&cas->tmp_seq, 1));
	fd = openat(cas->dir_fd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == ENOENT) {  /* the first unit of XX */
		char sub[3] = { name[0], name[1], '\0' };

		if (mkdirat(cas->dir_fd, sub, 0700) == 0 || errno == EEXIST)
			fd = openat(cas->dir_fd, tmp,
				    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
				    O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return LSQ_ERR_IO;
	ret = lsq_pwrite_full(fd, buf, len, 0);
	if (close(fd) != 0 || ret ||
	    renameat(cas->dir_fd, tmp, cas->dir_fd, name) != 0) {
		int saved = errno;

		(void)unlinkat(cas->dir_fd, tmp, 0);
		errno = saved ? saved : EIO;
		return LSQ_ERR_IO;
	}
	return LSQ_OK;
}

void lsq_cas_write(struct lsq_cas_store *cas,
		   const uint8_t digest[LSQ_CAS_DIGEST_SIZE], const void *buf,
		   size_t len, bool replace)
{
	struct lsq_clock_shard *sh = shard_of(cas, digest);
	struct lsq_clock_node *victims = NULL;
	char name[CAS_NAME_LEN + 1];
	struct cas_entry *e, *fresh;
	uint32_t charge = charge_of(len);
	bool clash, stored, room = true;

	if (atomic_load(&cas->disabled) || len == 0 || charge > sh->budget)
		return;
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh)
		return;
	memcpy(fresh->digest, digest, LSQ_CAS_DIGEST_SIZE);
	fresh->node.key = lsq_le64(digest);
	fresh->node.charge = charge;

	pthread_mutex_lock(&sh->mu);
	e = find(sh, digest, &clash);
	if (clash || (e && !replace)) {
		if (e)
			e->node.referenced = true;
		pthread_mutex_unlock(&sh->mu);
		free(fresh);
		return;
	}
	if (!e) {
		/* Reserve now so concurrent stores cannot overshoot the
		 * budget; when writes in flight hold the room, skip this. */
		evict_for(cas, sh, charge, &victims);
		room = sh->bytes + charge <= sh->budget;
		if (room)
			sh->bytes += charge;
	}
	pthread_mutex_unlock(&sh->mu);
	unlink_victims(cas, victims);
	if (!room) {
		free(fresh);
		return;
	}

	name_of(digest, name);
	stored = write_file(cas, name, buf, len) == LSQ_OK;
	if (stored)
		atomic_fetch_add_explicit(&cas->writes, 1,
					  memory_order_relaxed);
	else
		stop_storing(cas, "store a block");
	if (e) {  /* replaced in place: the entry and its charge stay */
		free(fresh);
		return;
	}
	pthread_mutex_lock(&sh->mu);
	sh->bytes -= charge;  /* the reservation becomes the entry */
	if (!stored || find(sh, digest, &clash) || clash ||
	    !lsq_clock_insert(sh, &fresh->node)) {
		pthread_mutex_unlock(&sh->mu);
		free(fresh);
		return;
	}
	pthread_mutex_unlock(&sh->mu);
}

bool lsq_cas_holds(struct lsq_cas_store *cas,
		   const uint8_t digest[LSQ_CAS_DIGEST_SIZE])
{
	struct lsq_clock_shard *sh = shard_of(cas, digest);
	bool clash, held;

	pthread_mutex_lock(&sh->mu);
	held = find(sh, digest, &clash) != NULL;
	pthread_mutex_unlock(&sh->mu);
	return held;
}

void lsq_cas_get_stats(struct lsq_cas_store *cas, struct lsq_cas_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->hits = atomic_load(&cas->hits);
	out->misses = atomic_load(&cas->misses);
	out->writes = atomic_load(&cas->writes);
	out->evictions = atomic_load(&cas->evictions);
	for (unsigned i = 0; i < CAS_SHARDS; i++) {
		pthread_mutex_lock(&cas->shards[i].mu);
		out->bytes += cas->shards[i].bytes;
		out->budget += cas->shards[i].budget;
		pthread_mutex_unlock(&cas->shards[i].mu);
	}
}

/* ---- open: index what the store holds ---- */

/* One subdirectory, if any: index its units, remove what a crashed
 * writer left. */
static void scan_subdir(struct lsq_cas_store *cas, unsigned first, time_t now)
{
	uint8_t d[LSQ_CAS_DIGEST_SIZE] = { (uint8_t)first };
	char sub[3];
	struct dirent *de;
	DIR *dir;
	int fd;

	lsq_hex_encode(d, 1, sub);
	fd = openat(cas->dir_fd, sub,
		    O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	while ((de = readdir(dir)) != NULL && !atomic_load(&cas->stop)) {
		struct stat st;

		if ((de->d_type != DT_REG && de->d_type != DT_UNKNOWN) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (strncmp(de->d_name, ".tmp.", 5) == 0) {
			if (now - st.st_mtime > CAS_STALE_TMP)
				(void)unlinkat(fd, de->d_name, 0);
		} else if (digest_of_name(first, de->d_name, d)) {
			if (st.st_size > 0)
				adopt(cas, d, (uint64_t)st.st_size, false);
			else  /* a crash between create and write */
				(void)unlinkat(fd, de->d_name, 0);
		}
	}
	closedir(dir);
}

/* Listing a store of many units takes seconds with a cold dentry cache
 * (50,000 files: 2.3 s here): the mount must not wait for it. Reads open
 * files by name and need no index; stores and evictions work on what is
 * indexed so far, and a smaller budget than last time is reached as the
 * scan adopts the files. */
static void *scanner(void *arg)
{
	struct lsq_cas_store *cas = arg;
	time_t now = time(NULL);

	for (unsigned i = 0; i < 256 && !atomic_load(&cas->stop); i++)
		scan_subdir(cas, i, now);
	return NULL;
}

int lsq_cas_open(const char *dir, uint64_t budget, struct lsq_cas_store **out,
		 char *err, size_t errlen)
{
	struct lsq_cas_store *cas;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cache_dir %s: %s", dir, strerror(errno));
		return LSQ_ERR_IO;
	}
	cas = calloc(1, sizeof(*cas));
	if (!cas)
		return LSQ_ERR_NOMEM;
	cas->dir_fd = -1;
	if (asprintf(&cas->path, "%s/cas", dir) < 0) {
		free(cas);
		return LSQ_ERR_NOMEM;
	}
	for (unsigned i = 0; i < CAS_SHARDS; i++) {
		pthread_mutex_init(&cas->shards[i].mu, NULL);
		cas->shards[i].budget = budget / CAS_SHARDS;
	}
	if (mkdir(cas->path, 0700) < 0 && errno != EEXIST)
		goto fail;
	cas->dir_fd = open(cas->path,
			   O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (cas->dir_fd < 0)
		goto fail;
	if (pthread_create(&cas->scanner, NULL, scanner, cas) == 0)
		cas->scanning = true;
	else
		scanner(cas);
	*out = cas;
	return LSQ_OK;
fail:
	snprintf(err, errlen, "cache_dir %s: %s", cas->path, strerror(errno));
	lsq_cas_close(cas);
	return LSQ_ERR_IO;
}

void lsq_cas_wait_indexed(struct lsq_cas_store *cas)
{
	if (cas->scanning) {
		pthread_join(cas->scanner, NULL);
		cas->scanning = false;
	}
}

void lsq_cas_close(struct lsq_cas_store *cas)
{
	if (!cas)
		return;
	atomic_store(&cas->stop, true);
	lsq_cas_wait_indexed(cas);
	for (unsigned i = 0; i < CAS_SHARDS; i++) {
		struct lsq_clock_shard *sh = &cas->shards[i];

		while (sh->hand) {
			struct lsq_clock_node *n = sh->hand;

			lsq_clock_remove(sh, n);
			free(n);
		}
		free(sh->buckets);
		pthread_mutex_destroy(&sh->mu);
	}
	if (cas->dir_fd >= 0)
		close(cas->dir_fd);
	free(cas->path);
	free(cas);
}
