/* SPDX-License-Identifier: MIT */
/*
 * stats.h - the counters of a mount as text, for the stats xattr, --stats
 * and the SIGUSR1 log line.
 */
#ifndef LSQ_FUSE_STATS_H
#define LSQ_FUSE_STATS_H

#include <stddef.h>

#include "common/counter_set.h"
#include "fuse/mount.h"

/* Every counter of the mount, known ones first (at 0 where nothing
 * reported them). */
void lsq_stats_collect(const struct lsq_mount *m, struct lsq_counter_set *set);

/* "key value\n" per counter into buf (NUL-terminated when size > 0).
 * Returns the length of the full text, as snprintf does. */
size_t lsq_stats_format(const struct lsq_counter_set *set, char *buf,
			size_t size);

/* An upper bound of lsq_stats_format()'s length for the set's counters,
 * whatever their values. */
size_t lsq_stats_max_len(const struct lsq_counter_set *set);

/* The same counters as one "key=value key=value ..." line. */
size_t lsq_stats_format_line(const struct lsq_counter_set *set, char *buf,
			     size_t size);

/* What --status shows beside the counters, as "key value" lines (text
 * values on one line each) in a malloc'd string of *len bytes; NULL when
 * out of memory. At most LSQ_STATS_INFO_MAX bytes more than the mount's
 * image and mount point names. */
char *lsq_stats_info(const struct lsq_mount *m, size_t *len);
#define LSQ_STATS_INFO_MAX 1024

#endif
