/* SPDX-License-Identifier: MIT */
/*
 * disk_cache.c - see disk_cache.h.
 *
 * Files per image, named by a 128-bit hash of its identity:
 *   NAME.data  a sparse file as large as the image; a cached range sits at
 *              its own image offset, so no allocator is needed.
 *   NAME.log   a 32-byte header, then 32-byte records, each "bytes
 *              [off, off+len) have CRC c" (ADD) or "[off, off+len) is gone"
 *              (DROP), each with a CRC of its own so a torn tail is skipped.
 *   NAME.lock  flock()ed by the owning daemon; never renamed (the log is,
 *              when compacted). It is unlinked last, under its flock, when
 *              the cache is removed; an open that finds its locked file
 *              gone from the directory tries again.
 *   location-HASH  (HASH: of a location, the URL and offset) the NAME of
 *              the image last opened there. A location keeps one image's
 *              files: the next version's open removes the files of the one
 *              before (on a thread: that can take a second), or, while a
 *              daemon still holds them, that daemon does at close. Without
 *              this every version published at a URL would keep a cache of
 *              its own for ever.
 *
 * Store order: data first (pwrite), then its ADD record (one O_APPEND
 * write). A kill -9 between the two leaves bytes that no record names;
 * open punches every allocated extent that no live record covers, so the
 * budget holds across crashes. Reads check the CRC, so bytes that never
 * reached the disk, or that a racing eviction punched, read as a miss.
 *
 * In memory: shards by offset, each a hash table plus a CLOCK ring with
 * its own mutex and an equal share of the budget.
 */
#include "cache/disk_cache.h"
#include "cache/clock_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/endian.h"
#include "common/file_io.h"
#include "common/log.h"
#include "lsq/error.h"

#define DC_SHARDS 16
#define DC_REC 32
#define DC_MAGIC "SQLZDC01"
#define DC_COMPACT_SLACK 1024  /* dead records tolerated before a rewrite */

enum { REC_ADD = 1, REC_DROP = 2 };

/* node.key is the range's image offset */
struct dc_entry {
	struct lsq_clock_node node;      /* first: entries are nodes */
	uint32_t len, crc;
};

struct lsq_disk_cache {
	int data_fd, log_fd, lock_fd;
	uint64_t image_size;
	uint64_t blksize;                /* of the data file's filesystem */
	uint8_t header[DC_REC];
	char *log_path;
	char *dir, name[40];             /* NAME, for removal at close */
	char *location_path;             /* NULL: no location */
	char before[40];                 /* the location's image before */
	pthread_t remover;               /* removing it, when running */
	bool removing;
	struct lsq_clock_shard shards[DC_SHARDS];
	atomic_uint_least64_t hits, misses, writes, corrupt, evictions;
	atomic_bool disabled;            /* a store failed: stop storing */
	atomic_uint_least64_t records;   /* in the log, live or dead */
};

/* ---- hashing ---- */

