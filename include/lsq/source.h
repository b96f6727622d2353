/* SPDX-License-Identifier: MIT */
/*
 * source.h - the byte-source seam.
 *
 * Every byte the reader takes from an image comes through
 * lsq_source_read(), as one explicit request (struct lsq_read) passed
 * from layer to layer: nothing about a read travels beside it. A source knows nothing about SquashFS: a local file,
 * an HTTP range fetcher, a memory buffer and a fault injector all implement
 * the same small vtable.
 *
 * Thread safety: read may be called from many threads at once; an
 * implementation must not rely on a shared file position.
 */
#ifndef LSQ_SOURCE_H
#define LSQ_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lsq_source;

/* The run of data a read belongs to (a file's blocks, adjacent fragment
 * blocks): a source that reads ahead stops at its end, since the bytes
 * past it belong to other files. The end may be worked out only when a
 * source first asks (lsq_run_end(): a read that reaches the network), by
 * fn(ctx), once. */
typedef uint64_t (*lsq_run_end_fn)(void *ctx);
struct lsq_run {
	uint64_t end;       /* image offset; 0: not known */
	lsq_run_end_fn fn;  /* NULL, or works end out on the first ask */
	void *ctx;
};

/* The end of run, worked out on the first ask; 0 for NULL. Not
 * thread-safe: a run belongs to the read (and thread) that made it. */
uint64_t lsq_run_end(struct lsq_run *run);

/* Work of a read that takes a while: waiting for the source (the network),
 * decompressing a block. The thread that asked for the read may want to
 * hear of it before (done false) and after (done true), to move to where
 * the work runs best (src/fuse/uring.c, src/fuse/spread.c). */
enum lsq_long_work { LSQ_WORK_READ, LSQ_WORK_DECOMPRESS };
typedef void (*lsq_long_work_fn)(enum lsq_long_work what, bool done);

/* One unit the image reads as a whole: a data block, a fragment block. */
struct lsq_extent {
	uint64_t offset;
	uint32_t len;
};

/* One read, passed down the source stack: what it wants, what it knows,
 * and what comes back. A layer that reads from the one below passes a
 * request of its own (lsq_read_below) and hands the answers up. */
struct lsq_read {
	/* wants */
	void *buf;
	size_t len;
	uint64_t offset;
	/* knows */
	struct lsq_run *run;  /* NULL: not a file's data (tables, the
			       * superblock) */
	bool speculative;     /* nobody waits for these bytes yet (a
			       * prefetch): one try, no retries (a reader
			       * that needs them fetches them itself), no
			       * stream tracking or readahead around them */
	bool one_off;         /* bytes no layer keeps a copy of (a record
			       * read at an offset a block also starts at) */
	lsq_long_work_fn long_work; /* NULL, or told around each read that
				     * reaches a source */
	/* the range is these units of the image, each kept as it is (a
	 * prefetch span); nunits 0: the range is one unit */
	const struct lsq_extent *units;
	size_t nunits;
	/* comes back (reset by lsq_source_read) */
	const char *origin;   /* where the bytes came from, for messages:
			       * a cache or a mirror (must outlive the
			       * source); NULL: the source's name */
	bool checked;         /* a copy a caching layer checked when it
			       * loaded it (lsq_source_use_units), so the
			       * caller need not check it again */
	bool *units_checked;  /* NULL, or one per unit: checked the same */
};

/* A plain read of [offset, offset+len) into buf. */
static inline struct lsq_read lsq_read_of(void *buf, size_t len,
					  uint64_t offset)
{
	struct lsq_read rq = { .buf = buf, .len = len, .offset = offset };

	return rq;
}

/* The request a layer passes down for rq: another range, the same
 * knowledge. */
static inline struct lsq_read lsq_read_below(const struct lsq_read *rq,
					     void *buf, size_t len,
					     uint64_t offset)
{
	struct lsq_read sub = { .buf = buf, .len = len, .offset = offset,
				.run = rq->run,
				.speculative = rq->speculative,
				.one_off = rq->one_off,
				.long_work = rq->long_work };

	return sub;
}

/* Where copies of a unit are kept (lsq_source_held), or can be
 * (lsq_source_keeps). */
#define LSQ_HELD_PIN    1u  /* the pinned metadata region */
#define LSQ_HELD_RAM    2u  /* the RAM cache, or loading into it */
#define LSQ_HELD_DISK   4u  /* the image's persistent cache file */
#define LSQ_HELD_SHARED 8u  /* cache_dir's content-addressed store, shared
			     * by every image mounted with it */

