/* SPDX-License-Identifier: MIT */
/* source.c - dispatch and accounting shared by every byte source. */
#include <stdlib.h>

#include "common/checked_math.h"
#include "common/long_work.h"
#include "lsq/error.h"
#include "lsq/source.h"

int lsq_source_read_at(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset)
{
	int ret;

	/* Checked once here so no implementation can forget it. */
	if (lsq_range_outside(offset, len, src->size))
		return LSQ_ERR_OUT_OF_BOUNDS;
	if (len == 0)
		return LSQ_OK;
	lsq_source_note_origin(NULL);
	lsq_source_note_checked(false);
	/* a fetch may wait, and wake us, for long */
	lsq_long_work_ahead(LSQ_WORK_READ);
	ret = src->ops->read_at(src, buf, len, offset);
	lsq_long_work_done(LSQ_WORK_READ);
	atomic_fetch_add_explicit(&src->stats.reads, 1, memory_order_relaxed);
	if (ret == LSQ_OK)
		atomic_fetch_add_explicit(&src->stats.bytes_read, len,
					  memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&src->stats.failures, 1,
					  memory_order_relaxed);
	return ret;
}

int lsq_source_refetch(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset)
{
	int ret;

	if (!src->ops->refetch)
		return lsq_source_read_at(src, buf, len, offset);
	if (lsq_range_outside(offset, len, src->size))
		return LSQ_ERR_OUT_OF_BOUNDS;
	if (len == 0)
		return LSQ_OK;
	lsq_source_note_origin(NULL);
	lsq_source_note_checked(false);
	lsq_long_work_ahead(LSQ_WORK_READ);
	ret = src->ops->refetch(src, buf, len, offset);
	lsq_long_work_done(LSQ_WORK_READ);
	return ret;
}

void lsq_source_advise(struct lsq_source *src, uint64_t offset, uint64_t len)
{
	if (src->ops->advise)
		src->ops->advise(src, offset, len);
}

void lsq_source_destroy(struct lsq_source *src)
{
	if (src) {
		free(src->identity);
		src->identity = NULL;
		src->ops->destroy(src);
	}
}

static _Thread_local uint64_t run_end_hint;
static _Thread_local lsq_run_end_fn run_end_fn;
static _Thread_local void *run_end_ctx;

void lsq_source_hint_run_end(uint64_t end)
{
	run_end_hint = end;
	run_end_fn = NULL;
}

void lsq_source_hint_run_end_lazy(lsq_run_end_fn fn, void *ctx)
{
	run_end_hint = 0;
	run_end_fn = fn;
	run_end_ctx = ctx;
}

uint64_t lsq_source_run_end(void)
{
	if (run_end_fn) {  /* once per hint */
		lsq_run_end_fn fn = run_end_fn;

		/* cleared first: fn may read metadata, and that read must
		 * not ask fn again */
		run_end_fn = NULL;
		run_end_hint = fn(run_end_ctx);
	}
	return run_end_hint;
}

static _Thread_local bool speculative_reads;

void lsq_source_hint_speculative(bool on)
{
	speculative_reads = on;
}

bool lsq_source_speculative(void)
{
	return speculative_reads;
}

static _Thread_local const char *last_origin;

void lsq_source_note_origin(const char *where)
{
	last_origin = where;
}

const char *lsq_source_origin(void)
{
	return last_origin;
}

static _Thread_local bool served_checked;

void lsq_source_note_checked(bool checked)
{
	served_checked = checked;
}

bool lsq_source_checked(void)
{
	return served_checked;
}
