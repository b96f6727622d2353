/* SPDX-License-Identifier: MIT */
/*
 * metrics_request.h - what a request head sent to -o metrics= asks for.
 * Apart from the socket code so the fuzzer can drive it
 * (tests/fuzz/fuzz_metrics_request.c).
 */
#ifndef LSQ_DAEMON_METRICS_REQUEST_H
#define LSQ_DAEMON_METRICS_REQUEST_H

#include <stddef.h>

enum lsq_metrics_request {
	LSQ_MREQ_INCOMPLETE,  /* no blank line yet: read more */
	LSQ_MREQ_METRICS,     /* GET /metrics (a query string is ignored) */
	LSQ_MREQ_NOT_FOUND,   /* another path */
	LSQ_MREQ_METHOD,      /* /metrics with a method other than GET */
	LSQ_MREQ_BAD,         /* no request line of HTTP/1.x */
	LSQ_MREQ_TOO_LARGE,   /* no blank line within max bytes */
};

/* Judge the first len bytes received (not NUL-terminated); a head not
 * complete within max bytes is LSQ_MREQ_TOO_LARGE. */
enum lsq_metrics_request lsq_metrics_parse(const char *buf, size_t len,
					   size_t max);

#endif
