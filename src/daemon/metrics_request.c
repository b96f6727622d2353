/* SPDX-License-Identifier: MIT */
#include "daemon/metrics_request.h"

#include <string.h>

/* Where the head ends (past its blank line), or 0. */
static size_t head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static const char *find(const char *p, const char *end, char c)
{
	return memchr(p, c, (size_t)(end - p));
}

enum lsq_metrics_request lsq_metrics_parse(const char *buf, size_t len,
					   size_t max)
{
	const char *end, *line_end, *sp1, *sp2, *target_end, *q;
	size_t target_len;

	if (len > max)
		len = max;
	if (!head_end(buf, len))
		return len == max ? LSQ_MREQ_TOO_LARGE : LSQ_MREQ_INCOMPLETE;
	end = buf + len;
	/* request line: METHOD SP TARGET SP HTTP/1.x */
	line_end = find(buf, end, '\n');
	if (line_end > buf && line_end[-1] == '\r')
		line_end--;
	sp1 = find(buf, line_end, ' ');
	sp2 = sp1 ? find(sp1 + 1, line_end, ' ') : NULL;
	if (!sp1 || sp1 == buf || !sp2 || sp2 == sp1 + 1 ||
	    (size_t)(line_end - sp2 - 1) != 8 ||
	    memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
		return LSQ_MREQ_BAD;
	target_end = sp2;
	q = find(sp1 + 1, sp2, '?');
	if (q)
		target_end = q;
	target_len = (size_t)(target_end - sp1 - 1);
	if (target_len != 8 || memcmp(sp1 + 1, "/metrics", 8) != 0)
		return LSQ_MREQ_NOT_FOUND;
	if (sp1 - buf != 3 || memcmp(buf, "GET", 3) != 0)
		return LSQ_MREQ_METHOD;
	return LSQ_MREQ_METRICS;
}
