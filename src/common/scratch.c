/* SPDX-License-Identifier: MIT */
#include "common/scratch.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/bufpool.h"

struct scratch {
	void *buf[LSQ_SCRATCH_SLOTS];
	size_t cap[LSQ_SCRATCH_SLOTS];
};

static _Thread_local void *lent[LSQ_SCRATCH_SLOTS];
static _Thread_local size_t lent_cap[LSQ_SCRATCH_SLOTS];

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_err;

static void scratch_free(void *p)
{
	struct scratch *s = p;

	for (int i = 0; i < LSQ_SCRATCH_SLOTS; i++)
		lsq_bufpool_free(s->buf[i]);
	free(s);
}

static void scratch_init(void)
{
	scratch_key_err = pthread_key_create(&scratch_key, scratch_free);
}

void *lsq_scratch(enum lsq_scratch_slot slot, size_t len)
{
	struct scratch *s;
	size_t cap;
	void *p;

	if ((unsigned)slot >= LSQ_SCRATCH_SLOTS)
		return NULL;
	if (lent[slot] && len <= lent_cap[slot])
		return lent[slot];
	if (len > LSQ_SCRATCH_KEEP_MAX)
		return NULL;
	if (pthread_once(&scratch_once, scratch_init) || scratch_key_err)
		return NULL;
	s = pthread_getspecific(scratch_key);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s || pthread_setspecific(scratch_key, s)) {
			free(s);
			return NULL;
		}
	}
	if (s->cap[slot] >= len)
		return s->buf[slot];
	/* Grow in powers of two from 64 KiB: a few sizes cover all. */
	for (cap = 64 * 1024; cap < len; cap *= 2)
		;
	p = lsq_bufpool_alloc(cap);
	if (!p)
		return NULL;
	lsq_bufpool_free(s->buf[slot]);
	s->buf[slot] = p;
	s->cap[slot] = cap;
	return p;
}

void lsq_scratch_lend(enum lsq_scratch_slot slot, void *buf, size_t cap)
{
	if ((unsigned)slot >= LSQ_SCRATCH_SLOTS)
		return;
	lent[slot] = buf;
	lent_cap[slot] = buf ? cap : 0;
}
