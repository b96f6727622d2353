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

/*
 * Skip the test: prints "SKIP: reason" (tests/tally.py lists it as the
 * skip's reason) and exits 77. tests/run.sh counts a skip as a failure
 * unless LSQ_ALLOW_SKIPS=1; never skip what the build could have tested.
 */
#define CHECK_SKIP_BECAUSE(reason)                                         \
	do {                                                               \
		fflush(stdout);                                            \
		fprintf(stderr, "SKIP: %s\n", (reason));                  \
		exit(CHECK_SKIP);                                          \
	} while (0)

#endif
