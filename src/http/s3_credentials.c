/* SPDX-License-Identifier: MIT */
/*
 * s3_credentials.c - credentials for s3:// images from the environment and
 * the AWS shared files. The files are INI: "[section]" lines and
 * "name = value" lines, '#' or ';' comments. We read them strictly and
 * within bounds (64 KiB a file, 8 KiB a line) because they come from the
 * user's home and a mistake there should be one clear line, not a guess.
 * The explicit -o credentials_file= is refused when group or others may
 * read it, as -o header_file= is: it is a secret we were pointed at.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file_io.h"
#include "common/iso8601.h"
#include "lsq/error.h"
#include "http/s3_credentials.h"

#define FILE_MAX (64u * 1024u)
#define LINE_MAX_BYTES (8u * 1024u)
#define KEY_MAX 128u     /* access key id and secret */
#define TOKEN_MAX 8192u  /* session tokens run to a few KiB */

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void lsq_s3_creds_clear(struct lsq_s3_creds *c)
{
	wipe_free(c->access_key);
	wipe_free(c->secret);
	wipe_free(c->token);
	free(c->file);
	c->access_key = c->secret = c->token = c->file = NULL;
	c->from[0] = '\0';
	memset(&c->stamp, 0, sizeof(c->stamp));
	c->expires = 0;
}

static void stamp_of(const struct stat *st, struct lsq_s3_file_stamp *out)
{
	out->dev = st->st_dev;
	out->ino = st->st_ino;
	out->size = st->st_size;
	out->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 +
			st->st_mtim.tv_nsec;
}

bool lsq_s3_creds_stale(const char *file,
			const struct lsq_s3_file_stamp *stamp,
			int64_t expires, int64_t now)
{
	struct lsq_s3_file_stamp cur;
	struct stat st;

	if (!file)
		return false;
	if (expires && now >= expires - LSQ_S3_RENEW_BEFORE_S)
		return true;
	if (stat(file, &st) != 0)
		return false;
	stamp_of(&st, &cur);
	return cur.dev != stamp->dev || cur.ino != stamp->ino ||
	       cur.size != stamp->size || cur.mtime_ns != stamp->mtime_ns;
}

static bool same(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

bool lsq_s3_creds_equal(const struct lsq_s3_creds *a,
			const struct lsq_s3_creds *b)
{
	return same(a->access_key, b->access_key) &&
	       same(a->secret, b->secret) && same(a->token, b->token);
}

const char *lsq_s3_region(const char *region)
{
	const char *e;

	if (region && region[0])
		return region;
	e = getenv("AWS_REGION");
	if (e && e[0])
		return e;
	e = getenv("AWS_DEFAULT_REGION");
	if (e && e[0])
		return e;
	return "us-east-1";
}

static char *trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' ||
			   end[-1] == '\r' || end[-1] == '\n'))
		*--end = '\0';
	return s;
}

/* A value may hold no control characters or spaces: it goes into a
 * header and a signature. */
static bool printable_token(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v <= ' ' || *v == 0x7f)
			return false;
	return true;
}

/* Read the whole file (bounded) into a NUL-terminated buffer. strict:
 * refuse a file that group or others may read. Returns 0, -1 when the
 * file does not exist (not an error for the shared files), else an
 * LSQ_ERR_* with err set. */
static int slurp(const char *path, bool strict, char **out,
		 struct lsq_s3_file_stamp *stamp, char *err, size_t errlen)
{
	struct stat st;
	size_t len;
	int ret = lsq_read_small_file(path, FILE_MAX, out, &len, &st);

