/* SPDX-License-Identifier: MIT */
/*
 * prefetch.c - fetch a startup profile's blocks before they are read.
 *
 * Over a link with a round trip of tens of milliseconds, a program start
 * that touches a hundred blocks one after another waits a hundred round
 * trips. A profile (src/profile/profile.h) says which files, and which
 * bytes of them, the start will read, in order. From it:
 *
 *  1. plan (first thread): resolve each path from the root, list the
 *     compressed units its ranges need (lsq_file_extents), once each
 *     (deduplicated files and shared fragment blocks appear once), until
 *     the budget is spent; each unit remembers the earliest entry needing
 *     it.
 *  2. coalesce: sort the units by image offset and merge neighbours into
 *     spans of at most SPAN_MAX bytes with gaps of at most GAP_MAX, so a
 *     profile of an image packed in profile order is a few large
 *     requests; order the spans by the earliest entry they serve.
 *  3. fetch: `workers` threads take spans in that order, one request
 *     each, through lsq_source_prefetch() (LSQ_PREFETCH_RESERVE), which
 *     reserves every unit in the RAM cache first (a reader of one
 *     waits for the span instead of fetching it again).
 *
 * Nothing here can fail a read or the mount: a failed span is counted
 * and its readers fetch for themselves.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/endian.h"
#include "common/log.h"
#include "image/image_internal.h"
#include "image/verify.h"
#include "lsq/error.h"
#include "profile/profile.h"
#include "profile/record.h"

/* A span is one request: long enough that a round trip moves a lot, short
 * enough that its first blocks do not wait long for the rest (2 MiB take
 * 17 ms at 1 Gbit/s), and within what the caching layer caches. */
#define SPAN_MAX (2u << 20)
/* Bytes between two units fetched anyway to keep them in one request: a
 * request fewer saves a round trip when there are more spans than
 * workers; 256 KiB take 2 ms at 1 Gbit/s. On the bench's Python start
 * (docs/prefetch.md) 64 KiB gave 21 requests for 6.0 MB, 256 KiB 7 for
 * 8.0 MB. */
#define GAP_MAX (256u << 10)
#define MAX_WORKERS 16u

struct unit {
	uint64_t offset;
	uint32_t len;
	uint32_t entry;   /* earliest profile entry needing it */
};

struct span {
	size_t first, count;  /* units[first .. first + count) */
	uint32_t entry;       /* earliest entry among them */
	uint64_t offset;
};

struct lsq_prefetch {
	struct lsq_image *img;
	char *text;
	size_t len;
	lsq_profile_loader_fn load;  /* NULL: text given */
	void *load_ctx;
	char *name;
	unsigned workers;
	uint64_t budget;
	pthread_t threads[MAX_WORKERS];
	unsigned nthreads;       /* written by the planner once started */
	bool planner_started;    /* threads[0] runs; set before it starts */
	atomic_bool stop;

	/* the plan; written by the first thread before it starts the
	 * others, read-only afterwards */
	struct unit *units;
	size_t nunits, cap;
	struct span *spans;
	size_t nspans;
	atomic_size_t next_span;

	/* an open-addressing set of unit offsets (planning only) */
	uint64_t *seen;
	size_t seen_cap;   /* power of two */
	uint64_t planned;
	uint32_t cur_entry;

	atomic_uint_least64_t files, missing, planned_bytes, nspans_planned,
		spans_done;
	atomic_bool plan_done;  /* the plan is complete */
};

