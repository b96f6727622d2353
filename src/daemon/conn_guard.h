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
#include <stdint.h>
#include <sys/types.h>

#include "fuse/takeover_io.h"

struct lsq_conn_guard {
	pid_t pid;     /* the guard process, or 0 when there is none */
	int disarm_fd; /* write end of its pipe */
};

/* How the connection changed hands so far; each daemon's guard hands it
 * on, one higher, to the daemon it starts. */
struct lsq_takeover_count {
	unsigned crash, upgrade;
	/* daemons in a row that died within seconds of taking over */
	unsigned quick_deaths;
};

/* Takeover (-o takeover): instead of aborting the connection when the
 * daemon dies, the guard keeps it (fuse_fd, which it holds) and starts a
 * new daemon with the same arguments on it. */
struct lsq_guard_takeover {
	int fuse_fd;  /* -1: no takeover, abort as before */
	struct lsq_takeover_count count;
	/* the kernel's INIT, when known at start (a daemon that took over);
	 * NULL: the daemon tells it once read (lsq_conn_guard_send_init) */
	const struct lsq_init_record *init;
	/* the service keeper's pipe (service_keeper.h), which the guard
	 * holds and hands on to the daemon it starts; -1: none */
	int keeper_fd;
};

/* What a daemon started by a guard inherits (SQFS_LAZY_TAKEOVER). */
struct lsq_inherited {
	int fuse_fd;       /* the connection */
	int handshake_fd;  /* write "k" once serving, then close */
	bool upgrade;      /* asked for (--takeover), not a crash */
	uint64_t died_ns;  /* when the daemon before died (CLOCK_REALTIME) */
	struct lsq_takeover_count count;  /* this takeover included */
	struct lsq_init_record init;
	char mountpoint[4096];  /* canonical: the mount is not asked */
};

/* Whether this process was started by a guard to take over; the
 * variable is removed from the environment. false with *err set: it was,
 * but the variable does not parse. */
bool lsq_conn_guard_inherited(struct lsq_inherited *out, bool *err);

/* The bytes of the process's argv strings (argv[0] to the end of the
 * last), which /proc/PID/cmdline shows: the guard writes its own name
 * there, so `pgrep -f sqfs-lazy-mount` finds the daemon alone. Call
 * before anything rewrites argv. */
void lsq_conn_guard_set_cmdline(char *start, size_t len);

/* Write name over the argv strings (lsq_conn_guard_set_cmdline): a
 * helper process, not the daemon, for pgrep -f and ps. */
void lsq_conn_guard_rename(const char *name);

/* The daemon's arguments, which a takeover starts the new daemon with
 * (the guard copies them before it renames itself). */
void lsq_conn_guard_set_argv(int argc, char **argv);

/* Start the guard for the FUSE mount at `mountpoint`, made by this
 * process. Call from the thread that lives until the end (the guard
 * watches that thread), after fuse_daemonize() and before other threads
 * start. Without fusectl (and not root, so it cannot be mounted for the
 * guard alone) there is no guard; one debug line says so. */
void lsq_conn_guard_start(struct lsq_conn_guard *g, const char *mountpoint,
			  const struct lsq_guard_takeover *tk);

/* The kernel's INIT, for the guard to hand to a new daemon (from the
 * thread that read it; once). false: no guard to tell. */
bool lsq_conn_guard_send_init(struct lsq_conn_guard *g,
			      const struct lsq_init_record *rec);

/* An upgrade: this daemon leaves without unmounting, and the guard
 * starts the binary at exe on the connection once it is gone. */
void lsq_conn_guard_send_upgrade(struct lsq_conn_guard *g, const char *exe);

/* After a clean unmount: the guard exits without aborting anything. */
void lsq_conn_guard_disarm(struct lsq_conn_guard *g);

#endif
