/* SPDX-License-Identifier: MIT */
/*
 * source_stack.c - the one way a program turns what the user named (a path
 * or URL, an offset, HTTP and cache options) into the source an image is
 * read through: the file or HTTP source at the bottom, then, when any
 * cache is asked for, the caching layers over it:
 *
 *   pin (-o prefetch_metadata)  the metadata region, whole    pin_layer.c
 *   RAM (-o block_cache=)       ranges read, single flight    ram_layer.c
 *   store (always)              units checked and kept on     store_layer.c
 *                               disk (-o cache_dir=)
 *   transport                   a local file, HTTP(S), S3     source_*.c
 *
 * Programs then talk to the image and to this call only, never to one
 * kind of source or layer.
 *
 * With a cache_dir, every URL opened records its size and validator there
 * (origin-HASH, a hash of the URL and offset: no credentials on disk), so
 * that with offline_ok a later mount made while the server cannot be
 * reached opens from that record and serves what the cache holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/url.h"
#include "format/sif.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "source/layer.h"

static bool wants_cache(const struct lsq_cache_options *c)
{
	return c && (c->block_cache_bytes || c->pin_metadata || c->dir);
}

/* cache_dir/origin-HASH: FNV-1a of the URL and the offset */
static char *record_path(const char *dir, const char *url, uint64_t offset)
{
	uint64_t h = 0xcbf29ce484222325u;
	char *path;

	for (const char *p = url; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3u;
	for (int i = 0; i < 8; i++)
		h = (h ^ ((offset >> (8 * i)) & 0xff)) * 0x100000001b3u;
	if (asprintf(&path, "%s/origin-%016" PRIx64, dir, h) < 0)
		return NULL;
	return path;
}

/* What an open without asking the server needs ("SIZE\nVALIDATOR",
 * lsq_http_options.known) from a URL source's identity
 * ("URL\nSIZE\nOFFSET\nVALIDATOR", http_open.c); NULL without one. */
static char *known_of(const char *identity)
{
	const char *url_end = identity ? strchr(identity, '\n') : NULL;
	const char *size_end = url_end ? strchr(url_end + 1, '\n') : NULL;
	const char *offset_end = size_end ? strchr(size_end + 1, '\n') : NULL;
	char *known;

	if (!offset_end ||
	    asprintf(&known, "%.*s\n%s", (int)(size_end - url_end - 1),
		     url_end + 1, offset_end + 1) < 0)
		return NULL;
	return known;
}

/* The record keeps what known_of() gives. Best effort: a mount works
 * without. */
static void record_origin(const char *dir, const char *url, uint64_t offset,
			  const char *identity)
{
	char *path = record_path(dir, url, offset), *tmp = NULL;
	char *known = known_of(identity);
	int fd;

	if (!path || !known || asprintf(&tmp, "%s.tmp", path) < 0)
		goto out;
	/* before the disk cache, which would create it too */
	(void)mkdir(dir, 0700);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		bool ok = dprintf(fd, "%s", known) > 0;

		if (close(fd) == 0 && ok)
			(void)rename(tmp, path);
		else
			(void)unlink(tmp);
	}
out:
	free(known);
	free(tmp);
	free(path);
}

