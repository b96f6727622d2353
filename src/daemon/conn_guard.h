/* SPDX-License-Identifier: MIT */
/*
 * conn_guard.h - abort our FUSE connection if the daemon dies unclean.
 *
 * A daemon killed with SIGKILL can leave one thread inside the kernel for
 * good: the page store's notify_store waits on the lock of a page whose
 * READ is queued for this same daemon. That thread keeps the process, and
 * so /dev/fuse, open; the kernel never aborts the connection and readers
 * stay in D state. The guard is a small child process that holds the
 * connection's fusectl `abort` file open and writes it when the daemon's
 * main thread dies without having disarmed it first.
 */
#ifndef LSQ_DAEMON_CONN_GUARD_H
#define LSQ_DAEMON_CONN_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct lsq_conn_guard {
	pid_t pid;     /* the guard process, or 0 when there is none */
	int disarm_fd; /* write end of its pipe */
};

/* The bytes of the process's argv strings (argv[0] to the end of the
 * last), which /proc/PID/cmdline shows: the guard writes its own name
 * there, so `pgrep -f sqfs-lazy-mount` finds the daemon alone. Call
 * before anything rewrites argv. */
void lsq_conn_guard_set_cmdline(char *start, size_t len);

/* Start the guard for the FUSE mount at `mountpoint`, made by this
 * process. Call from the thread that lives until the end (the guard
 * watches that thread), after fuse_daemonize() and before other threads
 * start. Without fusectl (and not root, so it cannot be mounted for the
 * guard alone) there is no guard; one debug line says so. */
void lsq_conn_guard_start(struct lsq_conn_guard *g, const char *mountpoint);

/* After a clean unmount: the guard exits without aborting anything. */
void lsq_conn_guard_disarm(struct lsq_conn_guard *g);

#endif
