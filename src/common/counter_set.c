/* SPDX-License-Identifier: MIT */
#include "common/counter_set.h"

#include <string.h>

void lsq_counter_set_init(struct lsq_counter_set *set)
{
	set->n = 0;
	set->dropped = 0;
}

static struct lsq_counter *find(const struct lsq_counter_set *set,
				const char *name)
{
	/* a hundred names, read a few times a second at most: a scan */
	for (size_t i = 0; i < set->n; i++)
		if (strcmp(set->items[i].name, name) == 0)
			return (struct lsq_counter *)&set->items[i];
	return NULL;
}

void lsq_counter_set_add(void *ctx, const char *name, uint64_t value,
			 enum lsq_counter_kind kind)
{
	struct lsq_counter_set *set = ctx;
	struct lsq_counter *c = find(set, name);

	if (c) {
		c->value += value;
		return;
	}
	if (set->n == LSQ_COUNTER_SET_MAX) {
		set->dropped++;
		return;
	}
	set->items[set->n++] = (struct lsq_counter){ name, value, kind };
}

const struct lsq_counter *lsq_counter_set_find(
	const struct lsq_counter_set *set, const char *name)
{
	return find(set, name);
}
