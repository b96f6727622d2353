/* SPDX-License-Identifier: MIT */
/*
 * fuzz_metrics_request.c - arbitrary bytes as what a scraper sent to
 * -o metrics= (src/daemon/metrics_request.c): no crash, no read outside the
 * input (copied into a buffer of exactly its size, for ASan), and answers
 * that keep their promises: only a complete "GET /metrics" head is
 * served, only a head that cannot end within the limit is too large.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/metrics_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	enum lsq_metrics_request r;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	r = lsq_metrics_parse(buf, size, MAX);
	switch (r) {
	case LSQ_MREQ_METRICS:
		if (size < 16 || memcmp(buf, "GET /metrics", 12) != 0)
			abort();
		break;
	case LSQ_MREQ_INCOMPLETE:
		if (size >= MAX)
			abort();
		break;
	case LSQ_MREQ_TOO_LARGE:
		if (size < MAX)
			abort();
		break;
	case LSQ_MREQ_NOT_FOUND:
	case LSQ_MREQ_METHOD:
	case LSQ_MREQ_BAD:
		break;
	default:
		abort();
	}
	/* a smaller limit never turns a refusal into a scrape */
	if (r != LSQ_MREQ_METRICS && size > 0 &&
	    lsq_metrics_parse(buf, size, size - 1) == LSQ_MREQ_METRICS)
		abort();
	free(buf);
	return 0;
}