static uint64_t fnv1a64(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint32_t crc_of(const void *buf, size_t len)
{
	return (uint32_t)crc32_z(crc32_z(0, Z_NULL, 0), buf, len);
}

static struct lsq_clock_shard *shard_of(struct lsq_disk_cache *dc,
					uint64_t off)
{
	return &dc->shards[lsq_clock_mix(off) >> 60];
}

static struct dc_entry *entry_of(struct lsq_clock_node *n)
{
	return (struct dc_entry *)n;
}

static struct dc_entry *shard_find(struct lsq_clock_shard *sh, uint64_t off)
{
	return entry_of(lsq_clock_find(sh, off));
}

/* ---- files ---- */

static void rec_encode(uint8_t r[DC_REC], uint32_t kind, uint64_t off,
		       uint32_t len, uint32_t crc)
{
	memset(r, 0, DC_REC);
	lsq_put64(r, off);
	lsq_put32(r + 8, len);
	lsq_put32(r + 12, crc);
	lsq_put32(r + 16, kind);
	lsq_put32(r + 28, crc_of(r, 28));
}

static void append_record(struct lsq_disk_cache *dc, uint32_t kind,
			  uint64_t off, uint32_t len, uint32_t crc)
{
	uint8_t r[DC_REC];

	rec_encode(r, kind, off, len, crc);
	/* One write on an O_APPEND descriptor: records never interleave. */
	if (write(dc->log_fd, r, DC_REC) != DC_REC) {
		lsq_log_once(UINT64_MAX - 1, LSQ_LOG_WARNING,
			     "cache_dir: cannot append to %s: %s; storing stops",
			     dc->log_path, strerror(errno));
		atomic_store(&dc->disabled, true);
		return;
	}
	atomic_fetch_add_explicit(&dc->records, 1, memory_order_relaxed);
}

/* Ranges are not block aligned, so neighbours share edge blocks. An entry
 * is charged every block it touches; that bounds the space the file takes
 * at the budget. */
static uint32_t charge_of(const struct lsq_disk_cache *dc, uint64_t off,
			  uint32_t len)
{
	uint64_t first = off / dc->blksize;
	uint64_t last = (off + len - 1) / dc->blksize;

	return (uint32_t)((last - first + 1) * dc->blksize);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Free [off, off+len) whole blocks at a time. A hole punched only inside
 * the range would leave its edge blocks allocated for good (zeroed, but
 * shared with a neighbour that may go later): so punch the blocks around
 * it and put the neighbours' bytes in the edge blocks back, if any. A
 * neighbour written in between may be lost; its CRC then fails and it is
 * fetched again. */
static void punch(struct lsq_disk_cache *dc, uint64_t off, uint64_t len)
{
	uint64_t start = off / dc->blksize * dc->blksize;
	uint64_t end = (off + len + dc->blksize - 1) / dc->blksize * dc->blksize;
	size_t head = (size_t)(off - start), tail = (size_t)(end - off - len);
	uint8_t *edge = calloc(2, (size_t)dc->blksize);

	if (!edge)
		return;
	if (end > dc->image_size) {
		end = dc->image_size;
		tail = (size_t)(end - off - len);
	}
	if (head && lsq_pread_full(dc->data_fd, edge, head, start) != LSQ_OK)
		memset(edge, 0, head);
	if (tail && lsq_pread_full(dc->data_fd, edge + dc->blksize, tail,
				   off + len) != LSQ_OK)
		memset(edge + dc->blksize, 0, tail);
	if (fallocate(dc->data_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)start, (off_t)(end - start)) < 0) {
		/* Without holes the budget cannot hold: stop storing. */
		lsq_log_once(UINT64_MAX - 2, LSQ_LOG_WARNING,
			     "cache_dir: cannot free space in the cache file: %s; storing stops",
			     strerror(errno));
		atomic_store(&dc->disabled, true);
		free(edge);
		return;
	}
	if (head && !all_zero(edge, head) &&
	    lsq_pwrite_full(dc->data_fd, edge, head, start) != LSQ_OK)
		atomic_store(&dc->disabled, true);
	if (tail && !all_zero(edge + dc->blksize, tail) &&
	    lsq_pwrite_full(dc->data_fd, edge + dc->blksize, tail,
			    off + len) != LSQ_OK)
		atomic_store(&dc->disabled, true);
	free(edge);
}

/* ---- lookups and stores ---- */

static void drop_if_same(struct lsq_disk_cache *dc, uint64_t off,
			 uint32_t len, uint32_t crc)
{
	struct lsq_clock_shard *sh = shard_of(dc, off);
	struct dc_entry *e;

	pthread_mutex_lock(&sh->mu);
	e = shard_find(sh, off);
	if (e && e->len == len && e->crc == crc)
		lsq_clock_remove(sh, &e->node);
	else
		e = NULL;
	pthread_mutex_unlock(&sh->mu);
	if (e) {
		free(e);
		append_record(dc, REC_DROP, off, len, crc);
	}
}

int lsq_disk_cache_read(struct lsq_disk_cache *dc, void *buf, size_t len,
			uint64_t offset)
{
	struct lsq_clock_shard *sh = shard_of(dc, offset);
	struct dc_entry *e;
	uint32_t crc = 0;
	bool found = false;

	pthread_mutex_lock(&sh->mu);
	e = shard_find(sh, offset);
	if (e && e->len == len) {
		e->node.referenced = true;
		crc = e->crc;
		found = true;
	}
	pthread_mutex_unlock(&sh->mu);
	if (found) {
		if (lsq_pread_full(dc->data_fd, buf, len, offset) == LSQ_OK &&
		    crc_of(buf, len) == crc) {
			atomic_fetch_add_explicit(&dc->hits, 1,
						  memory_order_relaxed);
			return LSQ_OK;
		}
		atomic_fetch_add_explicit(&dc->corrupt, 1,
					  memory_order_relaxed);
		lsq_log_once(offset, LSQ_LOG_WARNING,
			     "cache_dir: cached bytes at 0x%" PRIx64
			     " (%zu) fail their CRC; fetching them again",
			     offset, len);
		drop_if_same(dc, offset, (uint32_t)len, crc);
	}
	atomic_fetch_add_explicit(&dc->misses, 1, memory_order_relaxed);
	return LSQ_ERR_NOT_FOUND;
}

bool lsq_disk_cache_has(struct lsq_disk_cache *dc, size_t len,
			uint64_t offset)
{
	struct lsq_clock_shard *sh = shard_of(dc, offset);
	struct dc_entry *e;
	bool found;

	pthread_mutex_lock(&sh->mu);
	e = shard_find(sh, offset);
	found = e && e->len == len;
	pthread_mutex_unlock(&sh->mu);
	return found;
}

void lsq_disk_cache_write(struct lsq_disk_cache *dc, const void *buf,
			  size_t len, uint64_t offset)
{
	struct lsq_clock_shard *sh = shard_of(dc, offset);
	struct lsq_clock_node *victims = NULL;
	struct dc_entry *e, *fresh;
	uint32_t crc;
	bool room;

	if (atomic_load(&dc->disabled) || len == 0 || len > UINT32_MAX ||
	    offset > dc->image_size || len > dc->image_size - offset ||
	    charge_of(dc, offset, (uint32_t)len) > sh->budget)
		return;
	crc = crc_of(buf, len);
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh)
		return;
	fresh->node.key = offset;
	fresh->len = (uint32_t)len;
	fresh->crc = crc;
	fresh->node.charge = charge_of(dc, offset, (uint32_t)len);

	pthread_mutex_lock(&sh->mu);
	e = shard_find(sh, offset);
	if (e && e->len == len && e->crc == crc) {
		pthread_mutex_unlock(&sh->mu);
		free(fresh);
		return;
	}
	if (e) {  /* a different range at this offset: replace it */
		lsq_clock_remove(sh, &e->node);
		e->node.hnext = victims;
		victims = &e->node;
	}
	while (sh->bytes + fresh->node.charge > sh->budget && sh->hand) {
		e = entry_of(lsq_clock_evict_one(sh));
		e->node.hnext = victims;
		victims = &e->node;
		atomic_fetch_add_explicit(&dc->evictions, 1,
					  memory_order_relaxed);
	}
	/* Reserve now so concurrent stores cannot overshoot the budget;
	 * when writes in flight hold the room, skip this one. */
	room = sh->bytes + fresh->node.charge <= sh->budget;
	if (room)
		sh->bytes += fresh->node.charge;
	pthread_mutex_unlock(&sh->mu);

	while (victims) {
		e = entry_of(victims);
		victims = victims->hnext;
		punch(dc, e->node.key, e->len);
		append_record(dc, REC_DROP, e->node.key, e->len, e->crc);
		free(e);
	}
	if (!room) {
		free(fresh);
		return;
	}
	if (lsq_pwrite_full(dc->data_fd, buf, len, offset) != LSQ_OK) {
		lsq_log_once(UINT64_MAX - 3, LSQ_LOG_WARNING,
			     "cache_dir: cannot write the cache file: %s; storing stops",
			     strerror(errno));
		atomic_store(&dc->disabled, true);
		pthread_mutex_lock(&sh->mu);
		sh->bytes -= fresh->node.charge;
		pthread_mutex_unlock(&sh->mu);
		free(fresh);
		return;
	}
	append_record(dc, REC_ADD, offset, (uint32_t)len, crc);

	pthread_mutex_lock(&sh->mu);
	sh->bytes -= fresh->node.charge;  /* the reservation becomes the entry */
	if (shard_find(sh, offset) || !lsq_clock_insert(sh, &fresh->node)) {
		pthread_mutex_unlock(&sh->mu);
		free(fresh);
		return;
	}
	pthread_mutex_unlock(&sh->mu);
	atomic_fetch_add_explicit(&dc->writes, 1, memory_order_relaxed);
}

