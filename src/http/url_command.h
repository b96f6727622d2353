/* SPDX-License-Identifier: MIT */
/*
 * url_command.h - -o url_command=CMD: URLs that expire (presigned S3 URLs,
 * signed CDN URLs) come from a program the user names, which prints a
 * fresh one on stdout. This file runs that program (no shell, bounded in
 * time and output), reads a signed URL's expiry from its query, and keeps
 * the current URL with its renewal, one run at a time. No libcurl here:
 * the HTTP source asks for the URL before each request and reports the
 * server's refusals (docs/http-source.md, "Expiring URLs").
 *
 * A URL holds credentials in its query: it never goes into a message;
 * copies are wiped before they are freed (lsq_url_command_free).
 */
#ifndef LSQ_SOURCE_URL_COMMAND_H
#define LSQ_SOURCE_URL_COMMAND_H

#include <stddef.h>
#include <stdint.h>

#define LSQ_URL_COMMAND_MAX_ARGS 32
#define LSQ_URL_COMMAND_MAX_OUTPUT (16u * 1024u)  /* bytes of stdout */

/* Run cmd, split into words at spaces and tabs (no quoting, no shell;
 * the first word is looked up in PATH), as the calling user, with stdin
 * /dev/null, its own process group and the environment of this process.
 * It has timeout_s seconds to exit; then its group is killed. On success
 * *url is the first line of its stdout (malloc'd, free with
 * lsq_url_command_free), an http:// or https:// URL without spaces or
 * control characters. Otherwise LSQ_ERR_IO (LSQ_ERR_TIMEOUT when it ran
 * out of time, LSQ_ERR_INVALID for an unusable cmd) and one line in err:
 * the reason (exit status, signal, no output, not a URL) and the last line
 * the program wrote to stderr, never what it printed on stdout.
 * Thread-safe; never leaves a child behind. */
int lsq_url_command_run(const char *cmd, double timeout_s, char **url,
			char *err, size_t errlen);

/* Wipe and free a URL from this module. NULL is fine. */
void lsq_url_command_free(char *url);

/* When a signed URL stops working, from its query: X-Amz-Date plus
 * X-Amz-Expires (S3 presigned, Signature V4), X-Goog-Date plus
 * X-Goog-Expires (Cloud Storage V4), Expires= in Unix seconds (CloudFront,
 * S3 Signature V2, Cloud Storage V2) or se= in ISO-8601 (Azure SAS).
 * *expires is the Unix time it expires, *issued the time it was signed or
 * 0 when the URL does not say. Returns 0, or -1 when the URL names no
 * expiry we read. */
int lsq_url_expiry(const char *url, int64_t *expires, int64_t *issued);

/* When to ask for a new URL that expires at expires and was signed at
 * issued (0: unknown, then now): when less than a tenth of its lifetime
 * is left, but at least min(60 s, half the lifetime) before the end. */
int64_t lsq_url_renew_at(int64_t expires, int64_t issued, int64_t now);

/* The current URL of an image and its renewal. */
struct lsq_url_renewer;

struct lsq_url_renewer_stats {
	uint64_t renewals;  /* new URLs taken after the first */
	uint64_t failures;  /* runs of the command that gave no URL */
};

/* A renewer for cmd; the command is first run by the first
 * lsq_url_renewer_get(). name is the image as messages show it. NULL when
 * out of memory. */
struct lsq_url_renewer *lsq_url_renewer_create(const char *cmd,
					       double timeout_s,
					       const char *name);
void lsq_url_renewer_destroy(struct lsq_url_renewer *r);

/* The URL to use now (*url malloc'd, free with lsq_url_command_free) and
 * its generation (*gen, for lsq_url_renewer_refused). Runs the command
 * when there is no URL yet, and when the URL's own expiry is near (a
 * failure then keeps the old URL and logs a warning; another try comes
 * 10 s later); threads that find a run under way use the old URL. Fails
 * (reason in err) only when there is no URL at all. Thread-safe. */
int lsq_url_renewer_get(struct lsq_url_renewer *r, char **url,
			unsigned *gen, char *err, size_t errlen);

/* The server refused the URL of generation gen (401, 403): get a new one.
 * Single-flight: when another thread already got a newer URL this returns
 * 0 at once; while one thread runs the command the others wait for its
 * result. A command that failed less than a second ago is not run again:
 * its reason is returned. 0 when a newer URL is there, else the error with
 * the reason in err (not logged here: the failed read's line carries it).
 * Thread-safe. */
int lsq_url_renewer_refused(struct lsq_url_renewer *r, unsigned gen,
			    char *err, size_t errlen);

void lsq_url_renewer_get_stats(struct lsq_url_renewer *r,
			       struct lsq_url_renewer_stats *out);

#endif
