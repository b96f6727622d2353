/* SPDX-License-Identifier: MIT */
#include "common/histogram.h"

#include <string.h>
#include <time.h>

#define MS 1000000ull
static const uint64_t ns_bounds[] = {
	50000, 100000, 250000, 500000, 1 * MS, 2500000, 5 * MS, 10 * MS,
	25 * MS, 50 * MS, 100 * MS, 250 * MS, 500 * MS, 1000 * MS,
	2500 * MS, 5000 * MS, 10000 * MS, 30000 * MS,
};
static const uint64_t byte_bounds[] = {
	4096, 16384, 65536, 262144, 1u << 20, 4u << 20, 16u << 20, 64u << 20,
};

_Static_assert(sizeof(ns_bounds) / sizeof(ns_bounds[0]) <=
	       LSQ_HISTOGRAM_MAX_BOUNDS, "ns buckets");

static _Atomic(struct lsq_histogram *) registry;

const uint64_t *lsq_histogram_bounds(enum lsq_histogram_unit unit, size_t *n)
{
	if (unit == LSQ_HISTOGRAM_BYTES) {
		*n = sizeof(byte_bounds) / sizeof(byte_bounds[0]);
		return byte_bounds;
	}
	*n = sizeof(ns_bounds) / sizeof(ns_bounds[0]);
	return ns_bounds;
}

void lsq_histogram_register(struct lsq_histogram *h)
{
	struct lsq_histogram *head = atomic_load(&registry);

	do
		h->next = head;
	while (!atomic_compare_exchange_weak(&registry, &head, h));
}

const struct lsq_histogram *lsq_histograms(void)
{
	return atomic_load(&registry);
}

const struct lsq_histogram *lsq_histogram_find(const char *name,
					       const char *value)
{
	for (const struct lsq_histogram *h = lsq_histograms(); h; h = h->next)
		if (strcmp(h->name, name) == 0 &&
		    (value ? h->value && strcmp(h->value, value) == 0
			   : !h->value))
			return h;
	return NULL;
}

void lsq_histogram_add(struct lsq_histogram *h, uint64_t v)
{
	size_t n, i;
	const uint64_t *b = lsq_histogram_bounds(h->unit, &n);

	/* at most 18 bounds, and most samples fall in the first few */
	for (i = 0; i < n && v > b[i]; i++)
		;
	atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

uint64_t lsq_histogram_quantile(const struct lsq_histogram *h, double q)
{
	size_t n;
	const uint64_t *b = lsq_histogram_bounds(h->unit, &n);
	uint64_t total = 0, seen = 0, want;

	for (size_t i = 0; i <= n; i++)
		total += atomic_load_explicit(&h->buckets[i],
					      memory_order_relaxed);
	if (total == 0)
		return 0;
	want = (uint64_t)(q * (double)total + 0.999999);
	if (want == 0)
		want = 1;
	for (size_t i = 0; i < n; i++) {
		seen += atomic_load_explicit(&h->buckets[i],
					     memory_order_relaxed);
		if (seen >= want)
			return b[i];
	}
	return UINT64_MAX;
}

uint64_t lsq_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct timespec lsq_realtime_after_ns(uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec += (long)(ns % 1000000000u);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}