/* The record of an earlier open, or NULL; *when is its time. */
static char *read_origin(const char *dir, const char *url, uint64_t offset,
			 time_t *when)
{
	char *path = record_path(dir, url, offset), *buf = NULL;
	struct stat st;
	ssize_t n;
	int fd;

	fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	free(path);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < 4096 &&
	    (buf = malloc((size_t)st.st_size + 1)) != NULL) {
		n = read(fd, buf, (size_t)st.st_size);
		if (n == st.st_size) {
			buf[n] = '\0';
			*when = st.st_mtime;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	close(fd);
	return buf;
}

/* known: open from cache_dir's record without asking (offline_ok);
 * recorded: that record, whose validator spares an unchanged image's
 * tail (lsq_http_options.tail_unless). */
static int open_url(const char *spec, const char *shown,
		    const struct lsq_source_stack_options *opt,
		    const char *known, const char *recorded,
		    struct lsq_source **out, char *err, size_t errlen)
{
	const char *nl = recorded ? strchr(recorded, '\n') : NULL;
	struct lsq_http_options hopt;
	int ret;

	if (opt->http)
		hopt = *opt->http;
	else
		lsq_http_options_default(&hopt);
	hopt.base_offset = opt->offset;
	hopt.known = known;
	/* the metadata region is wanted at once only when pinned */
	hopt.tail_with_probe = opt->cache && opt->cache->pin_metadata;
	hopt.tail_unless = nl ? nl + 1 : NULL;
	err[0] = '\0';
	ret = lsq_source_http_open(spec, &hopt, out, err, errlen);
	/* the HTTP source's reasons name the URL already */
	if (ret && !err[0])
		snprintf(err, errlen, "%s: %s", shown, lsq_strerror(ret));
	return ret;
}

/* A URL: opened by asking the server; if it cannot be reached and
 * offline_ok is set, from cache_dir's record of the last open. */
static int open_remote(const char *spec, const char *shown,
		       const struct lsq_source_stack_options *opt,
		       struct lsq_source **out, char *err, size_t errlen,
		       char *warn, size_t warnlen)
{
	const struct lsq_cache_options *c = opt->cache;
	const char *dir = c ? c->dir : NULL;
	char *known, stamp[32] = "?";
	time_t when = 0;
	struct tm tm;
	int ret;

	known = dir ? read_origin(dir, spec, opt->offset, &when) : NULL;
	ret = open_url(spec, shown, opt, NULL, known, out, err, errlen);
	if (ret == LSQ_OK) {
		free(known);
		if (dir && (*out)->identity)
			record_origin(dir, spec, opt->offset, (*out)->identity);
		return ret;
	}
	if (!dir || !c->offline_ok ||
	    (ret != LSQ_ERR_UNREACHABLE && ret != LSQ_ERR_TIMEOUT)) {
		free(known);
		return ret;
	}
	if (!known) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, "; offline_ok: %s has no record "
			 "of this image", dir);
		return ret;
	}
	if (gmtime_r(&when, &tm))
		strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S UTC", &tm);
	snprintf(warn, warnlen, "%s; offline_ok: serving what %s holds, "
		 "as the image was on %s, not revalidated", err, dir, stamp);
	ret = open_url(spec, shown, opt, known, NULL, out, err, errlen);
	free(known);
	if (ret && warnlen)
		warn[0] = '\0';
	return ret;
}

static int open_file(const char *spec, const char *shown,
		     const struct lsq_source_stack_options *opt,
		     struct lsq_source **out, char *err, size_t errlen)
{
	int ret = lsq_source_file_open(spec, opt->offset, out);

	if (ret == LSQ_ERR_IO)
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
	else if (ret == LSQ_ERR_OUT_OF_BOUNDS)
		snprintf(err, errlen,
			 "%s: offset %" PRIu64 " is past the end of the file",
			 shown, opt->offset);
	else if (ret)
		snprintf(err, errlen, "%s: %s", shown, lsq_strerror(ret));
	return ret;
}

/* A SIF file: *src becomes the source of its SquashFS partition, opened
 * at its offset as offset= would. The header and the descriptors come
 * from the bytes the open fetched already; a URL is opened again without
 * asking the server (its size and validator are known), but the
 * partition's first bytes cost a request of their own. */
