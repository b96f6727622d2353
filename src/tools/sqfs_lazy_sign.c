/* SPDX-License-Identifier: MIT */
/*
 * sqfs-lazy-sign - add a signed block manifest to a SquashFS 4.0 image,
 * check one, or list the units it would cover (docs/manifest.md).
 *
 * Signing lists the image's units through the reader (src/image/units.c),
 * hashes them in one sequential pass (unit_hash.c), and writes body and
 * trailer after the zero padding that follows bytes_used, or to a file of
 * their own with --detached. An old manifest at that place is replaced,
 * so signing twice gives the same bytes (Ed25519 signatures are
 * deterministic). Verifying checks, in order: the manifest's structure,
 * its signature, that it names this image (superblock, size), every unit's
 * digest, and that its units are the ones this image's reader fetches.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "format/manifest.h"
#include "format/manifest_sign.h"
#include "image/units.h"
#include "lsq/error.h"
#include "lsq/image.h"
#include "lsq/source.h"
#include "tools/unit_hash.h"

#define PROG "sqfs-lazy-sign"
#define MAX_KEYS 16

struct opts {
	const char *key;         /* --key: private key, sign */
	const char *pub[MAX_KEYS]; /* --verify: public keys */
	unsigned npub;
	const char *detached;    /* --detached: manifest file */
	bool list;
	bool verbose;
	const char *image;
};

/* What the image's reader says about it: its units (NULL when it cannot
 * be opened or listed, with the reason in why). */
struct image_facts {
	struct lsq_unit *units;
	size_t count;
	uint64_t bytes_used;
	char why[384]; /* fits in the callers' 512 with their words */
	int ret;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --key KEY.pem [--detached OUT] [-v] IMAGE\n"
		"       " PROG " --verify PUB.pem [--verify PUB.pem]... [--detached MANIFEST] IMAGE\n"
		"       " PROG " --list IMAGE\n"
		"Sign a SquashFS 4.0 image: a SHA-256 of every unit a reader fetches, one\n"
		"Ed25519 signature over them, appended after the filesystem (or written\n"
		"to OUT with --detached). --verify checks a signed image, --list prints\n"
		"the units. Keys are PEM files (openssl genpkey -algorithm ed25519).\n"
		"  -v, --verbose   say what was done\n"
		"  --help, --version\n");
}

/* The one line of a failure; returns the exit status. what is the image,
 * or NULL when the reason names its file itself (a key). */
static int die(const char *what, const char *reason)
{
	if (what)
		fprintf(stderr, PROG ": %s: %s\n", what, reason);
	else
		fprintf(stderr, PROG ": %s\n", reason);
	return 1;
}

static void facts_fini(struct image_facts *f)
{
	free(f->units);
	f->units = NULL;
}

/* Open the image with the reader and list its units. */
static int read_facts(const char *path, struct image_facts *f)
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

/* The kind of the unit at offset, from the reader's list, for messages. */
static const char *kind_at(const struct image_facts *f, uint64_t offset)
{
	size_t lo = 0, hi = f->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->units[mid].offset == offset)
			return lsq_unit_kind_name(f->units[mid].kind);
		if (f->units[mid].offset < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return "unit";
}

static int pread_full(int fd, void *buf, size_t len, uint64_t offset)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)offset);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r ? LSQ_ERR_IO : LSQ_ERR_OUT_OF_BOUNDS;
		p += r;
		len -= (size_t)r;
		offset += (uint64_t)r;
	}
	return LSQ_OK;
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t offset)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t r = pwrite(fd, p, len, (off_t)offset);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return LSQ_ERR_IO;
		p += r;
		len -= (size_t)r;
		offset += (uint64_t)r;
	}
	return LSQ_OK;
}

/* Whether [from, to) of the file holds only zero bytes. */
static int all_zero(int fd, uint64_t from, uint64_t to, bool *zero)
{
	uint8_t buf[64 * 1024];

	*zero = true;
	while (from < to) {
		size_t n = to - from < sizeof(buf) ? (size_t)(to - from)
						   : sizeof(buf);
		int ret = pread_full(fd, buf, n, from);

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
		ret = pread_full(fd, magic, sizeof(magic), body_offset);
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
	ret = pwrite_full(fd, buf, len, 0);
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

		ret = pwrite_full(fd, zeros, (size_t)(pad_end - bytes_used),
				  bytes_used);
	}
	if (!ret)
		ret = pwrite_full(fd, buf, len, body_offset);
	if (!ret && ftruncate(fd, (off_t)(body_offset + len)))
		ret = LSQ_ERR_IO;
	if (!ret && fsync(fd))
		ret = LSQ_ERR_IO;
	if (ret)
		snprintf(why, whylen, "cannot write the manifest: %s",
			 strerror(errno));
	return ret;
}

