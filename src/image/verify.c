/* SPDX-License-Identifier: MIT */
/* verify.c - see verify.h. */
#include "image/verify.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file_io.h"
#include "common/log.h"
#include "format/manifest_sign.h"
#include "format/ondisk.h"
#include "lsq/error.h"

/* A manifest lists 44 bytes a unit: this is a 1.5 TB image of 128 KiB
 * blocks, and bounds what a hostile trailer can make a mount allocate. */
#define MANIFEST_MAX (512u * 1024u * 1024u)

/* The most read from the image's end before the trailer says how much
 * the manifest takes. */
#define TAIL_GUESS_MAX (4u * 1024u * 1024u)

struct lsq_verifier {
	struct lsq_manifest m;
	atomic_uint_least64_t units, reused, mismatches, refetches, refused;
};

/* One SHA-256 context per thread: created on first use, freed when the
 * thread ends; the digest lookup happens once, not once per unit. */
static pthread_key_t sha_key;
static pthread_once_t sha_once = PTHREAD_ONCE_INIT;
static int sha_key_ok;

static void sha_free(void *h)
{
	lsq_sha256_destroy(h);
}

static void sha_init(void)
{
	sha_key_ok = pthread_key_create(&sha_key, sha_free) == 0;
}

static struct lsq_sha256 *thread_sha(void)
{
	struct lsq_sha256 *h;

	pthread_once(&sha_once, sha_init);
	if (!sha_key_ok)
		return NULL;
	h = pthread_getspecific(sha_key);
	if (!h && lsq_sha256_create(&h) == LSQ_OK &&
	    pthread_setspecific(sha_key, h) != 0) {
		lsq_sha256_destroy(h);
		h = NULL;
	}
	return h;
}

static int read_file(const char *path, uint8_t **out, size_t *len, char *err,
		     size_t errlen)
{
	char *text;
	int ret = lsq_read_small_file(path, MANIFEST_MAX, &text, len, NULL);

	if (ret == LSQ_ERR_INVALID)
		snprintf(err, errlen, "manifest %s: not a regular file of at most %u bytes",
			 path, MANIFEST_MAX);
	else if (ret == LSQ_ERR_IO)
		snprintf(err, errlen, "cannot read manifest %s: %s", path,
			 strerror(errno));
	if (!ret)
		*out = (uint8_t *)text;
	return ret;
}

/* How much of the image's end to read at once, so that one request brings
 * the trailer and the body: a manifest lists 44 bytes a unit and units
 * average tens of KiB, so 1/1024 of the image covers most manifests, for
 * 0.1% of its bytes. A larger body costs a second request. */
static size_t tail_guess(uint64_t size)
{
	uint64_t n = size / 1024 + 4096;

	if (n > TAIL_GUESS_MAX)
		n = TAIL_GUESS_MAX;
	if (n > size - SQUASHFS_SUPERBLOCK_SIZE)
		n = size - SQUASHFS_SUPERBLOCK_SIZE;
	return (size_t)n;
}

/* The body and trailer at the end of the image. LSQ_ERR_NOT_FOUND when the
 * image ends in no trailer. */
