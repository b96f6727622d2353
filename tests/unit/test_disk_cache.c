/* SPDX-License-Identifier: MIT */
/*
 * test_disk_cache.c - the persistent cache on a real directory: reuse after
 * reopen, CRC checks, a torn log, the budget on disk, reclaim of unlogged
 * bytes, one owner at a time, kill -9 in the middle of heavy stores, and
 * one image per location (a next version's open removes the last one's
 * files, or its daemon does at close).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/disk_cache.h"
#include "harness/check.h"
#include "lsq/error.h"

#define IMAGE_SIZE (64u << 20)
#define RANGE_LEN 40000u  /* not a multiple of any block size */

static char dir[256];

/* The bytes of the "image" at off: a pure function, so any process can
 * check what it reads. */
static void image_bytes(uint8_t *buf, size_t len, uint64_t off)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t x = (off + i) * 0x9e3779b97f4a7c15ull;

		buf[i] = (uint8_t)(x >> 56);
	}
}

static uint64_t range_off(unsigned i)
{
	return (uint64_t)i * RANGE_LEN;
}

static struct lsq_disk_cache *open_cache(uint64_t budget, int expect)
{
	struct lsq_disk_cache *dc = NULL;
	char err[256] = "";
	int ret = lsq_disk_cache_open(dir, "http://example.test/img\n1\nETAG",
				      NULL, IMAGE_SIZE, budget, &dc, err,
				      sizeof(err));

	if (ret != expect)
		fprintf(stderr, "open: %d (%s)\n", ret, err);
	CHECK_EQ_INT(ret, expect);
	if (expect != LSQ_OK)
		CHECK(strstr(err, "in use by another daemon") != NULL);
	return dc;
}

/* The cache of identity at location in sub (a directory of its own). */
static struct lsq_disk_cache *open_at(const char *sub, const char *identity,
				      const char *location)
{
	struct lsq_disk_cache *dc = NULL;
	char err[256] = "";

	if (lsq_disk_cache_open(sub, identity, location, IMAGE_SIZE, 1u << 30,
				&dc, err, sizeof(err)) != LSQ_OK)
		fprintf(stderr, "open %s: %s\n", sub, err);
	CHECK(dc != NULL);
	return dc;
}

/* Files in sub whose name ends with suffix */
static unsigned count_with(const char *sub, const char *suffix)
{
	DIR *d = opendir(sub);
	struct dirent *e;
	unsigned n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name), k = strlen(suffix);

		n += len >= k && strcmp(e->d_name + len - k, suffix) == 0;
	}
	closedir(d);
	return n;
}

/* count_with(), once it is want or after 10 s */
static unsigned wait_count(const char *sub, const char *suffix, unsigned want)
{
	unsigned n;

	for (int i = 0; (n = count_with(sub, suffix)) != want && i < 1000; i++)
		usleep(10000);
	return n;
}

static void store(struct lsq_disk_cache *dc, unsigned i)
{
	static uint8_t buf[RANGE_LEN];

	image_bytes(buf, RANGE_LEN, range_off(i));
	lsq_disk_cache_write(dc, buf, RANGE_LEN, range_off(i));
}

/* 1 hit with the right bytes, 0 miss; never wrong bytes. */
static int lookup(struct lsq_disk_cache *dc, unsigned i)
{
	static uint8_t got[RANGE_LEN], want[RANGE_LEN];

	if (lsq_disk_cache_read(dc, got, RANGE_LEN, range_off(i)) != LSQ_OK)
		return 0;
	image_bytes(want, RANGE_LEN, range_off(i));
	CHECK(memcmp(got, want, RANGE_LEN) == 0);
	return 1;
}

static char *file_with(const char *suffix)
{
	static char path[512];
	DIR *d = opendir(dir);
	struct dirent *e;

	CHECK(d != NULL);
	path[0] = '\0';
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name), k = strlen(suffix);

		if (n > k && strcmp(e->d_name + n - k, suffix) == 0)
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
	}
	closedir(d);
	CHECK(path[0] != '\0');
	return path;
}

static uint64_t allocated_bytes(void)
{
	struct stat st;

	CHECK(stat(file_with(".data"), &st) == 0);
	return (uint64_t)st.st_blocks * 512u;
}

