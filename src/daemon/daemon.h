/* SPDX-License-Identifier: MIT */
/*
 * daemon.h - the whole of sqfs-lazy-mount behind its main().
 */
#ifndef LSQ_DAEMON_DAEMON_H
#define LSQ_DAEMON_DAEMON_H

/* Parse argv, then mount and serve until unmounted (or print help, the
 * version or a mount's stats). Returns the process exit status. */
int lsq_mount_main(int argc, char **argv);

#endif
