/* SPDX-License-Identifier: MIT */
/*
 * sqfs-lazy-sign - add a signed block manifest to a SquashFS 4.0 image,
 * check one, or list the units it would cover (docs/manifest.md).
 *
 * Signing is sign_image.c's, shared with sqfs-lazy-pack --sign. Verifying
 * checks, in order: the manifest's structure,
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

#include "common/file_io.h"
#include "common/log.h"
#include "format/manifest.h"
#include "format/manifest_sign.h"
#include "image/units.h"
#include "lsq/error.h"
#include "lsq/image.h"
#include "lsq/source.h"
#include "sign/sign_image.h"
#include "sign/unit_hash.h"

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

/* The kind of the unit at offset, from the reader's list, for messages. */
static const char *kind_at(const struct lsq_image_facts *f, uint64_t offset)
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

/* ---- signing ---- */

static int sign(const struct opts *o)
{
	struct lsq_sign_key *key = NULL;
	struct lsq_signed_info info;
	char why[512], hex[17];
	int ret;

	ret = lsq_sign_key_load_private(o->key, &key, why, sizeof(why));
	if (ret)
		return die(NULL, why);
	ret = lsq_sign_image(o->image, key, o->detached, &info, why,
			     sizeof(why));
	if (ret) {
		lsq_sign_key_destroy(key);
		return die(o->image, why);
	}
	if (o->verbose) {
		lsq_sign_key_id_hex(lsq_sign_key_id(key), hex);
		if (o->detached)
			printf("%s: signed %zu units with key id %s; manifest of %zu bytes written to %s\n",
			       o->image, info.units, hex, info.manifest_len,
			       o->detached);
		else
			printf("%s: signed %zu units with key id %s; manifest of %zu bytes at 0x%llx, file now %llu bytes\n",
			       o->image, info.units, hex, info.manifest_len,
			       (unsigned long long)info.body_offset,
			       (unsigned long long)info.image_size);
	}
	lsq_sign_key_destroy(key);
	return 0;
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
	ret = lsq_pread_full(mfd, tb, sizeof(tb), end - sizeof(tb));
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
	ret = lsq_pread_full(mfd, *out, *len, from);
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

	if (size < sizeof(sb) || lsq_pread_full(fd, sb, sizeof(sb), 0)) {
		snprintf(why, whylen, "cannot read the superblock");
		return LSQ_ERR_IO;
	}
	return lsq_manifest_check_image(m, sb, size, why, whylen);
}

/* Every unit's digest, then the list against the reader's own. */
static int check_units(int fd, const struct lsq_manifest *m,
		       const struct lsq_image_facts *f, char *why, size_t whylen)
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
	struct lsq_image_facts f;
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
	lsq_image_facts_read(o->image, &f);
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
	lsq_image_facts_fini(&f);
	for (unsigned i = 0; i < o->npub; i++)
		lsq_sign_key_destroy(keys[i]);
	return rc;
}

/* ---- listing ---- */

static int list(const struct opts *o)
{
	struct lsq_image_facts f;
	uint64_t covered = 0;

	if (lsq_image_facts_read(o->image, &f)) {
		lsq_image_facts_fini(&f);
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
	lsq_image_facts_fini(&f);
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
