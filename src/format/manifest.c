/* SPDX-License-Identifier: MIT */
/*
 * manifest.c - encode and parse the signed block manifest
 * (docs/manifest.md). The parser takes bytes an attacker may have written:
 * every size is checked against the buffer before it is used, with
 * overflow-checked sums, and each refusal gets a reason of its own, since
 * that line is all a user sees of a refused mount.
 */
#include "format/manifest.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_math.h"
#include "common/endian.h"
#include "common/errmsg.h"
#include "format/ondisk.h"
#include "lsq/error.h"

/* Trailer layout: magic, body_offset, body_length, body digest, key id,
 * signature, end magic. 8+8+8+32+32+64+8 = 160: no room is left for a
 * reserved field, and none is needed, since the version lives in the
 * body header and a new trailer layout would get new magics. */
#define T_OFFSET 8
#define T_LENGTH 16
#define T_DIGEST 24
#define T_KEY_ID 56
#define T_SIG 88
#define T_END 152

/* Header layout: magic, version, unit_count, bytes_used, image_size,
 * 16 reserved bytes. */
#define H_VERSION 8
#define H_COUNT 12
#define H_BYTES_USED 16
#define H_IMAGE_SIZE 24
#define H_RESERVED 32
#define H_RESERVED_LEN 16


#define BAD(...) lsq_fail(LSQ_ERR_CORRUPT, err, errlen, __VA_ARGS__)

uint64_t lsq_manifest_body_length(uint32_t count)
{
	return LSQ_MANIFEST_HEADER_SIZE +
	       (uint64_t)count * LSQ_MANIFEST_ENTRY_SIZE;
}

int lsq_manifest_body_offset(uint64_t bytes_used, uint64_t *out)
{
	uint64_t end;

	if (lsq_add_u64_overflow(bytes_used, LSQ_MANIFEST_ALIGN - 1, &end))
		return LSQ_ERR_OVERFLOW;
	*out = end & ~(uint64_t)(LSQ_MANIFEST_ALIGN - 1);
	return LSQ_OK;
}

void lsq_manifest_encode_header(uint8_t out[LSQ_MANIFEST_HEADER_SIZE],
				uint32_t count, uint64_t bytes_used,
				uint64_t image_size)
{
	memset(out, 0, LSQ_MANIFEST_HEADER_SIZE);
	memcpy(out, LSQ_MANIFEST_MAGIC, 8);
	lsq_put32(out + H_VERSION, LSQ_MANIFEST_VERSION);
	lsq_put32(out + H_COUNT, count);
	lsq_put64(out + H_BYTES_USED, bytes_used);
	lsq_put64(out + H_IMAGE_SIZE, image_size);
}

void lsq_manifest_encode_entry(uint8_t out[LSQ_MANIFEST_ENTRY_SIZE],
			       const struct lsq_manifest_entry *e)
{
	lsq_put64(out, e->offset);
	lsq_put32(out + 8, e->length);
	memcpy(out + 12, e->digest, LSQ_MANIFEST_DIGEST_SIZE);
}

void lsq_manifest_encode_trailer(uint8_t out[LSQ_MANIFEST_TRAILER_SIZE],
				 const struct lsq_manifest_trailer *t)
{
	memcpy(out, LSQ_MANIFEST_TRAILER_MAGIC, 8);
	lsq_put64(out + T_OFFSET, t->body_offset);
	lsq_put64(out + T_LENGTH, t->body_length);
	memcpy(out + T_DIGEST, t->body_digest, LSQ_MANIFEST_DIGEST_SIZE);
	memcpy(out + T_KEY_ID, t->key_id, LSQ_MANIFEST_KEY_ID_SIZE);
	memcpy(out + T_SIG, t->signature, LSQ_MANIFEST_SIG_SIZE);
	memcpy(out + T_END, LSQ_MANIFEST_END_MAGIC, 8);
}

void lsq_manifest_message(uint8_t out[LSQ_MANIFEST_MESSAGE_SIZE],
			  const struct lsq_manifest_trailer *t)
{
	memset(out, 0, 32);
	memcpy(out, LSQ_MANIFEST_DOMAIN, sizeof(LSQ_MANIFEST_DOMAIN) - 1);
	lsq_put64(out + 32, t->body_length);
	memcpy(out + 40, t->body_digest, LSQ_MANIFEST_DIGEST_SIZE);
	lsq_put64(out + 72, t->body_offset);
}