static void test_reuse_and_crc(void)
{
	struct lsq_disk_cache *dc = open_cache(1u << 30, LSQ_OK);
	struct lsq_disk_cache_stats st;
	int fd;

	for (unsigned i = 0; i < 50; i++)
		store(dc, i);
	CHECK_EQ_INT(lookup(dc, 3), 1);
	CHECK_EQ_INT(lookup(dc, 60), 0);
	lsq_disk_cache_close(dc);

	dc = open_cache(1u << 30, LSQ_OK);
	for (unsigned i = 0; i < 50; i++)
		CHECK_EQ_INT(lookup(dc, i), 1);
	lsq_disk_cache_get_stats(dc, &st);
	CHECK_EQ_INT(st.hits, 50);
	CHECK(st.bytes >= 50ull * RANGE_LEN && st.bytes <= 50ull * (RANGE_LEN + 8192));

	/* flip one byte of range 7 on disk: a miss, counted, never served */
	fd = open(file_with(".data"), O_RDWR);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, "\x5a", 1, (off_t)range_off(7) + 123) == 1);
	close(fd);
	CHECK_EQ_INT(lookup(dc, 7), 0);
	lsq_disk_cache_get_stats(dc, &st);
	CHECK_EQ_INT(st.corrupt, 1);
	store(dc, 7);  /* refetched and stored again */
	CHECK_EQ_INT(lookup(dc, 7), 1);
	lsq_disk_cache_close(dc);
}

static void test_torn_log_and_reclaim(void)
{
	struct lsq_disk_cache *dc;
	int fd;

	/* a torn record at the tail, and bytes no record names */
	fd = open(file_with(".log"), O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	CHECK(write(fd, "torn-record-part", 17) == 17);
	close(fd);
	fd = open(file_with(".data"), O_RDWR);
	CHECK(fd >= 0);
	{
		static uint8_t junk[1 << 20];

		memset(junk, 0xab, sizeof(junk));
		CHECK(pwrite(fd, junk, sizeof(junk), 40u << 20) ==
		      (ssize_t)sizeof(junk));
	}
	fsync(fd);
	close(fd);

	dc = open_cache(1u << 30, LSQ_OK);
	for (unsigned i = 0; i < 50; i++)
		CHECK_EQ_INT(lookup(dc, i), 1);
	/* the unlogged MiB was punched: only the 50 ranges take space */
	CHECK(allocated_bytes() <= 50ull * (RANGE_LEN + 8192));
	/* appends after the torn tail are still read back */
	store(dc, 70);
	lsq_disk_cache_close(dc);
	dc = open_cache(1u << 30, LSQ_OK);
	CHECK_EQ_INT(lookup(dc, 70), 1);
	lsq_disk_cache_close(dc);
}

static void test_budget_and_owner(void)
{
	const uint64_t budget = 2u << 20;
	struct lsq_disk_cache *dc = open_cache(budget, LSQ_OK);
	struct lsq_disk_cache_stats st;
	unsigned hits = 0;

	/* a second daemon on the same image is refused */
	CHECK(open_cache(budget, LSQ_ERR_IO) == NULL);

	for (unsigned i = 0; i < 400; i++)
		store(dc, i);
	lsq_disk_cache_get_stats(dc, &st);
	CHECK(st.bytes <= budget);
	CHECK(st.evictions > 0);
	/* the budget bounds the space on disk, not only the count */
	CHECK(allocated_bytes() <= budget);
	for (unsigned i = 0; i < 400; i++)
		hits += (unsigned)lookup(dc, i);
	CHECK(hits > 0 && hits * (uint64_t)RANGE_LEN <= budget);
	lsq_disk_cache_close(dc);
}

/* A child stores ranges as fast as it can and counts them in memory shared
 * with the parent; once it has stored a random number of them (past the
 * budget's worth: evictions under way) kill -9 it, several times. Every
 * range found afterwards must hold the right bytes, some must be found
 * (the child stored at least one, and the log names it), and the budget
 * must hold. */
static void test_kill9(void)
{
	const unsigned in_budget = (8u << 20) / RANGE_LEN;
	unsigned seed = (unsigned)time(NULL);
	atomic_uint *stored = mmap(NULL, sizeof(*stored),
				   PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	CHECK(stored != MAP_FAILED);
	printf("disk_cache: kill -9 rounds, seed %u\n", seed);
	fflush(stdout);  /* not copied into the children */
	for (int round = 0; round < 6; round++) {
		struct lsq_disk_cache *dc;
		struct lsq_disk_cache_stats st;
		unsigned hits = 0, want;
		time_t deadline = time(NULL) + 120;
		int status;
		pid_t pid;

		atomic_store(stored, 0);
		want = 1 + (unsigned)(rand_r(&seed) % (3 * in_budget));
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			unsigned n = 0;

			dc = open_cache(8u << 20, LSQ_OK);
			for (unsigned i = 0;; i = (i + 7) % 1500) {
				store(dc, i);
				atomic_store(stored, ++n);
			}
		}
		/* the child's count is the event: no fixed sleep */
		while (atomic_load(stored) < want) {
			CHECK(time(NULL) < deadline);
			CHECK(waitpid(pid, &status, WNOHANG) == 0);
			usleep(100);
		}
		CHECK(kill(pid, SIGKILL) == 0);
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK(WIFSIGNALED(status));

		dc = open_cache(8u << 20, LSQ_OK);
		for (unsigned i = 0; i < 1500; i++)
			hits += (unsigned)lookup(dc, i);
		lsq_disk_cache_get_stats(dc, &st);
		CHECK_EQ_INT(st.hits, hits);
		CHECK(hits >= 1);
		CHECK(hits * (uint64_t)RANGE_LEN <= (8u << 20));
		CHECK(allocated_bytes() <= (8u << 20));
		lsq_disk_cache_close(dc);
	}
	munmap(stored, sizeof(*stored));
}

static void damage_location_files(const char *sub)
{
	DIR *d = opendir(sub);
	struct dirent *e;
	char path[600];
	FILE *f;

	CHECK(d != NULL);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "location-", 9) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", sub, e->d_name);
		f = fopen(path, "w");
		CHECK(f != NULL);
		fputs("not a name\n", f);
		fclose(f);
	}
	closedir(d);
}

