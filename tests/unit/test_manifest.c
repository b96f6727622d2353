/* SPDX-License-Identifier: MIT */
/*
 * test_manifest.c - the signed block manifest: encode -> parse round trip,
 * lookups, one distinct reason for every refusal of the parser
 * (src/format/manifest.c), and signing / checking with real Ed25519 keys
 * written as PEM files (src/format/manifest_sign.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/endian.h"
#include "format/manifest.h"
#include "format/manifest_sign.h"
#include "harness/check.h"
#include "lsq/error.h"

#define BYTES_USED 1000u
#define BODY_OFFSET 4096u

struct built {
	uint8_t *buf;
	size_t len;
};

/* A manifest of the given units: body + trailer, embedded at
 * BODY_OFFSET (or detached), digests a recognisable pattern. */
static struct built build(const struct lsq_manifest_entry *e, uint32_t n,
			  bool detached)
{
	uint64_t body_len = lsq_manifest_body_length(n);
	struct lsq_manifest_trailer t;
	struct built b;

	b.len = (size_t)body_len + LSQ_MANIFEST_TRAILER_SIZE;
	b.buf = calloc(1, b.len);
	CHECK(b.buf != NULL);
	lsq_manifest_encode_header(b.buf, n, BYTES_USED,
				   detached ? 8192 : BODY_OFFSET + b.len);
	for (uint32_t i = 0; i < n; i++)
		lsq_manifest_encode_entry(b.buf + LSQ_MANIFEST_HEADER_SIZE +
					  44 * (size_t)i, &e[i]);
	memset(&t, 0x5a, sizeof(t));
	t.body_offset = detached ? 0 : BODY_OFFSET;
	t.body_length = body_len;
	lsq_manifest_encode_trailer(b.buf + body_len, &t);
	return b;
}

static const struct lsq_manifest_entry good[] = {
	{ 0, 96, { 1 } },
	{ 96, 100, { 2 } },
	{ 300, 50, { 3 } },
	{ 900, 100, { 4 } },
};
#define NGOOD 4u

static void test_round_trip(void)
{
	struct built b = build(good, NGOOD, false);
	struct lsq_manifest m;
	char err[256];

	CHECK_EQ_INT(b.len, 48 + 44 * NGOOD + 160);
	CHECK_EQ_INT(lsq_manifest_parse(b.buf, b.len, &m, err, sizeof(err)),
		     LSQ_OK);
	CHECK_EQ_INT(m.count, NGOOD);
	CHECK_EQ_INT(m.bytes_used, BYTES_USED);
	CHECK_EQ_INT(m.image_size, BODY_OFFSET + b.len);
	CHECK_EQ_INT(m.trailer.body_offset, BODY_OFFSET);
	CHECK_EQ_INT(m.trailer.body_length, b.len - 160);
	CHECK(m.trailer.key_id[31] == 0x5a && m.trailer.signature[0] == 0x5a);
	for (uint32_t i = 0; i < NGOOD; i++) {
		CHECK_EQ_INT(m.entries[i].offset, good[i].offset);
		CHECK_EQ_INT(m.entries[i].length, good[i].length);
		CHECK(memcmp(m.entries[i].digest, good[i].digest, 32) == 0);
	}
	/* the trailer ends the buffer with the end magic, the body starts
	 * with its magic */
	CHECK(memcmp(b.buf + b.len - 8, "sqlzEND1", 8) == 0);
	CHECK(memcmp(b.buf + b.len - 160, "sqlzSIG1", 8) == 0);
	CHECK(memcmp(b.buf, "sqlzMAN1", 8) == 0);

	CHECK(lsq_manifest_find(&m, 0) == &m.entries[0]);
	CHECK(lsq_manifest_find(&m, 96) == &m.entries[1]);
	CHECK(lsq_manifest_find(&m, 900) == &m.entries[3]);
	CHECK(lsq_manifest_find(&m, 97) == NULL);
	CHECK(lsq_manifest_find(&m, 299) == NULL);
	CHECK(lsq_manifest_find(&m, 5000) == NULL);
	CHECK(lsq_manifest_find_containing(&m, 95) == &m.entries[0]);
	CHECK(lsq_manifest_find_containing(&m, 98) == &m.entries[1]);
	CHECK(lsq_manifest_find_containing(&m, 195) == &m.entries[1]);
	CHECK(lsq_manifest_find_containing(&m, 196) == NULL); /* a gap */
	CHECK(lsq_manifest_find_containing(&m, 349) == &m.entries[2]);
	CHECK(lsq_manifest_find_containing(&m, 350) == NULL);
	CHECK(lsq_manifest_find_containing(&m, 999) == &m.entries[3]);
	CHECK(lsq_manifest_find_containing(&m, 1000) == NULL);
	lsq_manifest_fini(&m);
	lsq_manifest_fini(&m); /* twice is fine */
	free(b.buf);

	/* detached: body offset 0, any image size at least bytes_used */
	b = build(good, NGOOD, true);
	CHECK_EQ_INT(lsq_manifest_parse(b.buf, b.len, &m, err, sizeof(err)),
		     LSQ_OK);
	CHECK_EQ_INT(m.trailer.body_offset, 0);
	CHECK_EQ_INT(m.image_size, 8192);
	lsq_manifest_fini(&m);
	free(b.buf);

	/* the placement arithmetic */
	uint64_t off;

	CHECK(lsq_manifest_body_offset(0, &off) == LSQ_OK && off == 0);
	CHECK(lsq_manifest_body_offset(1, &off) == LSQ_OK && off == 4096);
	CHECK(lsq_manifest_body_offset(4096, &off) == LSQ_OK && off == 4096);
	CHECK(lsq_manifest_body_offset(UINT64_MAX - 10, &off) ==
	      LSQ_ERR_OVERFLOW);
}