int lsq_manifest_trailer_decode(const uint8_t in[LSQ_MANIFEST_TRAILER_SIZE],
				struct lsq_manifest_trailer *out, char *err,
				size_t errlen)
{
	struct lsq_manifest_trailer t;

	if (memcmp(in + T_END, LSQ_MANIFEST_END_MAGIC, 8) != 0)
		return lsq_fail(LSQ_ERR_NOT_FOUND, err, errlen,
			    "no manifest: the file does not end in \"%s\"",
			    LSQ_MANIFEST_END_MAGIC);
	if (memcmp(in, LSQ_MANIFEST_TRAILER_MAGIC, 8) != 0)
		return BAD("bad manifest trailer: no \"%s\" 160 bytes before the end",
			   LSQ_MANIFEST_TRAILER_MAGIC);
	t.body_offset = lsq_le64(in + T_OFFSET);
	t.body_length = lsq_le64(in + T_LENGTH);
	memcpy(t.body_digest, in + T_DIGEST, LSQ_MANIFEST_DIGEST_SIZE);
	memcpy(t.key_id, in + T_KEY_ID, LSQ_MANIFEST_KEY_ID_SIZE);
	memcpy(t.signature, in + T_SIG, LSQ_MANIFEST_SIG_SIZE);
	/* The body length must be one a whole number of entries makes, with
	 * a count that fits the header's u32. */
	if (t.body_length < LSQ_MANIFEST_HEADER_SIZE ||
	    (t.body_length - LSQ_MANIFEST_HEADER_SIZE) % LSQ_MANIFEST_ENTRY_SIZE ||
	    (t.body_length - LSQ_MANIFEST_HEADER_SIZE) / LSQ_MANIFEST_ENTRY_SIZE >
		    UINT32_MAX)
		return BAD("bad manifest trailer: body length %llu is not %u + %u * units",
			   (unsigned long long)t.body_length,
			   LSQ_MANIFEST_HEADER_SIZE, LSQ_MANIFEST_ENTRY_SIZE);
	*out = t;
	return LSQ_OK;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Entry rules: non-empty, inside bytes_used, sorted and apart, the first
 * one the superblock (that entry is what ties the list to one image). */
static int check_entry(const struct lsq_manifest_entry *e,
		       const struct lsq_manifest_entry *prev, uint32_t i,
		       uint64_t bytes_used, char *err, size_t errlen)
{
	uint64_t prev_end;

	if (e->length == 0)
		return BAD("bad manifest: unit %u at 0x%llx has length 0", i,
			   (unsigned long long)e->offset);
	if (lsq_range_outside(e->offset, e->length, bytes_used))
		return BAD("bad manifest: unit %u at 0x%llx (%u bytes) reaches past bytes_used 0x%llx",
			   i, (unsigned long long)e->offset, e->length,
			   (unsigned long long)bytes_used);
	if (!prev) {
		if (e->offset != 0 || e->length != SQUASHFS_SUPERBLOCK_SIZE)
			return BAD("bad manifest: the first unit (0x%llx, %u bytes) is not the superblock (0x0, 96 bytes)",
				   (unsigned long long)e->offset, e->length);
		return LSQ_OK;
	}
	if (e->offset <= prev->offset)
		return BAD("bad manifest: units not sorted: unit %u at 0x%llx follows 0x%llx",
			   i, (unsigned long long)e->offset,
			   (unsigned long long)prev->offset);
	/* prev is inside bytes_used, so its end does not overflow */
	prev_end = prev->offset + prev->length;
	if (e->offset < prev_end)
		return BAD("bad manifest: unit %u at 0x%llx overlaps the one at 0x%llx (%u bytes)",
			   i, (unsigned long long)e->offset,
			   (unsigned long long)prev->offset, prev->length);
	return LSQ_OK;
}

/* Where the manifest says it lives must agree with the image it names:
 * an embedded body right after the padded filesystem, ending the file
 * with its trailer; a detached one (offset 0) for a file that holds at
 * least the filesystem. */
static int check_placement(const struct lsq_manifest_trailer *t,
			   uint64_t bytes_used, uint64_t image_size, char *err,
			   size_t errlen)
{
	uint64_t want, end;

	if (image_size < bytes_used)
		return BAD("bad manifest: image size %llu is smaller than bytes_used %llu",
			   (unsigned long long)image_size,
			   (unsigned long long)bytes_used);
	if (t->body_offset == 0)
		return LSQ_OK;
	if (lsq_manifest_body_offset(bytes_used, &want) ||
	    t->body_offset != want)
		return BAD("bad manifest: body offset 0x%llx is not bytes_used 0x%llx rounded up to %u",
			   (unsigned long long)t->body_offset,
			   (unsigned long long)bytes_used, LSQ_MANIFEST_ALIGN);
	if (lsq_add_u64_overflow(t->body_offset, t->body_length, &end) ||
	    lsq_add_u64_overflow(end, LSQ_MANIFEST_TRAILER_SIZE, &end) ||
	    end != image_size)
		return BAD("bad manifest: image size %llu is not where body and trailer end",
			   (unsigned long long)image_size);
	return LSQ_OK;
}

int lsq_manifest_parse(const uint8_t *buf, size_t len,
		       struct lsq_manifest *out, char *err, size_t errlen)
{
	struct lsq_manifest m;
	const uint8_t *body = buf;
	uint64_t body_len;
	int ret;

	memset(&m, 0, sizeof(m));
	if (len < LSQ_MANIFEST_TRAILER_SIZE)
		return lsq_fail(LSQ_ERR_NOT_FOUND, err, errlen,
			    "no manifest: %zu bytes, a manifest trailer alone takes %u",
			    len, LSQ_MANIFEST_TRAILER_SIZE);
	ret = lsq_manifest_trailer_decode(buf + len - LSQ_MANIFEST_TRAILER_SIZE,
					  &m.trailer, err, errlen);
	if (ret)
		return ret;
	body_len = len - LSQ_MANIFEST_TRAILER_SIZE;
	if (m.trailer.body_length > body_len)
		return BAD("truncated manifest: the trailer announces a body of %llu bytes, %llu are there",
			   (unsigned long long)m.trailer.body_length,
			   (unsigned long long)body_len);
	if (m.trailer.body_length < body_len)
		return BAD("bad manifest: %llu bytes before the trailer, which announces a body of %llu",
			   (unsigned long long)body_len,
			   (unsigned long long)m.trailer.body_length);
	/* the trailer check made body_len >= the header size */
	if (memcmp(body, LSQ_MANIFEST_MAGIC, 8) != 0)
		return BAD("bad manifest: the body does not start with \"%s\"",
			   LSQ_MANIFEST_MAGIC);
	if (lsq_le32(body + H_VERSION) != LSQ_MANIFEST_VERSION)
		return lsq_fail(LSQ_ERR_UNSUPPORTED, err, errlen,
			    "unsupported manifest version %u (this build reads %u)",
			    lsq_le32(body + H_VERSION), LSQ_MANIFEST_VERSION);
	if (!all_zero(body + H_RESERVED, H_RESERVED_LEN))
		return BAD("bad manifest: reserved header bytes are not zero");
	m.count = lsq_le32(body + H_COUNT);
	m.bytes_used = lsq_le64(body + H_BYTES_USED);
	m.image_size = lsq_le64(body + H_IMAGE_SIZE);
	if (lsq_manifest_body_length(m.count) != body_len)
		return BAD("bad manifest: %u units do not fill a body of %llu bytes",
			   m.count, (unsigned long long)body_len);
	if (m.count == 0)
		return BAD("bad manifest: no units (the superblock at least must be listed)");
	if (m.bytes_used < SQUASHFS_SUPERBLOCK_SIZE)
		return BAD("bad manifest: bytes_used %llu is smaller than a superblock",
			   (unsigned long long)m.bytes_used);
	ret = check_placement(&m.trailer, m.bytes_used, m.image_size, err,
			      errlen);
	if (ret)
		return ret;

	/* count * 44 <= len, so this allocation is bounded by the input */
	m.entries = malloc((size_t)m.count * sizeof(*m.entries));
	if (!m.entries)
		return lsq_fail(LSQ_ERR_NOMEM, err, errlen,
			    "out of memory for %u manifest units", m.count);
	for (uint32_t i = 0; i < m.count; i++) {
		const uint8_t *p = body + LSQ_MANIFEST_HEADER_SIZE +
				   (size_t)i * LSQ_MANIFEST_ENTRY_SIZE;
		struct lsq_manifest_entry *e = &m.entries[i];

		e->offset = lsq_le64(p);
		e->length = lsq_le32(p + 8);
		memcpy(e->digest, p + 12, LSQ_MANIFEST_DIGEST_SIZE);
		ret = check_entry(e, i ? e - 1 : NULL, i, m.bytes_used, err,
				  errlen);
		if (ret) {
			free(m.entries);
			return ret;
		}
	}
	*out = m;
	return LSQ_OK;
}

void lsq_manifest_fini(struct lsq_manifest *m)
{
	free(m->entries);
	m->entries = NULL;
	m->count = 0;
}

/* Index of the last entry starting at or before offset, or -1. */
static long long last_at_or_before(const struct lsq_manifest *m,
				   uint64_t offset)
{
	size_t lo = 0, hi = m->count; /* answer in [lo, hi) shifted by 1 */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->entries[mid].offset <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long long)lo - 1;
}

const struct lsq_manifest_entry *
lsq_manifest_find(const struct lsq_manifest *m, uint64_t offset)
{
	long long i = last_at_or_before(m, offset);

	if (i < 0 || m->entries[i].offset != offset)
		return NULL;
	return &m->entries[i];
}

const struct lsq_manifest_entry *
lsq_manifest_find_containing(const struct lsq_manifest *m, uint64_t offset)
{
	long long i = last_at_or_before(m, offset);

	if (i < 0 || offset - m->entries[i].offset >= m->entries[i].length)
		return NULL;
	return &m->entries[i];
}
