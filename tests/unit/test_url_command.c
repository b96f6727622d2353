/* SPDX-License-Identifier: MIT */
/*
 * test_url_command.c - -o url_command=: the expiry read from signed URLs,
 * when to renew, and running the command (output, exit status, stderr's
 * last line, timeout, output cap, words without a shell).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/iso8601.h"
#include "harness/check.h"
#include "lsq/error.h"
#include "http/url_command.h"

static void test_expiry(void)
{
	int64_t exp = 0, iss = 0;

	/* S3 presigned, Signature V4: 2026-11-25T18:00:00Z + 3600 s */
	CHECK(lsq_url_expiry("https://b.s3.amazonaws.com/k?X-Amz-Algorithm="
			     "AWS4-HMAC-SHA256&X-Amz-Date=20261125T180000Z&"
			     "X-Amz-Expires=3600&X-Amz-Signature=ab", &exp,
			     &iss) == 0);
	CHECK(iss == 1795629600 && exp == iss + 3600);
	/* names are case-insensitive; Cloud Storage V4 */
	CHECK(lsq_url_expiry("https://s.example/b/o?x-goog-date=20261125T"
			     "180000Z&x-goog-expires=60", &exp, &iss) == 0);
	CHECK(iss == 1795629600 && exp == iss + 60);
	/* CloudFront, S3 V2: Unix seconds, no signing time */
	CHECK(lsq_url_expiry("https://d.cloudfront.net/i.sqfs?Expires="
			     "1795633200&Signature=x&Key-Pair-Id=K", &exp,
			     &iss) == 0);
	CHECK(exp == 1795633200 && iss == 0);
	/* Azure SAS, ':' percent-encoded */
	CHECK(lsq_url_expiry("https://a.blob.core.windows.net/c/i?sv=2022&"
			     "se=2026-11-25T19%3A00%3A00Z&sig=x", &exp,
			     &iss) == 0);
	CHECK(exp == 1795633200 && iss == 0);
	/* nothing we read, or malformed */
	CHECK(lsq_url_expiry("https://h/i.sqfs", &exp, &iss) == -1);
	CHECK(lsq_url_expiry("https://h/i.sqfs?X-Amz-Date=2026&"
			     "X-Amz-Expires=60", &exp, &iss) == -1);
	CHECK(lsq_url_expiry("https://h/i.sqfs?Expires=soon", &exp,
			     &iss) == -1);
	/* a parameter name inside another is not it */
	CHECK(lsq_url_expiry("https://h/i?NoExpires=5", &exp, &iss) == -1);
}

static void test_iso8601(void)
{
	int64_t t = 0;

	CHECK(lsq_parse_iso8601("2026-11-25T18:00:00Z", &t) == 0 &&
	      t == 1795629600);
	CHECK(lsq_parse_iso8601("2026-11-25T20:00:00+02:00", &t) == 0 &&
	      t == 1795629600);
	CHECK(lsq_parse_iso8601("2026-11-25T17:00:00-0100", &t) == 0 &&
	      t == 1795629600);
	CHECK(lsq_parse_iso8601("2026-11-25 18:00:00.123Z", &t) == 0 &&
	      t == 1795629600);
	CHECK(lsq_parse_iso8601("2000-02-29T00:00:00Z", &t) == 0 &&
	      t == 951782400);
	CHECK(lsq_parse_iso8601("2026-11-25T18:00:00", &t) == -1);
	CHECK(lsq_parse_iso8601("2026-13-25T18:00:00Z", &t) == -1);
	CHECK(lsq_parse_iso8601("2026-11-25T18:00:00Zjunk", &t) == -1);
	CHECK(lsq_parse_iso8601("tomorrow", &t) == -1);
}

