/* SPDX-License-Identifier: MIT */
/*
 * check.h - tiny assertion helpers for the C unit tests.
 * A failed CHECK prints file:line and the expression and exits 1.
 */
#ifndef LSQ_CHECK_H
#define LSQ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			exit(1);                                           \
		}                                                          \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                 \
	do {                                                               \
		long long va_ = (long long)(a), vb_ = (long long)(b);      \
		if (va_ != vb_) {                                          \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", \
				__FILE__, __LINE__, #a, #b, va_, vb_);     \
			exit(1);                                           \
		}                                                          \
	} while (0)

/* Exit status meaning "skipped" to meson. */
#define CHECK_SKIP 77

#endif
