/* SPDX-License-Identifier: MIT */
/*
 * test_counter_set.c - counters gathered by name (src/common/counter_set.c):
 * first-report order, values of one name added up (layers that count one
 * thing each for their part), the kind of the first report kept, lookups,
 * and a full set counting what it left out.
 */
#include <stdio.h>
#include <string.h>

#include "common/counter_set.h"
#include "harness/check.h"

static char names[LSQ_COUNTER_SET_MAX + 3][16];

int main(void)
{
	static struct lsq_counter_set set;
	const struct lsq_counter *c;

	lsq_counter_set_init(&set);
	CHECK(lsq_counter_set_find(&set, "a") == NULL);
	lsq_counter_set_add(&set, "b", 0, LSQ_COUNTER_GAUGE);
	lsq_counter_set_add(&set, "a", 5, LSQ_COUNTER_TOTAL);
	lsq_counter_set_add(&set, "b", 7, LSQ_COUNTER_TOTAL);
	lsq_counter_set_add(&set, "b", 1, LSQ_COUNTER_TOTAL);
	CHECK_EQ_INT(set.n, 2);
	CHECK(strcmp(set.items[0].name, "b") == 0);
	CHECK(strcmp(set.items[1].name, "a") == 0);
	c = lsq_counter_set_find(&set, "b");
	CHECK(c != NULL);
	CHECK_EQ_INT(c->value, 8);
	CHECK_EQ_INT(c->kind, LSQ_COUNTER_GAUGE);
	CHECK_EQ_INT(lsq_counter_set_find(&set, "a")->value, 5);
	CHECK_EQ_INT(set.dropped, 0);

	/* full: known names still add up, new ones are counted as left out */
	lsq_counter_set_init(&set);
	for (size_t i = 0; i < LSQ_COUNTER_SET_MAX + 3; i++) {
		snprintf(names[i], sizeof(names[i]), "c%zu", i);
		lsq_counter_set_add(&set, names[i], 1, LSQ_COUNTER_TOTAL);
	}
	CHECK_EQ_INT(set.n, LSQ_COUNTER_SET_MAX);
	CHECK_EQ_INT(set.dropped, 3);
	lsq_counter_set_add(&set, "c0", 1, LSQ_COUNTER_TOTAL);
	CHECK_EQ_INT(lsq_counter_set_find(&set, "c0")->value, 2);
	CHECK(lsq_counter_set_find(&set, names[LSQ_COUNTER_SET_MAX]) == NULL);
	return 0;
}