static void test_renew_at(void)
{
	/* an hour: a tenth (360 s) before the end */
	CHECK(lsq_url_renew_at(4600, 1000, 1000) == 4600 - 360);
	/* five minutes: 60 s before */
	CHECK(lsq_url_renew_at(1300, 1000, 1000) == 1240);
	/* 4 s: half of it */
	CHECK(lsq_url_renew_at(1004, 1000, 1000) == 1002);
	/* no signing time: the lifetime counts from now */
	CHECK(lsq_url_renew_at(1300, 0, 1000) == 1240);
}

static void run_ok(const char *cmd, const char *want)
{
	char err[512] = "", *url = NULL;

	CHECK_EQ_INT(lsq_url_command_run(cmd, 10, &url, err, sizeof(err)),
		     LSQ_OK);
	CHECK(url && strcmp(url, want) == 0);
	lsq_url_command_free(url);
}

static void run_fails(const char *cmd, double timeout, int want_ret,
		      const char *want_err)
{
	char err[512] = "", *url = (char *)"unset";

	CHECK_EQ_INT(lsq_url_command_run(cmd, timeout, &url, err,
					 sizeof(err)), want_ret);
	CHECK(url == NULL);
	if (!strstr(err, want_err))
		fprintf(stderr, "error '%s' lacks '%s'\n", err, want_err);
	CHECK(strstr(err, want_err) != NULL);
}

static void test_run(void)
{
	struct timespec t0, t1;

	/* first line only, trailing blanks and CR cut; words, no shell */
	run_ok("printf  https://h/i?sig=a\\r\\nsecond\\n",
	       "https://h/i?sig=a");
	run_ok("echo http://h/$HOME", "http://h/$HOME");
	run_fails("false", 10, LSQ_ERR_IO, "url_command: exit status 1");
	run_fails("sh\t-c  exit${IFS}7", 10, LSQ_ERR_IO, "exit status 7");
	/* stderr's last line, with the query of a URL in it masked */
	run_fails("sh -c echo${IFS}first>&2;echo${IFS}denied${IFS}"
		  "https://h/x?sig=SECRET${IFS}now>&2;exit${IFS}2", 10,
		  LSQ_ERR_IO, "exit status 2: denied https://h/x?*** now");
	run_fails("true", 10, LSQ_ERR_IO, "url_command: printed no URL");
	run_fails("echo s3://b/k", 10, LSQ_ERR_IO, "not an http:// or");
	run_fails("echo https://h/a b", 10, LSQ_ERR_IO, "not an http:// or");
	run_fails("sh -c kill${IFS}-9${IFS}$$", 10, LSQ_ERR_IO,
		  "killed by signal 9");
	run_fails("/nonexistent/signer", 10, LSQ_ERR_IO, "cannot run "
		  "/nonexistent/signer");
	run_fails("   ", 10, LSQ_ERR_INVALID, "empty");
	run_fails("head -c 20000 /dev/zero", 10, LSQ_ERR_IO,
		  "printed more than 16384 bytes");
	/* a hang ends at the timeout, its children with it */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run_fails("sh -c sleep${IFS}30;echo${IFS}http://late", 0.5,
		  LSQ_ERR_TIMEOUT, "no answer within 0.5 s");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(t1.tv_sec - t0.tv_sec < 5);
	/* stdin is /dev/null: a command that reads it sees the end */
	run_fails("cat", 10, LSQ_ERR_IO, "printed no URL");
	/* no descriptor of ours is inherited (glibc 2.34 and later) */
	{
		int fd = open("/dev/null", O_RDONLY);  /* no O_CLOEXEC */
		char cmd[160];

		CHECK(fd > 2);
		snprintf(cmd, sizeof(cmd), "sh -c test${IFS}-e${IFS}/proc/"
			 "self/fd/%d&&echo${IFS}http://inherited||"
			 "echo${IFS}http://closed", fd);
#if defined(__GLIBC__) && \
	(__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
		run_ok(cmd, "http://closed");
#endif
		close(fd);
	}
}

int main(void)
{
	test_expiry();
	test_iso8601();
	test_renew_at();
	test_run();
	printf("url_command: ok\n");
	return 0;
}
