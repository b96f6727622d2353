/* SPDX-License-Identifier: MIT */
/*
 * sign_image.c - sign an image file (sign_image.h): list its units
 * through the reader (src/image/units.c), hash them in one sequential
 * pass (unit_hash.c), and write body and trailer after the zero padding
 * that follows bytes_used, or to a file of their own. An old manifest at
 * that place is replaced, so signing twice gives the same bytes (Ed25519
 * signatures are deterministic). Used by sqfs-lazy-sign --key and
 * sqfs-lazy-pack --sign.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_io.h"
#include "format/manifest.h"
#include "lsq/error.h"
#include "lsq/image.h"
#include "lsq/source.h"
#include "sign/sign_image.h"
#include "sign/unit_hash.h"

void lsq_image_facts_fini(struct lsq_image_facts *f)
{
	free(f->units);
	f->units = NULL;
}

int lsq_image_facts_read(const char *path, struct lsq_image_facts *f)
{
	struct lsq_image_options io;
	struct lsq_source *src;
	struct lsq_image *img;
	int ret;

	memset(f, 0, sizeof(*f));
	ret = lsq_source_file_open(path, 0, &src);
	if (ret) {
		snprintf(f->why, sizeof(f->why), "%s", strerror(errno));
		return f->ret = ret;
	}
	lsq_image_options_default(&io);
	io.decomp_contexts = 1;
	ret = lsq_image_open(src, &io, &img, f->why, sizeof(f->why));
	if (ret) {
		lsq_source_destroy(src);
		return f->ret = ret;
	}
	f->bytes_used = lsq_image_info(img)->bytes_used;
	ret = lsq_image_units(img, &f->units, &f->count, f->why,
			      sizeof(f->why));
	lsq_image_close(img);
	return f->ret = ret;
}

/* Whether [from, to) of the file holds only zero bytes. */
static int all_zero(int fd, uint64_t from, uint64_t to, bool *zero)
{
	uint8_t buf[64 * 1024];

	*zero = true;
	while (from < to) {
		size_t n = to - from < sizeof(buf) ? (size_t)(to - from)
						   : sizeof(buf);
		int ret = lsq_pread_full(fd, buf, n, from);

		if (ret)
			return ret;
		for (size_t i = 0; i < n; i++)
			if (buf[i]) {
				*zero = false;
				return LSQ_OK;
			}
		from += n;
	}
	return LSQ_OK;
}

/* ---- signing ---- */

/* What may follow the padded filesystem of an image about to be signed:
 * nothing, an old manifest (replaced), or zeros (more padding). Anything
 * else is someone's data, which signing must not cut off. */
static int check_tail(int fd, uint64_t size, uint64_t body_offset,
		      char *why, size_t whylen)
{
	uint8_t magic[8];
	bool zero;
	int ret;

	if (size <= body_offset)
		return LSQ_OK;
	if (size - body_offset >= sizeof(magic)) {
		ret = lsq_pread_full(fd, magic, sizeof(magic), body_offset);
		if (ret)
			goto io;
		if (!memcmp(magic, LSQ_MANIFEST_MAGIC, sizeof(magic)))
			return LSQ_OK;
	}
	ret = all_zero(fd, body_offset, size, &zero);
	if (ret)
		goto io;
	if (zero)
		return LSQ_OK;
	snprintf(why, whylen,
		 "%llu bytes after the padded filesystem (from 0x%llx) are neither zeros nor a manifest; use --detached, or cut them off",
		 (unsigned long long)(size - body_offset),
		 (unsigned long long)body_offset);
	return LSQ_ERR_INVALID;
io:
	snprintf(why, whylen, "cannot read the end of the file: %s",
		 strerror(errno));
	return ret;
}

/* Build body + trailer for the entries; *out is malloc'd. */
static int build_manifest(const struct lsq_sign_key *key,
			  const struct lsq_manifest_entry *e, size_t n,
			  uint64_t bytes_used, uint64_t image_size,
			  uint64_t body_offset, uint8_t **out, size_t *len)
{
	size_t body_len = (size_t)lsq_manifest_body_length((uint32_t)n);
	struct lsq_manifest_trailer t;
	uint8_t *buf;
	int ret;

	buf = malloc(body_len + LSQ_MANIFEST_TRAILER_SIZE);
	if (!buf)
		return LSQ_ERR_NOMEM;
	lsq_manifest_encode_header(buf, (uint32_t)n, bytes_used, image_size);
	for (size_t i = 0; i < n; i++)
		lsq_manifest_encode_entry(buf + LSQ_MANIFEST_HEADER_SIZE +
					  i * LSQ_MANIFEST_ENTRY_SIZE, &e[i]);
	ret = lsq_manifest_sign(key, buf, body_len, body_offset, &t);
	if (ret) {
		free(buf);
		return ret;
	}
	lsq_manifest_encode_trailer(buf + body_len, &t);
	*out = buf;
	*len = body_len + LSQ_MANIFEST_TRAILER_SIZE;
	return LSQ_OK;
}

