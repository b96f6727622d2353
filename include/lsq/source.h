/* SPDX-License-Identifier: MIT */
/*
 * source.h - the byte-source seam.
 *
 * Every byte the reader takes from an image comes through
 * lsq_source_read_at(). A source knows nothing about SquashFS: a local file,
 * an HTTP range fetcher, a memory buffer and a fault injector all implement
 * the same small vtable.
 *
 * Thread safety: read_at may be called from many threads at once; an
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

struct lsq_source_ops {
	/* Read exactly len bytes at offset into buf. A range that reaches
	 * past the end of the source is LSQ_ERR_OUT_OF_BOUNDS (nothing is
	 * read); transport failures are LSQ_ERR_IO / LSQ_ERR_TIMEOUT /
	 * LSQ_ERR_REMOTE_CHANGED. Must be thread-safe. */
	int (*read_at)(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset);
	/* Optional (may be NULL): advise that [offset, offset+len) will be
	 * read soon. Asynchronous sources may start fetching; must not
	 * block. */
	void (*advise)(struct lsq_source *src, uint64_t offset, uint64_t len);
	/* Release everything the source owns, including itself. */
	void (*destroy)(struct lsq_source *src);
	/* Optional (NULL: read_at): read the range again from its origin,
	 * past every copy kept on the way (caches, readahead), and from the
	 * next mirror where there are several; the bytes read replace the
	 * kept copies where a layer can replace them. For bytes that failed
	 * a check above (a signed manifest's digest). */
	int (*refetch)(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset);
};

/* Counters kept by lsq_source_read_at() for every source. */
struct lsq_source_stats {
	atomic_uint_least64_t reads;      /* read_at calls */
	atomic_uint_least64_t bytes_read; /* bytes delivered */
	atomic_uint_least64_t failures;   /* read_at calls that failed */
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
	/* Reads ahead of sequential readers, so it wants run-end hints
	 * (lsq_source_hint_run_end); a caching layer copies its inner's. */
	bool reads_ahead;
	struct lsq_source_stats stats;
};

/* Bounds-checked, counted read through the vtable. */
int lsq_source_read_at(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset);

/* Hint; no-op for sources without advise. */
void lsq_source_advise(struct lsq_source *src, uint64_t offset, uint64_t len);

/* Read again from the origin (lsq_source_ops.refetch); same contract as
 * lsq_source_read_at. */
int lsq_source_refetch(struct lsq_source *src, void *buf, size_t len,
		       uint64_t offset);

/* Run-end hint, per thread: the reads this thread makes until the hint is
 * cleared (end 0) belong to a run of data (a file's blocks) that ends at
 * image offset end, so a source that reads ahead (reads_ahead) should not
 * read past it: the bytes there belong to other files. The image sets it
 * around the data block loads of a file. */
void lsq_source_hint_run_end(uint64_t end);
/* The same, worked out only when a source first asks (a read that
 * reaches the network): fn(ctx) is the end. fn and ctx stay valid until
 * the hint is cleared; lsq_source_hint_run_end() replaces it. */
typedef uint64_t (*lsq_run_end_fn)(void *ctx);
void lsq_source_hint_run_end_lazy(lsq_run_end_fn fn, void *ctx);
/* The calling thread's hint; 0 when none. */
uint64_t lsq_source_run_end(void);

/* Speculative-read hint, per thread: the reads this thread makes until it
 * is cleared fetch bytes nobody waits for yet (a prefetch). A source
 * treats them as one-offs: no retries (a reader that needs the bytes
 * fetches them itself, with retries, and reports), no sequential-stream
 * tracking or readahead around them. */
void lsq_source_hint_speculative(bool on);
bool lsq_source_speculative(void);

/* Where the bytes of this thread's last lsq_source_read_at() came from,
 * for messages: a layer that serves the read itself notes it (a cache, a
 * mirror); NULL when none did (then: the source's name). where must
 * outlive the source. Thread-local. */
void lsq_source_note_origin(const char *where);
const char *lsq_source_origin(void);

/* Whether the bytes of this thread's last lsq_source_read_at() are a copy
 * a caching layer checked when it loaded it (lsq_source_cache_check_units),
 * so the caller need not check them again. Cleared by every read; noted
 * by the layer that served it. Thread-local. */
