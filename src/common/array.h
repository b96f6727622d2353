/* SPDX-License-Identifier: MIT */
/*
 * array.h - a malloc'd array that grows one element at a time.
 */
#ifndef LSQ_COMMON_ARRAY_H
#define LSQ_COMMON_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Room for element n of *arr, which has room for *cap elements of size
 * bytes: doubled (first, when none) once n reaches it. false without
 * memory, *arr and *cap as they were. */
static inline bool lsq_array_reserve(void **arr, size_t *cap, size_t n,
				     size_t size, size_t first)
{
	size_t ncap = *cap ? *cap * 2 : first;
	void *p;

	if (n < *cap)
		return true;
	if (ncap > SIZE_MAX / size || !(p = realloc(*arr, ncap * size)))
		return false;
	*arr = p;
	*cap = ncap;
	return true;
}

/* The same for an array variable of any element type. */
#define LSQ_ARRAY_RESERVE(arr, cap, n, first) \
	lsq_array_reserve((void **)&(arr), &(cap), (n), sizeof(*(arr)), (first))

#endif
