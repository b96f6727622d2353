/* SPDX-License-Identifier: MIT */
/*
 * test_cas_store.c - the content-addressed store on a real directory:
 * units read back as stored, a second open (another daemon, a later
 * mount) finds them, the budget holds on disk, replace overwrites,
 * damaged and half-written files are misses, leftovers of a crashed
 * writer are removed.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "cache/cas_store.h"
#include "harness/check.h"
#include "lsq/error.h"

#define UNIT_LEN 5000u  /* charged as two 4 KiB blocks */

static char dir[256];

/* Unit i's bytes and a digest standing for them (the store trusts its
 * caller for digests: any 32 distinct bytes will do). */
static void unit(unsigned i, uint8_t *buf, uint8_t d[LSQ_CAS_DIGEST_SIZE])
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;

	for (unsigned k = 0; k < UNIT_LEN; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[k] = (uint8_t)x;
	}
	for (unsigned k = 0; k < LSQ_CAS_DIGEST_SIZE; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		d[k] = (uint8_t)(x >> 24);
	}
}

static void path_of(const uint8_t *d, char *out, size_t n)
{
	int k = snprintf(out, n, "%s/cas/%02x/", dir, d[0]);

	for (unsigned i = 1; i < LSQ_CAS_DIGEST_SIZE; i++)
		k += snprintf(out + k, n - (size_t)k, "%02x", d[i]);
}

static struct lsq_cas_store *open_store(uint64_t budget)
{
	struct lsq_cas_store *cas = NULL;
	char err[256] = "";

	CHECK_EQ_INT(lsq_cas_open(dir, budget, &cas, err, sizeof(err)),
		     LSQ_OK);
	lsq_cas_wait_indexed(cas);
	return cas;
}

