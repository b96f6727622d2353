/* SPDX-License-Identifier: MIT */
/* checked_math.h - overflow-checked arithmetic for values read from images. */
#ifndef LSQ_CHECKED_MATH_H
#define LSQ_CHECKED_MATH_H

#include <stdbool.h>
#include <stdint.h>

/* Each returns true on overflow and leaves *res unspecified then. */
static inline bool lsq_add_u64_overflow(uint64_t a, uint64_t b, uint64_t *res)
{
	return __builtin_add_overflow(a, b, res);
}

/* true when [off, off+len) does not fit inside [0, limit). */
static inline bool lsq_range_outside(uint64_t off, uint64_t len, uint64_t limit)
{
	uint64_t end;

	return lsq_add_u64_overflow(off, len, &end) || end > limit;
}

#endif