/* ---- refusals ---- */

#define MAX_CASES 32
static char reasons[MAX_CASES][256];
static unsigned ncases;

/* Parse must refuse buf with ret and a reason containing want, leaving
 * the output untouched. */
static void refuse(const char *name, const uint8_t *buf, size_t len,
		   int want_ret, const char *want)
{
	struct lsq_manifest m;
	char *r = reasons[ncases++];
	int ret;

	memset(&m, 0xa5, sizeof(m));
	ret = lsq_manifest_parse(buf, len, &m, r, 256);
	if (ret != want_ret || !strstr(r, want)) {
		fprintf(stderr, "%s: got %d \"%s\", want %d \"%s\"\n", name,
			ret, r, want_ret, want);
		exit(1);
	}
	CHECK(m.count == 0xa5a5a5a5u); /* untouched */
	for (unsigned i = 0; i + 1 < ncases; i++)
		if (!strcmp(reasons[i], r)) {
			fprintf(stderr, "%s: same reason as case %u: %s\n",
				name, i, r);
			exit(1);
		}
}

/* A fresh good manifest to damage. */
static struct built fresh(void)
{
	return build(good, NGOOD, false);
}

static void set_entry(struct built *b, unsigned i, uint64_t off, uint32_t len)
{
	lsq_put64(b->buf + 48 + 44 * i, off);
	lsq_put32(b->buf + 48 + 44 * i + 8, len);
}

