/* SPDX-License-Identifier: MIT */
/*
 * profile.h - startup profiles: which files a workload reads, in the order
 * of their first read, and which byte ranges of each.
 *
 * Written by `sqfs-lazy-mount -o record=PATH`, read by `-o prefetch=PATH`
 * and by `sqfs-lazy-pack --order PATH`, and embedded in images packed with
 * --order (src/profile/record.h). Plain text, one entry per line:
 *
 *     PATH [TAB RANGES [TAB missed=N] [TAB more fields, ignored]]
 *
 * PATH is relative to the image root, components separated by '/' (a
 * leading "/" or "./" is accepted and dropped); a backslash escapes
 * itself, TAB (\t), newline (\n) and carriage return (\r). RANGES is a
 * comma-separated list of inclusive byte ranges FIRST-LAST of the file,
 * as in an HTTP Range header; without it the entry means the whole file.
 * Blank lines and lines starting with '#' are comments. A line that does
 * not parse (empty, "." or ".." components, bad ranges) is skipped and
 * counted: a stale or damaged profile is a hint, never an error.
 *
 * missed=N is kept by learned profiles (a mount's own record merged with
 * the last one, lsq_profile_merge): how many merges in a row the entry
 * was not read. Other readers ignore it.
 */
#ifndef LSQ_PROFILE_PROFILE_H
#define LSQ_PROFILE_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Inclusive byte range of a file. */
struct lsq_profile_range {
	uint64_t first, last;
};

struct lsq_profile_entry {
	char *path;                        /* unescaped, NUL-terminated */
	struct lsq_profile_range *ranges;  /* sorted, merged; NULL: whole file */
	size_t nranges;
	unsigned missed;                   /* the missed=N field, or 0 */
};

struct lsq_profile {
	struct lsq_profile_entry *entries; /* in file order, duplicates kept */
	size_t count;
	size_t bad_lines;                  /* lines skipped as unparsable */
};

/* Limits that keep a hostile profile from costing much. */
#define LSQ_PROFILE_MAX_ENTRIES (1u << 20)
#define LSQ_PROFILE_MAX_RANGES 65536u  /* per entry */
#define LSQ_PROFILE_MAX_PATH 4096u

/* Parse len bytes of text into *out (zeroed first). Only LSQ_ERR_NOMEM is
 * an error; bad lines are counted in out->bad_lines, entries past
 * LSQ_PROFILE_MAX_ENTRIES dropped and counted there too. */
int lsq_profile_parse(const char *text, size_t len, struct lsq_profile *out);

/* Free what parse allocated; the struct is zeroed. NULL is ignored. */
void lsq_profile_free(struct lsq_profile *p);

/* Write one entry line (escaped path, ranges if nranges > 0, missed=N if
 * missed > 0) to f. LSQ_OK or LSQ_ERR_IO. */
int lsq_profile_write_entry(FILE *f, const char *path,
			    const struct lsq_profile_range *ranges,
			    size_t nranges, unsigned missed);

/* Learn from one run: *out gets run's entries in their order (missed 0,
 * ranges widened by old's for the same path), then old's entries that run
 * did not read, with missed + 1, dropped past max_missed; each path once,
 * at most max_entries. Duplicates within run keep their first place.
 * Neither input is changed. LSQ_ERR_NOMEM (then *out is empty). */
int lsq_profile_merge(const struct lsq_profile *run,
		      const struct lsq_profile *old, unsigned max_missed,
		      size_t max_entries, struct lsq_profile *out);

#endif
