/* SPDX-License-Identifier: MIT */
/*
 * background.c - fetch the image's data over spare bandwidth, behind the
 * readers.
 *
 * A program start waits on each piece it reads in turn: at 50 ms a round
 * trip, the link idles while the program waits. Without a profile nothing
 * says what it will read next, but packers write a directory's files next
 * to each other, so what lies just past the last block a reader loaded is
 * the best guess, and the rest of the image the next. So:
 *
 *  1. plan (first thread): walk the tree and list every compressed unit
 *     (data blocks and fragment blocks) once, sorted by image offset.
 *  2. fetch: `streams` threads each take the next span of units nobody
 *     claimed, starting past the last block a reader loaded
 *     (img->read_pos; past the aligned latency window around it, which
 *     the reader's own miss fetches) when there is one, else the lowest
 *     unclaimed unit, and fetch it with lsq_source_prefetch()
 *     (LSQ_PREFETCH_BACKGROUND): the source's speculative connections, no reservations (a reader
 *     never waits on a background range), units already kept skipped.
 *     A large file a reader loaded a block of goes first (a program
 *     faulting its binary in, a JVM its module image, each in scattered
 *     pieces): the rest of it around the reader's last load in it, the
 *     file a reader entered last first (lsq_background_note_load).
 *  3. stop when every unit was tried, the budget of fetched bytes is
 *     spent, the mount ends, or the origin keeps failing (after backing
 *     off); a span that takes long (a slow link or origin) drops to one
 *     stream, so readers keep the link.
 *
 * Nothing here can fail a read or the mount.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/array.h"
#include "common/histogram.h"
#include "common/log.h"
#include "image/image_internal.h"
#include "lsq/error.h"

#define MAX_STREAMS 8u
/* A span is one request. Large enough that a round trip of 50 ms moves a
 * lot, small enough that a reader's request that meets one on the link
 * waits little behind it (2 MiB take 17 ms at 1 Gbit/s). At 50 ms, 1, 2
 * and 4 MiB: python start 0.75, 0.76, 0.80 s; gcc 2.02, 1.88, 1.94 s; grep
 * 1.46, 1.40, 1.32 s; with a profile 0.51, 0.55, 0.63 s (python). */
#define SPAN_DEFAULT (2u << 20)
/* Gap between units fetched anyway to keep them in one request. */
#define GAP_MAX (256u << 10)
/* A reader's own miss fetches the aligned window around it (at most
 * 2 x readahead, 2 MiB by default): start past it. */
#define GUIDE_ALIGN (2u << 20)
/* How far past a reader's position to look for unclaimed units before
 * falling back to the lowest ones. */
#define GUIDE_REACH (64u << 20)
/* A span slower than this means a slow link or origin: one stream. */
#define SLOW_SPAN_NS (1500000000ull)
#define MAX_FAILURES 5u
/* How long a stream rests while a reader waits on the network before it
 * looks again. */
#define READER_NAP_NS (10000000ull)
/* Reader transfers a span may start beside. One: a program that waits on
 * one read at a time (a compiler faulting its pieces in) keeps a transfer
 * in flight most of the time, and spans that yield to it leave the link
 * idle for its round trips (bench/startup.sh gcc at 50 ms, 2026-11-26);
 * more readers at once get the link to themselves. */
#define READERS_ALONGSIDE 1u
#define MAX_UNITS (1u << 22)
/* A file whose blocks span less is left to the latency window around a
 * reader's miss, which covers it. */
#define FILE_MIN GUIDE_ALIGN

struct bg_unit {
	uint64_t offset;
	uint32_t len;
	bool claimed;  /* protected by lsq_background.mu */
};

/* The data blocks of a large file: [start, end) of the image. */
struct bg_file {
	uint64_t start, end;
};

/* Readers in a large file (lsq_background_note_load). */
struct bg_heat {
	atomic_uint hot;             /* order readers entered it in, from 1 */
	atomic_uint_least64_t last;  /* the last load, + 1 */
};

struct lsq_background {
	struct lsq_image *img;
	unsigned streams;
	uint64_t budget, span_max, min_rtt_us;
	pthread_t threads[MAX_STREAMS];
	unsigned nthreads;       /* written by the planner once started */
	bool planner_started;    /* threads[0] runs; set before it starts */
	atomic_bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* stop, for sleeping streams */

