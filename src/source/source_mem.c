/* SPDX-License-Identifier: MIT */
/* source_mem.c - a private copy of a memory buffer as byte source (unit
 * tests and fuzzing feed images through it). */
#include <stdlib.h>
#include <string.h>

#include "lsq/error.h"
#include "lsq/source.h"

struct mem_source {
	struct lsq_source base;
	uint8_t data[];
};

static int mem_read(struct lsq_source *src, struct lsq_read *rq)
{
	struct mem_source *ms = (struct mem_source *)src;

	memcpy(rq->buf, ms->data + rq->offset, rq->len);
	return LSQ_OK;
}

static void mem_destroy(struct lsq_source *src)
{
	free(src->name);
	free(src);
}

static const struct lsq_source_ops mem_ops = {
	.read = mem_read,
	.destroy = mem_destroy,
};

int lsq_source_mem_create(const void *data, size_t size, const char *name,
			  struct lsq_source **out)
{
	struct mem_source *ms;

	if (size > SIZE_MAX - sizeof(*ms))
		return LSQ_ERR_NOMEM;
	ms = calloc(1, sizeof(*ms) + size);
	if (!ms)
		return LSQ_ERR_NOMEM;
	ms->base.name = strdup(name ? name : "<memory>");
	if (!ms->base.name) {
		free(ms);
		return LSQ_ERR_NOMEM;
	}
	if (size)
		memcpy(ms->data, data, size);
	ms->base.ops = &mem_ops;
	ms->base.size = size;
	*out = &ms->base;
	return LSQ_OK;
}
