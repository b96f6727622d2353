/* SPDX-License-Identifier: MIT */
/* profile.c - parse and write startup profiles (format in profile.h). */
#include "profile/profile.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "lsq/error.h"

/* Unescape a path field into a fresh string and normalise it: no leading
 * "/" or "./", no empty, "." or ".." component. NULL when the field is bad
 * (*nomem tells an allocation failure apart). */
static char *parse_path(const char *s, size_t n, bool *nomem)
{
	char *out, *p;
	size_t i = 0;

	while (i < n && (s[i] == '/' ||
			 (s[i] == '.' && i + 1 < n && s[i + 1] == '/')))
		i += s[i] == '/' ? 1 : 2;
	if (i == n || n - i > LSQ_PROFILE_MAX_PATH)
		return NULL;
	out = malloc(n - i + 1);
	if (!out) {
		*nomem = true;
		return NULL;
	}
	for (p = out; i < n; i++) {
		char c = s[i];

		if (c == '\\' && i + 1 < n) {
			switch (s[i + 1]) {
			case '\\': c = '\\'; i++; break;
			case 't': c = '\t'; i++; break;
			case 'n': c = '\n'; i++; break;
			case 'r': c = '\r'; i++; break;
			default: break;
			}
		}
		if (c == '\0')
			goto bad;
		*p++ = c;
	}
	*p = '\0';
	/* check components */
	for (p = out;;) {
		char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		if (len == 0 || (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.'))
			goto bad;
		if (!slash)
			break;
		p = slash + 1;
	}
	return out;
bad:
	free(out);
	return NULL;
}

static bool parse_u64(const char **sp, const char *end, uint64_t *v)
{
	const char *s = *sp;
	uint64_t x = 0;

	if (s == end || *s < '0' || *s > '9')
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*sp = s;
	*v = x;
	return true;
}

static int cmp_range(const void *a, const void *b)
{
	const struct lsq_profile_range *x = a, *y = b;

	return x->first < y->first ? -1 : x->first > y->first;
}

/* "A-B,C-D" -> sorted, merged ranges. false when malformed. */
static bool parse_ranges(const char *s, const char *end,
			 struct lsq_profile_entry *e, bool *nomem)
{
	size_t cap = 0, n = 0, out = 0;
	struct lsq_profile_range *r = NULL;

	while (s < end) {
		struct lsq_profile_range x;

		if (!parse_u64(&s, end, &x.first) || s == end || *s++ != '-' ||
		    !parse_u64(&s, end, &x.last) || x.last < x.first ||
		    n == LSQ_PROFILE_MAX_RANGES)
			goto bad;
		if (s < end && (*s++ != ',' || s == end))
			goto bad;  /* junk, or a trailing comma */
		if (!LSQ_ARRAY_RESERVE(r, cap, n, 4)) {
			*nomem = true;
			goto bad;
		}
		r[n++] = x;
	}
	if (n == 0)
		goto bad;
	qsort(r, n, sizeof(*r), cmp_range);
	for (size_t i = 1; i < n; i++) {
		if (r[i].first <= r[out].last ||
		    r[i].first - r[out].last == 1) {
			if (r[i].last > r[out].last)
				r[out].last = r[i].last;
		} else {
			r[++out] = r[i];
		}
	}
	e->ranges = r;
	e->nranges = out + 1;
	return true;
bad:
	free(r);
	return false;
}

/* The missed=N field among the fields in [s, end), or 0. */
static unsigned parse_missed(const char *s, const char *end)
{
	static const char key[] = "missed=";
	unsigned v = 0;

	while (s < end) {
		const char *f_end = memchr(s, '\t', (size_t)(end - s));

		if (!f_end)
			f_end = end;
		if ((size_t)(f_end - s) > sizeof(key) - 1 &&
		    memcmp(s, key, sizeof(key) - 1) == 0) {
			for (s += sizeof(key) - 1; s < f_end &&
			     *s >= '0' && *s <= '9' && v < 1000000; s++)
				v = v * 10 + (unsigned)(*s - '0');
			return v;
		}
		s = f_end + 1;
	}
	return 0;
}

/* One line without its newline; false when it is to be skipped as bad. */
static bool parse_line(const char *s, const char *end,
		       struct lsq_profile_entry *e, bool *nomem)
{
	const char *tab = memchr(s, '\t', (size_t)(end - s));
	const char *path_end = tab ? tab : end;

	memset(e, 0, sizeof(*e));
	e->path = parse_path(s, (size_t)(path_end - s), nomem);
	if (!e->path)
		return false;
	if (tab) {
		const char *r = tab + 1;
		const char *r_end = memchr(r, '\t', (size_t)(end - r));

		if (!r_end)
			r_end = end;
		if (r_end > r && !parse_ranges(r, r_end, e, nomem)) {
			free(e->path);
			e->path = NULL;
			return false;
		}
		if (r_end < end)
			e->missed = parse_missed(r_end + 1, end);
	}
	return true;
}

int lsq_profile_parse(const char *text, size_t len, struct lsq_profile *out)
{
	const char *s = text, *end = text + len;
	size_t cap = 0;
	bool nomem = false;

	memset(out, 0, sizeof(*out));
	while (s < end && !nomem) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *line_end = nl ? nl : end;
		struct lsq_profile_entry e;

		if (line_end > s && line_end[-1] == '\r')
			line_end--;
		if (line_end == s || *s == '#') {
			/* comment or blank */
		} else if (out->count == LSQ_PROFILE_MAX_ENTRIES ||
			   !parse_line(s, line_end, &e, &nomem)) {
			out->bad_lines++;
		} else {
			if (!LSQ_ARRAY_RESERVE(out->entries, cap, out->count,
					       64)) {
				free(e.path);
				free(e.ranges);
				nomem = true;
				break;
			}
			out->entries[out->count++] = e;
		}
		s = nl ? nl + 1 : end;
	}
	if (nomem) {
		lsq_profile_free(out);
		return LSQ_ERR_NOMEM;
	}
	return LSQ_OK;
}

void lsq_profile_free(struct lsq_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->count; i++) {
		free(p->entries[i].path);
		free(p->entries[i].ranges);
	}
	free(p->entries);
	memset(p, 0, sizeof(*p));
}

