/* SPDX-License-Identifier: MIT */
/*
 * manifest_sign.h - the cryptography of the signed block manifest:
 * SHA-256 and Ed25519 through OpenSSL's libcrypto, with no OpenSSL type in
 * this interface (as no libcurl type leaves src/source/http*.c).
 *
 * Keys are PEM files as `openssl genpkey -algorithm ed25519` (private)
 * and `openssl pkey -pubout` (public) write them. A key's id is the
 * SHA-256 of its 32-byte raw public key; the trailer names the signing
 * key by it, so a refusal can say which key signed.
 *
 * Thread safety: keys are immutable after loading and may be used from
 * any thread; an lsq_sha256 context belongs to one thread at a time.
 */
#ifndef LSQ_MANIFEST_SIGN_H
#define LSQ_MANIFEST_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "format/manifest.h"
#include "format/ondisk.h"

/* ---- SHA-256 ---- */

struct lsq_sha256;

/* A reusable context: the digest implementation is looked up once, not
 * once per unit. LSQ_ERR_NOMEM, or LSQ_ERR_UNSUPPORTED without SHA-256. */
int lsq_sha256_create(struct lsq_sha256 **out);
void lsq_sha256_destroy(struct lsq_sha256 *h); /* NULL is ignored */

/* out = SHA-256(data[0..len)). LSQ_ERR_CODEC if libcrypto fails. */
int lsq_sha256_digest(struct lsq_sha256 *h, const void *data, size_t len,
		      uint8_t out[LSQ_MANIFEST_DIGEST_SIZE]);

/* Incremental use of the same context: begin, any number of updates,
 * end. */
int lsq_sha256_begin(struct lsq_sha256 *h);
int lsq_sha256_update(struct lsq_sha256 *h, const void *data, size_t len);
int lsq_sha256_end(struct lsq_sha256 *h,
		   uint8_t out[LSQ_MANIFEST_DIGEST_SIZE]);

/* ---- Ed25519 keys ---- */

struct lsq_sign_key;

/* Load an Ed25519 private key. Refused (LSQ_ERR_INVALID, one line in
 * err): a file group or others may read (as ssh refuses one; the line
 * says to chmod 600), an encrypted key, another algorithm, no PEM key.
 * LSQ_ERR_IO when the file cannot be read. */
int lsq_sign_key_load_private(const char *path, struct lsq_sign_key **out,
			      char *err, size_t errlen);

/* Load an Ed25519 public key; a private key file is accepted too (its
 * public half is used). Errors as above, without the mode check. */
int lsq_sign_key_load_public(const char *path, struct lsq_sign_key **out,
			     char *err, size_t errlen);

void lsq_sign_key_destroy(struct lsq_sign_key *key); /* NULL is ignored */

/* The key's id (borrowed, lives as long as the key). */
const uint8_t *lsq_sign_key_id(const struct lsq_sign_key *key);

/* The first 8 bytes of a key id as 16 hex digits and a NUL: enough to
 * tell keys apart in a message. */
void lsq_sign_key_id_hex(const uint8_t id[LSQ_MANIFEST_KEY_ID_SIZE],
			 char out[17]);

/* ---- signing and checking ---- */

/* Fill t for body[0..body_len) placed at body_offset (0: detached):
 * body_length, body_digest, key_id and the signature over
 * lsq_manifest_message(). LSQ_ERR_INVALID for a key without its private
 * half, LSQ_ERR_CODEC if libcrypto fails. */
int lsq_manifest_sign(const struct lsq_sign_key *key, const uint8_t *body,
		      size_t body_len, uint64_t body_offset,
		      struct lsq_manifest_trailer *t);

/* Check the signature of a parsed manifest m whose body is
 * body[0..body_len) (the bytes it was parsed from): the body must hash to
 * the digest in the trailer, the trailer's key id must be one of
 * keys[0..nkeys), and that key's signature must verify. On success
 * *matched (if not NULL) is the index of the key. Otherwise
 * LSQ_ERR_CORRUPT and a one-line reason: the digests were altered after
 * signing, "signed by another key (key id ...)", "bad signature". */
int lsq_manifest_verify(const struct lsq_manifest *m, const uint8_t *body,
			size_t body_len, struct lsq_sign_key *const *keys,
			size_t nkeys, size_t *matched, char *err,
			size_t errlen);

/* Whether m is the manifest of this image: sb is the image's first 96
 * bytes (the superblock, which holds bytes_used and every table's start),
 * size the size of the file (or remote object) it came in. LSQ_ERR_CORRUPT
 * with "manifest of another image: ..." otherwise; LSQ_ERR_CODEC if
 * hashing fails. */
int lsq_manifest_check_image(const struct lsq_manifest *m,
			     const uint8_t sb[SQUASHFS_SUPERBLOCK_SIZE],
			     uint64_t size, char *err, size_t errlen);

#endif
