/* SPDX-License-Identifier: MIT */
/*
 * source_stack.c - the one way a program turns what the user named (a path
 * or URL, an offset, HTTP and cache options) into the source an image is
 * read through: the file or HTTP source, then the caching layer when any
 * cache is asked for. Programs then talk to the image and to this call
 * only, never to one kind of source.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/url.h"
#include "lsq/error.h"
#include "lsq/source.h"

static bool wants_cache(const struct lsq_cache_options *c)
{
	return c && (c->block_cache_bytes || c->pin_metadata || c->dir);
}

static int open_inner(const char *spec, const char *shown,
		      const struct lsq_source_stack_options *opt,
		      struct lsq_source **out, char *err, size_t errlen)
{
	int ret;

	if (lsq_source_is_url(spec)) {
		struct lsq_http_options hopt;

		if (opt->http)
			hopt = *opt->http;
		else
			lsq_http_options_default(&hopt);
		hopt.base_offset = opt->offset;
		err[0] = '\0';
		ret = lsq_source_http_open(spec, &hopt, out, err, errlen);
		/* the HTTP source's reasons name the URL already */
		if (ret && !err[0])
			snprintf(err, errlen, "%s: %s", shown,
				 lsq_strerror(ret));
		return ret;
	}
	ret = lsq_source_file_open(spec, opt->offset, out);
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

int lsq_source_open_stack(const char *spec,
			  const struct lsq_source_stack_options *opt,
			  struct lsq_source **out, char *err, size_t errlen,
			  char *warn, size_t warnlen)
{
	static const struct lsq_source_stack_options none;
	struct lsq_source *src, *cached;
	char *shown;
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
	ret = open_inner(spec, shown, opt, &src, err, errlen);
	if (ret || !wants_cache(opt->cache)) {
		free(shown);
		if (!ret)
			*out = src;
		return ret;
	}
	/* an unusable persistent cache is a warning: the layer works
	 * without it */
	ret = lsq_source_cache_wrap(src, opt->cache, &cached, warn, warnlen);
	if (ret) {
		snprintf(err, errlen, "%s: %s", shown, lsq_strerror(ret));
		lsq_source_destroy(src);
	} else {
		*out = cached;
	}
	free(shown);
	return ret;
}