/* How lsq_source_prefetch keeps what it fetches. */
enum lsq_prefetch_mode {
	/* a startup profile's blocks: each extent is reserved in the RAM
	 * cache first, so a reader of one in flight waits for this fetch
	 * instead of fetching it again (and fetches it itself if the
	 * fetch fails) */
	LSQ_PREFETCH_RESERVE,
	/* background fetch: nothing reserved (a reader fetches for
	 * itself rather than wait on a range it did not ask for); what
	 * arrives goes to the persistent cache when there is one (the RAM
	 * cache stays for readers), else to the RAM cache where no reader
	 * stored it meanwhile */
	LSQ_PREFETCH_BACKGROUND,
};

/* A counter a layer reports (lsq_source_counters): totals only grow;
 * gauges say how much is held or running now. */
enum lsq_counter_kind { LSQ_COUNTER_TOTAL, LSQ_COUNTER_GAUGE };
typedef void (*lsq_counter_fn)(void *ctx, const char *name, uint64_t value,
			       enum lsq_counter_kind kind);

/* What a network transport knows of its link (lsq_source_link). */
struct lsq_link {
	uint64_t rtt_us;      /* round trip measured (min, recent) */
	uint64_t rtt_samples; /* transfers timed so far */
	uint64_t in_flight;   /* transfers running now */
	/* of them, reading ahead of a sequential reader (it will want
	 * the bytes soon) */
	uint64_t readahead_in_flight;
	/* the copy answering now, as shown in messages (no credentials),
	 * when there are several (mirrors); NULL: one */
	const char *mirror;
	unsigned mirror_index, mirrors;  /* 0: the image's own URL */
};

/* What a signed image's manifest tells the layer that loads units
 * (lsq_source_use_units). Both functions are thread-safe; ctx outlives
 * the source. */
struct lsq_unit_checks {
	/* the SHA-256 digest (32 bytes) listed for the unit [offset,
	 * offset+len), or NULL when no such unit is listed */
	const uint8_t *(*digest_of)(void *ctx, uint64_t offset, size_t len);
	/* whether buf is the unit [offset, offset+len) with its digest */
	bool (*check)(void *ctx, const void *buf, size_t len,
		      uint64_t offset);
	void *ctx;
};

/* A source is a stack of layers, each a source over the one below
 * (inner), composed in one place (lsq_source_open_stack). read and
 * destroy are every layer's own; every other operation is optional: a
 * layer that leaves it NULL passes it to the layer below, so a caller
 * never needs to know which layer it talks to. */
struct lsq_source_ops {
	/* Read exactly rq->len bytes at rq->offset into rq->buf and fill in
	 * what comes back. The range is within the source and not empty
	 * (lsq_source_read checked). Transport failures are LSQ_ERR_IO /
	 * LSQ_ERR_TIMEOUT / LSQ_ERR_REMOTE_CHANGED. Must be thread-safe. */
	int (*read)(struct lsq_source *src, struct lsq_read *rq);
	/* Release everything the layer owns, itself and the layers below
	 * included. */
	void (*destroy)(struct lsq_source *src);
	/* Read the range again from its origin, past every copy kept on
	 * the way (caches, readahead), and from the next mirror where
	 * there are several; the bytes read replace the kept copies where
	 * a layer can replace them. For bytes that failed a check above
	 * (a signed manifest's digest). Bottom: read. */
	int (*refetch)(struct lsq_source *src, struct lsq_read *rq);
	/* Advise that [offset, offset+len) will be read soon; must not
	 * block. Bottom: nothing. */
	void (*advise)(struct lsq_source *src, uint64_t offset, uint64_t len);
	/* Fetch ext[0..n) ahead of readers with ONE read of the range
	 * spanning the extents no copy is kept of (the caller keeps that
	 * range short and the gaps small), as a speculative read, and keep
	 * each extent exactly as the image will read it; mode says how.
	 * *fetched: bytes requested (0 when all was held, or on failure).
	 * Blocks; returns the fetch's error, which only the caller sees.
	 * Bottom: RESERVE advises the span, BACKGROUND does nothing. */
	int (*prefetch)(struct lsq_source *src, const struct lsq_extent *ext,
			size_t n, enum lsq_prefetch_mode mode,
			uint64_t *fetched);
	/* LSQ_HELD_* bits of the copies of [offset, offset+len) this layer
	 * keeps; the layers' answers are or'ed. Cheap: no I/O. */
	unsigned (*held)(struct lsq_source *src, uint64_t offset, size_t len);
	/* LSQ_HELD_* bits of the copies this layer can keep; or'ed. */
	unsigned (*keeps)(const struct lsq_source *src);
	/* Report this layer's counters through fn; every layer is asked. */
	void (*counters)(const struct lsq_source *src, lsq_counter_fn fn,
			 void *ctx);
	/* The link below, for a network transport; LSQ_ERR_INVALID at the
	 * bottom. */
	int (*link)(const struct lsq_source *src, struct lsq_link *out);
	/* Start the threads the layer wants (every layer is told). */
	void (*allow_threads)(struct lsq_source *src);
	/* A signed image: the layer that loads units checks and keeps them
	 * as the manifest says (lsq_source_use_units). Bottom: nothing. */
	int (*use_units)(struct lsq_source *src,
			 const struct lsq_unit_checks *units, char *warn,
			 size_t warnlen);
};

