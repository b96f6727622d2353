/* SPDX-License-Identifier: MIT */
/*
 * bufpool.c - mapped data buffers and their bounded pool (bufpool.h).
 *
 * Each buffer starts with a 64-byte header holding its mapping's length
 * (0: it came from malloc). A freed mapping goes to the pool shard of the
 * CPU the thread runs on, if that shard has room; an allocation takes the
 * smallest pooled mapping that fits and wastes at most an eighth of it,
 * from its own shard first, then from any other it can lock at once.
 * Mappings are counted: past half of the kernel's per-process limit
 * (vm.max_map_count) buffers come from malloc, so that thread stacks,
 * libraries and sockets can still be mapped with a huge cache.
 * Under AddressSanitizer every buffer comes from malloc, so that overruns
 * of a buffer are still caught.
 */
#include "common/bufpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define USE_MAPS false
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define USE_MAPS false
#endif
#endif
#ifndef USE_MAPS
#define USE_MAPS true
#endif

#define HEADER 64
#define MAX_SHARDS 16
#define SLOTS 32

struct header {
	size_t map_len; /* 0: malloc'd */
	size_t len;     /* asked for */
};

_Static_assert(sizeof(struct header) <= HEADER, "bufpool header");

struct slot {
	void *map;
	size_t len;
};

struct shard {
	_Alignas(64) pthread_mutex_t lock;
	size_t bytes;               /* protected by lock */
	unsigned n;                 /* protected by lock */
	struct slot slot[SLOTS];    /* protected by lock */
};

static struct shard shards[MAX_SHARDS];
static unsigned nshards;
static size_t shard_cap;
static size_t page;               /* mappings are whole pages */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_size_t live_maps;  /* ours, pooled ones included */
static size_t max_maps;

/* Half of vm.max_map_count (65530 by default). */
static size_t map_budget(void)
{
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
	unsigned long n = 65530;

	if (f) {
		if (fscanf(f, "%lu", &n) != 1)
			n = 65530;
		fclose(f);
	}
	return n / 2;
}

static void init(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);
	long pg = sysconf(_SC_PAGESIZE);

	page = pg > 0 ? (size_t)pg : 4096;
	max_maps = map_budget();
	nshards = cpus < 1 ? 1 : cpus > MAX_SHARDS ? MAX_SHARDS : (unsigned)cpus;
	shard_cap = LSQ_BUFPOOL_CAP / nshards;
	for (unsigned i = 0; i < MAX_SHARDS; i++)
		pthread_mutex_init(&shards[i].lock, NULL);
}

static struct shard *my_shard(void)
{
	int cpu = sched_getcpu();

	return &shards[(cpu < 0 ? 0u : (unsigned)cpu) % nshards];
}

/* The smallest pooled mapping of need to need + need/8 bytes, taken out
 * of the shard; NULL if none. Called with the shard locked. */
static void *take(struct shard *s, size_t need, size_t *got)
{
	unsigned best = SLOTS;
	void *map;

	for (unsigned i = 0; i < s->n; i++) {
		size_t len = s->slot[i].len;

		if (len >= need && len - need <= need / 8 &&
		    (best == SLOTS || len < s->slot[best].len))
			best = i;
	}
	if (best == SLOTS)
		return NULL;
	map = s->slot[best].map;
	*got = s->slot[best].len;
	s->bytes -= *got;
	s->slot[best] = s->slot[--s->n];
	return map;
}

static void *from_pool(size_t need, size_t *got)
{
	struct shard *own = my_shard();
	void *map;

	pthread_mutex_lock(&own->lock);
	map = take(own, need, got);
	pthread_mutex_unlock(&own->lock);
	for (unsigned i = 0; !map && i < nshards; i++) {
		struct shard *s = &shards[i];

		if (s == own || pthread_mutex_trylock(&s->lock))
			continue;
		map = take(s, need, got);
		pthread_mutex_unlock(&s->lock);
	}
	return map;
}

/* Keeps a freed mapping if the shard has room; false: unmap it. */
static bool to_pool(void *map, size_t len)
{
	struct shard *s = my_shard();
	bool kept = false;

	pthread_mutex_lock(&s->lock);
	if (s->n < SLOTS && s->bytes + len <= shard_cap) {
		s->slot[s->n++] = (struct slot){ map, len };
		s->bytes += len;
		kept = true;
	}
	pthread_mutex_unlock(&s->lock);
	return kept;
}

/* A fresh mapping of len bytes, if we may have one more. */
static void *map_new(size_t len, size_t *got)
{
	void *map = MAP_FAILED;

	if (atomic_fetch_add(&live_maps, 1) < max_maps)
		map = mmap(NULL, len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		atomic_fetch_sub(&live_maps, 1);
		return NULL;
	}
	*got = len;
	return map;
}

void *lsq_bufpool_alloc(size_t len)
{
	struct header *h;
	size_t map_len = 0;

	pthread_once(&once, init);
	if (len > SIZE_MAX - HEADER - page)
		return NULL;
	if (USE_MAPS && len + HEADER >= LSQ_BUFPOOL_MIN) {
		size_t need = (len + HEADER + page - 1) & ~(page - 1);

		h = from_pool(need, &map_len);
		if (!h)
			h = map_new(need, &map_len);
	} else {
		h = NULL;
	}
	if (!h && !(h = aligned_alloc(HEADER, (len + 2 * HEADER - 1) &
						~(size_t)(HEADER - 1))))
		return NULL;
	h->map_len = map_len;
	h->len = len;
	return (char *)h + HEADER;
}

void lsq_bufpool_free(void *p)
{
	struct header *h;

	if (!p)
		return;
	h = (struct header *)((char *)p - HEADER);
	if (!h->map_len) {
		free(h);
	} else if (!to_pool(h, h->map_len)) {
		munmap(h, h->map_len);
		atomic_fetch_sub(&live_maps, 1);
	}
}

size_t lsq_bufpool_footprint(const void *p)
{
	const struct header *h =
		(const struct header *)((const char *)p - HEADER);

	return h->map_len ? h->map_len : h->len + HEADER;
}

uint64_t lsq_bufpool_pooled_bytes(void)
{
	uint64_t sum = 0;

	pthread_once(&once, init);
	for (unsigned i = 0; i < nshards; i++) {
		pthread_mutex_lock(&shards[i].lock);
		sum += shards[i].bytes;
		pthread_mutex_unlock(&shards[i].lock);
	}
	return sum;
}
