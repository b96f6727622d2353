/* SPDX-License-Identifier: MIT */
/*
 * manifest_sign.c - SHA-256 and Ed25519 for the manifest, over libcrypto
 * (OpenSSL 3). Pure Ed25519 (no pre-hash): the signed message is only 80
 * bytes, and pure Ed25519 is what `openssl pkeyutl -rawin` produces and
 * checks, so a signature can be checked without our code.
 */
#include "format/manifest_sign.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/errmsg.h"
#include "common/file_io.h"
#include "common/hex.h"
#include "lsq/error.h"

/* PEM key files are a few hundred bytes; this bounds what is read. */
#define KEY_FILE_MAX (64u * 1024u)
#define ED25519_KEY_SIZE 32u

struct lsq_sha256 {
	EVP_MD *md;
	EVP_MD_CTX *ctx;
};

struct lsq_sign_key {
	EVP_PKEY *pkey;
	bool has_private;
	uint8_t id[LSQ_MANIFEST_KEY_ID_SIZE];
};

/* lsq_fail, and nothing of libcrypto's error queue outlives the call. */
#define fail(ret, ...) (ERR_clear_error(), lsq_fail((ret), __VA_ARGS__))

/* ---- SHA-256 ---- */

int lsq_sha256_create(struct lsq_sha256 **out)
{
	struct lsq_sha256 *h = calloc(1, sizeof(*h));

	if (!h)
		return LSQ_ERR_NOMEM;
	h->md = EVP_MD_fetch(NULL, "SHA256", NULL);
	h->ctx = EVP_MD_CTX_new();
	if (!h->md || !h->ctx) {
		int ret = h->md ? LSQ_ERR_NOMEM : LSQ_ERR_UNSUPPORTED;

		lsq_sha256_destroy(h);
		ERR_clear_error();
		return ret;
	}
	*out = h;
	return LSQ_OK;
}

void lsq_sha256_destroy(struct lsq_sha256 *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	EVP_MD_free(h->md);
	free(h);
}

int lsq_sha256_begin(struct lsq_sha256 *h)
{
	if (!EVP_DigestInit_ex2(h->ctx, h->md, NULL)) {
		ERR_clear_error();
		return LSQ_ERR_CODEC;
	}
	return LSQ_OK;
}

int lsq_sha256_update(struct lsq_sha256 *h, const void *data, size_t len)
{
	if (!EVP_DigestUpdate(h->ctx, data, len)) {
		ERR_clear_error();
		return LSQ_ERR_CODEC;
	}
	return LSQ_OK;
}

int lsq_sha256_end(struct lsq_sha256 *h, uint8_t out[LSQ_MANIFEST_DIGEST_SIZE])
{
	unsigned int n = 0;

	if (!EVP_DigestFinal_ex(h->ctx, out, &n) ||
	    n != LSQ_MANIFEST_DIGEST_SIZE) {
		ERR_clear_error();
		return LSQ_ERR_CODEC;
	}
	return LSQ_OK;
}

int lsq_sha256_digest(struct lsq_sha256 *h, const void *data, size_t len,
		      uint8_t out[LSQ_MANIFEST_DIGEST_SIZE])
{
	int ret = lsq_sha256_begin(h);

	if (!ret)
		ret = lsq_sha256_update(h, data, len);
	if (!ret)
		ret = lsq_sha256_end(h, out);
	return ret;
}

/* One-shot digest for the few places that hash once (key ids, bodies). */
static int sha256_once(const void *data, size_t len,
		       uint8_t out[LSQ_MANIFEST_DIGEST_SIZE])
{
	struct lsq_sha256 *h;
	int ret = lsq_sha256_create(&h);

	if (ret)
		return ret;
	ret = lsq_sha256_digest(h, data, len, out);
	lsq_sha256_destroy(h);
	return ret;
}

/* ---- keys ---- */

/* The whole key file, NUL-terminated, and its mode. The mode is taken
 * from the open descriptor, so the file checked is the file read. */
static int read_key_file(const char *path, char **out, size_t *len,
			 mode_t *mode, char *err, size_t errlen)
{
	struct stat st;
	int ret = lsq_read_small_file(path, KEY_FILE_MAX, out, len, &st);

	if (ret == LSQ_ERR_INVALID)
		return fail(ret, err, errlen,
			    "%s: not a key file (a PEM file of at most %u bytes)",
			    path, KEY_FILE_MAX);
	if (ret == LSQ_ERR_IO)
		return fail(ret, err, errlen, "%s: %s", path, strerror(errno));
	if (!ret)
		*mode = st.st_mode;
	return ret;
}