/* Files (not temporaries) under dir/cas, and their bytes. */
static unsigned count_files(uint64_t *bytes)
{
	char sub[300];
	unsigned n = 0;

	*bytes = 0;
	for (unsigned i = 0; i < 256; i++) {
		DIR *dd;
		struct dirent *de;

		snprintf(sub, sizeof(sub), "%s/cas/%02x", dir, i);
		dd = opendir(sub);
		if (!dd)  /* made with its first unit */
			continue;
		while ((de = readdir(dd)) != NULL) {
			struct stat st;
			char p[600];

			if (de->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", sub, de->d_name);
			CHECK(stat(p, &st) == 0);
			*bytes += (uint64_t)st.st_size;
			n++;
		}
		closedir(dd);
	}
	return n;
}

static void test_store_reopen_replace(void)
{
	uint8_t buf[UNIT_LEN], got[UNIT_LEN], d[LSQ_CAS_DIGEST_SIZE];
	struct lsq_cas_store *cas = open_store(64u << 20), *other;
	struct lsq_cas_stats st;
	char p[600];
	uint64_t bytes;

	for (unsigned i = 0; i < 50; i++) {
		unit(i, buf, d);
		CHECK_EQ_INT(lsq_cas_read(cas, d, got, UNIT_LEN),
			     LSQ_ERR_NOT_FOUND);
		lsq_cas_write(cas, d, buf, UNIT_LEN, false);
	}
	for (unsigned i = 0; i < 50; i++) {
		unit(i, buf, d);
		CHECK_EQ_INT(lsq_cas_read(cas, d, got, UNIT_LEN), LSQ_OK);
		CHECK(memcmp(got, buf, UNIT_LEN) == 0);
	}
	/* a digest has one length: a file of another is damaged, removed */
	unit(0, buf, d);
	CHECK_EQ_INT(lsq_cas_read(cas, d, got, UNIT_LEN - 1),
		     LSQ_ERR_NOT_FOUND);
	CHECK_EQ_INT(lsq_cas_read(cas, d, got, UNIT_LEN), LSQ_ERR_NOT_FOUND);
	CHECK_EQ_INT(count_files(&bytes), 49);
	lsq_cas_get_stats(cas, &st);
	CHECK(st.writes == 50 && st.hits == 50 && st.misses == 52);

	/* another daemon sees them, and what this one stores later */
	other = open_store(64u << 20);
	unit(10, buf, d);
	CHECK_EQ_INT(lsq_cas_read(other, d, got, UNIT_LEN), LSQ_OK);
	CHECK(memcmp(got, buf, UNIT_LEN) == 0);
	unit(1000, buf, d);
	lsq_cas_write(cas, d, buf, UNIT_LEN, false);
	CHECK_EQ_INT(lsq_cas_read(other, d, got, UNIT_LEN), LSQ_OK);

	/* a damaged copy (the caller's digest check fails) is replaced;
	 * without replace, a stored copy is kept */
	unit(20, buf, d);
	path_of(d, p, sizeof(p));
	{
		int fd = open(p, O_WRONLY);

		CHECK(fd >= 0 && pwrite(fd, "XX", 2, 100) == 2);
		close(fd);
	}
	lsq_cas_write(cas, d, buf, UNIT_LEN, false);
	CHECK_EQ_INT(lsq_cas_read(cas, d, got, UNIT_LEN), LSQ_OK);
	CHECK(memcmp(got + 100, "XX", 2) == 0);
	lsq_cas_write(cas, d, buf, UNIT_LEN, true);
	CHECK_EQ_INT(lsq_cas_read(other, d, got, UNIT_LEN), LSQ_OK);
	CHECK(memcmp(got, buf, UNIT_LEN) == 0);
	lsq_cas_close(other);
	lsq_cas_close(cas);
}

static void test_budget_and_leftovers(void)
{
	uint8_t buf[UNIT_LEN], d[LSQ_CAS_DIGEST_SIZE];
	const uint64_t budget = 16 * 4 * 8192;  /* 4 units a shard */
	struct lsq_cas_store *cas;
	struct lsq_cas_stats st;
	struct timeval old[2] = { { 1000000, 0 }, { 1000000, 0 } };
	char p[600], tmp_old[600], tmp_new[600], empty[600];
	uint64_t bytes;
	int fd;

	/* the first test left 50 units, more than this budget holds */
	cas = open_store(budget);
	lsq_cas_get_stats(cas, &st);
	CHECK(st.bytes <= budget);
	for (unsigned i = 2000; i < 2400; i++) {
		unit(i, buf, d);
		lsq_cas_write(cas, d, buf, UNIT_LEN, false);
	}
	lsq_cas_get_stats(cas, &st);
	CHECK(st.bytes <= budget && st.evictions > 300);
	CHECK(count_files(&bytes) * 8192ull <= budget);
	CHECK(bytes * 8192 / UNIT_LEN == st.bytes);
	lsq_cas_close(cas);

	/* a crashed writer's old temporary and an empty file go at open;
	 * a young temporary (a writer at work) stays */
	unit(5000, buf, d);
	path_of(d, p, sizeof(p));
	snprintf(tmp_old, sizeof(tmp_old), "%s/cas/%02x/.tmp.1.1", dir, d[0]);
	snprintf(tmp_new, sizeof(tmp_new), "%s/cas/%02x/.tmp.1.2", dir, d[0]);
	snprintf(empty, sizeof(empty), "%s", p);
	snprintf(tmp_new, sizeof(tmp_new), "%s/cas/%02x", dir, d[0]);
	(void)mkdir(tmp_new, 0700);
	snprintf(tmp_new, sizeof(tmp_new), "%s/cas/%02x/.tmp.1.2", dir, d[0]);
	for (const char *f = tmp_old; f; f = f == tmp_old ? tmp_new :
	     f == tmp_new ? empty : NULL) {
		fd = open(f, O_WRONLY | O_CREAT, 0600);
		CHECK(fd >= 0);
		if (f != empty)
			CHECK(write(fd, buf, 10) == 10);
		close(fd);
	}
	CHECK(utimes(tmp_old, old) == 0);
	cas = open_store(budget);
	CHECK(access(tmp_old, F_OK) != 0);
	CHECK(access(tmp_new, F_OK) == 0);
	CHECK(access(empty, F_OK) != 0);
	lsq_cas_close(cas);
	unlink(tmp_new);
}

struct worker {
	struct lsq_cas_store *cas;
	unsigned first;
};

static void *store_and_read(void *arg)
{
	struct worker *w = arg;
	uint8_t buf[UNIT_LEN], got[UNIT_LEN], d[LSQ_CAS_DIGEST_SIZE];

	for (unsigned i = w->first; i < w->first + 200; i++) {
		unit(i, buf, d);
		lsq_cas_write(w->cas, d, buf, UNIT_LEN, false);
		if (lsq_cas_read(w->cas, d, got, UNIT_LEN) == LSQ_OK)
			CHECK(memcmp(got, buf, UNIT_LEN) == 0);
		(void)lsq_cas_holds(w->cas, d);
	}
	return NULL;
}

/* Stores and reads on two threads while the store indexes what it holds
 * (run under ThreadSanitizer too); the budget holds throughout. */
static void test_while_indexing(void)
{
	const uint64_t budget = 16 * 8 * 8192;
	struct lsq_cas_store *cas = NULL;
	struct worker w[2];
	pthread_t t[2];
	struct lsq_cas_stats st;
	char err[256];

	CHECK_EQ_INT(lsq_cas_open(dir, budget, &cas, err, sizeof(err)),
		     LSQ_OK);
	for (unsigned i = 0; i < 2; i++) {
		w[i].cas = cas;
		w[i].first = 3000 + 200 * i;
		CHECK(pthread_create(&t[i], NULL, store_and_read, &w[i]) == 0);
	}
	for (unsigned i = 0; i < 2; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	lsq_cas_wait_indexed(cas);
	lsq_cas_get_stats(cas, &st);
	CHECK(st.bytes <= budget && st.writes >= 200);
	lsq_cas_close(cas);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char cmd[300];

	snprintf(dir, sizeof(dir), "%s/lsq-cas-XXXXXX", tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	test_store_reopen_replace();
	test_budget_and_leftovers();
	test_while_indexing();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
	printf("cas_store: ok\n");
	return 0;
}