static int sign(const struct opts *o)
{
	struct lsq_manifest_entry *e = NULL;
	struct lsq_sign_key *key = NULL;
	struct image_facts f;
	struct lsq_manifest check;
	uint64_t size, body_offset, image_size;
	uint8_t *buf = NULL;
	size_t len = 0;
	char why[512], hex[17];
	struct stat st;
	int fd, ret, rc = 1;

	ret = lsq_sign_key_load_private(o->key, &key, why, sizeof(why));
	if (ret)
		return die(NULL, why);
	memset(&f, 0, sizeof(f));
	fd = open(o->image, (o->detached ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
		goto fail;
	}
	size = (uint64_t)st.st_size;
	if (read_facts(o->image, &f)) {
		snprintf(why, sizeof(why), "%s", f.why);
		goto fail;
	}
	if (f.count > UINT32_MAX ||
	    lsq_manifest_body_offset(f.bytes_used, &body_offset)) {
		snprintf(why, sizeof(why), "too many units (%zu)", f.count);
		goto fail;
	}
	if (!o->detached &&
	    check_tail(fd, size, body_offset, why, sizeof(why)))
		goto fail;

	e = calloc(f.count, sizeof(*e));
	if (!e) {
		snprintf(why, sizeof(why), "out of memory for %zu units",
			 f.count);
		goto fail;
	}
	for (size_t i = 0; i < f.count; i++) {
		e[i].offset = f.units[i].offset;
		e[i].length = f.units[i].length;
	}
	if (lsq_hash_units(fd, e, f.count, 0, why, sizeof(why)))
		goto fail;

	image_size = o->detached ? size :
		     body_offset + lsq_manifest_body_length((uint32_t)f.count) +
		     LSQ_MANIFEST_TRAILER_SIZE;
	ret = build_manifest(key, e, f.count, f.bytes_used, image_size,
			     o->detached ? 0 : body_offset, &buf, &len);
	if (ret) {
		snprintf(why, sizeof(why), "cannot sign: %s",
			 lsq_strerror(ret));
		goto fail;
	}
	/* What we write must be what a mount accepts. */
	ret = lsq_manifest_parse(buf, len, &check, why, sizeof(why));
	if (ret)
		goto fail;
	lsq_manifest_fini(&check);

	if (o->detached)
		ret = write_detached(o->detached, buf, len, why, sizeof(why));
	else
		ret = write_embedded(fd, size, f.bytes_used, body_offset, buf,
				     len, why, sizeof(why));
	if (ret)
		goto fail;
	if (o->verbose) {
		lsq_sign_key_id_hex(lsq_sign_key_id(key), hex);
		if (o->detached)
			printf("%s: signed %zu units with key id %s; manifest of %zu bytes written to %s\n",
			       o->image, f.count, hex, len, o->detached);
		else
			printf("%s: signed %zu units with key id %s; manifest of %zu bytes at 0x%llx, file now %llu bytes\n",
			       o->image, f.count, hex, len,
			       (unsigned long long)body_offset,
			       (unsigned long long)image_size);
	}
	rc = 0;
	goto out;
fail:
	die(o->image, why);
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(e);
	facts_fini(&f);
	lsq_sign_key_destroy(key);
	return rc;
}

/* ---- verifying ---- */

/* The manifest bytes (body + trailer) of the image or of the detached
 * file, malloc'd into *out. */
static int load_manifest(const struct opts *o, int fd, uint64_t size,
			 uint8_t **out, size_t *len, char *why, size_t whylen)
{
	uint8_t tb[LSQ_MANIFEST_TRAILER_SIZE];
	struct lsq_manifest_trailer t;
	uint64_t from = 0, end = size;
	int mfd = fd, ret;

	if (o->detached) {
		struct stat st;

		mfd = open(o->detached, O_RDONLY | O_CLOEXEC);
		if (mfd < 0 || fstat(mfd, &st)) {
			snprintf(why, whylen, "%s: %s", o->detached,
				 strerror(errno));
			if (mfd >= 0)
				close(mfd);
			return LSQ_ERR_IO;
		}
		end = (uint64_t)st.st_size;
	}
	if (end < LSQ_MANIFEST_TRAILER_SIZE) {
		snprintf(why, whylen, "no manifest: %llu bytes, less than a manifest trailer",
			 (unsigned long long)end);
		ret = LSQ_ERR_NOT_FOUND;
		goto out;
	}
	ret = pread_full(mfd, tb, sizeof(tb), end - sizeof(tb));
	if (ret) {
		snprintf(why, whylen, "cannot read the manifest trailer: %s",
			 strerror(errno));
		goto out;
	}
	ret = lsq_manifest_trailer_decode(tb, &t, why, whylen);
	if (ret)
		goto out;
	if (!o->detached) {
		/* the body must sit where the trailer says, right before it */
		if (t.body_offset == 0) {
			snprintf(why, whylen, "bad manifest: an embedded manifest with the body offset 0 of a detached one");
			ret = LSQ_ERR_CORRUPT;
			goto out;
		}
		if (t.body_offset > end - sizeof(tb) ||
		    end - sizeof(tb) - t.body_offset != t.body_length) {
			snprintf(why, whylen,
				 "truncated manifest: the trailer puts a body of %llu bytes at 0x%llx, but %llu bytes lie between there and the trailer",
				 (unsigned long long)t.body_length,
				 (unsigned long long)t.body_offset,
				 t.body_offset > end - sizeof(tb) ? 0ull :
				 (unsigned long long)(end - sizeof(tb) - t.body_offset));
			ret = LSQ_ERR_CORRUPT;
			goto out;
		}
		from = t.body_offset;
	} else if (t.body_offset != 0) {
		snprintf(why, whylen, "bad manifest: a detached manifest with the body offset 0x%llx of an embedded one",
			 (unsigned long long)t.body_offset);
		ret = LSQ_ERR_CORRUPT;
		goto out;
	}
	if (end - from > SIZE_MAX / 2) {
		snprintf(why, whylen, "manifest too large");
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	*len = (size_t)(end - from);
	*out = malloc(*len);
	if (!*out) {
		snprintf(why, whylen, "out of memory for a manifest of %zu bytes",
			 *len);
		ret = LSQ_ERR_NOMEM;
		goto out;
	}
	ret = pread_full(mfd, *out, *len, from);
	if (ret) {
		snprintf(why, whylen, "cannot read the manifest: %s",
			 strerror(errno));
		free(*out);
		*out = NULL;
	}
out:
	if (mfd != fd)
		close(mfd);
	return ret;
}

/* The manifest names this image: its superblock and its size. */
static int check_binding(int fd, uint64_t size, const struct lsq_manifest *m,
			 char *why, size_t whylen)
{
	uint8_t sb[SQUASHFS_SUPERBLOCK_SIZE];

	if (size < sizeof(sb) || pread_full(fd, sb, sizeof(sb), 0)) {
		snprintf(why, whylen, "cannot read the superblock");
		return LSQ_ERR_IO;
	}
	return lsq_manifest_check_image(m, sb, size, why, whylen);
}

/* Every unit's digest, then the list against the reader's own. */
static int check_units(int fd, const struct lsq_manifest *m,
		       const struct image_facts *f, char *why, size_t whylen)
{
	struct lsq_manifest_entry *e;
	size_t bad = 0, first = 0;
	int ret;

	e = malloc((size_t)m->count * sizeof(*e));
	if (!e) {
		snprintf(why, whylen, "out of memory for %u units", m->count);
		return LSQ_ERR_NOMEM;
	}
	memcpy(e, m->entries, (size_t)m->count * sizeof(*e));
	ret = lsq_hash_units(fd, e, m->count, 0, why, whylen);
	for (size_t i = 0; !ret && i < m->count; i++)
		if (memcmp(e[i].digest, m->entries[i].digest,
			   LSQ_MANIFEST_DIGEST_SIZE) && !bad++)
			first = i;
	free(e);
	if (ret)
		return ret;
	if (bad) {
		const struct lsq_manifest_entry *x = &m->entries[first];
		char more[64] = "";

		if (bad > 1)
			snprintf(more, sizeof(more), " (%zu units differ)", bad);
		snprintf(why, whylen,
			 "%s at 0x%llx (%u bytes) does not match the manifest%s",
			 kind_at(f, x->offset), (unsigned long long)x->offset,
			 x->length, more);
		return LSQ_ERR_CORRUPT;
	}
	/* Digests all good: the image is the one signed. What is left is
	 * whether the manifest covers every unit this reader fetches. */
	if (f->ret) {
		snprintf(why, whylen, "the signed image cannot be listed: %s",
			 f->why);
		return f->ret;
	}
	for (size_t i = 0; i < f->count || i < m->count; i++) {
		const struct lsq_unit *u = i < f->count ? &f->units[i] : NULL;
		const struct lsq_manifest_entry *x =
			i < m->count ? &m->entries[i] : NULL;

		if (u && x && u->offset == x->offset && u->length == x->length)
			continue;
		if (u && (!x || u->offset <= x->offset))
			snprintf(why, whylen,
				 "the manifest does not cover the %s at 0x%llx (%u bytes); sign the image again",
				 lsq_unit_kind_name(u->kind),
				 (unsigned long long)u->offset, u->length);
		else
			snprintf(why, whylen,
				 "the manifest lists a unit at 0x%llx (%u bytes) that the image does not have",
				 (unsigned long long)x->offset, x->length);
		return LSQ_ERR_CORRUPT;
	}
	return LSQ_OK;
}

static int verify(const struct opts *o)
{
	struct lsq_sign_key *keys[MAX_KEYS] = { 0 };
	struct lsq_manifest m = { 0 };
	struct image_facts f;
	uint8_t *buf = NULL;
	size_t len = 0, which = 0;
	uint64_t size, covered = 0;
	char why[512], hex[17];
	struct stat st;
	int fd = -1, rc = 1;

	memset(&f, 0, sizeof(f));
	for (unsigned i = 0; i < o->npub; i++)
		if (lsq_sign_key_load_public(o->pub[i], &keys[i], why,
					     sizeof(why))) {
			die(NULL, why);
			goto out;
		}
	fd = open(o->image, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
		goto fail;
	}
	size = (uint64_t)st.st_size;
	if (load_manifest(o, fd, size, &buf, &len, why, sizeof(why)) ||
	    lsq_manifest_parse(buf, len, &m, why, sizeof(why)) ||
	    lsq_manifest_verify(&m, buf, len - LSQ_MANIFEST_TRAILER_SIZE, keys,
				o->npub, &which, why, sizeof(why)) ||
	    check_binding(fd, size, &m, why, sizeof(why)))
		goto fail;
	/* best effort: a damaged image may not open, and the digests
	 * will say where it is damaged */
	read_facts(o->image, &f);
	if (check_units(fd, &m, &f, why, sizeof(why)))
		goto fail;
	for (uint32_t i = 0; i < m.count; i++)
		covered += m.entries[i].length;
	lsq_sign_key_id_hex(m.trailer.key_id, hex);
	printf("%s: good signature by key id %s (%s); %u units, %llu of %llu filesystem bytes checked\n",
	       o->image, hex, o->pub[which], m.count,
	       (unsigned long long)covered,
	       (unsigned long long)m.bytes_used);
	rc = 0;
	goto out;
fail:
	die(o->image, why);
out:
	if (fd >= 0)
		close(fd);
	lsq_manifest_fini(&m);
	free(buf);
	facts_fini(&f);
	for (unsigned i = 0; i < o->npub; i++)
		lsq_sign_key_destroy(keys[i]);
	return rc;
}

/* ---- listing ---- */

static int list(const struct opts *o)
{
	struct image_facts f;
	uint64_t covered = 0;

	if (read_facts(o->image, &f)) {
		facts_fini(&f);
		return die(o->image, f.why);
	}
	for (size_t i = 0; i < f.count; i++) {
		printf("0x%llx %u %s\n", (unsigned long long)f.units[i].offset,
		       f.units[i].length, lsq_unit_kind_name(f.units[i].kind));
		covered += f.units[i].length;
	}
	if (o->verbose)
		fprintf(stderr, "%s: %zu units, %llu of %llu bytes\n", o->image,
			f.count, (unsigned long long)covered,
			(unsigned long long)f.bytes_used);
	facts_fini(&f);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option long_opts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "verify", required_argument, NULL, 'V' },
		{ "detached", required_argument, NULL, 'd' },
		{ "list", no_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { 0 };
	int c, modes;

	while ((c = getopt_long(argc, argv, "vh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			o.key = optarg;
			break;
		case 'V':
			if (o.npub == MAX_KEYS) {
				fprintf(stderr, PROG ": at most %d --verify keys\n",
					MAX_KEYS);
				return 2;
			}
			o.pub[o.npub++] = optarg;
			break;
		case 'd':
			o.detached = optarg;
			break;
		case 'l':
			o.list = true;
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'R':
			printf(PROG " %s\n", LSQ_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	modes = !!o.key + !!o.npub + o.list;
	if (optind != argc - 1 || modes != 1 || (o.list && o.detached)) {
		usage(stderr);
		return 2;
	}
	o.image = argv[optind];
	/* the reader's own messages would be a second line; ours says it */
	lsq_log_set_prefix(PROG);
	lsq_log_set_level(o.verbose ? LSQ_LOG_WARNING : LSQ_LOG_SILENT);
	if (o.key)
		return sign(&o);
	if (o.npub)
		return verify(&o);
	return list(&o);
}