int lsq_profile_write_entry(FILE *f, const char *path,
			    const struct lsq_profile_range *ranges,
			    size_t nranges, unsigned missed)
{
	/* a name starting with '#' would read back as a comment; the
	 * parser drops a leading "./" */
	if (path[0] == '#' && fputs("./", f) == EOF)
		return LSQ_ERR_IO;
	for (const char *p = path; *p; p++) {
		const char *esc = NULL;

		switch (*p) {
		case '\\': esc = "\\\\"; break;
		case '\t': esc = "\\t"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		default: break;
		}
		if (esc ? fputs(esc, f) == EOF : putc(*p, f) == EOF)
			return LSQ_ERR_IO;
	}
	for (size_t i = 0; i < nranges; i++)
		if (fprintf(f, "%s%llu-%llu", i ? "," : "\t",
			    (unsigned long long)ranges[i].first,
			    (unsigned long long)ranges[i].last) < 0)
			return LSQ_ERR_IO;
	if (missed && fprintf(f, "%s\tmissed=%u", nranges ? "" : "\t",
			      missed) < 0)
		return LSQ_ERR_IO;
	return putc('\n', f) == EOF ? LSQ_ERR_IO : LSQ_OK;
}

/* ---- merging a run into a learned profile ---- */

static int by_path(const void *a, const void *b, void *ctx)
{
	const struct lsq_profile_entry *v = ctx;

	return strcmp(v[*(const size_t *)a].path, v[*(const size_t *)b].path);
}

/* Indices of p's entries sorted by path, for find(). */
static size_t *path_index(const struct lsq_profile *p)
{
	size_t *ix = malloc((p->count ? p->count : 1) * sizeof(*ix));

	if (!ix)
		return NULL;
	for (size_t i = 0; i < p->count; i++)
		ix[i] = i;
	qsort_r(ix, p->count, sizeof(*ix), by_path, p->entries);
	return ix;
}

