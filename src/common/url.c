/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/url.h"

/* The userinfo of the URL whose "://" is at sep: [*start, *end) before the
 * last '@' of the authority, which ends at '/', '?', '#', ',' (option
 * lists) or the end of the string. Returns 0 when there is none. */
static int userinfo_span(const char *sep, const char **start,
			 const char **end)
{
	const char *auth = sep + 3;
	size_t n = strcspn(auth, "/?#,");
	const char *at = NULL;

	for (size_t i = 0; i < n; i++)
		if (auth[i] == '@')
			at = auth + i;
	if (!at)
		return 0;
	*start = auth;
	*end = at;
	return 1;
}

char *lsq_url_redact(const char *url)
{
	const char *sep = strstr(url, "://"), *start = NULL, *end = NULL;
	const char *host, *path_end, *query;
	char *out;

	if (!sep)
		return strdup(url);
	host = sep + 3;
	path_end = host + strcspn(host, "/?#");
	/* a signed URL carries its credentials in the query */
	query = strpbrk(path_end, "?#");
	if (!userinfo_span(sep, &start, &end) || end >= path_end)
		start = end = NULL;
	if (asprintf(&out, "%.*s%s%.*s%s", (int)(host - url), url,
		     start ? "***" : "",
		     (int)((query ? query : path_end + strlen(path_end)) -
			   (end ? end : host)),
		     end ? end : host, query ? "?***" : "") < 0)
		return NULL;
	return out;
}

unsigned long lsq_url_scrub(char *s)
{
	unsigned long n = 0;
	char *sep = s;

	while ((sep = strstr(sep, "://"))) {
		const char *start, *end;

		if (userinfo_span(sep, &start, &end)) {
			memset(s + (start - s), '*', (size_t)(end - start));
			n += (unsigned long)(end - start);
		}
		sep += 3;
	}
	return n;
}