	if (ret == LSQ_ERR_IO && errno == ENOENT && !strict)
		return -1;
	if (ret == LSQ_ERR_IO || ret == LSQ_ERR_INVALID) {
		if (ret == LSQ_ERR_IO)
			snprintf(err, errlen, "credentials file %s: %s", path,
				 strerror(errno));
		else if (errno == EFBIG)
			snprintf(err, errlen, "credentials file %s: larger "
				 "than %u bytes", path, FILE_MAX);
		else
			snprintf(err, errlen, "credentials file %s: not a "
				 "regular file", path);
		return LSQ_ERR_INVALID;
	}
	if (ret)
		return ret;
	if (strict && (st.st_mode & (S_IRGRP | S_IROTH))) {
		snprintf(err, errlen, "credentials file %s is readable by "
			 "others (chmod go-r %s)", path, path);
		explicit_bzero(*out, len);
		free(*out);
		return LSQ_ERR_INVALID;
	}
	stamp_of(&st, stamp);
	return LSQ_OK;
}

/* Find [section] in an INI text and take its three keys into c. Returns
 * 0 with c filled (access key and secret both present), -1 when the
 * section or its keys are absent, else LSQ_ERR_* with err set. */
static int parse_ini(char *text, const char *path, const char *section,
		     struct lsq_s3_creds *c, char *err, size_t errlen)
{
	bool in = false, found = false;
	unsigned lineno = 0;
	char *line = text, *next;

	for (; line && *line; line = next) {
		char *l, *eq, *name, *value, **slot;
		size_t cap;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		if (strlen(line) > LINE_MAX_BYTES) {
			snprintf(err, errlen, "%s, line %u: longer than %u "
				 "bytes", path, lineno, LINE_MAX_BYTES);
			return LSQ_ERR_INVALID;
		}
		l = trim(line);
		if (l[0] == '\0' || l[0] == '#' || l[0] == ';')
			continue;
		if (l[0] == '[') {
			char *close = strchr(l, ']');

			if (!close || trim(close + 1)[0] != '\0') {
				snprintf(err, errlen, "%s, line %u: expected "
					 "'[section]'", path, lineno);
				return LSQ_ERR_INVALID;
			}
			*close = '\0';
			in = strcmp(trim(l + 1), section) == 0;
			found |= in;
			continue;
		}
		eq = strchr(l, '=');
		if (!eq) {
			snprintf(err, errlen, "%s, line %u: expected "
				 "'name = value'", path, lineno);
			return LSQ_ERR_INVALID;
		}
		if (!in)
			continue;
		*eq = '\0';
		name = trim(l);
		value = trim(eq + 1);
		if (strcmp(name, "aws_access_key_id") == 0) {
			slot = &c->access_key;
			cap = KEY_MAX;
		} else if (strcmp(name, "aws_secret_access_key") == 0) {
			slot = &c->secret;
			cap = KEY_MAX;
		} else if (strcmp(name, "aws_session_token") == 0) {
			slot = &c->token;
			cap = TOKEN_MAX;
		} else if (strcmp(name, "aws_expiration") == 0 ||
			   strcmp(name, "x_security_token_expires") == 0) {
			/* written by credential helpers, read by no AWS
			 * tool: one we cannot read is no reason to fail */
			if (lsq_parse_iso8601(value, &c->expires))
				c->expires = 0;
			continue;
		} else {
			continue;  /* region, output, ...: not ours */
		}
		if (!value[0] || strlen(value) > cap ||
		    !printable_token(value)) {
			/* the value is never echoed */
			snprintf(err, errlen, "%s, line %u: unusable value "
				 "for %s", path, lineno, name);
			return LSQ_ERR_INVALID;
		}
		wipe_free(*slot);
		*slot = strdup(value);
		if (!*slot)
			return LSQ_ERR_NOMEM;
	}
	if (!found || !c->access_key || !c->secret) {
		lsq_s3_creds_clear(c);
		return -1;
	}
	return LSQ_OK;
}

/* Read path and take section's credentials. strict: the explicit file. */
static int from_file(const char *path, bool strict, const char *section,
		     struct lsq_s3_creds *c, char *err, size_t errlen)
{
	struct lsq_s3_file_stamp stamp;
	char *text = NULL;
	int ret = slurp(path, strict, &text, &stamp, err, errlen);