/* Counters kept by lsq_source_read() for every source. */
struct lsq_source_stats {
	atomic_uint_least64_t reads;      /* read calls */
	atomic_uint_least64_t bytes_read; /* bytes delivered */
	atomic_uint_least64_t failures;   /* read calls that failed */
};

/* Base object; implementations embed it as their first member. */
struct lsq_source {
	const struct lsq_source_ops *ops;
	uint64_t size;      /* bytes readable, fixed for the source's life */
	char *name;         /* for messages: path or URL (owned, malloc'd) */
	/* What makes these bytes these bytes (for a URL: URL, size and
	 * validator), for persistent caches; NULL when the source cannot
	 * tell (no validator). Owned, malloc'd, freed by destroy. */
	char *identity;
	/* Where the bytes are published, whatever version is there now (for
	 * a URL: URL and offset); a persistent cache keeps one image per
	 * location. NULL: none. Owned, freed by destroy. */
	char *location;
	/* Reads ahead of sequential readers, so it wants to know the run a
	 * read belongs to (lsq_read.run); a layer copies its inner's. */
	bool reads_ahead;
	struct lsq_source *inner;  /* the layer below; NULL at the bottom */
	struct lsq_source_stats stats;
};

/* Bounds-checked, counted read through the vtable. A range past the end
 * of the source is LSQ_ERR_OUT_OF_BOUNDS (nothing is read). */
int lsq_source_read(struct lsq_source *src, struct lsq_read *rq);

/* lsq_source_read of a plain request. */
int lsq_source_read_at(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset);

/* Hint; no-op for sources without advise. */
void lsq_source_advise(struct lsq_source *src, uint64_t offset, uint64_t len);

/* Read again from the origin (lsq_source_ops.refetch); same contract as
 * lsq_source_read. */
int lsq_source_refetch(struct lsq_source *src, struct lsq_read *rq);

/* The optional operations (lsq_source_ops), each passed down to the
 * first layer that has it. */
int lsq_source_prefetch(struct lsq_source *src, const struct lsq_extent *ext,
			size_t n, enum lsq_prefetch_mode mode,
			uint64_t *fetched);
/* The LSQ_HELD_* bits of which that hold a copy of [offset, offset+len);
 * layers that keep none of which are not asked. */
unsigned lsq_source_held(struct lsq_source *src, uint64_t offset, size_t len,
			 unsigned which);
unsigned lsq_source_keeps(const struct lsq_source *src);
void lsq_source_counters(const struct lsq_source *src, lsq_counter_fn fn,
			 void *ctx);
int lsq_source_link(const struct lsq_source *src, struct lsq_link *out);
/* Let layers that want threads start them (an HTTP transport's transfer
 * engine, which multiplexes parallel requests over HTTP/2, and its
 * prefetch workers). Call it once the process will not fork any more
 * (after daemonizing): threads do not survive a fork. */
void lsq_source_allow_threads(struct lsq_source *src);
/* Call before other threads read. Without a layer that keeps units:
 * nothing. A shared store that cannot be opened: an error and one line
 * in warn; the stack goes on as before. */
int lsq_source_use_units(struct lsq_source *src,
			 const struct lsq_unit_checks *units, char *warn,
			 size_t warnlen);

/* Destroy a source; NULL is ignored. */
void lsq_source_destroy(struct lsq_source *src);

/* Open a local file read-only. base_offset skips that many leading bytes
 * (an image embedded in a larger file); the source then starts there.
 * Errors: LSQ_ERR_IO (with errno left set), LSQ_ERR_OUT_OF_BOUNDS when
 * base_offset is past the end of the file. */
int lsq_source_file_open(const char *path, uint64_t base_offset,
			 struct lsq_source **out);

/* A source over a memory buffer. The buffer is copied, so the caller keeps
 * ownership of data. */
int lsq_source_mem_create(const void *data, size_t size, const char *name,
			  struct lsq_source **out);

/* ---- caching layers (any source) ---- */

/* Options of the caching layers (lsq_source_open_stack). */
struct lsq_cache_options {
	uint64_t block_cache_bytes; /* RAM for the ranges read (0: none) */
	int pin_metadata;           /* fetch the advised region (the image's
				     * metadata) whole on first use; keep it */
	const char *dir;            /* persistent cache directory, or NULL */
	uint64_t dir_bytes;         /* bound of the persistent cache */
	int offline_ok;             /* a URL whose server cannot be reached
				     * opens as dir recorded it last time */
};

