/* SPDX-License-Identifier: MIT */
/*
 * latency_window.h - how much a remote source fetches around a random
 * miss, from the link's measured round trip and throughput.
 *
 * A miss costs a round trip plus its bytes' transfer time. When the round
 * trip is long, fetching the aligned window of about one bandwidth-delay
 * product around the miss costs little more than the miss alone, and
 * programs read near what they read before (a program start reads many
 * small files of the same directories, a library's pages): later misses
 * fall inside windows already fetched. On a short round trip (under 2 ms:
 * a LAN, loopback), or when the product is below LSQ_WINDOW_MIN, nothing
 * changes.
 *
 * Windows that do not pay (fewer later reads served from them than
 * windows fetched: random reads over a large image) halve the window, down
 * to none; a probe window now and then finds out when they pay again.
 * Lock-free; every field is a relaxed atomic (the policy tolerates races).
 */
#ifndef LSQ_SOURCE_LATENCY_WINDOW_H
#define LSQ_SOURCE_LATENCY_WINDOW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct lsq_latency_window {
	uint64_t max;                     /* largest window (power of two) */
	atomic_uint_least64_t rtt_ns;     /* min round trip, last epoch */
	atomic_uint_least64_t bps;        /* best throughput, last epoch */
	atomic_bool bps_link;             /* bps was link-timed */
	/* this epoch's: minimum round trip, best throughput of bodies timed
	 * alone and of bodies that timed the link */
	atomic_uint_least64_t epoch_rtt_ns, epoch_bps, epoch_link_bps;
	atomic_uint samples;
	atomic_uint shift;                /* window = bdp >> shift */
	atomic_uint judged_windows, judged_hits; /* since the last verdict */
	atomic_uint misses_off;           /* misses while shifted to none */
	atomic_uint_least64_t windows, hits; /* totals, for --stats */
};

/* max_bytes: the largest window (rounded down to a power of two). */
void lsq_latency_window_init(struct lsq_latency_window *w, uint64_t max_bytes);

/* One transfer: its round trip (request sent to first byte), and the
 * bytes of its body over the time it took (0: not measured). link: the
 * body lasted long enough to time the link, and bytes are what every
 * transfer received meanwhile. A body too short for that is timed alone,
 * and its bytes may have come in one burst (buffers along the path that
 * filled while the link idled): an epoch's rate is its best link-timed
 * one where it has one. */
void lsq_latency_window_sample(struct lsq_latency_window *w, uint64_t rtt_ns,
			       uint64_t bytes, uint64_t body_ns, bool link);

/* The link's throughput measured (bytes/s; 0: no long body timed yet). */
uint64_t lsq_latency_window_rate(const struct lsq_latency_window *w);

/* The bandwidth-delay product measured (bytes), or 0 on a short round
 * trip or before three transfers were timed. */
uint64_t lsq_latency_window_bdp(struct lsq_latency_window *w);

/* The window for a random miss now (a power of two), or 0: fetch only
 * what is asked. */
uint64_t lsq_latency_window_size(struct lsq_latency_window *w);

/* A window was fetched; a read was served by a window it did not fetch. */
void lsq_latency_window_fetched(struct lsq_latency_window *w);
void lsq_latency_window_hit(struct lsq_latency_window *w);

/* The smallest window worth a round trip; below it windows are off. */
#define LSQ_WINDOW_MIN (512u * 1024u)

#endif
