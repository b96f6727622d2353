/* SPDX-License-Identifier: MIT */
#include "common/iso8601.h"

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

bool lsq_utc_to_unix(int year, int month, int day, int hour, int minute,
		     int second, int64_t *out)
{
	if (month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 ||
	    hour > 23 || minute < 0 || minute > 59 || second < 0 ||
	    second > 60)
		return false;
	*out = days_from_civil(year, (unsigned)month, (unsigned)day) * 86400 +
	       hour * 3600 + minute * 60 + second;
	return true;
}

/* n decimal digits at s. */
static bool digits(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

int lsq_parse_iso8601(const char *s, int64_t *out)
{
	int y, mo, d, h, mi, se, oh = 0, om = 0;
	int64_t t;

	if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
	    s[7] != '-' || !digits(s + 8, 2, &d) ||
	    (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
	    !digits(s + 11, 2, &h) || s[13] != ':' ||
	    !digits(s + 14, 2, &mi) || s[16] != ':' ||
	    !digits(s + 17, 2, &se) ||
	    !lsq_utc_to_unix(y, mo, d, h, mi, se, &t))
		return -1;
	s += 19;
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++)
			;
	if ((*s == 'Z' || *s == 'z') && !s[1]) {
		*out = t;
		return 0;
	}
	if ((*s != '+' && *s != '-') || !digits(s + 1, 2, &oh))
		return -1;
	if (s[3] == ':' ? !digits(s + 4, 2, &om) || s[6]
			: s[3] && (!digits(s + 3, 2, &om) || s[5]))
		return -1;
	/* local time = UTC + offset */
	t += (*s == '+' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
	*out = t;
	return 0;
}

int lsq_parse_iso8601_basic(const char *s, size_t len, int64_t *out)
{
	int y, mo, d, h, mi, se;

	if (len != 16 || !digits(s, 4, &y) || !digits(s + 4, 2, &mo) ||
	    !digits(s + 6, 2, &d) || s[8] != 'T' || !digits(s + 9, 2, &h) ||
	    !digits(s + 11, 2, &mi) || !digits(s + 13, 2, &se) ||
	    s[15] != 'Z' || !lsq_utc_to_unix(y, mo, d, h, mi, se, out))
		return -1;
	return 0;
}