/* The first entry of p (in file order) with path, or NULL. */
static const struct lsq_profile_entry *
find(const struct lsq_profile *p, const size_t *ix, const char *path)
{
	size_t lo = 0, hi = p->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(p->entries[ix[mid]].path, path);

		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* equal paths: the lowest index sits first among them only if the
	 * sort kept file order, which qsort does not promise */
	if (lo < p->count && strcmp(p->entries[ix[lo]].path, path) == 0) {
		size_t best = ix[lo];

		for (size_t j = lo + 1; j < p->count &&
		     strcmp(p->entries[ix[j]].path, path) == 0; j++)
			if (ix[j] < best)
				best = ix[j];
		return &p->entries[best];
	}
	return NULL;
}

/* The union of two entries' ranges into e (no ranges: the whole file). */
static int union_ranges(const struct lsq_profile_entry *a,
			const struct lsq_profile_entry *b,
			struct lsq_profile_entry *e)
{
	size_t n = 0, i = 0, j = 0;

	e->ranges = NULL;
	e->nranges = 0;
	if (!a->nranges || (b && !b->nranges))
		return LSQ_OK;
	e->ranges = malloc((a->nranges + (b ? b->nranges : 0)) *
			   sizeof(*e->ranges));
	if (!e->ranges)
		return LSQ_ERR_NOMEM;
	while (i < a->nranges || (b && j < b->nranges)) {
		struct lsq_profile_range r =
			!b || j >= b->nranges ||
				(i < a->nranges &&
				 a->ranges[i].first <= b->ranges[j].first)
				? a->ranges[i++] : b->ranges[j++];

		if (n && r.first <= e->ranges[n - 1].last + 1) {
			if (r.last > e->ranges[n - 1].last)
				e->ranges[n - 1].last = r.last;
		} else {
			e->ranges[n++] = r;
		}
	}
	e->nranges = n;
	if (n > LSQ_PROFILE_MAX_RANGES) {  /* would not parse: all of it */
		free(e->ranges);
		e->ranges = NULL;
		e->nranges = 0;
	}
	return LSQ_OK;
}

static int push(struct lsq_profile *out, size_t *cap,
		const struct lsq_profile_entry *src,
		const struct lsq_profile_entry *widen, unsigned missed)
{
	struct lsq_profile_entry e = { 0 };

	if (!LSQ_ARRAY_RESERVE(out->entries, *cap, out->count, 64))
		return LSQ_ERR_NOMEM;
	e.path = strdup(src->path);
	if (!e.path || union_ranges(src, widen, &e) != LSQ_OK) {
		free(e.path);
		return LSQ_ERR_NOMEM;
	}
	e.missed = missed;
	out->entries[out->count++] = e;
	return LSQ_OK;
}

int lsq_profile_merge(const struct lsq_profile *run,
		      const struct lsq_profile *old, unsigned max_missed,
		      size_t max_entries, struct lsq_profile *out)
{
	size_t *run_ix = path_index(run), *old_ix = path_index(old);
	size_t cap = 0;
	int ret = run_ix && old_ix ? LSQ_OK : LSQ_ERR_NOMEM;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; !ret && i < run->count &&
	     out->count < max_entries; i++) {
		const struct lsq_profile_entry *e = &run->entries[i];

		if (find(run, run_ix, e->path) != e)
			continue;  /* a later duplicate */
		ret = push(out, &cap, e, find(old, old_ix, e->path), 0);
	}
	for (size_t i = 0; !ret && i < old->count &&
	     out->count < max_entries; i++) {
		const struct lsq_profile_entry *e = &old->entries[i];

		if (e->missed >= max_missed || find(run, run_ix, e->path) ||
		    find(old, old_ix, e->path) != e)
			continue;
		ret = push(out, &cap, e, NULL, e->missed + 1);
	}
	free(run_ix);
	free(old_ix);
	if (ret)
		lsq_profile_free(out);
	return ret;
}
