/* SPDX-License-Identifier: MIT */
/*
 * sign_image.h - give an image file its signed block manifest
 * (docs/manifest.md): what `sqfs-lazy-sign --key` does, also called by
 * `sqfs-lazy-pack --sign` on the image it has just written, so that both
 * produce the same bytes.
 */
#ifndef LSQ_SIGN_IMAGE_H
#define LSQ_SIGN_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "format/manifest_sign.h"
#include "image/units.h"

/* What the image's reader says about it: its units (NULL when it cannot
 * be opened or listed, with the reason in why). */
struct lsq_image_facts {
	struct lsq_unit *units;
	size_t count;
	uint64_t bytes_used;
	char why[384]; /* fits in the callers' 512 with their words */
	int ret;
};

/* Open the image file at path with the reader and list its units;
 * returns f->ret. lsq_image_facts_fini() frees the list either way. */
int lsq_image_facts_read(const char *path, struct lsq_image_facts *f);
void lsq_image_facts_fini(struct lsq_image_facts *f);

struct lsq_signed_info {
	size_t units;          /* units listed */
	size_t manifest_len;   /* body + trailer */
	uint64_t body_offset;  /* where the body went (embedded) */
	uint64_t image_size;   /* the file's size now (embedded) */
};

/* Sign the image file at path with key: list its units, hash them, and
 * write body and trailer after the zero padding that follows bytes_used
 * (replacing an old manifest there; the file is cut right after), or,
 * when detached is not NULL, to that file (the image is not touched).
 * Returns LSQ_OK, or an lsq_err with a one-line reason in why (not
 * naming the image). */
int lsq_sign_image(const char *path, const struct lsq_sign_key *key,
		   const char *detached, struct lsq_signed_info *info,
		   char *why, size_t whylen);

#endif
