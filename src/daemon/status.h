/* SPDX-License-Identifier: MIT */
/*
 * status.h - sqfs-lazy-mount --stats and --status (status.c): read a
 * running mount's counters and what its daemon says of itself through the
 * root's xattrs, and print them.
 */
#ifndef LSQ_DAEMON_STATUS_H
#define LSQ_DAEMON_STATUS_H

/* The counters as "name value" lines; 0, or 1 after an error line. */
int lsq_print_stats(const char *mountpoint);

/* A summary for a person: the image, since when, what was fetched, hit
 * ratios, the round trip, prefetch, background and verification state,
 * the last problem logged. 0, or 1 after an error line. */
int lsq_print_status(const char *mountpoint);

#endif