void lsq_disk_cache_get_stats(struct lsq_disk_cache *dc,
			      struct lsq_disk_cache_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->hits = atomic_load(&dc->hits);
	out->misses = atomic_load(&dc->misses);
	out->writes = atomic_load(&dc->writes);
	out->corrupt = atomic_load(&dc->corrupt);
	out->evictions = atomic_load(&dc->evictions);
	for (unsigned i = 0; i < DC_SHARDS; i++) {
		pthread_mutex_lock(&dc->shards[i].mu);
		out->bytes += dc->shards[i].bytes;
		out->budget += dc->shards[i].budget;
		pthread_mutex_unlock(&dc->shards[i].mu);
	}
}

/* ---- open: replay the log, enforce the budget, reclaim, compact ---- */

static void apply_record(struct lsq_disk_cache *dc, const uint8_t *r)
{
	uint64_t off = lsq_le64(r);
	uint32_t len = lsq_le32(r + 8), crc = lsq_le32(r + 12);
	uint32_t kind = lsq_le32(r + 16);
	struct lsq_clock_shard *sh;
	struct dc_entry *e;

	if (lsq_le32(r + 28) != crc_of(r, 28) || len == 0 ||
	    off > dc->image_size || len > dc->image_size - off)
		return;  /* torn or foreign: as if never written */
	sh = shard_of(dc, off);
	e = shard_find(sh, off);
	if (e) {
		lsq_clock_remove(sh, &e->node);
		free(e);
	}
	if (kind != REC_ADD)
		return;
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->node.key = off;
	e->len = len;
	e->crc = crc;
	e->node.charge = charge_of(dc, off, len);
	if (!lsq_clock_insert(sh, &e->node))
		free(e);
}

