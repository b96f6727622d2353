/* SPDX-License-Identifier: MIT */
/*
 * test_latency_window.c - the window policy of src/http/latency_window.c:
 * sized from the measured round trip and throughput, off on short round
 * trips, halved while windows do not pay, probed and restored when they
 * do, estimates renewed per epoch.
 */
#include "harness/check.h"
#include "http/latency_window.h"

#define MS 1000000ull
#define MiB (1ull << 20)

/* n transfers of 4 MiB at bps bytes/s with round trip rtt_ns. */
static void feed(struct lsq_latency_window *w, unsigned n, uint64_t rtt_ns,
		 uint64_t bps)
{
	for (unsigned i = 0; i < n; i++)
		lsq_latency_window_sample(w, rtt_ns, 4 * MiB,
					  4 * MiB * 1000000000ull / bps, true);
}

int main(void)
{
	struct lsq_latency_window w;
	unsigned probes = 0;

	lsq_latency_window_init(&w, 3 * MiB);  /* rounds down to 2 MiB */
	CHECK(w.max == 2 * MiB);
	CHECK(lsq_latency_window_size(&w) == 0);  /* nothing measured */

	feed(&w, 3, 1 * MS / 2, 1000 * MiB);       /* a LAN */
	CHECK(lsq_latency_window_size(&w) == 0);

	lsq_latency_window_init(&w, 2 * MiB);
	feed(&w, 1, 50 * MS, 125000000);       /* 6.25 MB in flight */
	CHECK(lsq_latency_window_size(&w) == 0);  /* one sample: too few */
	feed(&w, 1, 50 * MS, 125000000);
	/* two long ones (a mount's probe and metadata) are enough */
	CHECK(lsq_latency_window_size(&w) == 2 * MiB);
	lsq_latency_window_init(&w, 2 * MiB);
	feed(&w, 2, 3 * MS, 1000000000);       /* a loaded loopback, maybe */
	CHECK(lsq_latency_window_size(&w) == 0);  /* short: wait for a third */
	feed(&w, 1, 3 * MS, 1000000000);
	CHECK(lsq_latency_window_size(&w) != 0);
	lsq_latency_window_init(&w, 8 * MiB);
	feed(&w, 3, 20 * MS, 125000000);       /* 2.5 MB */
	CHECK(lsq_latency_window_size(&w) == 2 * MiB);
	lsq_latency_window_init(&w, 8 * MiB);
	feed(&w, 3, 5 * MS, 100000000);        /* 0.5 MB: under the minimum */
	CHECK(lsq_latency_window_size(&w) == 0);

	/* windows that no later read uses: 2 MiB, 1 MiB, 512 KiB, then off
	 * but for a probe every 64 misses */
	lsq_latency_window_init(&w, 2 * MiB);
	feed(&w, 3, 50 * MS, 125000000);
	for (uint64_t want = 2 * MiB; want >= LSQ_WINDOW_MIN; want /= 2) {
		CHECK(lsq_latency_window_size(&w) == want);
		for (int i = 0; i < 16; i++)
			lsq_latency_window_fetched(&w);
	}
	for (int i = 0; i < 640; i++)
		probes += lsq_latency_window_size(&w) == LSQ_WINDOW_MIN;
	CHECK(probes == 10);
	/* windows that pay (four later reads each) come back, a step per
	 * sixteen windows */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 16; i++) {
			for (int h = 0; h < 4; h++)
				lsq_latency_window_hit(&w);
			lsq_latency_window_fetched(&w);
		}
	CHECK(lsq_latency_window_size(&w) == 1 * MiB);
	CHECK(w.windows == 16 * 3 + 32 && w.hits == 128);

	/* a round trip that grows is taken over at the next epoch; the
	 * first sample and any smaller one count at once */
	lsq_latency_window_init(&w, 2 * MiB);
	feed(&w, 1, 3 * MS, 125000000);
	CHECK(w.rtt_ns == 3 * MS);
	feed(&w, 1, 1 * MS, 125000000);
	CHECK(w.rtt_ns == 1 * MS);
	feed(&w, 64, 40 * MS, 125000000);
	CHECK(w.rtt_ns == 40 * MS);
	CHECK(lsq_latency_window_size(&w) == 2 * MiB);

	/* a short body timed alone, its bytes in one burst (512 KiB in
	 * 0.5 ms: 1 GB/s through a 125 MB/s link), does not beat what
	 * bodies long enough to time the link measured; with none of
	 * those, it is all there is */
	lsq_latency_window_init(&w, 2 * MiB);
	feed(&w, 3, 50 * MS, 125000000);
	lsq_latency_window_sample(&w, 50 * MS, MiB / 2, MS / 2, false);
	CHECK(lsq_latency_window_rate(&w) == 125000000);
	for (int i = 0; i < 64; i++)
		lsq_latency_window_sample(&w, 50 * MS, MiB / 2, MS / 2, false);
	CHECK(lsq_latency_window_rate(&w) == 125000000);
	lsq_latency_window_init(&w, 2 * MiB);
	lsq_latency_window_sample(&w, 50 * MS, MiB / 2, MS / 2, false);
	CHECK(lsq_latency_window_rate(&w) == 1048576000);
	return 0;
}