static unsigned hits_of(struct lsq_disk_cache *dc, unsigned n)
{
	unsigned hits = 0;

	for (unsigned i = 0; i < n; i++)
		hits += (unsigned)lookup(dc, i);
	return hits;
}

static void test_one_image_per_location(void)
{
	static const char v1[] = "http://example.test/app\n1\n0\n\"v1\"";
	static const char v2[] = "http://example.test/app\n1\n0\n\"v2\"";
	static const char v3[] = "http://example.test/app\n1\n0\n\"v3\"";
	static const char other[] = "http://example.test/lib\n1\n0\n\"v1\"";
	static const char at[] = "http://example.test/app\n0";
	struct lsq_disk_cache *dc, *held;
	char sub[300];

	snprintf(sub, sizeof(sub), "%s/location", dir);
	dc = open_at(sub, other, "http://example.test/lib\n0");
	for (unsigned i = 0; i < 10; i++)
		store(dc, i);
	lsq_disk_cache_close(dc);

	/* v1, then v2 at the same location: v1's files go at v2's open */
	dc = open_at(sub, v1, at);
	for (unsigned i = 0; i < 10; i++)
		store(dc, i);
	lsq_disk_cache_close(dc);
	CHECK_EQ_INT(count_with(sub, ".data"), 2);
	dc = open_at(sub, v2, at);
	CHECK_EQ_INT(wait_count(sub, ".lock", 2), 2);  /* removed on a thread */
	CHECK_EQ_INT(count_with(sub, ".data"), 2);
	CHECK_EQ_INT(count_with(sub, ".log"), 2);
	for (unsigned i = 0; i < 5; i++)
		store(dc, i);
	lsq_disk_cache_close(dc);

	/* held by a daemon (v2 now), v3 opened beside it: v2's files stay
	 * while held, and go when it closes; v3 keeps its own */
	held = open_at(sub, v2, at);
	CHECK_EQ_INT(hits_of(held, 10), 5);
	dc = open_at(sub, v3, at);
	store(dc, 0);
	lsq_disk_cache_close(dc);  /* joins its removal, which found v2 held */
	CHECK_EQ_INT(count_with(sub, ".data"), 3);
	CHECK_EQ_INT(hits_of(held, 10), 5);
	lsq_disk_cache_close(held);
	CHECK_EQ_INT(count_with(sub, ".data"), 2);
	CHECK_EQ_INT(count_with(sub, ".lock"), 2);
	dc = open_at(sub, v3, at);
	CHECK_EQ_INT(hits_of(dc, 10), 1);
	lsq_disk_cache_close(dc);

	/* another location was never touched */
	dc = open_at(sub, other, "http://example.test/lib\n0");
	CHECK_EQ_INT(hits_of(dc, 10), 10);
	lsq_disk_cache_close(dc);

	/* a damaged location file names nothing: nothing is removed on its
	 * word, and the next open writes it whole again */
	damage_location_files(sub);
	dc = open_at(sub, v1, at);
	CHECK_EQ_INT(count_with(sub, ".data"), 3);
	CHECK_EQ_INT(hits_of(dc, 10), 0);  /* v1's cache was removed before */
	lsq_disk_cache_close(dc);
	dc = open_at(sub, v3, at);  /* v1 was last: its files go now */
	CHECK_EQ_INT(wait_count(sub, ".lock", 2), 2);
	CHECK_EQ_INT(count_with(sub, ".data"), 2);
	CHECK_EQ_INT(hits_of(dc, 10), 1);
	lsq_disk_cache_close(dc);
	CHECK_EQ_INT(count_with(sub, ".lock"), 2);
	/* and nothing else: two images' three files, two locations, . and .. */
	CHECK_EQ_INT(count_with(sub, ""), 2 * 3 + 2 + 2);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/lsq-dc-XXXXXX", tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	test_reuse_and_crc();
	test_torn_log_and_reclaim();
	test_budget_and_owner();
	test_kill9();
	test_one_image_per_location();
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		CHECK(system(cmd) == 0);
	}
	printf("disk_cache: ok\n");
	return 0;
}
