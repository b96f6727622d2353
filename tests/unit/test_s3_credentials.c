/* SPDX-License-Identifier: MIT */
/*
 * test_s3_credentials.c - where s3:// credentials come from: the order
 * (explicit file, environment, shared credentials file, config file), the
 * profile rules, the strict INI reading, and that a refusal never quotes
 * a secret.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/check.h"
#include "lsq/error.h"
#include "http/s3_credentials.h"

static char dir[] = "/tmp/lsq-s3cred-XXXXXX";

static char *write_file(const char *name, const char *text, mode_t mode)
{
	static char path[4][256];
	static unsigned next;
	char *p = path[next++ % 4];
	FILE *f;

	snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
	f = fopen(p, "w");
	CHECK(f != NULL);
	CHECK(fputs(text, f) >= 0);
	CHECK(fclose(f) == 0);
	CHECK(chmod(p, mode) == 0);
	return p;
}

static void clear_env(void)
{
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	unsetenv("AWS_CONFIG_FILE");
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");
	setenv("HOME", dir, 1);
}

static int load(const char *profile, const char *file,
		struct lsq_s3_creds *c, char *err, size_t errlen)
{
	struct lsq_s3_where w = { profile, file };

	err[0] = '\0';
	return lsq_s3_creds_load(&w, c, err, errlen);
}

int main(void)
{
	struct lsq_s3_creds c = { 0 }, d = { 0 };
	char err[512];
	char *f;

	CHECK(mkdtemp(dir) != NULL);
	clear_env();

	/* nothing anywhere: one line naming the profile */
	CHECK_EQ_INT(load(NULL, NULL, &c, err, sizeof(err)), LSQ_ERR_INVALID);
	CHECK(strstr(err, "profile default") != NULL);

	/* environment */
	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	CHECK_EQ_INT(load(NULL, NULL, &c, err, sizeof(err)), LSQ_OK);
	CHECK(strcmp(c.access_key, "AKENV") == 0);
	CHECK(strcmp(c.secret, "envsecret") == 0);
	CHECK(strcmp(c.token, "envtoken") == 0);
	lsq_s3_creds_clear(&c);

	/* the shared credentials file, a named profile; the named profile
	 * wins over the environment */
	f = write_file("creds", "# comment\n[default]\n"
		       "aws_access_key_id = AKDEF\n"
		       "aws_secret_access_key = defsecret\n\n"
		       "; other\n[ci]\n  aws_access_key_id=AKCI  \n"
		       "aws_secret_access_key = cisecret\nregion = eu-west-1\n",
		       0644);
	setenv("AWS_SHARED_CREDENTIALS_FILE", f, 1);
	CHECK_EQ_INT(load("ci", NULL, &c, err, sizeof(err)), LSQ_OK);
	CHECK(strcmp(c.access_key, "AKCI") == 0);
	CHECK(strcmp(c.secret, "cisecret") == 0);
	CHECK(c.token == NULL);
	CHECK(strstr(c.from, "[ci]") != NULL);
	/* the same again compares equal; another profile does not */
	CHECK_EQ_INT(load("ci", NULL, &d, err, sizeof(err)), LSQ_OK);
	CHECK(lsq_s3_creds_equal(&c, &d));
	lsq_s3_creds_clear(&d);
	unsetenv("AWS_ACCESS_KEY_ID");
	CHECK_EQ_INT(load(NULL, NULL, &d, err, sizeof(err)), LSQ_OK);
	CHECK(strcmp(d.access_key, "AKDEF") == 0);
	CHECK(!lsq_s3_creds_equal(&c, &d));
	lsq_s3_creds_clear(&c);
	lsq_s3_creds_clear(&d);

	/* AWS_PROFILE, found only in the config file as [profile NAME] */
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	setenv("AWS_PROFILE", "cfg", 1);
	setenv("AWS_CONFIG_FILE",
	       write_file("config", "[profile cfg]\naws_access_key_id = AKCFG\n"
			  "aws_secret_access_key = cfgsecret\n"
			  "aws_session_token = cfgtoken\n", 0600), 1);
	CHECK_EQ_INT(load(NULL, NULL, &c, err, sizeof(err)), LSQ_OK);
	CHECK(strcmp(c.access_key, "AKCFG") == 0);
	CHECK(strcmp(c.token, "cfgtoken") == 0);
	lsq_s3_creds_clear(&c);
	unsetenv("AWS_PROFILE");

	/* an explicit file: only it, and not readable by others */
	f = write_file("explicit", "[default]\naws_access_key_id = AKX\n"
		       "aws_secret_access_key = xsecret\n", 0640);
	CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)), LSQ_ERR_INVALID);
	CHECK(strstr(err, "readable by others") != NULL);
	CHECK(strstr(err, "xsecret") == NULL);
	CHECK(chmod(f, 0600) == 0);
	CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)), LSQ_OK);
	CHECK(strcmp(c.secret, "xsecret") == 0);
	lsq_s3_creds_clear(&c);
	/* ... whose profile must be there (the shared files are not asked) */
	CHECK_EQ_INT(load("ci", f, &c, err, sizeof(err)), LSQ_ERR_INVALID);
	CHECK(strstr(err, "[ci]") != NULL);
	CHECK_EQ_INT(load(NULL, "/nonexistent/creds", &c, err, sizeof(err)),
		     LSQ_ERR_INVALID);

	/* strict reading: bad lines are errors that quote no value */
	f = write_file("bad1", "[default]\naws_access_key_id AKBAD\n", 0600);
	CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)), LSQ_ERR_INVALID);
	CHECK(strstr(err, "line 2") != NULL && strstr(err, "AKBAD") == NULL);
	f = write_file("bad2", "[default\naws_access_key_id = A\n", 0600);
	CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)), LSQ_ERR_INVALID);
	CHECK(strstr(err, "line 1") != NULL);
	f = write_file("bad3", "[default]\naws_access_key_id = A\n"
		       "aws_secret_access_key = two words\n", 0600);
	CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)), LSQ_ERR_INVALID);
	CHECK(strstr(err, "line 3") != NULL && strstr(err, "words") == NULL);
	f = write_file("bad4", "[default]\naws_access_key_id = A\n", 0600);
	CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)), LSQ_ERR_INVALID);
	{
		/* a file over the bound */
		size_t n = 70 * 1024;
		char *big = malloc(n + 1);

		CHECK(big != NULL);
		memset(big, '#', n);
		big[n] = '\0';
		f = write_file("big", big, 0600);
		free(big);
		CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)),
			     LSQ_ERR_INVALID);
		CHECK(strstr(err, "larger than") != NULL);
	}

	/* an expiry as credential helpers write it, in the profile read;
	 * the file and its stamp, to notice a rotation */
	clear_env();
	f = write_file("expiring", "[other]\naws_expiration = "
		       "2030-01-01T00:00:00Z\n[default]\naws_access_key_id"
		       " = AKX\naws_secret_access_key = sx\n"
		       "x_security_token_expires = 2026-11-25T20:00:00+02:00"
		       "\n", 0600);
	CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)), LSQ_OK);
	CHECK(c.expires == 1795629600);
	CHECK(c.file && strcmp(c.file, f) == 0);
	CHECK(!lsq_s3_creds_stale(c.file, &c.stamp, 0, 0));
	/* within LSQ_S3_RENEW_BEFORE_S of the expiry, and not before */
	CHECK(lsq_s3_creds_stale(c.file, &c.stamp, c.expires,
				 c.expires - 299));
	CHECK(!lsq_s3_creds_stale(c.file, &c.stamp, c.expires,
				  c.expires - 301));
	/* rewritten: another size; renamed over: another inode */
	write_file("expiring", "[default]\naws_access_key_id = AKY\n"
		   "aws_secret_access_key = sy\n", 0600);
	CHECK(lsq_s3_creds_stale(c.file, &c.stamp, 0, 0));
	CHECK_EQ_INT(load(NULL, f, &d, err, sizeof(err)), LSQ_OK);
	CHECK(d.expires == 0 && !lsq_s3_creds_stale(d.file, &d.stamp, 0, 0));
	CHECK(rename(write_file("expiring.new", "[default]\n"
				"aws_access_key_id = AKY\n"
				"aws_secret_access_key = sy\n", 0600),
		     f) == 0);
	CHECK(lsq_s3_creds_stale(d.file, &d.stamp, 0, 0));
	/* gone (between unlink and rename): keep what we have */
	CHECK(unlink(f) == 0);
	CHECK(!lsq_s3_creds_stale(d.file, &d.stamp, 0, 0));
	lsq_s3_creds_clear(&c);
	lsq_s3_creds_clear(&d);
	/* an expiry we cannot read is none; the environment has no file */
	f = write_file("oddexp", "[default]\naws_access_key_id = AKX\n"
		       "aws_secret_access_key = sx\naws_expiration = soon\n",
		       0600);
	CHECK_EQ_INT(load(NULL, f, &c, err, sizeof(err)), LSQ_OK);
	CHECK(c.expires == 0);
	lsq_s3_creds_clear(&c);
	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	CHECK_EQ_INT(load(NULL, NULL, &c, err, sizeof(err)), LSQ_OK);
	CHECK(c.file == NULL && !lsq_s3_creds_stale(c.file, &c.stamp, 0, 0));
	lsq_s3_creds_clear(&c);
	clear_env();

	/* region */
	CHECK(strcmp(lsq_s3_region(NULL), "us-east-1") == 0);
	setenv("AWS_DEFAULT_REGION", "eu-north-1", 1);
	CHECK(strcmp(lsq_s3_region(NULL), "eu-north-1") == 0);
	setenv("AWS_REGION", "ap-south-1", 1);
	CHECK(strcmp(lsq_s3_region(NULL), "ap-south-1") == 0);
	CHECK(strcmp(lsq_s3_region("us-west-2"), "us-west-2") == 0);

	{
		char cmd[64];

		/* only our own directory */
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		CHECK(system(cmd) == 0);
	}
	return 0;
}