	/* the plan: written by the first thread before it starts the
	 * others, then only .claimed changes (under mu) */
	struct bg_unit *units;
	size_t nunits, cap;
	struct bg_file *files;   /* sorted by start */
	struct bg_heat *heat;    /* one per file */
	size_t nfiles, files_cap;
	atomic_bool planned;     /* files and heat are there */
	atomic_uint hot_files;
	size_t low;              /* no unclaimed unit below; under mu */
	unsigned failures;       /* failed spans in a row; under mu */
	unsigned active;         /* streams allowed to fetch; under mu */
	uint64_t pending;        /* bytes of the spans in flight; under mu */

	atomic_uint_least64_t planned_units, planned_bytes, fetched, spans;
	atomic_uint_least64_t hot_spans;
	atomic_uint running;     /* threads not yet ended */
	atomic_uint in_flight;   /* spans being fetched */
};

/* ---- planning: every unit of the image, once ---- */

static int add_unit(void *ctx, uint64_t offset, uint32_t len)
{
	struct lsq_background *bg = ctx;

	if (bg->nunits >= MAX_UNITS)
		return 1;
	if (!LSQ_ARRAY_RESERVE(bg->units, bg->cap, bg->nunits, 1024))
		return LSQ_ERR_NOMEM;
	bg->units[bg->nunits++] = (struct bg_unit){ offset, len, false };
	return LSQ_OK;
}

/* Note the file whose units were just added from units[first] on, if
 * large: its data blocks lie side by side (the fragment block holding
 * its tail, if any, lies elsewhere and ends the run). */
static int add_file(struct lsq_background *bg, size_t first)
{
	uint64_t start, end;

	if (first >= bg->nunits)
		return LSQ_OK;
	start = bg->units[first].offset;
	end = start + bg->units[first].len;
	for (size_t i = first + 1;
	     i < bg->nunits && bg->units[i].offset == end; i++)
		end += bg->units[i].len;
	if (end - start < FILE_MIN)
		return LSQ_OK;
	if (!LSQ_ARRAY_RESERVE(bg->files, bg->files_cap, bg->nfiles, 64))
		return LSQ_ERR_NOMEM;
	bg->files[bg->nfiles++] = (struct bg_file){ start, end };
	return LSQ_OK;
}

struct walk {
	struct lsq_background *bg;
	lsq_inode_ref *dirs;     /* directories still to list */
	size_t ndirs, cap;
	int err;
};