/* Never prompt: a key file that wants a passphrase is refused. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	return -1;
}

static int finish_key(EVP_PKEY *pkey, bool has_private, const char *path,
		      struct lsq_sign_key **out, char *err, size_t errlen)
{
	uint8_t raw[ED25519_KEY_SIZE];
	size_t raw_len = sizeof(raw);
	struct lsq_sign_key *key;
	int ret;

	if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(pkey);
		return fail(LSQ_ERR_INVALID, err, errlen,
			    "%s: not an Ed25519 key (make one with: openssl genpkey -algorithm ed25519)",
			    path);
	}
	if (!EVP_PKEY_get_raw_public_key(pkey, raw, &raw_len) ||
	    raw_len != ED25519_KEY_SIZE) {
		EVP_PKEY_free(pkey);
		return fail(LSQ_ERR_INVALID, err, errlen,
			    "%s: cannot take the public key out of it", path);
	}
	key = calloc(1, sizeof(*key));
	if (!key) {
		EVP_PKEY_free(pkey);
		return LSQ_ERR_NOMEM;
	}
	ret = sha256_once(raw, raw_len, key->id);
	if (ret) {
		EVP_PKEY_free(pkey);
		free(key);
		return fail(ret, err, errlen, "%s: cannot hash the public key",
			    path);
	}
	key->pkey = pkey;
	key->has_private = has_private;
	*out = key;
	return LSQ_OK;
}

static EVP_PKEY *read_private(const char *text, size_t len)
{
	BIO *bio = BIO_new_mem_buf(text, (int)len);
	EVP_PKEY *pkey;

	if (!bio)
		return NULL;
	pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
	BIO_free(bio);
	return pkey;
}

int lsq_sign_key_load_private(const char *path, struct lsq_sign_key **out,
			      char *err, size_t errlen)
{
	EVP_PKEY *pkey;
	char *text;
	size_t len;
	mode_t mode;
	int ret;

	ret = read_key_file(path, &text, &len, &mode, err, errlen);
	if (ret)
		return ret;
	pkey = read_private(text, len);
	if (!pkey)
		ret = fail(LSQ_ERR_INVALID, err, errlen,
			   strstr(text, "ENCRYPTED") ?
			   "%s: encrypted private keys are not supported" :
			   "%s: no PEM private key in it", path);
	OPENSSL_cleanse(text, len);
	free(text);
	if (ret)
		return ret;
	/* A signing key others can read signs for them too: refused as
	 * ssh refuses such a key, rather than warned about and used. */
	if (mode & (S_IRGRP | S_IROTH)) {
		EVP_PKEY_free(pkey);
		return fail(LSQ_ERR_INVALID, err, errlen,
			    "%s: private key readable by group or others (mode %04o); chmod 600 it",
			    path, (unsigned)(mode & 07777));
	}
	return finish_key(pkey, true, path, out, err, errlen);
}

int lsq_sign_key_load_public(const char *path, struct lsq_sign_key **out,
			     char *err, size_t errlen)
{
	EVP_PKEY *pkey = NULL;
	bool has_private = false;
	char *text;
	size_t len;
	mode_t mode;
	BIO *bio;
	int ret;

	/* the mode does not matter: only the public half is used */
	ret = read_key_file(path, &text, &len, &mode, err, errlen);
	if (ret)
		return ret;
	bio = BIO_new_mem_buf(text, (int)len);
	if (bio) {
		pkey = PEM_read_bio_PUBKEY(bio, NULL, no_passphrase, NULL);
		BIO_free(bio);
	}
	if (!pkey && strstr(text, "PRIVATE KEY")) {
		pkey = read_private(text, len);
		has_private = pkey != NULL;
	}
	if (!pkey)
		ret = fail(LSQ_ERR_INVALID, err, errlen,
			   "%s: no PEM public key in it", path);
	OPENSSL_cleanse(text, len);
	free(text);
	if (ret)
		return ret;
	ERR_clear_error(); /* the failed PUBKEY attempt queued errors */
	return finish_key(pkey, has_private, path, out, err, errlen);
}

void lsq_sign_key_destroy(struct lsq_sign_key *key)
{
	if (!key)
		return;
	EVP_PKEY_free(key->pkey);
	free(key);
}

const uint8_t *lsq_sign_key_id(const struct lsq_sign_key *key)
{
	return key->id;
}

