/* SPDX-License-Identifier: MIT */
/* startup.c - -o prefetch= sources (see startup.h). */
#include "profile/startup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file_io.h"
#include "common/log.h"
#include "common/url.h"
#include "lsq/error.h"
#include "profile/learned.h"

/* A profile lists files, a few dozen bytes each: this is millions. */
#define PROFILE_MAX (64u << 20)

static int fetch_url(const char *url, const struct lsq_http_options *http,
		     char **text, size_t *len, char *err, size_t errlen)
{
	/* the image's HTTP options (headers, TLS); not its mirrors */
	struct lsq_http_options hopt = *http;
	struct lsq_source_stack_options so = { .http = &hopt };
	struct lsq_source *src;
	char *buf;
	int ret;

	hopt.nmirrors = 0;
	hopt.url_command = NULL;  /* it prints the image's URL, not this */
	hopt.max_connections = 1;  /* one read of the whole file */
	ret = lsq_source_open_stack(url, &so, &src, err, errlen, NULL, 0);
	if (ret)
		return ret;
	if (src->size > PROFILE_MAX) {
		snprintf(err, errlen, "%llu bytes, more than a profile can be",
			 (unsigned long long)src->size);
		lsq_source_destroy(src);
		return LSQ_ERR_INVALID;
	}
	buf = malloc(src->size ? (size_t)src->size : 1);
	ret = buf ? lsq_source_read_at(src, buf, (size_t)src->size, 0)
		  : LSQ_ERR_NOMEM;
	if (ret == LSQ_OK) {
		*text = buf;
		*len = (size_t)src->size;
	} else {
		free(buf);
	}
	lsq_source_destroy(src);
	return ret;
}

/* The publisher's profile beside an image URL: URL.profile; NULL where
 * the URL has a query (a signature: the guess would be refused). */
static char *beside(const char *image)
{
	size_t n = strlen(image);
	char *url;

	if (strpbrk(image, "?#") || strncmp(image, "file:", 5) == 0)
		return NULL;
	url = malloc(n + sizeof(".profile"));
	if (url)
		memcpy(mempcpy(url, image, n), ".profile", sizeof(".profile"));
	return url;
}

/* Auto: learned, stored, then beside the image URL. */
static void load_auto(struct lsq_startup_profile *p,
		      const struct lsq_profile_sources *from,
		      struct lsq_image *img)
{
	const char *learned_path = from->learned_path;
	int ret;

	if (learned_path) {
		ret = lsq_learned_profile_read(learned_path, &p->text,
					       &p->len);
		if (ret == LSQ_OK) {
			p->name = strdup("learned");
			return;
		}
		if (ret != LSQ_ERR_NOT_FOUND)
			lsq_warn("prefetch: the learned profile %s is unusable (%s); ignoring it",
				 learned_path,
				 ret == LSQ_ERR_CORRUPT ? "damaged or truncated"
							: lsq_strerror(ret));
		p->text = NULL;
	}
	ret = lsq_image_stored_profile(img, &p->text, &p->len);
	if (ret == LSQ_OK) {
		p->name = strdup("stored in the image");
		return;
	}
	if (ret != LSQ_ERR_NOT_FOUND)
		lsq_warn("prefetch: the profile stored in the image is unusable (%s); not prefetching",
			 lsq_strerror(ret));
	/* with url_command the image's URL is the command's, and signed:
	 * nothing to guess beside it */
	if (ret == LSQ_ERR_NOT_FOUND && lsq_source_is_url(from->image) &&
	    !from->http->url_command) {
		p->url = beside(from->image);
		p->name = p->url ? lsq_url_redact(p->url) : NULL;
		p->quiet = true;
	}
}

void lsq_startup_profile_load(struct lsq_startup_profile *p,
			      const struct lsq_profile_sources *from,
			      struct lsq_image *img)
{
	const char *want = from->want;
	int ret;

	memset(p, 0, sizeof(*p));
	p->http = from->http;
	if (want && strcmp(want, "off") == 0)
		return;
	if (!want || strcmp(want, "auto") == 0) {
		load_auto(p, from, img);
		return;
	}
	p->name = lsq_url_redact(want);
	if (lsq_source_is_url(want)) {
		p->url = strdup(want);
		return;
	}
	ret = lsq_read_small_file(want, PROFILE_MAX, &p->text, &p->len, NULL);
	if (ret)
		lsq_warn("prefetch %s: %s; not prefetching", want,
			 ret == LSQ_ERR_NOMEM ? lsq_strerror(ret)
					      : strerror(errno));
}

/* lsq_profile_loader_fn: fetch p->url on the prefetch's thread. */
static int load_url(void *ctx, char **text, size_t *len)
{
	struct lsq_startup_profile *p = ctx;
	char err[512] = "";
	int ret = fetch_url(p->url, p->http, text, len, err, sizeof(err));

	if (ret && p->quiet)
		lsq_debug("prefetch %s: %s; none beside the image",
			  p->name ? p->name : "URL",
			  err[0] ? err : lsq_strerror(ret));
	else if (ret)
		lsq_warn("prefetch %s: %s; not prefetching",
			 p->name ? p->name : "URL",
			 err[0] ? err : lsq_strerror(ret));
	return ret;
}

void lsq_startup_profile_start(struct lsq_startup_profile *p,
			       struct lsq_image *img,
			       const struct lsq_prefetch_options *po)
{
	int ret;

	if (!p->text && !p->url)
		return;
	ret = p->text ? lsq_image_prefetch(img, p->text, p->len, p->name, po)
		      : lsq_image_prefetch_from(img, load_url, p, p->name, po);
	if (ret)
		lsq_warn("prefetch %s: %s; not prefetching", p->name,
			 lsq_strerror(ret));
}

void lsq_startup_profile_fini(struct lsq_startup_profile *p)
{
	free(p->text);
	free(p->name);
	free(p->url);
	memset(p, 0, sizeof(*p));
}
