/* SPDX-License-Identifier: MIT */
/* learned.c - profiles learned in cache_dir (see learned.h). */
#include "profile/learned.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_io.h"
#include "common/hex.h"
#include "common/log.h"
#include "common/url.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "profile/profile.h"
#include "profile/record.h"
#include "profile/recorder.h"

/* A file not read by more than this many starts in a row leaves the
 * profile (missed=N counts them). */
#define LEARN_MAX_MISSED 3u

char *lsq_learned_profile_path(const char *dir, const char *image)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	char *where, *path;
	size_t n;

	if (!dir)
		return NULL;
	/* a URL's query is its signature (a presigned URL changes it) */
	where = lsq_source_is_url(image) ? lsq_url_redact(image)
					 : realpath(image, NULL);
	if (!where)
		return NULL;
	SHA256((const unsigned char *)where, strlen(where), md);
	free(where);
	n = strlen(dir) + sizeof("/profiles/") + 2 * sizeof(md) +
	    sizeof(".prof");
	path = malloc(n);
	if (!path)
		return NULL;
	n = (size_t)snprintf(path, n, "%s/profiles/", dir);
	lsq_hex_encode(md, sizeof(md), path + n);
	strcpy(path + n + 2 * sizeof(md), ".prof");
	return path;
}

int lsq_learned_profile_read(const char *path, char **text, size_t *len)
{
	const size_t h = LSQ_PROFILE_RECORD_HEADER;
	uint32_t n, crc;
	size_t got;
	char *buf;
	int ret = lsq_read_small_file(path, h + LSQ_PROFILE_RECORD_MAX, &buf,
				      &got, NULL);

	if (ret == LSQ_ERR_IO)
		return errno == ENOENT ? LSQ_ERR_NOT_FOUND : LSQ_ERR_IO;
	if (ret)
		return ret == LSQ_ERR_NOMEM ? ret : LSQ_ERR_CORRUPT;
	if (got < h ||
	    lsq_profile_record_decode((uint8_t *)buf, &n, &crc) != LSQ_OK ||
	    got != h + n || !lsq_profile_record_check(buf + h, n, crc)) {
		free(buf);
		return LSQ_ERR_CORRUPT;
	}
	memmove(buf, buf + h, n);
	*text = buf;
	*len = n;
	return LSQ_OK;
}

/* The merged profile as text; LSQ_ERR_NOMEM, LSQ_ERR_IO. */
static int format_profile(const struct lsq_profile *p, char **text,
			  size_t *len)
{
	FILE *f = open_memstream(text, len);
	int ret = LSQ_OK;

	if (!f)
		return LSQ_ERR_NOMEM;
	if (fputs("# sqfs-lazy learned profile: files in the order of their first read, TAB, byte ranges read, TAB, starts since last read\n",
		  f) == EOF)
		ret = LSQ_ERR_IO;
	for (size_t i = 0; i < p->count && !ret; i++)
		ret = lsq_profile_write_entry(f, p->entries[i].path,
					      p->entries[i].ranges,
					      p->entries[i].nranges,
					      p->entries[i].missed);
	if (fclose(f) != 0 && !ret)
		ret = LSQ_ERR_NOMEM;
	if (ret) {
		free(*text);
		*text = NULL;
	}
	return ret;
}

/* Header and text, replacing path whole: readers see the old file or
 * the new one, never a part. */
static int replace_file(const char *path, const char *text, size_t len)
{
	uint8_t h[LSQ_PROFILE_RECORD_HEADER];

	if (len > LSQ_PROFILE_RECORD_MAX)
		return LSQ_ERR_OVERFLOW;
	lsq_profile_record_encode(h, text, (uint32_t)len);
	return lsq_replace_file(path, (const struct lsq_file_part[]){
		{ h, sizeof(h) }, { text, len } }, 2);
}

void lsq_learned_profile_save(const char *path, struct lsq_recorder *rec)
{
	struct lsq_profile run = { 0 }, old = { 0 }, merged = { 0 };
	char *old_text = NULL, *text = NULL, *dir = NULL;
	size_t old_len = 0, len = 0;
	int ret;

	if (!path || !rec)
		return;
	ret = lsq_recorder_profile(rec, &run);
	if (!ret && run.count == 0)
		goto out;  /* nothing read: what was learned stays */
	/* a damaged old profile is dropped: this run starts afresh */
	if (!ret && lsq_learned_profile_read(path, &old_text, &old_len) ==
			    LSQ_OK)
		ret = lsq_profile_parse(old_text, old_len, &old);
	if (!ret)
		ret = lsq_profile_merge(&run, &old, LEARN_MAX_MISSED,
					LSQ_LEARN_MAX_FILES, &merged);
	if (!ret)
		ret = format_profile(&merged, &text, &len);
	if (!ret) {
		dir = strndup(path, (size_t)(strrchr(path, '/') - path));
		if (!dir)
			ret = LSQ_ERR_NOMEM;
		else if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			ret = LSQ_ERR_IO;
	}
	if (!ret)
		ret = replace_file(path, text, len);
	if (ret)
		lsq_warn("learned profile %s: not saved: %s", path,
			 ret == LSQ_ERR_IO ? strerror(errno)
					   : lsq_strerror(ret));
	else
		lsq_debug("learned profile %s: %zu files (%zu read now)", path,
			  merged.count, run.count);
out:
	lsq_profile_free(&run);
	lsq_profile_free(&old);
	lsq_profile_free(&merged);
	free(old_text);
	free(text);
	free(dir);
}
