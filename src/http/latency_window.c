/* SPDX-License-Identifier: MIT */
/* latency_window.c - windows around random misses (latency_window.h). */
#include "http/latency_window.h"

/* Estimates hold for this many transfers, then the next epoch's replace
 * them (a path whose round trip grew is seen within an epoch). */
#define EPOCH 32u
/* Until a long transfer was timed: a modest link. */
#define DEFAULT_BPS (100u * 1000u * 1000u)
/* Bodies shorter than this time the round trip more than the link. */
#define MIN_TIMED_BODY (256u * 1024u)
/* Windows judged at a time; a window pays when later reads hit it. */
#define JUDGE 16u
#define MAX_SHIFT 4u
/* While windows are off, every PROBE-th miss fetches one anyway. */
#define PROBE 64u
/* Below this round trip (a LAN, loopback) a miss costs about what a
 * window's transfer and copy do: leave the reads as they are. */
#define MIN_RTT_NS (2u * 1000u * 1000u)
/* Transfers timed before any window: a mount's first two (the probe, the
 * metadata) meet a cold server and, on a loaded machine, can take
 * milliseconds on loopback; the minimum of three is the round trip. */
#define MIN_SAMPLES 3u
#define EARLY_RTT_NS (4u * MIN_RTT_NS)

#define R memory_order_relaxed

static uint64_t floor_pow2(uint64_t x)
{
	return x ? UINT64_C(1) << (63 - __builtin_clzll(x)) : 0;
}

void lsq_latency_window_init(struct lsq_latency_window *w, uint64_t max_bytes)
{
	*w = (struct lsq_latency_window){ .max = floor_pow2(max_bytes) };
	atomic_init(&w->epoch_rtt_ns, UINT64_MAX);
}

static void store_min(atomic_uint_least64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, R);

	while (v < cur && !atomic_compare_exchange_weak_explicit(a, &cur, v,
								 R, R))
		;
}

static void store_max(atomic_uint_least64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, R);

	while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v,
								 R, R))
		;
}

void lsq_latency_window_sample(struct lsq_latency_window *w, uint64_t rtt_ns,
			       uint64_t bytes, uint64_t body_ns, bool link)
{
	unsigned n;

	if (rtt_ns) {
		uint64_t cur = atomic_load_explicit(&w->rtt_ns, R);

		store_min(&w->epoch_rtt_ns, rtt_ns);
		/* a smaller round trip counts at once (the first samples of a
		 * mount include a cold server's own delays); 0 is none yet */
		while ((cur == 0 || rtt_ns < cur) &&
		       !atomic_compare_exchange_weak_explicit(&w->rtt_ns, &cur,
							      rtt_ns, R, R))
			;
	}
	if (bytes >= MIN_TIMED_BODY && body_ns)
		store_max(link ? &w->epoch_link_bps : &w->epoch_bps,
			  bytes * 1000000000u / body_ns);
	n = atomic_fetch_add_explicit(&w->samples, 1, R) + 1;
	if (n % EPOCH == 0) {
		uint64_t r = atomic_exchange_explicit(&w->epoch_rtt_ns,
						      UINT64_MAX, R);
		uint64_t b = atomic_exchange_explicit(&w->epoch_bps, 0, R);
		uint64_t l = atomic_exchange_explicit(&w->epoch_link_bps, 0,
						      R);

		if (r != UINT64_MAX)
			atomic_store_explicit(&w->rtt_ns, r, R);
		/* an epoch of short bodies alone does not replace a
		 * link-timed figure */
		if (l) {
			atomic_store_explicit(&w->bps, l, R);
			atomic_store_explicit(&w->bps_link, true, R);
		} else if (b && !atomic_load_explicit(&w->bps_link, R)) {
			atomic_store_explicit(&w->bps, b, R);
		}
	}
}

uint64_t lsq_latency_window_rate(const struct lsq_latency_window *w)
{
	uint64_t bps = atomic_load_explicit(&w->bps, R);
	uint64_t link = atomic_load_explicit(&w->epoch_link_bps, R);

	/* a link-timed body beats the last epoch's figure at once; a
	 * body timed alone only counts in the first epoch, with none */
	if (link > bps)
		return link;
	return bps ? bps : atomic_load_explicit(&w->epoch_bps, R);
}

uint64_t lsq_latency_window_bdp(struct lsq_latency_window *w)
{
	uint64_t rtt = atomic_load_explicit(&w->rtt_ns, R);
	uint64_t bps = lsq_latency_window_rate(w);
	unsigned n = atomic_load_explicit(&w->samples, R);

	/* a mount's probe and metadata are two transfers: a third sample
	 * would cost its first data read a round trip of its own, so two
	 * do where both took a clearly long round trip (the estimate is
	 * their minimum), which a loaded loopback does not */
	if (rtt < MIN_RTT_NS || n + 1 < MIN_SAMPLES ||
	    (n < MIN_SAMPLES && rtt < EARLY_RTT_NS))
		return 0;
	if (!bps)
		bps = DEFAULT_BPS;
	/* bytes in flight over one round trip; 2^64 ns is 584 years */
	return rtt / 1000u * (bps / 1000000u);
}

uint64_t lsq_latency_window_size(struct lsq_latency_window *w)
{
	uint64_t bdp = lsq_latency_window_bdp(w), size;

	if (bdp == 0)
		return 0;
	size = floor_pow2(bdp);
	if (size > w->max)
		size = w->max;
	if (size < LSQ_WINDOW_MIN)
		return 0;  /* a short round trip: a miss costs little */
	size >>= atomic_load_explicit(&w->shift, R);
	if (size >= LSQ_WINDOW_MIN)
		return size;
	/* windows did not pay: probe now and then */
	if ((atomic_fetch_add_explicit(&w->misses_off, 1, R) + 1) % PROBE == 0)
		return LSQ_WINDOW_MIN;
	return 0;
}

void lsq_latency_window_fetched(struct lsq_latency_window *w)
{
	unsigned n = atomic_fetch_add_explicit(&w->judged_windows, 1, R) + 1;
	unsigned hits, shift;

	atomic_fetch_add_explicit(&w->windows, 1, R);
	if (n < JUDGE)
		return;
	atomic_store_explicit(&w->judged_windows, 0, R);
	hits = atomic_exchange_explicit(&w->judged_hits, 0, R);
	shift = atomic_load_explicit(&w->shift, R);
	if (hits < n && shift < MAX_SHIFT)
		atomic_store_explicit(&w->shift, shift + 1, R);
	else if (hits >= 4 * n && shift > 0)
		atomic_store_explicit(&w->shift, shift - 1, R);
}

void lsq_latency_window_hit(struct lsq_latency_window *w)
{
	atomic_fetch_add_explicit(&w->judged_hits, 1, R);
	atomic_fetch_add_explicit(&w->hits, 1, R);
}