static int on_entry(void *ctx, const struct lsq_dirent *ent)
{
	struct walk *w = ctx;
	struct lsq_inode ino;

	if (ent->is_dot || atomic_load(&w->bg->stop))
		return ent->is_dot ? 0 : 1;
	if (ent->type == S_IFDIR) {
		if (!LSQ_ARRAY_RESERVE(w->dirs, w->cap, w->ndirs, 64)) {
			w->err = LSQ_ERR_NOMEM;
			return 1;
		}
		w->dirs[w->ndirs++] = ent->ref;
		return 0;
	}
	if (ent->type != S_IFREG)
		return 0;
	/* a bad inode or block list is the reader's to report */
	if (lsq_image_inode(w->bg->img, ent->ref, &ino) == LSQ_OK) {
		size_t first = w->bg->nunits;
		int ret = lsq_file_extents(w->bg->img, &ino, 0, UINT64_MAX,
					   add_unit, w->bg);

		if (ret == 1 || ret == LSQ_ERR_NOMEM) {
			w->err = ret;
			return 1;
		}
		if (add_file(w->bg, first) != LSQ_OK) {
			w->err = LSQ_ERR_NOMEM;
			return 1;
		}
	}
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const struct bg_unit *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int by_start(const void *a, const void *b)
{
	const struct bg_file *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static void plan(struct lsq_background *bg)
{
	struct walk w = { .bg = bg };
	uint64_t bytes = 0;
	size_t n = 0;

	if (add_unit(bg, 0, 0) != LSQ_OK)  /* room for the array */
		return;
	bg->nunits = 0;
	if (!LSQ_ARRAY_RESERVE(w.dirs, w.cap, 0, 64))
		return;
	w.dirs[w.ndirs++] = lsq_image_root(bg->img);
	while (w.ndirs && !w.err && !atomic_load(&bg->stop)) {
		struct lsq_inode dir;

		if (lsq_image_inode(bg->img, w.dirs[--w.ndirs], &dir) ==
			    LSQ_OK &&
		    S_ISDIR(dir.mode))
			lsq_image_readdir(bg->img, &dir, 0, on_entry, &w);
	}
	free(w.dirs);
	if (w.err == 1)
		lsq_warn("background fetch: more than %u units; fetching the first ones found",
			 MAX_UNITS);
	/* hard links and shared fragment blocks appear more than once */
	qsort(bg->units, bg->nunits, sizeof(*bg->units), by_offset);
	for (size_t i = 0; i < bg->nunits; i++) {
		if (n && bg->units[n - 1].offset == bg->units[i].offset)
			continue;
		bg->units[n++] = bg->units[i];
		bytes += bg->units[i].len;
	}
	bg->nunits = n;
	/* hard links list a file twice; no large file: no array */
	if (bg->nfiles)
		qsort(bg->files, bg->nfiles, sizeof(*bg->files), by_start);
	n = 0;
	for (size_t i = 0; i < bg->nfiles; i++) {
		if (n && bg->files[n - 1].start == bg->files[i].start)
			continue;
		bg->files[n++] = bg->files[i];
	}
	bg->nfiles = n;
	bg->heat = calloc(n ? n : 1, sizeof(*bg->heat));
	if (bg->heat)
		atomic_store_explicit(&bg->planned, true, memory_order_release);
	/* after planned: a read that sees the plan's counters is noted */
	atomic_store(&bg->planned_units, bg->nunits);
	atomic_store(&bg->planned_bytes, bytes);
	lsq_debug("background fetch: %zu units, %llu bytes, %zu large files",
		  bg->nunits, (unsigned long long)bytes, n);
}

/* ---- fetching ---- */

/* First unit at or after offset. */
static size_t lower_bound(const struct lsq_background *bg, uint64_t offset)
{
	size_t lo = 0, hi = bg->nunits;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (bg->units[mid].offset < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The large file holding offset, or NULL. */
static const struct bg_file *file_at(const struct lsq_background *bg,
				     uint64_t offset)
{
	size_t lo = 0, hi = bg->nfiles;

	while (lo < hi) {  /* the first file starting past offset */
		size_t mid = lo + (hi - lo) / 2;

		if (bg->files[mid].start <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && offset < bg->files[lo - 1].end)
		return &bg->files[lo - 1];
	return NULL;
}

void lsq_background_note_load(struct lsq_background *bg, uint64_t offset)
{
	const struct bg_file *f;
	struct bg_heat *h;

	if (!bg || !atomic_load_explicit(&bg->planned, memory_order_acquire))
		return;
	f = file_at(bg, offset);
	if (!f)
		return;
	h = &bg->heat[f - bg->files];
	atomic_store_explicit(&h->last, offset + 1, memory_order_relaxed);
	if (!atomic_load_explicit(&h->hot, memory_order_relaxed))
		atomic_store_explicit(&h->hot,
				      atomic_fetch_add(&bg->hot_files, 1) + 1,
				      memory_order_relaxed);
}

/* The first unit that ends past offset. A latency window's aligned edge
 * at offset cuts a unit in two: the window holds its head, and the
 * reader that needs it would wait a round trip for the rest, so it comes
 * first (a span fetches only what the source's memory lacks). */
static size_t first_ending_past(const struct lsq_background *bg,
				uint64_t offset)
{
	size_t i = lower_bound(bg, offset);

	if (i > 0 && bg->units[i - 1].offset + bg->units[i - 1].len > offset)
		i--;
	return i;
}

/* The unclaimed unit of file f closest below offset, moved down to the
 * start of the span that ends with it (spans are claimed upwards);
 * SIZE_MAX: none. Under mu. */
static size_t below_in_file(const struct lsq_background *bg,
			    const struct bg_file *f, uint64_t offset)
{
	size_t i = lower_bound(bg, offset), j;
	uint64_t end;

	while (i > 0 && bg->units[i - 1].offset >= f->start &&
	       bg->units[i - 1].claimed)
		i--;
	if (i == 0 || bg->units[i - 1].offset < f->start)
		return SIZE_MAX;
	j = --i;
	end = bg->units[i].offset + bg->units[i].len;
	while (j > 0 && !bg->units[j - 1].claimed &&
	       bg->units[j - 1].offset >= f->start &&
	       end - bg->units[j - 1].offset <= bg->span_max)
		j--;
	return j;
}

/* The next span of the large file a reader entered last that has
 * unclaimed units: past the latency window around the reader's last
 * load in it, then down from there (that window's units are usually
 * held already: no request). SIZE_MAX: none. Under mu. */
static size_t pick_hot(struct lsq_background *bg)
{
	unsigned best = 0;
	size_t pick = SIZE_MAX;

	if (!atomic_load_explicit(&bg->planned, memory_order_acquire) ||
	    !atomic_load(&bg->hot_files))
		return SIZE_MAX;
	for (size_t k = 0; k < bg->nfiles; k++) {
		const struct bg_file *f = &bg->files[k];
		unsigned hot = atomic_load_explicit(&bg->heat[k].hot,
						    memory_order_relaxed);
		uint64_t last, from;
		size_t i;

		if (hot <= best)
			continue;
		last = atomic_load_explicit(&bg->heat[k].last,
					    memory_order_relaxed);
		if (!last--)
			continue;
		from = (last | (GUIDE_ALIGN - 1)) + 1;
		for (i = first_ending_past(bg, from);
		     i < bg->nunits && bg->units[i].offset < f->end &&
		     bg->units[i].claimed; i++)
			;
		if (i >= bg->nunits || bg->units[i].offset >= f->end)
			i = below_in_file(bg, f,
					  from < f->end ? from : f->end);
		if (i != SIZE_MAX) {
			best = hot;
			pick = i;
		}
	}
	return pick;
}

/* Where the next span starts: past the last block a reader loaded, when
 * that moved and something unclaimed lies close past it; else the lowest
 * unclaimed unit. SIZE_MAX when nothing is left. Under mu. */
static size_t pick_start(struct lsq_background *bg)
{
	uint64_t pos = atomic_load_explicit(&bg->img->read_pos,
					    memory_order_relaxed);

	while (bg->low < bg->nunits && bg->units[bg->low].claimed)
		bg->low++;
	if (bg->low >= bg->nunits)
		return SIZE_MAX;
	if (pos) {
		uint64_t from = ((pos - 1) | (GUIDE_ALIGN - 1)) + 1;
		size_t i = first_ending_past(bg, from);

		for (; i < bg->nunits &&
		       bg->units[i].offset < from + GUIDE_REACH; i++) {
			if (!bg->units[i].claimed)
				return i;
		}
	}
	return bg->low;
}

/* Claim the span from units[first]; returns how many units. Under mu. */
static size_t claim_span(struct lsq_background *bg, size_t first)
{
	uint64_t start = bg->units[first].offset, end = start;
	size_t i = first;

	for (; i < bg->nunits; i++) {
		const struct bg_unit *u = &bg->units[i];
		uint64_t u_end = u->offset + u->len;

		if (u->claimed || u->offset > end + GAP_MAX ||
		    (i > first && u_end - start > bg->span_max))
			break;
		if (u_end > end)
			end = u_end;
	}
	for (size_t j = first; j < i; j++)
		bg->units[j].claimed = true;
	return i - first;
}

static void unclaim(struct lsq_background *bg, size_t first, size_t n)
{
	for (size_t j = first; j < first + n; j++)
		bg->units[j].claimed = false;
	if (first < bg->low)
		bg->low = first;
}

/* Sleep up to ns, or until stop. Under mu. */
static void nap(struct lsq_background *bg, uint64_t ns)
{
	struct timespec until = lsq_realtime_after_ns(ns);

	if (!atomic_load(&bg->stop))
		pthread_cond_timedwait(&bg->cv, &bg->mu, &until);
}

/* Whether the round trip is long enough to be worth hiding; waits for
 * the source to have timed a few transfers. Under mu. */
static bool link_wants_it(struct lsq_background *bg)
{
	struct lsq_link hs;

	if (!bg->min_rtt_us)
		return true;
	for (;;) {
		if (atomic_load(&bg->stop) ||
		    lsq_source_link(bg->img->src, &hs) != LSQ_OK)
			return false;
		if (hs.rtt_samples >= 3)
			break;
		nap(bg, 50000000ull);
	}
	if (hs.rtt_us >= bg->min_rtt_us)
		return true;
	lsq_info("background fetch: off (round trip %llu us: reads fetch for themselves quickly)",
		 (unsigned long long)hs.rtt_us);
	return false;
}

/* Whether readers are on the network now: a sequential reader's
 * readahead (between its waves a span would take the link it is about
 * to need), or more than READERS_ALONGSIDE transfers of reads someone
 * waits for. */
static bool others_on_network(struct lsq_background *bg)
{
	struct lsq_link hs;

	return lsq_source_link(bg->img->src, &hs) == LSQ_OK &&
	       (hs.readahead_in_flight > 0 ||
		hs.in_flight > atomic_load(&bg->in_flight) + READERS_ALONGSIDE);
}

/* Wait for a profile prefetch in progress (its spans are surer bets) and
 * a round trip worth hiding; false: do not fetch. */
static bool wait_to_start(struct lsq_background *bg)
{
	bool go;

	pthread_mutex_lock(&bg->mu);
	while (!atomic_load(&bg->stop) && lsq_prefetch_busy(bg->img->prefetch))
		nap(bg, 20000000ull);
	go = link_wants_it(bg);
	pthread_mutex_unlock(&bg->mu);
	return go;
}

static void fetch(struct lsq_background *bg, unsigned stream)
{
	struct lsq_extent *ext = NULL;
	size_t ext_cap = 0;

	pthread_mutex_lock(&bg->mu);
	while (!atomic_load(&bg->stop)) {
		size_t first, n;
		uint64_t got = 0, t0, took, span;
		bool hot;
		int ret;

		if (stream >= bg->active) {  /* backed off: this one rests */
			nap(bg, 1000000000ull);
			continue;
		}
		/* readers are on the network (their own reads, or the
		 * readahead serving them): start no span now (ours in
		 * flight go on), so their requests have the link (not
		 * yielding for a reader's file cost g++ and python at
		 * 20 ms a little more than it gave the JVM) */
		if (others_on_network(bg)) {
			nap(bg, READER_NAP_NS);
			continue;
		}
		/* the spans in flight count: the budget is never passed by
		 * more than the last span */
		if (atomic_load(&bg->fetched) + bg->pending >= bg->budget)
			break;
		first = pick_hot(bg);
		hot = first != SIZE_MAX;
		if (!hot)
			first = pick_start(bg);
		if (first == SIZE_MAX)
			break;
		n = claim_span(bg, first);
		if (n > ext_cap) {
			void *p = realloc(ext, n * sizeof(*ext));

			if (!p) {
				unclaim(bg, first, n);
				break;
			}
			ext = p;
			ext_cap = n;
		}
		for (size_t j = 0; j < n; j++)
			ext[j] = (struct lsq_extent){ bg->units[first + j].offset,
						      bg->units[first + j].len };
		span = ext[n - 1].offset + ext[n - 1].len - ext[0].offset;
		bg->pending += span;
		pthread_mutex_unlock(&bg->mu);

		t0 = lsq_now_ns();
		atomic_fetch_add(&bg->in_flight, 1);
		ret = lsq_source_prefetch(bg->img->src, ext, n,
					  LSQ_PREFETCH_BACKGROUND, &got);
		atomic_fetch_sub(&bg->in_flight, 1);
		took = lsq_now_ns() - t0;

		pthread_mutex_lock(&bg->mu);
		bg->pending -= span;
		atomic_fetch_add(&bg->fetched, got);
		atomic_fetch_add(&bg->spans, 1);
		if (hot)
			atomic_fetch_add(&bg->hot_spans, 1);
		if (ret == LSQ_ERR_REMOTE_CHANGED) {
			lsq_debug("background fetch: the image changed; stopping");
			break;
		}
		if (ret) {
			unclaim(bg, first, n);
			if (++bg->failures >= MAX_FAILURES) {
				lsq_warn("background fetch: stopped after %u failed requests in a row (%s); readers fetch for themselves",
					 bg->failures, lsq_strerror(ret));
				atomic_store(&bg->stop, true);
				break;
			}
			/* 0.2, 0.4, 0.8, 1.6 s */
			nap(bg, 100000000ull << bg->failures);
			continue;
		}
		bg->failures = 0;
		if (got && took > SLOW_SPAN_NS && bg->active > 1) {
			bg->active = 1;
			lsq_debug("background fetch: %llu bytes took %llu ms; one stream from now on",
				  (unsigned long long)got,
				  (unsigned long long)(took / 1000000));
		}
	}
	pthread_cond_broadcast(&bg->cv);
	pthread_mutex_unlock(&bg->mu);
	free(ext);
}

struct stream_arg {
	struct lsq_background *bg;
	unsigned index;
};

/* Behind the readers for the CPU too: receiving and storing a span costs
 * CPU that a program start on a small machine wants for itself. */
static void run_idle(void)
{
	struct sched_param sp = { 0 };

	pthread_setname_np(pthread_self(), "sqfs-background");
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
}

static void *worker(void *arg)
{
	struct stream_arg *sa = arg;
	struct lsq_background *bg = sa->bg;
	unsigned index = sa->index;

	free(sa);
	run_idle();
	fetch(bg, index);
	atomic_fetch_sub(&bg->running, 1);
	return NULL;
}

static void *planner(void *arg)
{
	struct lsq_background *bg = arg;

	run_idle();
	if (!wait_to_start(bg)) {
		atomic_fetch_sub(&bg->running, 1);
		return NULL;
	}
	plan(bg);
	for (unsigned i = 1; i < bg->streams && !atomic_load(&bg->stop); i++) {
		struct stream_arg *sa = malloc(sizeof(*sa));

		if (!sa)
			break;
		*sa = (struct stream_arg){ bg, i };
		atomic_fetch_add(&bg->running, 1);
		if (pthread_create(&bg->threads[bg->nthreads], NULL, worker,
				   sa) != 0) {
			atomic_fetch_sub(&bg->running, 1);
			free(sa);
			break;
		}
		bg->nthreads++;
	}
	fetch(bg, 0);
	atomic_fetch_sub(&bg->running, 1);
	return NULL;
}

int lsq_image_background(struct lsq_image *img,
			 const struct lsq_background_options *opt)
{
	struct lsq_background *bg;

	if (img->background)
		return LSQ_ERR_INVALID;
	if (opt->budget_bytes == 0)
		return LSQ_OK;
	bg = calloc(1, sizeof(*bg));
	if (!bg)
		return LSQ_ERR_NOMEM;
	bg->img = img;
	bg->streams = opt->streams < 1 ? 1 :
		      opt->streams > MAX_STREAMS ? MAX_STREAMS : opt->streams;
	bg->active = bg->streams;
	bg->budget = opt->budget_bytes;
	bg->span_max = opt->span_bytes ? opt->span_bytes : SPAN_DEFAULT;
	bg->min_rtt_us = opt->min_rtt_us;
	pthread_mutex_init(&bg->mu, NULL);
	pthread_cond_init(&bg->cv, NULL);
	/* threads[0] is the planner, which starts (and counts) the others */
	bg->nthreads = 1;
	bg->planner_started = true;
	atomic_init(&bg->running, 1);
	if (pthread_create(&bg->threads[0], NULL, planner, bg) != 0) {
		bg->nthreads = 0;
		bg->planner_started = false;
		lsq_background_destroy(bg);
		return LSQ_ERR_NOMEM;
	}
	/* the read path looks for it (lsq_background_note_load) */
	__atomic_store_n(&img->background, bg, __ATOMIC_RELEASE);
	return LSQ_OK;
}

void lsq_background_destroy(struct lsq_background *bg)
{
	if (!bg)
		return;
	pthread_mutex_lock(&bg->mu);
	atomic_store(&bg->stop, true);
	pthread_cond_broadcast(&bg->cv);
	pthread_mutex_unlock(&bg->mu);
	/* the planner joins first: only it adds threads (nthreads is
	 * read after that join) */
	if (bg->planner_started)
		pthread_join(bg->threads[0], NULL);
	for (unsigned i = 1; i < bg->nthreads; i++)
		pthread_join(bg->threads[i], NULL);
	pthread_mutex_destroy(&bg->mu);
	pthread_cond_destroy(&bg->cv);
	free(bg->units);
	free(bg->files);
	free(bg->heat);
	free(bg);
}

void lsq_background_counters(const struct lsq_background *bg,
			     lsq_counter_fn fn, void *ctx)
{
	if (!bg)
		return;
	fn(ctx, "background_units", atomic_load(&bg->planned_units),
	   LSQ_COUNTER_GAUGE);
	fn(ctx, "background_planned_bytes", atomic_load(&bg->planned_bytes),
	   LSQ_COUNTER_GAUGE);
	fn(ctx, "background_spans", atomic_load(&bg->spans),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_hot_files", atomic_load(&bg->hot_files),
	   LSQ_COUNTER_TOTAL);
	fn(ctx, "background_hot_spans", atomic_load(&bg->hot_spans),
	   LSQ_COUNTER_TOTAL);
	/* every stream has ended: planned, fetched, or stopped */
	fn(ctx, "background_done", atomic_load(&bg->running) == 0,
	   LSQ_COUNTER_GAUGE);
}
