/* SPDX-License-Identifier: MIT */
/*
 * long_work.h - telling the thread that asked for a read about work that
 * takes a while (lsq_long_work_fn in lsq/source.h): the request carries
 * the listener, so what a read does to its thread shows in its arguments.
 */
#ifndef LSQ_COMMON_LONG_WORK_H
#define LSQ_COMMON_LONG_WORK_H

#include "lsq/source.h"

static inline void lsq_long_work_ahead(lsq_long_work_fn fn,
				       enum lsq_long_work what)
{
	if (fn)
		fn(what, false);
}

static inline void lsq_long_work_done(lsq_long_work_fn fn,
				      enum lsq_long_work what)
{
	if (fn)
		fn(what, true);
}

#endif
