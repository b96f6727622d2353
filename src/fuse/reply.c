/* SPDX-License-Identifier: MIT */
#include "fuse/reply.h"

#include "lsq/error.h"

void lsq_reply_err(fuse_req_t req, int err)
{
	/* The image layer already logged the cause once; a request that
	 * fails again must not log again. */
	fuse_reply_err(req, lsq_err_to_errno(err));
}

void lsq_reply_errno(fuse_req_t req, int errnum)
{
	fuse_reply_err(req, errnum);
}

void lsq_reply_ok(fuse_req_t req)
{
	fuse_reply_err(req, 0);
}