static void test_refusals(void)
{
	struct lsq_manifest_entry e[NGOOD];
	struct built b;

	b = fresh();
	b.buf[b.len - 1] ^= 1;
	refuse("end magic", b.buf, b.len, LSQ_ERR_NOT_FOUND, "no manifest: the file does not end");
	free(b.buf);

	b = fresh();
	refuse("too short", b.buf + b.len - 100, 100, LSQ_ERR_NOT_FOUND,
	       "a manifest trailer alone takes 160");
	free(b.buf);

	b = fresh();
	b.buf[b.len - 160] ^= 1;
	refuse("trailer magic", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "bad manifest trailer: no \"sqlzSIG1\"");
	free(b.buf);

	b = fresh();
	lsq_put64(b.buf + b.len - 160 + 16, 48 + 44 * NGOOD + 1);
	refuse("body length", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "is not 48 + 44 * units");
	free(b.buf);

	/* truncated: one entry's bytes cut out of the body */
	b = fresh();
	memmove(b.buf + 48 + 44 * 2, b.buf + 48 + 44 * 3, b.len - 48 - 44 * 3);
	refuse("truncated", b.buf, b.len - 44, LSQ_ERR_CORRUPT,
	       "truncated manifest: the trailer announces a body of 224 bytes, 180 are there");
	free(b.buf);

	/* bytes before the body (what a caller reading too far gives) */
	b = fresh();
	{
		uint8_t *more = calloc(1, b.len + 44);

		CHECK(more != NULL);
		memcpy(more + 44, b.buf, b.len);
		refuse("extra", more, b.len + 44, LSQ_ERR_CORRUPT,
		       "bytes before the trailer, which announces");
		free(more);
	}
	free(b.buf);

	b = fresh();
	b.buf[0] = 'X';
	refuse("body magic", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "the body does not start with \"sqlzMAN1\"");
	free(b.buf);

	b = fresh();
	lsq_put32(b.buf + 8, 2);
	refuse("version", b.buf, b.len, LSQ_ERR_UNSUPPORTED,
	       "unsupported manifest version 2");
	free(b.buf);

	b = fresh();
	b.buf[47] = 1;
	refuse("reserved", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "reserved header bytes are not zero");
	free(b.buf);

	b = fresh();
	lsq_put32(b.buf + 12, NGOOD + 1);
	refuse("count", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "5 units do not fill a body of 224 bytes");
	free(b.buf);

	b = build(good, 0, false);
	refuse("empty", b.buf, b.len, LSQ_ERR_CORRUPT, "no units");
	free(b.buf);

	b = fresh();
	lsq_put64(b.buf + 16, 50);
	refuse("tiny bytes_used", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "smaller than a superblock");
	free(b.buf);

	b = fresh();
	lsq_put64(b.buf + b.len - 160 + 8, 8192);
	refuse("body offset", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "body offset 0x2000 is not bytes_used 0x3e8 rounded up to 4096");
	free(b.buf);

	b = fresh();
	lsq_put64(b.buf + 24, BODY_OFFSET + b.len + 1);
	refuse("image size", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "is not where body and trailer end");
	free(b.buf);

	b = build(good, NGOOD, true);
	lsq_put64(b.buf + 24, BYTES_USED - 1);
	refuse("image smaller", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "image size 999 is smaller than bytes_used 1000");
	free(b.buf);

	b = fresh();
	set_entry(&b, 0, 0, 95);
	refuse("not superblock", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "the first unit (0x0, 95 bytes) is not the superblock");
	free(b.buf);

	b = fresh();
	set_entry(&b, 2, 300, 0);
	refuse("length 0", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "unit 2 at 0x12c has length 0");
	free(b.buf);

	b = fresh();
	set_entry(&b, 3, 900, 101);
	refuse("past bytes_used", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "unit 3 at 0x384 (101 bytes) reaches past bytes_used 0x3e8");
	free(b.buf);

	b = fresh();
	set_entry(&b, 3, UINT64_MAX - 10, 100); /* offset + length wraps */
	refuse("wrapping", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "unit 3 at 0xfffffffffffffff5 (100 bytes) reaches past bytes_used");
	free(b.buf);

	memcpy(e, good, sizeof(e));
	e[2] = good[1];
	e[1] = good[2];
	b = build(e, NGOOD, false);
	refuse("unsorted", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "units not sorted: unit 2 at 0x60 follows 0x12c");
	free(b.buf);

	b = fresh();
	set_entry(&b, 2, 150, 50);
	refuse("overlap", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "unit 2 at 0x96 overlaps the one at 0x60 (100 bytes)");
	free(b.buf);

	b = fresh();
	set_entry(&b, 1, 0, 96); /* a repeat of the superblock */
	refuse("repeat", b.buf, b.len, LSQ_ERR_CORRUPT,
	       "units not sorted: unit 1 at 0x0 follows 0x0");
	free(b.buf);
	CHECK(ncases >= 20);
}

/* ---- signing ---- */

static char tmpdir[] = "/tmp/lsq-test-manifest-XXXXXX";

/* Write a fresh Ed25519 key pair: private to priv (mode 0600), public to
 * pub. */
static void make_key(const char *priv, const char *pub)
{
	EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	FILE *f;

	CHECK(pkey != NULL);
	f = fopen(priv, "w");
	CHECK(f != NULL);
	CHECK(chmod(priv, 0600) == 0);
	CHECK(PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL) == 1);
	CHECK(fclose(f) == 0);
	f = fopen(pub, "w");
	CHECK(f != NULL);
	CHECK(PEM_write_PUBKEY(f, pkey) == 1);
	CHECK(fclose(f) == 0);
	EVP_PKEY_free(pkey);
}

static void path_in(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmpdir, name);
}