void lsq_source_note_checked(bool checked);
bool lsq_source_checked(void);

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

/* ---- caching layer (any source) ---- */

/* Options of lsq_source_cache_wrap(). */
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

/* Counters of a caching layer. */
struct lsq_cache_stats {
	uint64_t ram_hits, ram_misses, ram_evictions, ram_bytes;
	uint64_t disk_hits, disk_misses, disk_writes, disk_corrupt,
		disk_evictions, disk_bytes;
	/* the content-addressed store of a signed image's units */
	uint64_t cas_hits, cas_misses, cas_writes, cas_evictions, cas_bytes;
	uint64_t pinned_bytes;
	/* lsq_source_cache_prefetch: requests made, bytes they fetched,
	 * requests that failed, blocks stored, and reads served by a
	 * prefetched block (count and bytes) */
	uint64_t prefetch_requests, prefetch_bytes, prefetch_failures,
		prefetch_blocks, prefetch_hits, prefetch_hit_bytes;
	/* lsq_source_cache_fetch_behind: the same for background fetch
	 * (hits: reads served from its RAM copies; with a persistent
	 * cache its units are hits there) */
	uint64_t background_requests, background_bytes, background_failures,
		background_blocks, background_hits, background_hit_bytes;
};

/* Put a caching layer in front of inner. Reads are served from the pinned
 * region, then RAM, then the persistent cache, then inner (and stored on
 * the way back). On success *out owns inner. A persistent cache that
 * cannot be used (directory unusable, in use by another daemon, no
 * identity) is not an error: the layer works without it and warn gets one
 * line to log. */
int lsq_source_cache_wrap(struct lsq_source *inner,
			  const struct lsq_cache_options *opt,
			  struct lsq_source **out, char *warn, size_t warnlen);

/* The SHA-256 digest (32 bytes) a signed manifest lists for the unit
 * [offset, offset+len), or NULL when it lists no such unit. Thread-safe. */
typedef const uint8_t *(*lsq_unit_digest_fn)(void *ctx, uint64_t offset,
					     size_t len);

/* A signed image: from now on the units digest_of knows are kept in
 * cache_dir's content-addressed store (src/cache/cas_store.h), shared by
 * every image mounted with that cache_dir, instead of this image's own
 * cache file, which keeps the rest (the pinned metadata region, the
 * manifest). The store does not check units itself: the caller verifies
 * every unit it reads (or has the layer check them,
 * lsq_source_cache_check_units) and refetches (lsq_source_refetch) the
 * ones that fail, which stores them again. Call before other threads
 * read; ctx must outlive src. Without a cache_dir, or on a source that
 * is not a caching layer: nothing. A store that cannot be opened: an
 * error and one line in warn; the layer goes on as before. */
int lsq_source_cache_use_digests(struct lsq_source *src,
				 lsq_unit_digest_fn digest_of, void *ctx,
				 char *warn, size_t warnlen);

/* Whether the bytes buf are the unit [offset, offset+len) a signed
 * manifest lists (its SHA-256 matches). Thread-safe. */
typedef bool (*lsq_unit_check_fn)(void *ctx, const void *buf, size_t len,
				  uint64_t offset);

/* A signed image: from now on the caching layer checks each unit it loads
 * (from the persistent cache or inner) with check, once, and keeps the
 * answer with its RAM copy; a read served from a copy that passed notes
 * it (lsq_source_checked), so the caller hashes each unit once per load,
 * not once per read. A copy that fails is still returned, unmarked, and
 * not written to the persistent cache: the caller's own check refuses it
 * and refetches. Call before other threads read; ctx must outlive src.
 * On a source that is not a caching layer: nothing. */
void lsq_source_cache_check_units(struct lsq_source *src,
				  lsq_unit_check_fn check, void *ctx);

/* Whether a caching layer's shared store holds the unit [offset,
 * offset+len) (lsq_source_cache_use_digests), so reading ahead over it
 * would fetch bytes already on disk. false for any other source. Cheap:
 * no I/O. Thread-safe. */
bool lsq_source_cache_holds(struct lsq_source *src, uint64_t offset,
			    size_t len);
