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

/* --takeover MOUNTPOINT: ask the daemon of a -o takeover mount to hand it
 * over to a new daemon from this binary (SIGUSR2 to its main thread; its
 * guard starts the new one), and wait until it serves. 0 on success. */
int lsq_takeover_mount(const char *mountpoint);

#endif
