/* SPDX-License-Identifier: MIT */
/*
 * verify.h - a mount's check of every unit it reads against the image's
 * signed block manifest (docs/manifest.md).
 *
 * lsq_verifier_open() finds the manifest (at the end of the image, or in a
 * detached file), checks its signature against the configured public keys
 * and that it belongs to this image (superblock and size); the image then
 * passes every unit it reads through lsq_verifier_read(): the bytes must
 * be one listed unit with the listed SHA-256, or the unit is fetched once
 * more from its origin (the next mirror, past the caches) and refused if
 * that copy is bad too. Checked before anything is decompressed or kept
 * by the image's caches. A refetch replaces the bad copy in the source's
 * RAM and disk caches; one in the pinned metadata region stays, and is
 * refetched on each read of it, never served.
 */
#ifndef LSQ_IMAGE_VERIFY_H
#define LSQ_IMAGE_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/manifest.h"
#include "lsq/source.h"

struct lsq_verifier;

struct lsq_verify_options {
	const char *const *keys; /* public key PEM files (private accepted) */
	size_t nkeys;
	/* a detached manifest file; NULL: the one at the end of the image */
	const char *manifest;
	/* a missing manifest is an error (else: *out = NULL, LSQ_OK) */
	bool required;
};

/* LSQ_OK with *out set (or NULL: no manifest and none required); else
 * LSQ_ERR_* and one line in err saying why the image is refused: no
 * manifest, truncated or malformed manifest, manifest altered, signed by
 * another key, bad signature, manifest of another image. */
int lsq_verifier_open(struct lsq_source *src,
		      const struct lsq_verify_options *opt,
		      struct lsq_verifier **out, char *err, size_t errlen);

void lsq_verifier_destroy(struct lsq_verifier *v); /* NULL is ignored */

/* The unit starting at offset, or NULL when the manifest lists none. */
const struct lsq_manifest_entry *
lsq_verifier_unit(const struct lsq_verifier *v, uint64_t offset);

/* The digest of the unit [offset, offset+len), or NULL when the manifest
 * lists no unit of that length there (lsq_unit_checks.digest_of; ctx is the
 * verifier): what the cache_dir's content-addressed store keys it by. */
const uint8_t *lsq_verifier_digest(void *ctx, uint64_t offset, size_t len);

/* Whether buf is the unit [offset, offset+len) with its listed digest (an
 * lsq_unit_checks.check; ctx is the verifier): what the store layer checks
 * each unit with once, as it loads it (lsq_source_use_units). */
bool lsq_verifier_check(void *ctx, const void *buf, size_t len,
			uint64_t offset);

/* Read the unit rq asks for from src and check it (see above); a copy
 * the caching layer has checked (rq->checked) is taken as it is. LSQ_ERR_CORRUPT, with one logged line naming the
 * offset and the source, for a range that is not a listed unit or whose
 * bytes do not match after the refetch; the source's errors as they
 * are. */
int lsq_verifier_read(struct lsq_verifier *v, struct lsq_source *src,
		      struct lsq_read *rq);

/* Units checked and good (verify_units), of those the copies the caching
 * layer had checked (verify_reused), copies that failed their digest
 * (verify_mismatches), refetches that brought a good copy
 * (verify_refetches), reads failed with EIO (verify_refused). */
void lsq_verifier_counters(const struct lsq_verifier *v, lsq_counter_fn fn,
			   void *ctx);

#endif
