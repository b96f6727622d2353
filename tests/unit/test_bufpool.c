/* SPDX-License-Identifier: MIT */
/*
 * test_bufpool.c - src/common/bufpool.c: buffers are usable and aligned,
 * large ones are mapped and recycled, the pool never holds more than
 * LSQ_BUFPOOL_CAP, and a pooled buffer is never handed out for a request
 * much smaller than it. Under AddressSanitizer everything comes from
 * malloc and the pool stays empty.
 */
#include <stdint.h>
#include <string.h>

#include "common/bufpool.h"
#include "harness/check.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static void fill(void *p, size_t len, int c)
{
	memset(p, c, len);
	CHECK(((const unsigned char *)p)[len - 1] == (unsigned char)c);
}

int main(void)
{
	size_t sizes[] = { 1, 100, 4 * KiB, LSQ_BUFPOOL_MIN - 65,
			   LSQ_BUFPOOL_MIN, 128 * KiB + 40, MiB, 3 * MiB + 7 };
	void *big[64];
	void *p, *q;
	size_t fp;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		p = lsq_bufpool_alloc(sizes[i]);
		CHECK(p);
		CHECK((uintptr_t)p % 64 == 0);
		CHECK(lsq_bufpool_footprint(p) >= sizes[i]);
		fill(p, sizes[i], (int)i + 1);
		lsq_bufpool_free(p);
	}
	lsq_bufpool_free(NULL);
	CHECK(!lsq_bufpool_alloc(SIZE_MAX));

	p = lsq_bufpool_alloc(256 * KiB);
	CHECK(p);
	fp = lsq_bufpool_footprint(p);
	if (fp % 4096 != 0) {
		/* malloc'd (AddressSanitizer): nothing is pooled */
		lsq_bufpool_free(p);
		CHECK(lsq_bufpool_pooled_bytes() == 0);
		return 0;
	}
	CHECK(fp >= 256 * KiB + 64 && fp <= 256 * KiB + 8 * KiB);
	/* a freed mapping is reused for the same size, pages kept */
	fill(p, 256 * KiB, 0x5a);
	uint64_t before = lsq_bufpool_pooled_bytes();
	lsq_bufpool_free(p);
	CHECK(lsq_bufpool_pooled_bytes() == before + fp);
	q = lsq_bufpool_alloc(256 * KiB);
	CHECK(q == p);
	CHECK(lsq_bufpool_pooled_bytes() == before);
	CHECK(((unsigned char *)q)[256 * KiB - 1] == 0x5a);

	/* nor for a much smaller one: at most an eighth is wasted */
	lsq_bufpool_free(q);
	q = lsq_bufpool_alloc(128 * KiB);
	CHECK(q != p);
	CHECK(lsq_bufpool_footprint(q) <= (128 * KiB + 4 * KiB) * 9 / 8);
	lsq_bufpool_free(q);

	/* the pool is bounded whatever is freed into it */
	for (size_t i = 0; i < 64; i++) {
		big[i] = lsq_bufpool_alloc(512 * KiB);
		CHECK(big[i]);
		fill(big[i], 512 * KiB, 7);
	}
	for (size_t i = 0; i < 64; i++)
		lsq_bufpool_free(big[i]);
	CHECK(lsq_bufpool_pooled_bytes() <= LSQ_BUFPOOL_CAP);
	CHECK(lsq_bufpool_pooled_bytes() >= 512 * KiB);
	return 0;
}
