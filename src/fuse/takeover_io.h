/* SPDX-License-Identifier: MIT */
/*
 * takeover_io.h - the FUSE protocol side of a takeover: a new daemon
 * carries on a connection whose daemon died (src/daemon/conn_guard.c keeps
 * the connection and starts the new daemon).
 *
 * The kernel negotiated the connection once, with the first daemon's
 * FUSE_INIT; it will not send another. So the first daemon notes the INIT
 * request as it reads it, the guard keeps it, and the new daemon replays
 * it to libfuse, which initialises its session (and calls our init) as it
 * did the first time; the reply is dropped before it reaches the kernel.
 * Then FUSE_NOTIFY_RESEND (Linux 6.9) puts the requests the dead daemon
 * had read but not answered back in the kernel's queue.
 */
#ifndef LSQ_FUSE_TAKEOVER_IO_H
#define LSQ_FUSE_TAKEOVER_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuse/mount.h"

/* fuse_in_header and fuse_init_in as of protocol 7.36 are 104 bytes;
 * room for later growth. */
#define LSQ_INIT_RECORD_MAX 256u

struct lsq_init_record {
	uint32_t len;
	uint8_t bytes[LSQ_INIT_RECORD_MAX];
};

/* Told once, from the thread that read it, when the kernel's FUSE_INIT
 * has been seen. */
typedef void (*lsq_init_seen_fn)(const struct lsq_init_record *rec,
				 void *ctx);

/* The session's I/O on fd through us: reads note the kernel's FUSE_INIT
 * (told to fn), writes drop the reply to a replayed INIT. Call before
 * the loop starts, after fuse_session_mount() or with an inherited fd. */
int lsq_takeover_io_install(struct fuse_session *se, int fd,
			    lsq_init_seen_fn fn, void *ctx);

/* For a read path of its own (src/fuse/uring.c): note what was read. */
void lsq_takeover_note_read(const void *buf, size_t len);

/* Whether the kernel that sent rec can resend requests
 * (FUSE_HAS_RESEND). */
bool lsq_takeover_kernel_resends(const struct lsq_init_record *rec);

/* Replay rec to libfuse; its reply never reaches the kernel. */
int lsq_takeover_replay_init(struct fuse_session *se,
			     const struct lsq_init_record *rec);

/* Ask the kernel to resend every request read from the connection but
 * not answered. 0, or -errno (EINVAL: the kernel cannot). */
int lsq_takeover_resend(int fd);

/* Text for an environment variable, and back: hex of the record. */
char *lsq_init_record_encode(const struct lsq_init_record *rec);
bool lsq_init_record_decode(const char *text, struct lsq_init_record *rec);

#endif