/* Whether src has such a store at all (the answer above can be true). */
bool lsq_source_cache_shares_units(const struct lsq_source *src);

/* One unit the image reads as a whole: a data block, a fragment block. */
struct lsq_extent {
	uint64_t offset;
	uint32_t len;
};

/* Prefetch: fetch ext[0..n) with ONE read of the range spanning them (the
 * caller keeps that range short and the gaps small) and keep each extent
 * in the RAM cache exactly as the image will read it. Extents already
 * cached, loading, pinned or in the persistent cache are not fetched (the
 * span shrinks to the rest). A read of an extent in flight waits for this
 * fetch instead of fetching it again; if the fetch fails, the read fetches
 * for itself. The read is speculative (lsq_source_hint_speculative): no
 * retries, no readahead. Without a RAM cache the span is only advised to
 * the source (a local file's page cache reads it ahead). Blocks; returns
 * the fetch's error, which only the caller sees. Thread-safe. */
int lsq_source_cache_prefetch(struct lsq_source *src,
			      const struct lsq_extent *ext, size_t n);

/* Background fetch: fetch ext[0..n) with one read of the range spanning
 * the extents no copy is kept of (RAM or loading, the pin, the persistent
 * cache, the shared store), on the source's speculative connections.
 * Unlike lsq_source_cache_prefetch nothing is reserved: a reader of an
 * extent in flight fetches it for itself rather than wait on a range it
 * did not ask for. What arrives goes to the persistent cache when there
 * is one (the RAM cache stays for readers), else to the RAM cache where
 * no reader stored it meanwhile. *fetched: bytes requested (0 when all
 * was held, or on failure). Without a caching layer: nothing. Blocks;
 * thread-safe. */
int lsq_source_cache_fetch_behind(struct lsq_source *src,
				  const struct lsq_extent *ext, size_t n,
				  uint64_t *fetched);

/* LSQ_ERR_INVALID unless src is a caching layer. Thread-safe. */
int lsq_source_cache_get_stats(const struct lsq_source *src,
			       struct lsq_cache_stats *out);

/* The source under a caching layer, or src itself. */
const struct lsq_source *lsq_source_unwrap(const struct lsq_source *src);

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

/* Counters of an HTTP source (one request = one HTTP transfer). */
struct lsq_http_stats {
	uint64_t requests;        /* transfers started, including retries */
	uint64_t bytes_fetched;   /* body bytes received */
	uint64_t retries;         /* transfers repeated after a failure */
	uint64_t failures;        /* reads that failed after all retries */
	uint64_t cache_hits;      /* reads served from pinned/readahead memory */
	uint64_t readahead_bytes; /* bytes fetched beyond what was asked */
	uint64_t in_flight;       /* transfers running now */
	uint64_t rtt_us;          /* round trip measured (min, recent) */
	uint64_t rtt_samples;     /* transfers timed so far */
	uint64_t windows;         /* latency windows fetched around misses */
	uint64_t buffer_bytes;    /* readahead and window memory held now */
	uint64_t window_hits;     /* reads served by a window they did not
				   * fetch */
	uint64_t url_renewals;    /* new URLs from url_command after the
				   * first */
	uint64_t url_failures;    /* runs of url_command that gave none */
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

/* Copy the counters of an HTTP source (also under a caching layer);
 * LSQ_ERR_INVALID for any other source. Thread-safe. */
int lsq_source_http_get_stats(const struct lsq_source *src,
			      struct lsq_http_stats *out);

/* ---- the source stack: what programs open ---- */

/* Options of lsq_source_open_stack(); zero-initialised means the image at
 * offset 0, HTTP defaults, no cache. Pointed-to options are borrowed for
 * the duration of the call only. */
struct lsq_source_stack_options {
	uint64_t offset;                       /* the image starts here */
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

/* Let a source that wants threads start them (an HTTP source, also under a
 * caching layer: its transfer engine, which multiplexes parallel requests
 * over HTTP/2, and its prefetch workers; other sources ignore this). Call
 * it once the process will not fork any more (after daemonizing): threads
 * do not survive a fork. */
void lsq_source_allow_threads(struct lsq_source *src);

#ifdef __cplusplus
}
#endif
#endif