#define LSQ_CACHE_PIN_MAX (64u * 1024u * 1024u) /* metadata region cap */

/* ---- HTTP(S) source (only functional when built with libcurl) ---- */

#define LSQ_HTTP_MAX_MIRRORS 8

/* Options of lsq_source_http_open(); fill with lsq_http_options_default()
 * first. Strings are borrowed for the duration of the call only. */
struct lsq_http_options {
	unsigned max_connections;   /* easy handles / parallel requests (4) */
	unsigned retries;           /* retries per read after the first try (5) */
	double connect_timeout;     /* seconds (10) */
	double timeout;             /* seconds per request, total (60) */
	uint64_t readahead;         /* bytes fetched ahead when sequential (1M); 0: off */
	uint64_t base_offset;       /* the image starts at this byte of the URL (0) */
	const char *header_file;    /* "Name: value" lines, or NULL */
	const char *cacert;         /* CA bundle file, or NULL for the system's */
	int insecure;               /* skip TLS verification (0) */
	const char *mirrors[LSQ_HTTP_MAX_MIRRORS]; /* other copies of the image */
	unsigned nmirrors;
	/* Open without asking the server: size and validator as an earlier
	 * open recorded them ("SIZE\nVALIDATOR", see offline_ok); nothing is
	 * pinned, so the head comes through the caches like any read. */
	const char *known;
	/* Ask for the image's last bytes beside the probe: the metadata
	 * tables, which a mount reads next (http_warmup.c). tail_unless: the
	 * validator an earlier open recorded (cache_dir), sent as
	 * If-None-Match or If-Modified-Since so that an unchanged image,
	 * whose tables the cache holds, answers 304 instead; NULL: none. */
	int tail_with_probe;
	const char *tail_unless;
	/* s3://BUCKET/KEY images (docs/s3.md); all NULL for the defaults */
	const char *aws_profile;      /* profile of the shared files */
	const char *credentials_file; /* only this file (not world-readable) */
	const char *region;           /* else AWS_REGION, ..., us-east-1 */
	const char *endpoint;         /* scheme://host[:port] of another S3
				       * service, path-style; else AWS's */
	/* a program printing a fresh URL of the image, run at open and
	 * when the URL is refused or about to expire; the URL given to
	 * lsq_source_http_open() then only names the image (http(s) only,
	 * no mirrors; docs/http-source.md). NULL: none */
	const char *url_command;
};

void lsq_http_options_default(struct lsq_http_options *opt);

/* "libcurl/x.y.z OpenSSL/..." or "none (built without libcurl)"; static. */
const char *lsq_source_http_backend(void);

/* True when url starts with http://, https://, file:// or s3:// (any
 * case). */
int lsq_source_is_url(const char *url);

/* Open an image by URL. http(s): one ranged GET probes the size and the
 * validators (ETag, Last-Modified) and keeps the first 64 KiB; the server
 * must honour Range. file://: the local file source. Every mirror is
 * probed too and must match. On failure a one-line reason is written to
 * err (never header values) and LSQ_ERR_IO, LSQ_ERR_TIMEOUT,
 * LSQ_ERR_UNREACHABLE (no usable answer after the retries),
 * LSQ_ERR_INVALID, LSQ_ERR_UNSUPPORTED (no libcurl) or LSQ_ERR_NOMEM is
 * returned. Starts no thread that outlives the call. */
int lsq_source_http_open(const char *url, const struct lsq_http_options *opt,
			 struct lsq_source **out, char *err, size_t errlen);

/* ---- the source stack: what programs open ---- */

/* Options of lsq_source_open_stack(); zero-initialised means the image at
 * offset 0, HTTP defaults, no cache. Pointed-to options are borrowed for
 * the duration of the call only. */
struct lsq_source_stack_options {
	uint64_t offset;                       /* the image starts here */
	/* with offset 0: a SIF file (format/sif.h) is opened as its
	 * partition with object id sif_partition, 0: the primary system
	 * partition */
	bool find_sif;
	uint32_t sif_partition;
	const struct lsq_http_options *http;   /* URLs only; NULL: defaults */
	const struct lsq_cache_options *cache; /* NULL or nothing asked: no
						* caching layer */
};

/* Open spec (a path, or a URL as lsq_source_is_url() tells) with the
 * options, behind a caching layer when one is asked for. On failure err
 * gets one line naming the image without credentials and the error is
 * returned; warn gets one line (or "") about a cache that could not be
 * used, which is not an error. */
int lsq_source_open_stack(const char *spec,
			  const struct lsq_source_stack_options *opt,
			  struct lsq_source **out, char *err, size_t errlen,
			  char *warn, size_t warnlen);

#ifdef __cplusplus
}
#endif
#endif