	if (ret)
		return ret;
	ret = parse_ini(text, path, section, c, err, errlen);
	explicit_bzero(text, strlen(text));
	free(text);
	if (ret == 0) {
		c->file = strdup(path);
		if (!c->file)
			ret = LSQ_ERR_NOMEM;
	}
	if (ret == 0) {
		snprintf(c->from, sizeof(c->from), "%s [%s]", path, section);
		c->stamp = stamp;
	} else {  /* a bad line after good ones: keep none of them */
		lsq_s3_creds_clear(c);
	}
	return ret;
}

static int from_env(struct lsq_s3_creds *c)
{
	const char *id = getenv("AWS_ACCESS_KEY_ID");
	const char *secret = getenv("AWS_SECRET_ACCESS_KEY");
	const char *token = getenv("AWS_SESSION_TOKEN");

	if (!id || !id[0] || !secret || !secret[0])
		return -1;
	c->access_key = strdup(id);
	c->secret = strdup(secret);
	c->token = token && token[0] ? strdup(token) : NULL;
	if (!c->access_key || !c->secret || (token && token[0] && !c->token)) {
		lsq_s3_creds_clear(c);
		return LSQ_ERR_NOMEM;
	}
	snprintf(c->from, sizeof(c->from), "the environment");
	return LSQ_OK;
}

/* $NAME, else ~/.aws/tail; NULL when there is no home. */
static char *shared_path(const char *env, const char *tail)
{
	const char *p = getenv(env), *home;
	char *out = NULL;

	if (p && p[0])
		return strdup(p);
	home = getenv("HOME");
	if (!home || !home[0])
		return NULL;
	if (asprintf(&out, "%s/.aws/%s", home, tail) < 0)
		return NULL;
	return out;
}

int lsq_s3_creds_load(const struct lsq_s3_where *where,
		      struct lsq_s3_creds *out, char *err, size_t errlen)
{
	struct lsq_s3_creds c = { 0 };
	const char *profile = where->profile;
	char *path, *section = NULL;
	int ret;

	if (!profile || !profile[0])
		profile = getenv("AWS_PROFILE");
	if (!profile || !profile[0])
		profile = "default";
	if (where->credentials_file) {
		ret = from_file(where->credentials_file, true, profile, &c,
				err, errlen);
		if (ret < 0 && ret != -1)
			return ret;
		if (ret == -1) {
			snprintf(err, errlen, "credentials file %s: no "
				 "aws_access_key_id and aws_secret_access_key "
				 "in [%s]", where->credentials_file, profile);
			return LSQ_ERR_INVALID;
		}
		*out = c;
		return LSQ_OK;
	}
	/* An explicit -o aws_profile= wins over the environment's keys, as
	 * --profile does for the AWS tools. */
	if (!where->profile || !where->profile[0]) {
		ret = from_env(&c);
		if (ret != -1)
			goto done;
	}
	path = shared_path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	ret = path ? from_file(path, false, profile, &c, err, errlen) : -1;
	free(path);
	if (ret != -1)
		goto done;
	/* the config file names profiles "[profile NAME]", but "[default]" */
	if (strcmp(profile, "default") == 0)
		section = strdup(profile);
	else if (asprintf(&section, "profile %s", profile) < 0)
		section = NULL;
	path = shared_path("AWS_CONFIG_FILE", "config");
	if (!section) {
		free(path);
		return LSQ_ERR_NOMEM;
	}
	ret = path ? from_file(path, false, section, &c, err, errlen) : -1;
	free(path);
	free(section);
	if (ret == -1) {
		snprintf(err, errlen, "no AWS credentials for profile %s (set "
			 "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or use "
			 "~/.aws/credentials or -o credentials_file=)",
			 profile);
		return LSQ_ERR_INVALID;
	}
done:
	if (ret)
		return ret;
	*out = c;
	return LSQ_OK;
}
