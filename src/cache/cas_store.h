/* SPDX-License-Identifier: MIT */
/*
 * cas_store.h - the content-addressed part of cache_dir: compressed units
 * of signed images, stored by their SHA-256 digest and shared by every
 * image (and every version of an image) mounted with the same cache_dir,
 * so a new version reuses every block an older one fetched.
 *
 * One file per unit, DIR/cas/XX/REST (XX: the digest's first byte in hex,
 * REST: the other 31), written to a temporary name and renamed into
 * place: several daemons may share the directory, and a reader sees a
 * whole file or none. The store does not check what it serves: its only
 * user is a verifying mount, which hashes every unit it reads and, on a
 * mismatch, refetches it and stores it again (replace), so a damaged file
 * costs one refetch and is never served.
 *
 * The budget is kept per daemon, over the files it found at open and the
 * ones it stored or read since (CLOCK). Files another daemon adds meanwhile
 * count from the next open or the first read of them. What open finds is
 * indexed by a thread of the store's, so a large store does not delay
 * the mount.
 *
 * Thread-safe; no lock is held across file I/O.
 */
#ifndef LSQ_CAS_STORE_H
#define LSQ_CAS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LSQ_CAS_DIGEST_SIZE 32

struct lsq_cas_store;

struct lsq_cas_stats {
	uint64_t hits, misses;  /* lookups served / not served */
	uint64_t writes;        /* units stored */
	uint64_t evictions;     /* units removed to stay under the budget */
	uint64_t bytes;         /* bytes of units held now, as this daemon
				 * knows them */
	uint64_t budget;        /* the bound on them */
};

/* Open (creating dir and dir/cas with mode 0700 if needed) the store of
 * cache_dir dir, bounded by budget bytes, and start indexing what it
 * holds (removing what crashed writers left). On failure an lsq_err and
 * one line in err. */
int lsq_cas_open(const char *dir, uint64_t budget, struct lsq_cas_store **out,
		 char *err, size_t errlen);

/* Wait until what the store held at open is indexed (tests). */
void lsq_cas_wait_indexed(struct lsq_cas_store *cas);

/* LSQ_OK and len bytes in buf when a unit of that digest and length is
 * stored; LSQ_ERR_NOT_FOUND otherwise. */
int lsq_cas_read(struct lsq_cas_store *cas,
		 const uint8_t digest[LSQ_CAS_DIGEST_SIZE], void *buf,
		 size_t len);

/* Store a unit (best effort). replace: overwrite a stored copy (it failed
 * its digest); otherwise a stored copy is kept as it is. */
void lsq_cas_write(struct lsq_cas_store *cas,
		   const uint8_t digest[LSQ_CAS_DIGEST_SIZE], const void *buf,
		   size_t len, bool replace);

/* Whether the store holds a unit of that digest, as this daemon knows it
 * (its index, no I/O): for readahead that should not fetch it. */
bool lsq_cas_holds(struct lsq_cas_store *cas,
		   const uint8_t digest[LSQ_CAS_DIGEST_SIZE]);

void lsq_cas_get_stats(struct lsq_cas_store *cas, struct lsq_cas_stats *out);

/* NULL is ignored. No read or write may be in progress. */
void lsq_cas_close(struct lsq_cas_store *cas);

#endif