void lsq_sign_key_id_hex(const uint8_t id[LSQ_MANIFEST_KEY_ID_SIZE],
			 char out[17])
{
	lsq_hex_encode(id, 8, out);
}

/* ---- signing and checking ---- */

int lsq_manifest_sign(const struct lsq_sign_key *key, const uint8_t *body,
		      size_t body_len, uint64_t body_offset,
		      struct lsq_manifest_trailer *t)
{
	uint8_t msg[LSQ_MANIFEST_MESSAGE_SIZE];
	size_t sig_len = LSQ_MANIFEST_SIG_SIZE;
	EVP_MD_CTX *ctx;
	int ret;

	if (!key->has_private)
		return LSQ_ERR_INVALID;
	memset(t, 0, sizeof(*t));
	t->body_offset = body_offset;
	t->body_length = body_len;
	ret = sha256_once(body, body_len, t->body_digest);
	if (ret)
		return ret;
	memcpy(t->key_id, key->id, sizeof(t->key_id));
	lsq_manifest_message(msg, t);

	ctx = EVP_MD_CTX_new();
	if (!ctx)
		return LSQ_ERR_NOMEM;
	/* NULL digest: pure Ed25519, which hashes the message itself */
	if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, key->pkey) != 1 ||
	    EVP_DigestSign(ctx, t->signature, &sig_len, msg, sizeof(msg)) != 1 ||
	    sig_len != LSQ_MANIFEST_SIG_SIZE)
		ret = LSQ_ERR_CODEC;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ret;
}

static bool signature_good(EVP_PKEY *pkey, const struct lsq_manifest_trailer *t)
{
	uint8_t msg[LSQ_MANIFEST_MESSAGE_SIZE];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool good;

	if (!ctx)
		return false;
	lsq_manifest_message(msg, t);
	good = EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) == 1 &&
	       EVP_DigestVerify(ctx, t->signature, sizeof(t->signature), msg,
				sizeof(msg)) == 1;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return good;
}

int lsq_manifest_verify(const struct lsq_manifest *m, const uint8_t *body,
			size_t body_len, struct lsq_sign_key *const *keys,
			size_t nkeys, size_t *matched, char *err,
			size_t errlen)
{
	const struct lsq_manifest_trailer *t = &m->trailer;
	uint8_t digest[LSQ_MANIFEST_DIGEST_SIZE];
	char hex[17];
	int ret;

	ret = sha256_once(body, body_len, digest);
	if (ret)
		return fail(ret, err, errlen, "cannot hash the manifest: %s",
			    lsq_strerror(ret));
	/* The signature covers the body only through this digest: a body
	 * that does not hash to it was altered after signing. */
	if (body_len != t->body_length ||
	    CRYPTO_memcmp(digest, t->body_digest, sizeof(digest)) != 0)
		return fail(LSQ_ERR_CORRUPT, err, errlen,
			    "manifest altered: its unit digests are not the ones signed");
	lsq_sign_key_id_hex(t->key_id, hex);
	for (size_t i = 0; i < nkeys; i++) {
		if (memcmp(keys[i]->id, t->key_id, sizeof(t->key_id)) != 0)
			continue;
		if (!signature_good(keys[i]->pkey, t))
			return fail(LSQ_ERR_CORRUPT, err, errlen,
				    "bad signature (key id %s)", hex);
		if (matched)
			*matched = i;
		return LSQ_OK;
	}
	return fail(LSQ_ERR_CORRUPT, err, errlen,
		    "signed by another key (key id %s)", hex);
}

int lsq_manifest_check_image(const struct lsq_manifest *m,
			     const uint8_t sb[SQUASHFS_SUPERBLOCK_SIZE],
			     uint64_t size, char *err, size_t errlen)
{
	uint8_t digest[LSQ_MANIFEST_DIGEST_SIZE];
	int ret;

	/* parse guarantees entries[0] is the superblock */
	ret = sha256_once(sb, SQUASHFS_SUPERBLOCK_SIZE, digest);
	if (ret)
		return fail(ret, err, errlen, "cannot hash the superblock");
	if (memcmp(digest, m->entries[0].digest, sizeof(digest)) != 0)
		return fail(LSQ_ERR_CORRUPT, err, errlen,
			    "manifest of another image: the superblock differs from the one signed");
	if (size != m->image_size)
		return fail(LSQ_ERR_CORRUPT, err, errlen,
			    "manifest of another image: signed for a file of %llu bytes, this one has %llu",
			    (unsigned long long)m->image_size,
			    (unsigned long long)size);
	return LSQ_OK;
}