/* Write a detached manifest: a temporary file beside out, renamed over
 * it once complete, so out is either the old file or the whole new one. */
static int write_detached(const char *out, const uint8_t *buf, size_t len,
			  char *why, size_t whylen)
{
	size_t plen = strlen(out);
	char *tmp = malloc(plen + 16);
	int fd, ret;

	if (!tmp)
		return LSQ_ERR_NOMEM;
	snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", out);
	fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(why, whylen, "cannot create %s: %s", tmp,
			 strerror(errno));
		free(tmp);
		return LSQ_ERR_IO;
	}
	ret = lsq_pwrite_full(fd, buf, len, 0);
	if (!ret && (fchmod(fd, 0644) || fsync(fd)))
		ret = LSQ_ERR_IO;
	if (close(fd) && !ret)
		ret = LSQ_ERR_IO;
	if (!ret && rename(tmp, out))
		ret = LSQ_ERR_IO;
	if (ret) {
		snprintf(why, whylen, "cannot write %s: %s", out,
			 strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	return ret;
}

/* Write the manifest into the image: zero padding (only where a byte is
 * not zero already), body and trailer at body_offset, the file cut right
 * after. Nothing below bytes_used is touched. */
static int write_embedded(int fd, uint64_t size, uint64_t bytes_used,
			  uint64_t body_offset, const uint8_t *buf, size_t len,
			  char *why, size_t whylen)
{
	uint64_t pad_end = size < body_offset ? size : body_offset;
	bool zero = true;
	int ret = LSQ_OK;

	if (pad_end > bytes_used)
		ret = all_zero(fd, bytes_used, pad_end, &zero);
	if (!ret && !zero) {
		static const uint8_t zeros[LSQ_MANIFEST_ALIGN];

		ret = lsq_pwrite_full(fd, zeros,
				      (size_t)(pad_end - bytes_used),
				      bytes_used);
	}
	if (!ret)
		ret = lsq_pwrite_full(fd, buf, len, body_offset);
	if (!ret && ftruncate(fd, (off_t)(body_offset + len)))
		ret = LSQ_ERR_IO;
	if (!ret && fsync(fd))
		ret = LSQ_ERR_IO;
	if (ret)
		snprintf(why, whylen, "cannot write the manifest: %s",
			 strerror(errno));
	return ret;
}

int lsq_sign_image(const char *path, const struct lsq_sign_key *key,
		   const char *detached, struct lsq_signed_info *info,
		   char *why, size_t whylen)
{
	struct lsq_manifest_entry *e = NULL;
	struct lsq_image_facts f;
	struct lsq_manifest check;
	uint64_t size, body_offset, image_size;
	uint8_t *buf = NULL;
	size_t len = 0;
	struct stat st;
	int fd, ret;

	memset(&f, 0, sizeof(f));
	memset(info, 0, sizeof(*info));
	fd = open(path, (detached ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(why, whylen, "%s", strerror(errno));
		ret = LSQ_ERR_IO;
		goto out;
	}
	size = (uint64_t)st.st_size;
	ret = lsq_image_facts_read(path, &f);
	if (ret) {
		snprintf(why, whylen, "%s", f.why);
		goto out;
	}
	if (f.count > UINT32_MAX ||
	    lsq_manifest_body_offset(f.bytes_used, &body_offset)) {
		snprintf(why, whylen, "too many units (%zu)", f.count);
		ret = LSQ_ERR_OVERFLOW;
		goto out;
	}
	if (!detached) {
		ret = check_tail(fd, size, body_offset, why, whylen);
		if (ret)
			goto out;
	}

	e = calloc(f.count, sizeof(*e));
	if (!e) {
		snprintf(why, whylen, "out of memory for %zu units", f.count);
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < f.count; i++) {
		e[i].offset = f.units[i].offset;
		e[i].length = f.units[i].length;
	}
	ret = lsq_hash_units(fd, e, f.count, 0, why, whylen);
	if (ret)
		goto out;

	image_size = detached ? size :
		     body_offset + lsq_manifest_body_length((uint32_t)f.count) +
		     LSQ_MANIFEST_TRAILER_SIZE;
	ret = build_manifest(key, e, f.count, f.bytes_used, image_size,
			     detached ? 0 : body_offset, &buf, &len);
	if (ret) {
		snprintf(why, whylen, "cannot sign: %s", lsq_strerror(ret));
		goto out;
	}
	/* What we write must be what a mount accepts. */
	ret = lsq_manifest_parse(buf, len, &check, why, whylen);
	if (ret)
		goto out;
	lsq_manifest_fini(&check);

	if (detached)
		ret = write_detached(detached, buf, len, why, whylen);
	else
		ret = write_embedded(fd, size, f.bytes_used, body_offset, buf,
				     len, why, whylen);
	if (ret)
		goto out;
	info->units = f.count;
	info->manifest_len = len;
	info->body_offset = body_offset;
	info->image_size = image_size;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(e);
	lsq_image_facts_fini(&f);
	return ret;
}
