/* SPDX-License-Identifier: MIT */
/*
 * fuzz_manifest.c - arbitrary bytes as a manifest (body + trailer, what a
 * detached manifest file holds and what a mount reads from the end of an
 * image) through lsq_manifest_parse(): no crash, no leak, no read outside
 * the input, and whatever is accepted keeps the promises the mount relies
 * on; a broken promise aborts, so the fuzzer reports it.
 *
 * The input is copied into a buffer of exactly its size, so ASan sees any
 * read past the end.
 */
#include <stdlib.h>
#include <string.h>

#include "format/manifest.h"
#include "format/ondisk.h"
#include "lsq/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const struct lsq_manifest *m, size_t size)
{
	uint64_t end = 0;

	/* at most one entry per 44 input bytes; never an empty list */
	if (m->count == 0 || (uint64_t)m->count * LSQ_MANIFEST_ENTRY_SIZE > size)
		abort();
	if (m->entries[0].offset != 0 ||
	    m->entries[0].length != SQUASHFS_SUPERBLOCK_SIZE)
		abort();
	for (uint32_t i = 0; i < m->count; i++) {
		const struct lsq_manifest_entry *e = &m->entries[i];

		/* sorted, apart, non-empty, inside bytes_used */
		if (e->length == 0 || e->offset < end ||
		    e->offset + e->length > m->bytes_used)
			abort();
		end = e->offset + e->length;
		if (lsq_manifest_find(m, e->offset) != e ||
		    lsq_manifest_find_containing(m, e->offset + e->length - 1) != e)
			abort();
		if (e->length > 1 && lsq_manifest_find(m, e->offset + 1))
			abort();
	}
	if (lsq_manifest_find_containing(m, m->bytes_used) ||
	    lsq_manifest_find(m, UINT64_MAX))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsq_manifest m;
	struct lsq_manifest_trailer t;
	uint8_t *buf = malloc(size ? size : 1);
	char err[256];
	int ret;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (size >= LSQ_MANIFEST_TRAILER_SIZE)
		(void)lsq_manifest_trailer_decode(buf + size - LSQ_MANIFEST_TRAILER_SIZE,
						  &t, err, sizeof(err));
	err[0] = '\0';
	ret = lsq_manifest_parse(buf, size, &m, err, sizeof(err));
	if (ret == LSQ_OK) {
		check_accepted(&m, size);
		lsq_manifest_fini(&m);
	} else if (!err[0]) {
		abort(); /* every refusal has a reason */
	}
	free(buf);
	return 0;
}
