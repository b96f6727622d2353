/* SPDX-License-Identifier: MIT */
/*
 * hex.h - lower-case hex, as our file names, digests and key ids are
 * written (cache_dir entries, learned profiles, the takeover record).
 */
#ifndef LSQ_COMMON_HEX_H
#define LSQ_COMMON_HEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The value of a lower-case hex digit, or -1. */
static inline int lsq_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* n bytes as 2n lower-case digits at out, then a NUL. */
static inline void lsq_hex_encode(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		*out++ = digits[in[i] >> 4];
		*out++ = digits[in[i] & 15];
	}
	*out = '\0';
}

/* 2n lower-case digits at text into n bytes; false at any other
 * character (out then holds a part). */
static inline bool lsq_hex_decode(const char *text, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		int hi = lsq_hex_digit(text[2 * i]);
		int lo = hi < 0 ? -1 : lsq_hex_digit(text[2 * i + 1]);

		if (lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

#endif
