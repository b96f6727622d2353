/* SPDX-License-Identifier: MIT */
/*
 * s3_credentials.h - where an S3 image's credentials and region come from,
 * in the order the AWS tools use (docs/s3.md). No libcurl here: the HTTP
 * source signs with what this returns. Secrets are never written to err.
 */
#ifndef LSQ_SOURCE_S3_CREDENTIALS_H
#define LSQ_SOURCE_S3_CREDENTIALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where to look; all borrowed, NULL for "not given". */
struct lsq_s3_where {
	const char *profile;          /* -o aws_profile= (else AWS_PROFILE) */
	const char *credentials_file; /* -o credentials_file=: only this */
};

/* What a credentials file looked like when it was read: a rotator that
 * rewrites it in place changes size or mtime, one that renames a new file
 * over it changes the inode. */
struct lsq_s3_file_stamp {
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_ns;
};

/* One set of credentials; strings owned (malloc'd), token may be NULL. */
struct lsq_s3_creds {
	char *access_key;
	char *secret;
	char *token;
	char from[160];  /* where they came from, for messages (no secret) */
	char *file;      /* the file they were read from; NULL: environment */
	struct lsq_s3_file_stamp stamp;  /* of file, as read */
	/* Unix time the profile's aws_expiration or x_security_token_expires
	 * (ISO-8601) names; 0 when it names none we can read */
	int64_t expires;
};

/* Read the credentials again this long before their expiry. */
#define LSQ_S3_RENEW_BEFORE_S 300

/* Find credentials: with credentials_file only that file (which must not
 * be readable by group or others); else AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) unless a profile was
 * named with -o aws_profile=; else the profile's section of the shared
 * credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials),
 * then of the config file (AWS_CONFIG_FILE or ~/.aws/config). Returns 0,
 * or LSQ_ERR_INVALID / LSQ_ERR_NOMEM with one line in err. */
int lsq_s3_creds_load(const struct lsq_s3_where *where,
		      struct lsq_s3_creds *out, char *err, size_t errlen);

/* True when a and b hold the same key, secret and token. */
bool lsq_s3_creds_equal(const struct lsq_s3_creds *a,
			const struct lsq_s3_creds *b);

/* Whether the credentials c were read from a file that has changed since
 * (another inode, size or mtime: one stat()), or expire within
 * LSQ_S3_RENEW_BEFORE_S of now (Unix time). False for credentials from
 * the environment and when the file cannot be stat()ed (a rotator may be
 * between unlink and rename; the old credentials stay). */
bool lsq_s3_creds_stale(const char *file,
			const struct lsq_s3_file_stamp *stamp,
			int64_t expires, int64_t now);

/* Wipe and free the strings; the struct may be loaded again. */
void lsq_s3_creds_clear(struct lsq_s3_creds *c);

/* The region: region (-o region=), else AWS_REGION, else
 * AWS_DEFAULT_REGION, else us-east-1. Borrowed or static. */
const char *lsq_s3_region(const char *region);

#endif