static int open_sif_partition(const char *spec, const char *shown,
			      const struct lsq_source_stack_options *opt,
			      struct lsq_source **src, char *err,
			      size_t errlen)
{
	struct lsq_source_stack_options part = *opt;
	uint8_t head[LSQ_SIF_HEADER_SIZE], *descr = NULL;
	struct lsq_sif_partition p;
	uint64_t size = (*src)->size, doff, dsize;
	char why[320], *known = NULL;
	uint32_t count;
	int ret;

	if (size < sizeof(head) ||
	    lsq_source_read_at(*src, head, sizeof(head), 0) != LSQ_OK ||
	    !lsq_sif_is(head, sizeof(head))) {
		if (!opt->sif_partition)
			return LSQ_OK;
		snprintf(err, errlen, "%s: -o sif_partition=%u: not a SIF "
			 "file", shown, opt->sif_partition);
		ret = LSQ_ERR_INVALID;
		goto fail;
	}
	ret = lsq_sif_descriptors(head, size, &doff, &dsize, &count, why,
				  sizeof(why));
	if (!ret) {
		descr = malloc((size_t)dsize);
		ret = descr ? lsq_source_read_at(*src, descr, (size_t)dsize,
						 doff)
			    : LSQ_ERR_NOMEM;
		if (ret)
			snprintf(why, sizeof(why), "SIF descriptors: %s",
				 lsq_strerror(ret));
	}
	if (!ret)
		ret = lsq_sif_partition(descr, count, doff, size,
					opt->sif_partition, &p, why,
					sizeof(why));
	free(descr);
	if (ret) {
		snprintf(err, errlen, "%s: %s", shown, why);
		goto fail;
	}
	part.offset = p.offset;
	part.find_sif = false;
	known = lsq_source_is_url(spec) ? known_of((*src)->identity) : NULL;
	lsq_source_destroy(*src);
	*src = NULL;
	ret = lsq_source_is_url(spec)
		      ? open_url(spec, shown, &part, known, NULL, src,
				 err, errlen)
		      : open_file(spec, shown, &part, src, err, errlen);
	free(known);
	/* the partition, not what follows it: a manifest at its end is
	 * found there, not past a signature object */
	if (!ret && (*src)->size > p.size)
		(*src)->size = p.size;
	return ret;
fail:
	/* the caller has no source on failure */
	lsq_source_destroy(*src);
	*src = NULL;
	return ret;
}

/* The caching layers over src (owned from here on, destroyed on
 * failure). */
static int stack_caches(struct lsq_source *src,
			const struct lsq_cache_options *opt,
			struct lsq_source **out, char *warn, size_t warnlen)
{
	struct lsq_source *layer;
	int ret;

	ret = lsq_store_layer_create(src, opt, &layer, warn, warnlen);
	if (ret == LSQ_OK)
		src = layer;
	if (ret == LSQ_OK && opt->block_cache_bytes) {
		ret = lsq_ram_layer_create(src, opt->block_cache_bytes, &layer);
		if (ret == LSQ_OK)
			src = layer;
	}
	if (ret == LSQ_OK && opt->pin_metadata) {
		ret = lsq_pin_layer_create(src, &layer);
		if (ret == LSQ_OK)
			src = layer;
	}
	if (ret) {
		lsq_source_destroy(src);
		return ret;
	}
	*out = src;
	return LSQ_OK;
}

int lsq_source_open_stack(const char *spec,
			  const struct lsq_source_stack_options *opt,
			  struct lsq_source **out, char *err, size_t errlen,
			  char *warn, size_t warnlen)
{
	static const struct lsq_source_stack_options none;
	struct lsq_source *src, *cached;
	char *shown, cache_warn[512] = "";
	int ret;

	if (warnlen)
		warn[0] = '\0';
	if (!opt)
		opt = &none;
	shown = lsq_url_redact(spec);
	if (!shown) {
		snprintf(err, errlen, "%s", lsq_strerror(LSQ_ERR_NOMEM));
		return LSQ_ERR_NOMEM;
	}
	if (lsq_source_is_url(spec))
		ret = open_remote(spec, shown, opt, &src, err, errlen, warn,
				  warnlen);
	else
		ret = open_file(spec, shown, opt, &src, err, errlen);
	if (!ret && opt->find_sif && opt->offset == 0)
		ret = open_sif_partition(spec, shown, opt, &src, err, errlen);
	if (ret || !wants_cache(opt->cache)) {
		free(shown);
		if (!ret)
			*out = src;
		return ret;
	}
	/* an unusable persistent cache is a warning: the layer works
	 * without it (after an offline_ok line, if any) */
	ret = stack_caches(src, opt->cache, &cached, cache_warn,
			   sizeof(cache_warn));
	if (cache_warn[0] && warnlen) {
		size_t n = strlen(warn);

		snprintf(warn + n, warnlen - n, "%s%s", n ? "; " : "",
			 cache_warn);
	}
	if (ret) {
		snprintf(err, errlen, "%s: %s", shown, lsq_strerror(ret));
	} else {
		*out = cached;
	}
	free(shown);
	return ret;
}
