/* SPDX-License-Identifier: MIT */
/* errmsg.h - fail with a one-line reason written into a caller's buffer. */
#ifndef LSQ_COMMON_ERRMSG_H
#define LSQ_COMMON_ERRMSG_H

#include <stddef.h>

/* printf fmt into err[0..errlen) (nothing when err is NULL or errlen 0);
 * returns ret, so a check can `return lsq_fail(...)`. */
int lsq_fail(int ret, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