static int read_embedded(struct lsq_source *src, uint8_t **out, size_t *len,
			 char *err, size_t errlen)
{
	struct lsq_manifest_trailer t;
	uint64_t total;
	size_t guess;
	uint8_t *buf;
	int ret;

	if (src->size < SQUASHFS_SUPERBLOCK_SIZE + LSQ_MANIFEST_TRAILER_SIZE) {
		snprintf(err, errlen, "no manifest (the image is too small for one)");
		return LSQ_ERR_NOT_FOUND;
	}
	guess = tail_guess(src->size);
	buf = malloc(guess);
	if (!buf)
		return LSQ_ERR_NOMEM;
	ret = lsq_source_read_at(src, buf, guess, src->size - guess);
	if (ret) {
		snprintf(err, errlen, "cannot read the manifest trailer at %" PRIu64 ": %s",
			 src->size - (uint64_t)guess, lsq_strerror(ret));
		free(buf);
		return ret;
	}
	ret = lsq_manifest_trailer_decode(
		buf + guess - LSQ_MANIFEST_TRAILER_SIZE, &t, err, errlen);
	if (ret) {
		free(buf);
		return ret;
	}
	total = t.body_length + LSQ_MANIFEST_TRAILER_SIZE;
	if (t.body_length > MANIFEST_MAX || t.body_offset > src->size ||
	    src->size - t.body_offset != total) {
		snprintf(err, errlen,
			 "truncated manifest: a body of %" PRIu64 " bytes at %" PRIu64
			 " and the trailer do not end the image of %" PRIu64 " bytes",
			 t.body_length, t.body_offset, src->size);
		free(buf);
		return LSQ_ERR_CORRUPT;
	}
	if (total <= guess) {  /* the one read brought it all */
		memmove(buf, buf + (guess - total), (size_t)total);
		*out = buf;
		*len = (size_t)total;
		return LSQ_OK;
	}
	free(buf);
	buf = malloc((size_t)total);
	if (!buf)
		return LSQ_ERR_NOMEM;
	ret = lsq_source_read_at(src, buf, (size_t)total, t.body_offset);
	if (ret) {
		snprintf(err, errlen, "cannot read the manifest at %" PRIu64 ": %s",
			 t.body_offset, lsq_strerror(ret));
		free(buf);
		return ret;
	}
	*out = buf;
	*len = (size_t)total;
	return LSQ_OK;
}

static int check_signature(struct lsq_verifier *v, const uint8_t *buf,
			   const struct lsq_verify_options *opt, char *err,
			   size_t errlen)
{
	struct lsq_sign_key **keys = calloc(opt->nkeys ? opt->nkeys : 1,
					    sizeof(*keys));
	size_t n = 0;
	int ret = LSQ_OK;

	if (!keys)
		return LSQ_ERR_NOMEM;
	for (; n < opt->nkeys; n++) {
		ret = lsq_sign_key_load_public(opt->keys[n], &keys[n], err,
					       errlen);
		if (ret)
			break;
	}
	if (!ret)
		ret = lsq_manifest_verify(&v->m, buf,
					  (size_t)v->m.trailer.body_length,
					  keys, n, NULL, err, errlen);
	while (n > 0)
		lsq_sign_key_destroy(keys[--n]);
	free(keys);
	return ret;
}

int lsq_verifier_open(struct lsq_source *src,
		      const struct lsq_verify_options *opt,
		      struct lsq_verifier **out, char *err, size_t errlen)
{
	uint8_t sb[SQUASHFS_SUPERBLOCK_SIZE];
	struct lsq_verifier *v;
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret;

	*out = NULL;
	ret = opt->manifest ? read_file(opt->manifest, &buf, &len, err, errlen)
			    : read_embedded(src, &buf, &len, err, errlen);
	if (ret == LSQ_ERR_NOT_FOUND && !opt->required)
		return LSQ_OK;
	if (ret)
		return ret == LSQ_ERR_NOT_FOUND ? LSQ_ERR_CORRUPT : ret;
	v = calloc(1, sizeof(*v));
	if (!v) {
		free(buf);
		return LSQ_ERR_NOMEM;
	}
	ret = lsq_manifest_parse(buf, len, &v->m, err, errlen);
	if (ret == LSQ_ERR_NOT_FOUND)
		ret = LSQ_ERR_CORRUPT; /* a detached file without a trailer */
	if (!ret)
		ret = check_signature(v, buf, opt, err, errlen);
	if (!ret)
		ret = lsq_source_read_at(src, sb, sizeof(sb), 0);
	if (!ret)
		ret = lsq_manifest_check_image(&v->m, sb, src->size, err,
					       errlen);
	free(buf);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "cannot check the manifest: %s",
				 lsq_strerror(ret));
		lsq_verifier_destroy(v);
		return ret;
	}
	*out = v;
	return LSQ_OK;
}

void lsq_verifier_destroy(struct lsq_verifier *v)
{
	if (!v)
		return;
	lsq_manifest_fini(&v->m);
	free(v);
}

const struct lsq_manifest_entry *
lsq_verifier_unit(const struct lsq_verifier *v, uint64_t offset)
{
	return lsq_manifest_find(&v->m, offset);
}

