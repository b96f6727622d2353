/* SPDX-License-Identifier: MIT */
/*
 * manifest.h - the signed block manifest (issue 19, docs/manifest.md).
 *
 * A manifest lists every compressed unit a SquashFS reader fetches (as
 * offset, length and SHA-256) and carries one Ed25519 signature over the
 * list. It is appended to the image after the zero padding that follows
 * bytes_used, where no other reader looks, or kept in a file of its own:
 *
 *     body:    header (48 bytes) + unit_count entries (44 bytes each)
 *     trailer: 160 bytes, ending with "sqlzEND1" at the end of the file
 *
 * This file encodes and parses those bytes; it does no I/O and no
 * cryptography (that is manifest_sign.h), so the parser can be fuzzed on
 * its own. All integers are little-endian.
 */
#ifndef LSQ_MANIFEST_H
#define LSQ_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#define LSQ_MANIFEST_MAGIC "sqlzMAN1"          /* body header */
#define LSQ_MANIFEST_TRAILER_MAGIC "sqlzSIG1"  /* first 8 trailer bytes */
#define LSQ_MANIFEST_END_MAGIC "sqlzEND1"      /* last 8 bytes of a file */
#define LSQ_MANIFEST_VERSION 1u

#define LSQ_MANIFEST_HEADER_SIZE 48u
#define LSQ_MANIFEST_ENTRY_SIZE 44u
#define LSQ_MANIFEST_TRAILER_SIZE 160u
#define LSQ_MANIFEST_DIGEST_SIZE 32u   /* SHA-256 */
#define LSQ_MANIFEST_KEY_ID_SIZE 32u   /* SHA-256 of the raw public key */
#define LSQ_MANIFEST_SIG_SIZE 64u      /* Ed25519 */
#define LSQ_MANIFEST_MESSAGE_SIZE 80u  /* what the signature covers */
/* An embedded body starts at bytes_used rounded up to this. */
#define LSQ_MANIFEST_ALIGN 4096u
/* First 32 bytes of the signed message (zero-padded): a signature made
 * for anything else never verifies as a manifest signature. */
#define LSQ_MANIFEST_DOMAIN "sqfs-lazy manifest v1"

/* One unit: the bytes [offset, offset + length) of the image. */
struct lsq_manifest_entry {
	uint64_t offset;
	uint32_t length;
	uint8_t digest[LSQ_MANIFEST_DIGEST_SIZE];
};

struct lsq_manifest_trailer {
	uint64_t body_offset; /* file offset of the body; 0: detached */
	uint64_t body_length; /* LSQ_MANIFEST_HEADER_SIZE + 44 * count */
	uint8_t body_digest[LSQ_MANIFEST_DIGEST_SIZE];
	uint8_t key_id[LSQ_MANIFEST_KEY_ID_SIZE];
	uint8_t signature[LSQ_MANIFEST_SIG_SIZE];
};

/* A parsed manifest. Checked by lsq_manifest_parse(): entries sorted by
 * offset, non-overlapping, non-empty, inside [0, bytes_used), the first
 * one the superblock. Its signature and digests are NOT checked yet. */
struct lsq_manifest {
	uint64_t bytes_used;  /* the signed superblock's */
	uint64_t image_size;  /* size of the image file when signed */
	uint32_t count;
	struct lsq_manifest_entry *entries; /* owned; lsq_manifest_fini */
	struct lsq_manifest_trailer trailer;
};

/* Bytes of a body with count entries (never overflows). */
uint64_t lsq_manifest_body_length(uint32_t count);

/* Where an embedded body starts: bytes_used rounded up to
 * LSQ_MANIFEST_ALIGN. LSQ_ERR_OVERFLOW for a bytes_used near 2^64. */
int lsq_manifest_body_offset(uint64_t bytes_used, uint64_t *out);

/* Encoders (the signer's side). They store exactly the fields given. */
void lsq_manifest_encode_header(uint8_t out[LSQ_MANIFEST_HEADER_SIZE],
				uint32_t count, uint64_t bytes_used,
				uint64_t image_size);
void lsq_manifest_encode_entry(uint8_t out[LSQ_MANIFEST_ENTRY_SIZE],
			       const struct lsq_manifest_entry *e);
void lsq_manifest_encode_trailer(uint8_t out[LSQ_MANIFEST_TRAILER_SIZE],
				 const struct lsq_manifest_trailer *t);

/* The 80 bytes the signature covers: the domain string padded to 32,
 * body_length, body_digest, body_offset. Binding body_offset means a
 * manifest cannot be moved from its place, nor an embedded one passed off
 * as detached. */
void lsq_manifest_message(uint8_t out[LSQ_MANIFEST_MESSAGE_SIZE],
			  const struct lsq_manifest_trailer *t);

/* Decode the last LSQ_MANIFEST_TRAILER_SIZE bytes of a file, to learn
 * where the body is. LSQ_ERR_NOT_FOUND when they do not end in the end
 * magic (the file has no manifest), LSQ_ERR_CORRUPT for a damaged
 * trailer; err gets a one-line reason either way. *out is untouched on
 * failure. */
int lsq_manifest_trailer_decode(const uint8_t in[LSQ_MANIFEST_TRAILER_SIZE],
				struct lsq_manifest_trailer *out, char *err,
				size_t errlen);

/* Parse buf[0..len): a body directly followed by its trailer (what a
 * detached manifest file holds, and the tail of a signed image from the
 * body on). Every check but the cryptographic ones; on failure returns
 * LSQ_ERR_CORRUPT (LSQ_ERR_NOT_FOUND: no trailer at all, LSQ_ERR_NOMEM),
 * writes a one-line reason into err and leaves *out untouched. On success
 * the caller owns out->entries (lsq_manifest_fini). Entries are at most
 * len / 44, so a hostile buffer cannot ask for more memory than it is. */
int lsq_manifest_parse(const uint8_t *buf, size_t len,
		       struct lsq_manifest *out, char *err, size_t errlen);

/* Free what parse allocated; safe on a zeroed struct and twice. */
void lsq_manifest_fini(struct lsq_manifest *m);

/* The entry starting exactly at offset, or NULL (binary search). */
const struct lsq_manifest_entry *
lsq_manifest_find(const struct lsq_manifest *m, uint64_t offset);

/* The entry whose bytes contain offset, or NULL: for readers that fetch a
 * unit in pieces (a metadata block's 2-byte header, then its body). */
const struct lsq_manifest_entry *
lsq_manifest_find_containing(const struct lsq_manifest *m, uint64_t offset);

#endif
