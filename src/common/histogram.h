/* SPDX-License-Identifier: MIT */
/*
 * histogram.h - distributions of latencies and sizes, with fixed
 * buckets, for the metrics endpoint (docs/metrics.md) and --status.
 *
 * A sample costs three relaxed atomic adds (its bucket, the count, the
 * sum): no lock, so the read path can afford one per request. Each
 * histogram is a static object of the module that measures, defined with
 * LSQ_HISTOGRAM, which registers it before main() runs; the registry is
 * one process-wide list, since a daemon serves one mount. Histograms
 * that share a name are one Prometheus family, told apart by one label.
 */
#ifndef LSQ_COMMON_HISTOGRAM_H
#define LSQ_COMMON_HISTOGRAM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* What is recorded, and so the buckets: durations in ns (shown in
 * seconds, 50 us to 30 s), or sizes in bytes (4 KiB to 64 MiB). */
enum lsq_histogram_unit { LSQ_HISTOGRAM_NS, LSQ_HISTOGRAM_BYTES };

#define LSQ_HISTOGRAM_MAX_BOUNDS 18

struct lsq_histogram {
	const char *name;   /* family, without the product prefix:
			     * "fuse_request_seconds" */
	const char *help;
	const char *label;  /* "op"; NULL: no label */
	const char *value;  /* "read" */
	enum lsq_histogram_unit unit;
	atomic_uint_least64_t count, sum;
	/* per bucket, not cumulative; the last one is +Inf */
	atomic_uint_least64_t buckets[LSQ_HISTOGRAM_MAX_BOUNDS + 1];
	struct lsq_histogram *next;  /* the registry */
};

/* Defines histogram var, registered at start-up. */
#define LSQ_HISTOGRAM(var, name_, help_, label_, value_, unit_)       \
	struct lsq_histogram var = {                                  \
		.name = name_, .help = help_, .label = label_,        \
		.value = value_, .unit = unit_,                       \
	};                                                            \
	__attribute__((constructor)) static void register_##var(void) \
	{                                                             \
		lsq_histogram_register(&var);                         \
	}

void lsq_histogram_register(struct lsq_histogram *h);

/* One sample of v (ns or bytes, as h->unit says). */
void lsq_histogram_add(struct lsq_histogram *h, uint64_t v);

/* The upper bounds of unit's buckets (ascending, +Inf not included). */
const uint64_t *lsq_histogram_bounds(enum lsq_histogram_unit unit,
				     size_t *n);

/* The registered histograms, most recently registered first. */
const struct lsq_histogram *lsq_histograms(void);

/* The one of that name (and label value; NULL: none), or NULL. */
const struct lsq_histogram *lsq_histogram_find(const char *name,
					       const char *value);

/* The upper bound of the bucket holding the q-quantile (0 < q <= 1) of
 * what h recorded; 0 with no sample, UINT64_MAX in the +Inf bucket. */
uint64_t lsq_histogram_quantile(const struct lsq_histogram *h, double q);

/* The monotonic clock in ns, for samples. */
uint64_t lsq_now_ns(void);

/* The realtime clock ns from now: a deadline for pthread_cond_timedwait
 * and pthread_timedjoin_np, which take CLOCK_REALTIME. */
struct timespec lsq_realtime_after_ns(uint64_t ns);

#endif
