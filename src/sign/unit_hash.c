/* SPDX-License-Identifier: MIT */
/*
 * unit_hash.c - hash a manifest's units with one sequential pass over the
 * file.
 *
 * Why threads: SHA-256 runs at about 1.5 GB/s on one core with SHA
 * extensions (less without), slower than a warm page cache or a fast disk
 * delivers; the issue asks that signing cost no more than reading the
 * image once. Units are independent, so hashing spreads over cores while
 * the calling thread keeps the reads sequential: it reads runs of whole
 * units (batches of about 8 MiB) in file order into a ring of buffers,
 * and workers take the batches in the same order and hash each unit. A
 * digest is written only to its own entry, so results need no ordering.
 */
#include "sign/unit_hash.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bind_cpu.h"
#include "common/file_io.h"
#include "format/manifest_sign.h"
#include "lsq/error.h"

#define BATCH_BYTES (8u << 20)
/* Gaps between units are read through (cheaper than a new request to
 * the disk) up to this size; a larger gap starts a new batch. */
#define GAP_MAX (64u << 10)
#define MAX_THREADS 16u

struct slot {
	uint8_t *buf;
	size_t cap;
	size_t first, count; /* entries e[first .. first + count) */
	uint64_t start;      /* file offset of buf[0] */
	bool filled;         /* protected by pipe->mu */
};

struct pipe {
	int fd;
	struct lsq_manifest_entry *e;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct slot *slots;
	unsigned nslots;
	size_t produced;  /* batches filled so far; protected by mu */
	size_t taken;     /* batches taken by workers; protected by mu */
	bool end;         /* no more batches; protected by mu */
	int err;          /* first failure; protected by mu */
	char *errbuf;
	size_t errlen;
};

/* The next batch from entry i: whole units, at most BATCH_BYTES unless a
 * single unit is larger, no gap over GAP_MAX. Returns the entry after. */
static size_t next_batch(const struct lsq_manifest_entry *e, size_t n,
			 size_t i, uint64_t *start, size_t *len)
{
	uint64_t end = e[i].offset + e[i].length;
	size_t j = i + 1;

	*start = e[i].offset;
	for (; j < n; j++) {
		uint64_t next_end = e[j].offset + e[j].length;

		if (e[j].offset - end > GAP_MAX ||
		    next_end - *start > BATCH_BYTES)
			break;
		end = next_end;
	}
	*len = (size_t)(end - *start);
	return j;
}

/* Keep the first failure; the caller holds p->mu. */
static void set_err(struct pipe *p, int err, const char *msg)
{
	if (p->err)
		return;
	p->err = err;
	if (p->errbuf && p->errlen)
		snprintf(p->errbuf, p->errlen, "%s", msg);
}

static void *worker(void *arg)
{
	struct pipe *p = arg;
	struct lsq_sha256 *h = NULL;
	int ret = lsq_sha256_create(&h);

	pthread_mutex_lock(&p->mu);
	if (ret)
		set_err(p, ret, "cannot set up SHA-256");
	for (;;) {
		struct slot *s;
		size_t seq;

		while (!p->err && p->taken == p->produced && !p->end)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->err || p->taken == p->produced)
			break;
		seq = p->taken++;
		s = &p->slots[seq % p->nslots];
		pthread_mutex_unlock(&p->mu);

		for (size_t i = s->first; !ret && i < s->first + s->count; i++)
			ret = lsq_sha256_digest(h, s->buf + (p->e[i].offset - s->start),
						p->e[i].length, p->e[i].digest);

		pthread_mutex_lock(&p->mu);
		if (ret)
			set_err(p, ret, "SHA-256 failed");
		s->filled = false;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	lsq_sha256_destroy(h);
	return NULL;
}

/* The calling thread's part: read every batch, in file order. */
static void produce(struct pipe *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		struct slot *s;
		uint64_t start;
		size_t len, next;
		char msg[160];
		bool stop;
		int ret = LSQ_OK;

		next = next_batch(p->e, n, i, &start, &len);
		pthread_mutex_lock(&p->mu);
		s = &p->slots[p->produced % p->nslots];
		while (!p->err && s->filled)
			pthread_cond_wait(&p->cv, &p->mu);
		stop = p->err != 0;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			return;
		/* the slot is ours until it is marked filled */
		if (s->cap < len) {
			uint8_t *b = realloc(s->buf, len);

			if (b) {
				s->buf = b;
				s->cap = len;
			} else {
				ret = LSQ_ERR_NOMEM;
				snprintf(msg, sizeof(msg),
					 "out of memory for %zu bytes of units",
					 len);
			}
		}
		if (!ret) {
			ret = lsq_pread_full(p->fd, s->buf, len, start);
			if (ret == LSQ_ERR_IO)
				snprintf(msg, sizeof(msg),
					 "read of 0x%llx..0x%llx failed: %s",
					 (unsigned long long)start,
					 (unsigned long long)(start + len),
					 strerror(errno));
			else if (ret)
				snprintf(msg, sizeof(msg),
					 "the file ends inside the units at 0x%llx..0x%llx",
					 (unsigned long long)start,
					 (unsigned long long)(start + len));
		}
		pthread_mutex_lock(&p->mu);
		if (ret) {
			set_err(p, ret, msg);
		} else {
			s->first = i;
			s->count = next - i;
			s->start = start;
			s->filled = true;
			p->produced++;
		}
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		if (ret)
			return;
		i = next;
	}
}

int lsq_hash_units(int fd, struct lsq_manifest_entry *e, size_t n,
		   unsigned threads, char *err, size_t errlen)
{
	struct pipe p = {
		.fd = fd, .e = e, .errbuf = err, .errlen = errlen,
	};
	pthread_t tid[MAX_THREADS];
	unsigned started = 0;

	if (threads == 0)
		threads = lsq_online_cpus();
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	/* two buffers per worker: one hashed, one read ahead */
	p.nslots = 2 * threads;
	p.slots = calloc(p.nslots, sizeof(*p.slots));
	if (!p.slots)
		return LSQ_ERR_NOMEM;
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	for (; started < threads; started++)
		if (pthread_create(&tid[started], NULL, worker, &p))
			break;
	if (!started) {
		p.err = LSQ_ERR_NOMEM;
		snprintf(err, errlen, "cannot start a hashing thread");
	} else {
		produce(&p, n);
	}
	pthread_mutex_lock(&p.mu);
	p.end = true;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
	for (unsigned i = 0; i < p.nslots; i++)
		free(p.slots[i].buf);
	free(p.slots);
	return p.err;
}
