/* SPDX-License-Identifier: MIT */
/*
 * counter_set.h - counters reported one call at a time (lsq_counter_fn:
 * the image, its source layers, the daemon) gathered by name, for output
 * (--stats, the stats xattr, the SIGUSR1 line). Values of a name
 * reported more than once add up. Names are not copied: they must outlive
 * the set (the reporters pass string literals).
 */
#ifndef LSQ_COMMON_COUNTER_SET_H
#define LSQ_COMMON_COUNTER_SET_H

#include <stddef.h>
#include <stdint.h>

#include "lsq/source.h"

/* Room for every counter the product has, twice over; a set that is
 * full counts what it had to leave out. */
#define LSQ_COUNTER_SET_MAX 256

struct lsq_counter {
	const char *name;
	uint64_t value;
	enum lsq_counter_kind kind;
};

struct lsq_counter_set {
	struct lsq_counter items[LSQ_COUNTER_SET_MAX];
	size_t n;
	size_t dropped;  /* names reported past LSQ_COUNTER_SET_MAX */
};

/* An empty set. */
void lsq_counter_set_init(struct lsq_counter_set *set);

/* An lsq_counter_fn: ctx is the set. A name not seen yet is appended
 * (so the order is that of first report); a known one adds its value. */
void lsq_counter_set_add(void *ctx, const char *name, uint64_t value,
			 enum lsq_counter_kind kind);

/* The counter of that name, or NULL. */
const struct lsq_counter *lsq_counter_set_find(
	const struct lsq_counter_set *set, const char *name);

#endif