static void test_signing(void)
{
	char a_priv[128], a_pub[128], b_priv[128], b_pub[128], err[256];
	struct lsq_sign_key *a, *a_pub_key, *a_from_priv, *b, *b_pub_key;
	struct lsq_sign_key *keys[2];
	struct lsq_manifest_trailer t;
	struct lsq_manifest m;
	struct built x;
	size_t which = 99;
	uint64_t body_len;

	CHECK(mkdtemp(tmpdir) != NULL);
	path_in(a_priv, sizeof(a_priv), "a.pem");
	path_in(a_pub, sizeof(a_pub), "a.pub");
	path_in(b_priv, sizeof(b_priv), "b.pem");
	path_in(b_pub, sizeof(b_pub), "b.pub");
	make_key(a_priv, a_pub);
	make_key(b_priv, b_pub);

	CHECK_EQ_INT(lsq_sign_key_load_private(a_priv, &a, err, sizeof(err)),
		     LSQ_OK);
	CHECK_EQ_INT(lsq_sign_key_load_public(a_pub, &a_pub_key, err,
					      sizeof(err)), LSQ_OK);
	/* a private key file where a public key is expected */
	CHECK_EQ_INT(lsq_sign_key_load_public(a_priv, &a_from_priv, err,
					      sizeof(err)), LSQ_OK);
	CHECK_EQ_INT(lsq_sign_key_load_private(b_priv, &b, err, sizeof(err)),
		     LSQ_OK);
	CHECK_EQ_INT(lsq_sign_key_load_public(b_pub, &b_pub_key, err,
					      sizeof(err)), LSQ_OK);
	CHECK(memcmp(lsq_sign_key_id(a), lsq_sign_key_id(a_pub_key), 32) == 0);
	CHECK(memcmp(lsq_sign_key_id(a), lsq_sign_key_id(a_from_priv), 32) == 0);
	CHECK(memcmp(lsq_sign_key_id(a), lsq_sign_key_id(b), 32) != 0);
	/* a public key cannot sign */
	CHECK_EQ_INT(lsq_manifest_sign(a_pub_key, (const uint8_t *)"x", 1, 0,
				       &t), LSQ_ERR_INVALID);

	/* sign a body, then parse and check it */
	x = build(good, NGOOD, false);
	body_len = x.len - LSQ_MANIFEST_TRAILER_SIZE;
	CHECK_EQ_INT(lsq_manifest_sign(a, x.buf, (size_t)body_len, BODY_OFFSET,
				       &t), LSQ_OK);
	lsq_manifest_encode_trailer(x.buf + body_len, &t);
	CHECK_EQ_INT(lsq_manifest_parse(x.buf, x.len, &m, err, sizeof(err)),
		     LSQ_OK);
	keys[0] = b_pub_key;
	keys[1] = a_pub_key;
	CHECK_EQ_INT(lsq_manifest_verify(&m, x.buf, (size_t)body_len, keys, 2,
					 &which, err, sizeof(err)), LSQ_OK);
	CHECK_EQ_INT(which, 1);
	keys[1] = a_from_priv;
	CHECK_EQ_INT(lsq_manifest_verify(&m, x.buf, (size_t)body_len, keys, 2,
					 &which, err, sizeof(err)), LSQ_OK);

	/* another key only */
	CHECK_EQ_INT(lsq_manifest_verify(&m, x.buf, (size_t)body_len, keys, 1,
					 NULL, err, sizeof(err)),
		     LSQ_ERR_CORRUPT);
	{
		char want[64], hex[17];

		lsq_sign_key_id_hex(lsq_sign_key_id(a), hex);
		snprintf(want, sizeof(want), "signed by another key (key id %s)",
			 hex);
		CHECK(strcmp(err, want) == 0);
	}

	/* a digest altered after signing */
	x.buf[48 + 44 + 12] ^= 1;
	CHECK_EQ_INT(lsq_manifest_verify(&m, x.buf, (size_t)body_len, keys + 1,
					 1, NULL, err, sizeof(err)),
		     LSQ_ERR_CORRUPT);
	CHECK(strstr(err, "manifest altered") != NULL);
	x.buf[48 + 44 + 12] ^= 1;

	/* a signature that does not verify */
	m.trailer.signature[10] ^= 1;
	CHECK_EQ_INT(lsq_manifest_verify(&m, x.buf, (size_t)body_len, keys + 1,
					 1, NULL, err, sizeof(err)),
		     LSQ_ERR_CORRUPT);
	CHECK(strstr(err, "bad signature (key id ") == err);
	m.trailer.signature[10] ^= 1;

	/* the body offset is signed: moving the manifest breaks it */
	m.trailer.body_offset = 8192;
	CHECK_EQ_INT(lsq_manifest_verify(&m, x.buf, (size_t)body_len, keys + 1,
					 1, NULL, err, sizeof(err)),
		     LSQ_ERR_CORRUPT);
	CHECK(strstr(err, "bad signature") == err);
	m.trailer.body_offset = BODY_OFFSET;
	CHECK_EQ_INT(lsq_manifest_verify(&m, x.buf, (size_t)body_len, keys + 1,
					 1, NULL, err, sizeof(err)), LSQ_OK);

	/* the image it names: superblock digest (entry 0), file size */
	{
		uint8_t sb[96];
		struct lsq_sha256 *h;

		memset(sb, 7, sizeof(sb));
		CHECK_EQ_INT(lsq_sha256_create(&h), LSQ_OK);
		CHECK_EQ_INT(lsq_sha256_digest(h, sb, sizeof(sb),
					       m.entries[0].digest), LSQ_OK);
		lsq_sha256_destroy(h);
		CHECK_EQ_INT(lsq_manifest_check_image(&m, sb, m.image_size, err,
						      sizeof(err)), LSQ_OK);
		CHECK_EQ_INT(lsq_manifest_check_image(&m, sb, m.image_size + 1,
						      err, sizeof(err)),
			     LSQ_ERR_CORRUPT);
		CHECK(strstr(err, "manifest of another image: signed for a file of ") == err);
		sb[95] = 8;
		CHECK_EQ_INT(lsq_manifest_check_image(&m, sb, m.image_size, err,
						      sizeof(err)),
			     LSQ_ERR_CORRUPT);
		CHECK(strstr(err, "manifest of another image: the superblock differs") == err);
	}
	lsq_manifest_fini(&m);

	/* signing is deterministic */
	{
		struct lsq_manifest_trailer t2;

		CHECK_EQ_INT(lsq_manifest_sign(a, x.buf, (size_t)body_len,
					       BODY_OFFSET, &t2), LSQ_OK);
		CHECK(memcmp(t.signature, t2.signature, 64) == 0);
	}
	free(x.buf);

	/* a private key others may read is refused */
	CHECK(chmod(a_priv, 0640) == 0);
	CHECK_EQ_INT(lsq_sign_key_load_private(a_priv, &b, err, sizeof(err)),
		     LSQ_ERR_INVALID);
	CHECK(strstr(err, "readable by group or others (mode 0640); chmod 600") != NULL);
	/* ... but its public half may still be taken from it */
	lsq_sign_key_destroy(a_from_priv);
	CHECK_EQ_INT(lsq_sign_key_load_public(a_priv, &a_from_priv, err,
					      sizeof(err)), LSQ_OK);
	/* a public key is not a private key; a missing file says so */
	CHECK_EQ_INT(lsq_sign_key_load_private(a_pub, &b, err, sizeof(err)),
		     LSQ_ERR_INVALID);
	CHECK(strstr(err, "no PEM private key") != NULL);
	CHECK_EQ_INT(lsq_sign_key_load_public(tmpdir, &b, err, sizeof(err)),
		     LSQ_ERR_INVALID);
	path_in(b_pub, sizeof(b_pub), "missing.pub");
	CHECK_EQ_INT(lsq_sign_key_load_public(b_pub, &b, err, sizeof(err)),
		     LSQ_ERR_IO);

	lsq_sign_key_destroy(a);
	lsq_sign_key_destroy(a_pub_key);
	lsq_sign_key_destroy(a_from_priv);
	lsq_sign_key_destroy(b); /* the failed loads left it alone */
	lsq_sign_key_destroy(b_pub_key);
	lsq_sign_key_destroy(NULL);
	unlink(a_priv);
	unlink(a_pub);
	unlink(b_priv);
	path_in(b_pub, sizeof(b_pub), "b.pub");
	unlink(b_pub);
	rmdir(tmpdir);
}

static void test_sha256(void)
{
	/* FIPS 180-2 test vector "abc", whole and in pieces */
	static const uint8_t abc[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41,
		0x40, 0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3,
		0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00,
		0x15, 0xad,
	};
	struct lsq_sha256 *h;
	uint8_t d[32];

	CHECK_EQ_INT(lsq_sha256_create(&h), LSQ_OK);
	CHECK_EQ_INT(lsq_sha256_digest(h, "abc", 3, d), LSQ_OK);
	CHECK(memcmp(d, abc, 32) == 0);
	memset(d, 0, sizeof(d));
	CHECK_EQ_INT(lsq_sha256_begin(h), LSQ_OK);
	CHECK_EQ_INT(lsq_sha256_update(h, "a", 1), LSQ_OK);
	CHECK_EQ_INT(lsq_sha256_update(h, "bc", 2), LSQ_OK);
	CHECK_EQ_INT(lsq_sha256_end(h, d), LSQ_OK);
	CHECK(memcmp(d, abc, 32) == 0);
	lsq_sha256_destroy(h);
}

int main(void)
{
	test_round_trip();
	test_refusals();
	test_sha256();
	test_signing();
	printf("manifest: ok (%u refusals, each with its own reason)\n",
	       ncases);
	return 0;
}