static int replay_log(struct lsq_disk_cache *dc, bool *reset)
{
	uint8_t buf[DC_REC * 2048];
	uint64_t pos = DC_REC, n = 0;
	struct stat st;

	if (fstat(dc->log_fd, &st) < 0)
		return LSQ_ERR_IO;
	*reset = true;
	if ((uint64_t)st.st_size < DC_REC ||
	    lsq_pread_full(dc->log_fd, buf, DC_REC, 0) != LSQ_OK ||
	    memcmp(buf, dc->header, DC_REC) != 0)
		return LSQ_OK;
	*reset = false;
	while (pos + DC_REC <= (uint64_t)st.st_size) {
		uint64_t want = ((uint64_t)st.st_size - pos) / DC_REC * DC_REC;
		ssize_t got;

		if (want > sizeof(buf))
			want = sizeof(buf);
		got = pread(dc->log_fd, buf, want, (off_t)pos);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < DC_REC)
			break;
		for (ssize_t i = 0; i + DC_REC <= got; i += DC_REC, n++)
			apply_record(dc, buf + i);
		pos += (uint64_t)got / DC_REC * DC_REC;
	}
	atomic_store(&dc->records, n);
	/* A torn tail (power loss) would shift every later append. */
	if ((uint64_t)st.st_size % DC_REC &&
	    ftruncate(dc->log_fd, st.st_size / DC_REC * DC_REC) < 0)
		return LSQ_ERR_IO;
	return LSQ_OK;
}

static int cmp_entry_off(const void *a, const void *b)
{
	const struct dc_entry *x = *(struct dc_entry *const *)a;
	const struct dc_entry *y = *(struct dc_entry *const *)b;

	return x->node.key < y->node.key ? -1 : x->node.key > y->node.key;
}

/* Entries of every shard, sorted by offset (caller frees the array). */
static struct dc_entry **sorted_entries(struct lsq_disk_cache *dc, size_t *n)
{
	struct dc_entry **v;
	size_t total = 0, k = 0;

