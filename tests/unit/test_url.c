/* SPDX-License-Identifier: MIT */
/*
 * test_url.c - lsq_url_redact(): what of a URL may appear in a message,
 * STATUS= or /proc/mounts. Userinfo and query go, the rest stays.
 */
#include <stdlib.h>
#include <string.h>

#include "common/url.h"
#include "harness/check.h"

static void expect(const char *url, const char *shown)
{
	char *got = lsq_url_redact(url);

	CHECK(got != NULL);
	if (strcmp(got, shown) != 0) {
		fprintf(stderr, "lsq_url_redact(\"%s\") = \"%s\", want \"%s\"\n",
			url, got, shown);
		exit(1);
	}
	free(got);
}

int main(void)
{
	expect("https://host/a/img.sqfs", "https://host/a/img.sqfs");
	expect("https://bob:pw@host:8443/img", "https://***@host:8443/img");
	expect("http://token@host/img", "http://***@host/img");
	/* the last '@' of the authority ends the userinfo */
	expect("http://a@b:p@w@host/x", "http://***@host/x");
	/* an '@' in the path is not userinfo */
	expect("http://host/users/@me/img", "http://host/users/@me/img");
	expect("https://host/img?X-Amz-Signature=abc&e=1",
	       "https://host/img?***");
	expect("https://u:p@host?sig=1", "https://***@host?***");
	expect("http://host/img#frag", "http://host/img?***");
	expect("http://[::1]:8080/img", "http://[::1]:8080/img");
	expect("file:///srv/img.sqfs", "file:///srv/img.sqfs");
	/* plain paths are left alone, '@' and '?' included */
	expect("/srv/a@b/img?.sqfs", "/srv/a@b/img?.sqfs");
	expect("", "");

	/* lsq_url_scrub: in place, userinfo only, every URL of a list */
	{
		char list[] = "mirror=http://u:pw@a/x,mirror=https://b/y,url=http://t@c/";
		unsigned long n = lsq_url_scrub(list);

		if (n != 5 || strcmp(list, "mirror=http://****@a/x,mirror=https://b/y,url=http://*@c/") != 0) {
			fprintf(stderr, "lsq_url_scrub: %lu \"%s\"\n", n, list);
			exit(1);
		}
	}
	return 0;
}
