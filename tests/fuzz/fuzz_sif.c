/* SPDX-License-Identifier: MIT */
/*
 * fuzz_sif.c - arbitrary bytes as the start of a SIF file (format/sif.h):
 * the header, then the descriptors where it says they are, as the mount
 * reads them. No crash, no read outside the input, and a partition that
 * is accepted lies inside the file, past the descriptors; a broken
 * promise aborts, so the fuzzer reports it.
 *
 * The input is copied into a buffer of exactly its size, so ASan sees any
 * read past the end. The file is as long as the input, or longer when its
 * first 8 bytes say so (a remote SIF whose head alone was read).
 */
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "format/sif.h"
#include "lsq/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsq_sif_partition p;
	uint64_t file_size = size, doff, dsize;
	uint32_t count, want = 0;
	uint8_t *copy;
	char err[320];

	if (size < LSQ_SIF_HEADER_SIZE || !lsq_sif_is(data, size))
		return 0;
	/* the launch script's first bytes pick the file's size and the
	 * partition asked for, the rest of the header stays as given */
	if (data[0] & 1)
		file_size += lsq_le32(data + 1);
	if (data[0] & 2)
		want = lsq_le32(data + 5);
	if (lsq_sif_descriptors(data, file_size, &doff, &dsize, &count, err,
				sizeof(err)) != LSQ_OK)
		return 0;
	if (doff < LSQ_SIF_HEADER_SIZE || doff + dsize > file_size ||
	    dsize != (uint64_t)count * LSQ_SIF_DESCRIPTOR_SIZE)
		abort();
	if (doff + dsize > size)
		return 0;  /* not read: the mount would ask for it */
	copy = malloc(dsize ? dsize : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + doff, dsize);
	if (lsq_sif_partition(copy, count, doff, file_size, want, &p, err,
			      sizeof(err)) == LSQ_OK &&
	    (p.offset < doff + dsize || p.size == 0 ||
	     p.offset + p.size > file_size || (want && p.id != want)))
		abort();
	free(copy);
	return 0;
}