	for (unsigned i = 0; i < DC_SHARDS; i++)
		total += dc->shards[i].count;
	v = malloc((total ? total : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (unsigned i = 0; i < DC_SHARDS; i++) {
		struct lsq_clock_node *e = dc->shards[i].hand;

		for (size_t j = 0; j < dc->shards[i].count; j++, e = e->next)
			v[k++] = entry_of(e);
	}
	qsort(v, k, sizeof(*v), cmp_entry_off);
	*n = k;
	return v;
}

/* Punch every allocated byte that no entry covers: data a crash left
 * without its record. */
static void reclaim(struct lsq_disk_cache *dc, struct dc_entry **v, size_t n)
{
	off_t pos = 0;
	size_t i = 0;

	for (;;) {
		off_t d = lseek(dc->data_fd, pos, SEEK_DATA);
		off_t h;
		uint64_t at;

		if (d < 0)
			break;  /* ENXIO: no data past pos */
		h = lseek(dc->data_fd, d, SEEK_HOLE);
		if (h <= d)
			break;
		at = (uint64_t)d;
		while (i < n && v[i]->node.key + v[i]->len <= at)
			i++;
		for (size_t j = i; j < n && v[j]->node.key < (uint64_t)h; j++) {
			if (v[j]->node.key > at)
				punch(dc, at, v[j]->node.key - at);
			if (v[j]->node.key + v[j]->len > at)
				at = v[j]->node.key + v[j]->len;
		}
		if (at < (uint64_t)h)
			punch(dc, at, (uint64_t)h - at);
		pos = h;
	}
}

/* Rewrite the log with only live records when dead ones dominate. The
 * new log is complete before the rename; a crash before it keeps the old. */
static void compact(struct lsq_disk_cache *dc, struct dc_entry **v, size_t n)
{
	size_t plen = strlen(dc->log_path) + 5;
	char *tmp = malloc(plen);
	int fd;
	bool ok = true;

	if (atomic_load(&dc->records) <= 2 * n + DC_COMPACT_SLACK || !tmp) {
		free(tmp);
		return;
	}
	snprintf(tmp, plen, "%s.new", dc->log_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(tmp);
		return;
	}
	ok = lsq_pwrite_full(fd, dc->header, DC_REC, 0) == LSQ_OK;
	for (size_t i = 0; ok && i < n; i++) {
		uint8_t r[DC_REC];

		rec_encode(r, REC_ADD, v[i]->node.key, v[i]->len, v[i]->crc);
		ok = lsq_pwrite_full(fd, r, DC_REC,
				     (uint64_t)(i + 1) * DC_REC) == LSQ_OK;
	}
	ok = ok && fsync(fd) == 0 && rename(tmp, dc->log_path) == 0;
	close(fd);
	if (!ok) {
		unlink(tmp);
		free(tmp);
		return;
	}
	free(tmp);
	fd = open(dc->log_path, O_RDWR | O_APPEND | O_CLOEXEC);
	if (fd >= 0) {
		close(dc->log_fd);
		dc->log_fd = fd;
		atomic_store(&dc->records, n);
	}
}

static int open_file(const char *dir, const char *name, const char *ext,
		     int flags, char **path_out)
{
	size_t len = strlen(dir) + strlen(name) + strlen(ext) + 3;
	char *path = malloc(len);
	int fd;

	if (!path)
		return -1;
	snprintf(path, len, "%s/%s%s", dir, name, ext);
	fd = open(path, flags | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (path_out && fd >= 0)
		*path_out = path;
	else
		free(path);
	return fd;
}

/* ---- one image per location ---- */

/* NAME (32 hex digits) of a string, and its two halves */
static void name_of(const char *s, char name[40], uint64_t *h1,
		    uint64_t *h2)
{
	*h1 = fnv1a64(0xcbf29ce484222325ull, s);
	*h2 = lsq_clock_mix(fnv1a64(0x84222325cbf29ce4ull, s));
	snprintf(name, 40, "%016" PRIx64 "%016" PRIx64, *h1, *h2);
}

/* Whether fd is still the file at path (a lock file removed under its
 * flock, and perhaps created anew, is not). */
static bool still_at(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The lock last: whoever opens NAME meanwhile finds its lock gone.
 * Whether there was a data file. */
static bool unlink_image(const char *dir, const char *name)
{
	static const char *const ext[] = { ".data", ".log", ".log.new",
					   ".lock" };
	char path[PATH_MAX];
	bool had_data = false;

	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
		if (snprintf(path, sizeof(path), "%s/%s%s", dir, name,
			     ext[i]) < (int)sizeof(path) &&
		    unlink(path) == 0 && i == 0)
			had_data = true;
	return had_data;
}

/* Remove NAME's files unless a daemon holds them (it removes them at
 * close). Best effort. */
static void remove_image(const char *dir, const char *name)
{
	char path[PATH_MAX];
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s.lock", dir, name) >=
	    (int)sizeof(path))
		return;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno != ENOENT)
		return;
	if (fd >= 0 && (flock(fd, LOCK_EX | LOCK_NB) < 0 ||
			!still_at(fd, path))) {
		close(fd);
		return;
	}
	if (unlink_image(dir, name))
		lsq_info("cache_dir %s: removed the cache of the image "
			 "published before at this location", dir);
	if (fd >= 0)
		close(fd);
}

/* The NAME location-HASH names, or "" */
static void read_location(const char *path, char name[40])
{
	char buf[40];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	name[0] = '\0';
	if (fd >= 0)
		close(fd);
	if (n != 33 || buf[32] != '\n' ||
	    strspn(buf, "0123456789abcdef") != 32)
		return;
	memcpy(name, buf, 32);
	name[32] = '\0';
}

/* Written whole or not at all: a fresh file renamed over the old. */
static void write_location(const char *path, const char *name)
{
	(void)lsq_replace_file(path, (const struct lsq_file_part[]){
		{ name, strlen(name) }, { "\n", 1 } }, 2);
}

static void *remover_main(void *arg)
{
	struct lsq_disk_cache *dc = arg;
	struct sched_param sp = { 0 };

	/* behind the start the mount serves, as background fetch is */
	pthread_setname_np(pthread_self(), "sqfs-cache-rm");
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	remove_image(dc->dir, dc->before);
	return NULL;
}

/* Make NAME the image location holds, and remove the one before on a
 * thread of its own: freeing a large sparse file's extents took 0.4-1.3 s
 * here, which the mount must not wait for. Close joins it. */
static void claim_location(struct lsq_disk_cache *dc, const char *location)
{
	sigset_t all, old;
	char loc[40];
	uint64_t h1, h2;

	name_of(location, loc, &h1, &h2);
	if (asprintf(&dc->location_path, "%s/location-%s", dc->dir, loc) < 0) {
		dc->location_path = NULL;
		return;
	}
	read_location(dc->location_path, dc->before);
	if (strcmp(dc->before, dc->name) == 0)
		return;
	write_location(dc->location_path, dc->name);
	if (dc->before[0]) {
		/* signals belong to the daemon's main thread */
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		dc->removing = pthread_create(&dc->remover, NULL, remover_main,
					      dc) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (dc->before[0] && !dc->removing)
		remove_image(dc->dir, dc->before);
}

/* At close, under the flock: an image its location no longer names is
 * removed (a newer version was opened there while this one ran). */
static void leave_location(struct lsq_disk_cache *dc)
{
	char now[40];

	if (!dc->location_path)
		return;
	read_location(dc->location_path, now);
	if (now[0] && strcmp(now, dc->name) != 0 &&
	    unlink_image(dc->dir, dc->name))
		lsq_info("cache_dir %s: removed this image's cache, as a "
			 "newer one was opened at its location", dc->dir);
}

/* Take NAME's lock, again if the file was removed (and perhaps created
 * anew) between our open and our flock. */
static int lock_image(struct lsq_disk_cache *dc, const char *dir,
		      char *err, size_t errlen)
{
	for (int tries = 0; tries < 4; tries++) {
		char *path = NULL;
		bool ours;

		dc->lock_fd = open_file(dir, dc->name, ".lock", O_RDWR, &path);
		if (dc->lock_fd < 0) {
			snprintf(err, errlen, "cache_dir %s: %s", dir,
				 strerror(errno));
			return LSQ_ERR_IO;
		}
		if (flock(dc->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			if (errno == EWOULDBLOCK)
				snprintf(err, errlen,
					 "cache_dir %s: this image's cache is in use by another daemon",
					 dir);
			else
				snprintf(err, errlen, "cache_dir %s: lock: %s",
					 dir, strerror(errno));
			free(path);
			return LSQ_ERR_IO;
		}
		ours = still_at(dc->lock_fd, path);
		free(path);
		if (ours)
			return LSQ_OK;
		close(dc->lock_fd);
		dc->lock_fd = -1;
	}
	snprintf(err, errlen, "cache_dir %s: this image's cache is being "
		 "removed by another daemon", dir);
	return LSQ_ERR_IO;
}

int lsq_disk_cache_open(const char *dir, const char *identity,
			const char *location, uint64_t image_size,
			uint64_t budget, struct lsq_disk_cache **out,
			char *err, size_t errlen)
{
	struct lsq_disk_cache *dc;
	struct dc_entry **v;
	uint64_t h1, h2;
	struct stat st;
	size_t n = 0;
	bool reset;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cache_dir %s: %s", dir, strerror(errno));
		return LSQ_ERR_IO;
	}
	dc = calloc(1, sizeof(*dc));
	if (!dc)
		return LSQ_ERR_NOMEM;
	dc->data_fd = dc->log_fd = dc->lock_fd = -1;
	dc->image_size = image_size;
	for (unsigned i = 0; i < DC_SHARDS; i++) {
		pthread_mutex_init(&dc->shards[i].mu, NULL);
		dc->shards[i].budget = budget / DC_SHARDS;
	}
	name_of(identity, dc->name, &h1, &h2);
	memcpy(dc->header, DC_MAGIC, 8);
	lsq_put64(dc->header + 8, image_size);
	lsq_put64(dc->header + 16, h1);
	lsq_put64(dc->header + 24, h2);
	dc->dir = strdup(dir);
	if (!dc->dir) {
		lsq_disk_cache_close(dc);
		return LSQ_ERR_NOMEM;
	}
	if (lock_image(dc, dir, err, errlen) != LSQ_OK) {
		lsq_disk_cache_close(dc);
		return LSQ_ERR_IO;
	}
	dc->log_fd = open_file(dir, dc->name, ".log", O_RDWR | O_APPEND,
			       &dc->log_path);
	dc->data_fd = open_file(dir, dc->name, ".data", O_RDWR, NULL);
	if (dc->log_fd < 0 || dc->data_fd < 0 || fstat(dc->data_fd, &st) < 0)
		goto fail_errno;
	dc->blksize = st.st_blksize >= 512 && st.st_blksize <= (1 << 20)
			      ? (uint64_t)st.st_blksize : 4096;
	if (replay_log(dc, &reset) != LSQ_OK)
		goto fail_errno;
	if (reset) {
		if (ftruncate(dc->log_fd, 0) < 0 || ftruncate(dc->data_fd, 0) < 0 ||
		    write(dc->log_fd, dc->header, DC_REC) != DC_REC)
			goto fail_errno;
	}
	if (fstat(dc->data_fd, &st) < 0)
		goto fail_errno;
	if ((uint64_t)st.st_size != image_size &&
	    ftruncate(dc->data_fd, (off_t)image_size) < 0)
		goto fail_errno;

	/* A smaller budget than last time: evict down to it. */
	for (unsigned i = 0; i < DC_SHARDS; i++) {
		struct lsq_clock_shard *sh = &dc->shards[i];

		while (sh->bytes > sh->budget && sh->hand) {
			struct dc_entry *e = entry_of(lsq_clock_evict_one(sh));

			append_record(dc, REC_DROP, e->node.key, e->len, e->crc);
			free(e);
		}
	}
	v = sorted_entries(dc, &n);
	if (v) {
		reclaim(dc, v, n);
		compact(dc, v, n);
		free(v);
	}
	if (location)
		claim_location(dc, location);
	*out = dc;
	return LSQ_OK;

fail_errno:
	snprintf(err, errlen, "cache_dir %s: %s", dir, strerror(errno));
	lsq_disk_cache_close(dc);
	return LSQ_ERR_IO;
}

void lsq_disk_cache_close(struct lsq_disk_cache *dc)
{
	if (!dc)
		return;
	for (unsigned i = 0; i < DC_SHARDS; i++) {
		struct lsq_clock_shard *sh = &dc->shards[i];

		while (sh->hand) {
			struct dc_entry *e = entry_of(sh->hand);

			lsq_clock_remove(sh, &e->node);
			free(e);
		}
		free(sh->buckets);
		pthread_mutex_destroy(&sh->mu);
	}
	if (dc->removing)
		pthread_join(dc->remover, NULL);
	leave_location(dc);
	if (dc->data_fd >= 0)
		close(dc->data_fd);
	if (dc->log_fd >= 0)
		close(dc->log_fd);
	if (dc->lock_fd >= 0)
		close(dc->lock_fd);  /* releases the flock */
	free(dc->log_path);
	free(dc->location_path);
	free(dc->dir);
	free(dc);
}
