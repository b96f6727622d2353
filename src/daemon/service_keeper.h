/* SPDX-License-Identifier: MIT */
/*
 * service_keeper.h - the service's main process, while daemons come and go.
 *
 * A service manager knows a service by its main process: the one it
 * started. With takeover, daemons die and are replaced on the mount, so
 * under a manager ($NOTIFY_SOCKET, the unit's -f) that process does not
 * become the daemon: it forks it and stays, as the keeper, until the last
 * daemon of the mount has gone. It passes a stop (SIGTERM) on to the
 * daemon serving, and exits 0 after a clean stop, 1 otherwise: what the
 * manager saw of a single daemon before. (The manager could be told
 * another main process, MAINPID=, but one that is not its child it
 * cannot wait for: systemd 252 then kills the whole unit at once on a
 * stop.)
 *
 * The keeper learns through a pipe whose write end every daemon of the
 * mount and every guard holds (the guard hands it on as fd 5, named in
 * $SQFS_LAZY_KEEPER): a daemon says "serving, pid" once it serves and
 * "end" after its clean unmount; the pipe's end of file means that all of
 * them are gone.
 */
#ifndef LSQ_DAEMON_SERVICE_KEEPER_H
#define LSQ_DAEMON_SERVICE_KEEPER_H

#include <stdbool.h>

#define LSQ_KEEPER_ENV "SQFS_LAZY_KEEPER"
#define LSQ_KEEPER_FD 5
#define LSQ_KEEPER_FD_STR "5"

/* The keeper's pipe: the fd inherited from a guard ($SQFS_LAZY_KEEPER,
 * then removed from the environment); else, when want, a new keeper is
 * forked and this process goes on as its child, the daemon. -1: none. */
int lsq_keeper_attach(bool want);

/* Tell the keeper this process serves the mount now / stopped clean. */
void lsq_keeper_serving(int fd);
void lsq_keeper_clean_end(int fd);

#endif