/* ---- planning ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= UINT64_C(0x9e3779b97f4a7c15);
	return x ^ (x >> 29);
}

/* Offsets are stored + 1 so that 0 marks a free slot. */
static int seen_insert(struct lsq_prefetch *pf, uint64_t offset, bool *added)
{
	size_t i;

	if ((pf->nunits + 1) * 2 > pf->seen_cap) {
		size_t ncap = pf->seen_cap ? 2 * pf->seen_cap : 1024;
		uint64_t *n = calloc(ncap, sizeof(*n));

		if (!n)
			return LSQ_ERR_NOMEM;
		for (size_t j = 0; j < pf->seen_cap; j++) {
			if (!pf->seen[j])
				continue;
			for (i = mix(pf->seen[j]) & (ncap - 1); n[i];
			     i = (i + 1) & (ncap - 1))
				;
			n[i] = pf->seen[j];
		}
		free(pf->seen);
		pf->seen = n;
		pf->seen_cap = ncap;
	}
	for (i = mix(offset + 1) & (pf->seen_cap - 1); pf->seen[i];
	     i = (i + 1) & (pf->seen_cap - 1)) {
		if (pf->seen[i] == offset + 1) {
			*added = false;
			return LSQ_OK;
		}
	}
	pf->seen[i] = offset + 1;
	*added = true;
	return LSQ_OK;
}

/* lsq_extent_fn: one unit of the current entry. Stops the plan (1) once
 * the budget is spent. */
static int add_unit(void *ctx, uint64_t offset, uint32_t len)
{
	struct lsq_prefetch *pf = ctx;
	bool added;
	int ret;

	if (pf->planned + len > pf->budget)
		return 1;
	ret = seen_insert(pf, offset, &added);
	if (ret || !added)
		return ret;
	if (pf->nunits == pf->cap) {
		size_t ncap = pf->cap ? 2 * pf->cap : 256;
		void *n = realloc(pf->units, ncap * sizeof(*pf->units));

		if (!n)
			return LSQ_ERR_NOMEM;
		pf->units = n;
		pf->cap = ncap;
	}
	pf->units[pf->nunits++] = (struct unit){ offset, len, pf->cur_entry };
	pf->planned += len;
	return LSQ_OK;
}

/* The inode at path (relative to the root), or an error. */
static int resolve(struct lsq_image *img, const char *path,
		   struct lsq_inode *out)
{
	struct lsq_inode cur;
	int ret = lsq_image_inode(img, lsq_image_root(img), &cur);

	while (!ret && *path) {
		const char *slash = strchr(path, '/');
		size_t n = slash ? (size_t)(slash - path) : strlen(path);
		struct lsq_inode next;

		ret = lsq_image_lookup(img, &cur, path, n, &next);
		cur = next;
		path += n + (slash ? 1 : 0);
	}
	if (!ret)
		*out = cur;
	return ret;
}

/* Units of one entry; 1 when the budget is spent. */
static int plan_entry(struct lsq_prefetch *pf,
		      const struct lsq_profile_entry *e)
{
	struct lsq_inode ino;
	int ret = resolve(pf->img, e->path, &ino);

	if (ret || !S_ISREG(ino.mode))
		return ret == LSQ_ERR_NOMEM ? ret : LSQ_ERR_NOT_FOUND;
	if (e->nranges == 0)
		return lsq_file_extents(pf->img, &ino, 0, UINT64_MAX, add_unit,
					pf);
	for (size_t i = 0; i < e->nranges; i++) {
		ret = lsq_file_extents(pf->img, &ino, e->ranges[i].first,
				       e->ranges[i].last, add_unit, pf);
		if (ret)
			return ret;
	}
	return LSQ_OK;
}