const uint8_t *lsq_verifier_digest(void *ctx, uint64_t offset, size_t len)
{
	const struct lsq_verifier *v = ctx;
	const struct lsq_manifest_entry *e = lsq_manifest_find(&v->m, offset);

	return e && e->length == len ? e->digest : NULL;
}

static bool matches(const struct lsq_manifest_entry *e, const void *buf,
		    size_t len)
{
	uint8_t d[LSQ_MANIFEST_DIGEST_SIZE];
	struct lsq_sha256 *h = thread_sha();

	return h && lsq_sha256_digest(h, buf, len, d) == LSQ_OK &&
	       memcmp(d, e->digest, sizeof(d)) == 0;
}

bool lsq_verifier_check(void *ctx, const void *buf, size_t len,
			uint64_t offset)
{
	const struct lsq_verifier *v = ctx;
	const struct lsq_manifest_entry *e = lsq_manifest_find(&v->m, offset);

	return e && e->length == len && matches(e, buf, len);
}

int lsq_verifier_read(struct lsq_verifier *v, struct lsq_source *src,
		      struct lsq_read *rq)
{
	void *buf = rq->buf;
	size_t len = rq->len;
	uint64_t offset = rq->offset;
	const struct lsq_manifest_entry *e = lsq_manifest_find(&v->m, offset);
	const char *bad, *fresh;  /* where the two copies came from */
	int ret;

	if (!e || e->length != len) {
		atomic_fetch_add_explicit(&v->refused, 1, memory_order_relaxed);
		lsq_log_once(offset, LSQ_LOG_ERROR,
			     "%s: read of %zu bytes at %" PRIu64
			     " is not a unit of the signed manifest",
			     src->name, len, offset);
		return LSQ_ERR_CORRUPT;
	}
	ret = lsq_source_read(src, rq);
	if (ret)
		return ret;
	/* a copy the caching layer checked with lsq_verifier_check() when it
	 * loaded it is not hashed again */
	if (rq->checked) {
		atomic_fetch_add_explicit(&v->units, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&v->reused, 1, memory_order_relaxed);
		return LSQ_OK;
	}
	if (matches(e, buf, len)) {
		atomic_fetch_add_explicit(&v->units, 1, memory_order_relaxed);
		return LSQ_OK;
	}
	atomic_fetch_add_explicit(&v->mismatches, 1, memory_order_relaxed);
	bad = rq->origin;
	ret = lsq_source_refetch(src, rq);
	fresh = rq->origin;
	if (ret == LSQ_OK && matches(e, buf, len)) {
		atomic_fetch_add_explicit(&v->refetches, 1,
					  memory_order_relaxed);
		lsq_log_once(offset ^ (1ull << 63), LSQ_LOG_WARNING,
			     "%s: unit of %zu bytes at %" PRIu64
			     " from %s did not match the signed manifest; a fresh copy from %s did",
			     src->name, len, offset, bad ? bad : src->name,
			     fresh ? fresh : src->name);
		return LSQ_OK;
	}
	if (ret == LSQ_OK) {
		atomic_fetch_add_explicit(&v->mismatches, 1,
					  memory_order_relaxed);
		ret = LSQ_ERR_CORRUPT;
	}
	atomic_fetch_add_explicit(&v->refused, 1, memory_order_relaxed);
	lsq_log_once(offset, LSQ_LOG_ERROR,
		     "%s: unit of %zu bytes at %" PRIu64
		     " from %s does not match the signed manifest (nor did a fresh copy from %s): %s",
		     src->name, len, offset, bad ? bad : src->name,
		     fresh ? fresh : src->name, lsq_strerror(ret));
	return ret;
}

void lsq_verifier_counters(const struct lsq_verifier *v, lsq_counter_fn fn,
			   void *ctx)
{
	fn(ctx, "verify_units", atomic_load(&v->units), LSQ_COUNTER_TOTAL);
	fn(ctx, "verify_reused", atomic_load(&v->reused), LSQ_COUNTER_TOTAL);
	fn(ctx, "verify_mismatches", atomic_load(&v->mismatches),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "verify_refetches", atomic_load(&v->refetches),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "verify_refused", atomic_load(&v->refused), LSQ_COUNTER_TOTAL);
}
