/* SPDX-License-Identifier: MIT */
/*
 * reply.h - the only way the FUSE layer answers a request with an error.
 *
 * lsq_reply_err() turns an enum lsq_err into the errno the user sees through
 * lsq_err_to_errno(), the project's single table. Nothing else in src/fuse/
 * calls fuse_reply_err().
 */
#ifndef LSQ_FUSE_REPLY_H
#define LSQ_FUSE_REPLY_H

#include "fuse/mount.h"

/* Reply with the errno for err (an enum lsq_err; LSQ_OK replies success). */
void lsq_reply_err(fuse_req_t req, int err);

/* For the few refusals that come from the FUSE layer itself rather than the
 * image (a write open on a read-only mount), there is no lsq_err; errnum is
 * a positive errno. */
void lsq_reply_errno(fuse_req_t req, int errnum);

/* Success for operations whose only reply is a status (release, ...). */
void lsq_reply_ok(fuse_req_t req);

#endif
