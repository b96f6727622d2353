/* SPDX-License-Identifier: MIT */
/*
 * iso8601.h - UTC dates as Unix time, without the C library's time zone
 * machinery: the expiry of signed URLs and of temporary credentials.
 */
#ifndef LSQ_COMMON_ISO8601_H
#define LSQ_COMMON_ISO8601_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Unix time of a UTC date and time; false when a field is out of range
 * (month 1..12, day 1..31, hour 0..23, minute 0..59, second 0..60). */
bool lsq_utc_to_unix(int year, int month, int day, int hour, int minute,
		     int second, int64_t *out);

/* "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|+HHMM|-HH:MM|-HHMM)", 'T' or
 * a space between date and time, as credential tools write expiries.
 * Returns 0 with *out set, or -1. */
int lsq_parse_iso8601(const char *s, int64_t *out);

/* The basic format "YYYYMMDDTHHMMSSZ" (X-Amz-Date, X-Goog-Date), len
 * bytes at s. Returns 0 with *out set, or -1. */
int lsq_parse_iso8601_basic(const char *s, size_t len, int64_t *out);

#endif