static int by_offset(const void *a, const void *b)
{
	const struct unit *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int by_entry(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->entry != y->entry)
		return x->entry < y->entry ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int make_spans(struct lsq_prefetch *pf)
{
	struct span *sp = NULL;
	uint64_t end = 0;

	if (pf->nunits == 0)
		return LSQ_OK;  /* units is NULL: nothing to sort */
	qsort(pf->units, pf->nunits, sizeof(*pf->units), by_offset);
	for (size_t i = 0; i < pf->nunits; i++) {
		const struct unit *u = &pf->units[i];
		uint64_t u_end = u->offset + u->len;

		if (sp && u->offset <= end + GAP_MAX &&
		    (u_end > end ? u_end : end) - sp->offset <= SPAN_MAX) {
			sp->count++;
			if (u_end > end)
				end = u_end;
			if (u->entry < sp->entry)
				sp->entry = u->entry;
			continue;
		}
		if (!pf->spans) {
			pf->spans = malloc(pf->nunits * sizeof(*pf->spans));
			if (!pf->spans)
				return LSQ_ERR_NOMEM;
		}
		sp = &pf->spans[pf->nspans++];
		*sp = (struct span){ i, 1, u->entry, u->offset };
		end = u_end;
	}
	qsort(pf->spans, pf->nspans, sizeof(*pf->spans), by_entry);
	return LSQ_OK;
}

static void plan(struct lsq_prefetch *pf)
{
	struct lsq_profile prof;
	const char *first_missing = NULL;
	uint64_t missing = 0, files = 0;
	int ret;

	if (lsq_profile_parse(pf->text, pf->len, &prof) != LSQ_OK) {
		lsq_warn("prefetch %s: out of memory, not prefetching",
			 pf->name);
		return;
	}
	for (size_t i = 0; i < prof.count && !atomic_load(&pf->stop); i++) {
		pf->cur_entry = (uint32_t)i;
		ret = plan_entry(pf, &prof.entries[i]);
		if (ret == 1)
			break;  /* budget spent */
		if (ret == LSQ_ERR_NOMEM)
			break;
		if (ret) {
			if (!missing++)
				first_missing = prof.entries[i].path;
		} else {
			files++;
		}
	}
	if (missing || prof.bad_lines)
		lsq_warn("prefetch %s: skipped %llu entries not found as regular files in the image (first: %s) and %zu unreadable lines",
			 pf->name, (unsigned long long)missing,
			 first_missing ? first_missing : "-", prof.bad_lines);
	atomic_store(&pf->files, files);
	atomic_store(&pf->missing, missing);
	atomic_store(&pf->planned_bytes, pf->planned);
	if (make_spans(pf) != LSQ_OK)
		pf->nspans = 0;
	atomic_store(&pf->nspans_planned, pf->nspans);
	lsq_debug("prefetch %s: %llu files, %zu blocks, %llu bytes in %zu requests",
		  pf->name, (unsigned long long)files, pf->nunits,
		  (unsigned long long)pf->planned, pf->nspans);
	lsq_profile_free(&prof);
	free(pf->seen);
	pf->seen = NULL;
}

/* ---- fetching ---- */

static void fetch_spans(struct lsq_prefetch *pf)
{
	for (;;) {
		size_t i = atomic_fetch_add(&pf->next_span, 1);
		const struct span *sp;
		struct lsq_extent ext[64];

		if (i >= pf->nspans || atomic_load(&pf->stop))
			return;
		sp = &pf->spans[i];
		/* lsq_extent is the unit without its entry; convert in
		 * batches (a span holds at most SPAN_MAX / 4 KiB units,
		 * but usually a few dozen) */
		for (size_t done = 0; done < sp->count;) {
			size_t n = sp->count - done;

			if (n > sizeof(ext) / sizeof(ext[0]))
				n = sizeof(ext) / sizeof(ext[0]);
			for (size_t j = 0; j < n; j++) {
				const struct unit *u =
					&pf->units[sp->first + done + j];

				ext[j] = (struct lsq_extent){ u->offset,
							      u->len };
			}
			lsq_source_prefetch(pf->img->src, ext, n,
					    LSQ_PREFETCH_RESERVE, NULL);
			done += n;
		}
		atomic_fetch_add(&pf->spans_done, 1);
	}
}

static void *worker(void *arg)
{
	pthread_setname_np(pthread_self(), "sqfs-profile");
	fetch_spans(arg);
	return NULL;
}

static void *planner(void *arg)
{
	struct lsq_prefetch *pf = arg;

	pthread_setname_np(pthread_self(), "sqfs-profile");
	if (pf->load && pf->load(pf->load_ctx, &pf->text, &pf->len) != LSQ_OK) {
		pf->text = NULL;
		pf->len = 0;
	}
	if (pf->len)
		plan(pf);
	atomic_store(&pf->plan_done, true);
	/* the plan is complete before any other thread reads it */
	for (unsigned i = 1; i < pf->workers && !atomic_load(&pf->stop); i++) {
		if (pthread_create(&pf->threads[pf->nthreads], NULL, worker,
				   pf) != 0)
			break;
		pf->nthreads++;
	}
	fetch_spans(pf);
	return NULL;
}

static int start(struct lsq_image *img, const char *text, size_t len,
		 lsq_profile_loader_fn load, void *load_ctx, const char *name,
		 const struct lsq_prefetch_options *opt)
{
	struct lsq_prefetch *pf;

	if (img->prefetch)
		return LSQ_ERR_INVALID;
	if (len == 0 && !load)
		return LSQ_OK;
	pf = calloc(1, sizeof(*pf));
	if (!pf)
		return LSQ_ERR_NOMEM;
	pf->img = img;
	pf->name = strdup(name ? name : "profile");
	pf->load = load;
	pf->load_ctx = load_ctx;
	if (!load) {
		pf->text = malloc(len);
		if (pf->text)
			memcpy(pf->text, text, len);
		pf->len = len;
	}
	if ((!load && !pf->text) || !pf->name) {
		lsq_prefetch_destroy(pf);
		return LSQ_ERR_NOMEM;
	}
	pf->workers = opt->workers < 1 ? 1 :
		      opt->workers > MAX_WORKERS ? MAX_WORKERS : opt->workers;
	pf->budget = opt->budget_bytes;
	/* threads[0] is the planner, which starts (and counts) the others */
	pf->nthreads = 1;
	pf->planner_started = true;
	if (pthread_create(&pf->threads[0], NULL, planner, pf) != 0) {
		pf->nthreads = 0;
		pf->planner_started = false;
		lsq_prefetch_destroy(pf);
		return LSQ_ERR_NOMEM;
	}
	img->prefetch = pf;
	return LSQ_OK;
}

int lsq_image_prefetch(struct lsq_image *img, const char *text, size_t len,
		       const char *name,
		       const struct lsq_prefetch_options *opt)
{
	return start(img, text, len, NULL, NULL, name, opt);
}

int lsq_image_prefetch_from(struct lsq_image *img, lsq_profile_loader_fn load,
			    void *ctx, const char *name,
			    const struct lsq_prefetch_options *opt)
{
	return start(img, NULL, 0, load, ctx, name, opt);
}

void lsq_prefetch_destroy(struct lsq_prefetch *pf)
{
	if (!pf)
		return;
	atomic_store(&pf->stop, true);
	/* the planner joins first: only it adds threads (nthreads is
	 * read after that join) */
	if (pf->planner_started)
		pthread_join(pf->threads[0], NULL);
	for (unsigned i = 1; i < pf->nthreads; i++)
		pthread_join(pf->threads[i], NULL);
	free(pf->units);
	free(pf->spans);
	free(pf->seen);
	free(pf->text);
	free(pf->name);
	free(pf);
}

bool lsq_prefetch_busy(const struct lsq_prefetch *pf)
{
	return pf && !atomic_load(&pf->stop) &&
	       (!atomic_load(&pf->plan_done) ||
		atomic_load(&pf->spans_done) <
			atomic_load(&pf->nspans_planned));
}

void lsq_prefetch_counters(const struct lsq_prefetch *pf, lsq_counter_fn fn,
			   void *ctx)
{
	if (!pf)
		return;
	fn(ctx, "prefetch_files", atomic_load(&pf->files), LSQ_COUNTER_GAUGE);
	fn(ctx, "prefetch_missing", atomic_load(&pf->missing),
	   LSQ_COUNTER_GAUGE);
	fn(ctx, "prefetch_planned_bytes", atomic_load(&pf->planned_bytes),
	   LSQ_COUNTER_GAUGE);
	fn(ctx, "prefetch_spans", atomic_load(&pf->nspans_planned),
	   LSQ_COUNTER_GAUGE);
	fn(ctx, "prefetch_spans_done", atomic_load(&pf->spans_done),
	   LSQ_COUNTER_TOTAL);
}

/* ---- the profile stored in the image ---- */

/* A signed image has a profile only where its manifest lists one: read
 * and checked as one unit. Without a record the unit there is the first
 * data block, so the header is looked at first, from src (the bytes the
 * source's probe holds): only a record's header of the unit's length is
 * worth fetching the unit for. A forged header costs that fetch, never
 * unchecked bytes. */
/* A read of the record no layer keeps a copy of: caches key ranges by
 * offset, and on an image without a record this offset is the first data
 * block's, which a 16-byte entry would shadow. Remote sources hold these
 * bytes from their probe anyway. */
static int read_one_off(struct lsq_source *src, void *buf, size_t len,
			uint64_t at)
{
	struct lsq_read rq = lsq_read_of(buf, len, at);

	rq.one_off = true;
	return lsq_source_read(src, &rq);
}

static int signed_profile(struct lsq_image *img, struct lsq_source *src,
			  uint64_t at, char **text, size_t *len)
{
	const struct lsq_manifest_entry *e = lsq_verifier_unit(img->verifier,
							       at);
	uint8_t h[LSQ_PROFILE_RECORD_HEADER];
	uint32_t n, crc;
	uint8_t *buf;
	int ret;

	if (!e || e->length < LSQ_PROFILE_RECORD_HEADER)
		return LSQ_ERR_NOT_FOUND;
	ret = read_one_off(src, h, sizeof(h), at);
	if (!ret)
		ret = lsq_profile_record_decode(h, &n, &crc);
	if (ret)
		return ret;
	if (LSQ_PROFILE_RECORD_HEADER + (uint64_t)n != e->length)
		return LSQ_ERR_NOT_FOUND;
	buf = malloc(e->length);
	if (!buf)
		return LSQ_ERR_NOMEM;
	ret = lsq_image_read_unit(img, buf, e->length, at);
	if (!ret)
		ret = lsq_profile_record_decode(buf, &n, &crc);
	if (!ret && (LSQ_PROFILE_RECORD_HEADER + (uint64_t)n != e->length ||
		     !lsq_profile_record_check(buf + LSQ_PROFILE_RECORD_HEADER,
					       n, crc)))
		ret = LSQ_ERR_CORRUPT;
	if (ret) {
		free(buf);
		return ret;
	}
	memmove(buf, buf + LSQ_PROFILE_RECORD_HEADER, n);
	*text = (char *)buf;
	*len = n;
	return LSQ_OK;
}

int lsq_image_stored_profile(struct lsq_image *img, char **text, size_t *len)
{
	struct lsq_source *src = img->src;
	uint64_t at = lsq_profile_record_offset(img->comp_opts_block);
	uint8_t h[LSQ_PROFILE_RECORD_HEADER];
	uint32_t n, crc;
	char *buf;
	int ret;

	if (at + LSQ_PROFILE_RECORD_HEADER > img->sb.inode_table_start)
		return LSQ_ERR_NOT_FOUND;
	if (img->verifier)
		return signed_profile(img, src, at, text, len);
	ret = read_one_off(src, h, sizeof(h), at);
	if (ret)
		return ret;
	ret = lsq_profile_record_decode(h, &n, &crc);
	if (ret)
		return ret;
	if (at + LSQ_PROFILE_RECORD_HEADER + n > img->sb.inode_table_start)
		return LSQ_ERR_CORRUPT;
	buf = malloc(n ? n : 1);
	if (!buf)
		return LSQ_ERR_NOMEM;
	ret = read_one_off(src, buf, n, at + LSQ_PROFILE_RECORD_HEADER);
	if (!ret && !lsq_profile_record_check(buf, n, crc))
		ret = LSQ_ERR_CORRUPT;
	if (ret) {
		free(buf);
		return ret;
	}
	*text = buf;
	*len = n;
	return LSQ_OK;
}
