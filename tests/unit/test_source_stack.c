/* SPDX-License-Identifier: MIT */
/*
 * test_source_stack.c - the caching layers as lsq_source_open_stack()
 * composes them over a local file (pin over RAM over store over the
 * file): each read request comes back with the bytes and says where they
 * came from and whether they were checked; optional operations reach the
 * layer that has them whichever layer is asked; one-off reads leave no
 * copy; prefetches reserve into RAM or go to cache_dir; a refetch drops
 * the RAM copy; every layer reports its counters through one callback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/check.h"
#include "lsq/error.h"
#include "lsq/source.h"

#define FILE_BYTES (1u << 20)
#define UNIT 4096u
#define PIN_OFF (768u * 1024u)

static uint8_t bytes[FILE_BYTES];

static int read_rq(struct lsq_source *src, struct lsq_read *rq, void *buf,
		   size_t len, uint64_t off)
{
	*rq = lsq_read_of(buf, len, off);
	return lsq_source_read(src, rq);
}

/* The units at offsets that are a multiple of 2 * UNIT pass. */
static bool even_units_pass(void *ctx, const void *buf, size_t len,
			    uint64_t off)
{
	(void)ctx;
	return memcmp(buf, bytes + off, len) == 0 && off % (2 * UNIT) == 0;
}

static const uint8_t *no_digests(void *ctx, uint64_t off, size_t len)
{
	(void)ctx;
	(void)off;
	(void)len;
	return NULL;
}

struct counter_sum {
	uint64_t prefetch_blocks, prefetch_hits, background_blocks,
		pinned, block_cache_hits, disk_writes;
	unsigned names;
};

static void sum_counter(void *ctx, const char *name, uint64_t value,
			enum lsq_counter_kind kind)
{
	struct counter_sum *c = ctx;

	c->names++;
	if (!strcmp(name, "prefetch_blocks"))
		c->prefetch_blocks += value;
	else if (!strcmp(name, "prefetch_hits"))
		c->prefetch_hits += value;
	else if (!strcmp(name, "background_blocks"))
		c->background_blocks += value;
	else if (!strcmp(name, "metadata_pinned_bytes")) {
		CHECK(kind == LSQ_COUNTER_GAUGE);
		c->pinned += value;
	} else if (!strcmp(name, "block_cache_hits")) {
		CHECK(kind == LSQ_COUNTER_TOTAL);
		c->block_cache_hits += value;
	} else if (!strcmp(name, "disk_cache_writes"))
		c->disk_writes += value;
}

static struct counter_sum counters(const struct lsq_source *src)
{
	struct counter_sum c = { 0 };

	lsq_source_counters(src, sum_counter, &c);
	return c;
}

int main(void)
{
	char dir[] = "/tmp/lsq-stack-XXXXXX", path[64], cmd[96];
	struct lsq_cache_options cache = {
		.block_cache_bytes = 8u << 20,
		.pin_metadata = 1,
		.dir_bytes = 64u << 20,
	};
	struct lsq_source_stack_options so = { .cache = &cache };
	struct lsq_unit_checks units = { .digest_of = no_digests,
					 .check = even_units_pass };
	struct lsq_extent ext[4];
	struct lsq_source *src;
	struct lsq_read rq;
	struct counter_sum c;
	char err[256], warn[256];
	uint8_t buf[2 * UNIT];
	uint64_t fetched;
	FILE *f;

	for (size_t i = 0; i < FILE_BYTES; i++)
		bytes[i] = (uint8_t)(i * 2654435761u >> 13);
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/image", dir);
	f = fopen(path, "wb");
	CHECK(f && fwrite(bytes, 1, FILE_BYTES, f) == FILE_BYTES);
	fclose(f);
	cache.dir = dir;
	CHECK_EQ_INT(lsq_source_open_stack(path, &so, &src, err, sizeof(err),
					   warn, sizeof(warn)), LSQ_OK);
	CHECK(src->inner);  /* layered */
	CHECK(lsq_source_keeps(src) ==
	      (LSQ_HELD_PIN | LSQ_HELD_RAM | LSQ_HELD_DISK));
	CHECK(lsq_source_use_units(src, &units, warn, sizeof(warn)) == LSQ_OK);

	/* a load is checked once below and the RAM copy keeps the answer */
	CHECK_EQ_INT(read_rq(src, &rq, buf, UNIT, 0), LSQ_OK);
	CHECK(!memcmp(buf, bytes, UNIT) && rq.checked);
	CHECK_EQ_INT(read_rq(src, &rq, buf, UNIT, 0), LSQ_OK);
	CHECK(rq.checked && rq.origin && !strcmp(rq.origin, "block_cache"));
	CHECK_EQ_INT(read_rq(src, &rq, buf, UNIT, UNIT), LSQ_OK);
	CHECK(!memcmp(buf, bytes + UNIT, UNIT) && !rq.checked);
	CHECK(lsq_source_held(src, UNIT, UNIT, LSQ_HELD_RAM) == LSQ_HELD_RAM);
	CHECK(lsq_source_held(src, UNIT, UNIT, LSQ_HELD_DISK) ==
	      LSQ_HELD_DISK);

	/* past the end: refused before any layer */
	CHECK_EQ_INT(read_rq(src, &rq, buf, UNIT, FILE_BYTES - 1),
		     LSQ_ERR_OUT_OF_BOUNDS);

	/* a one-off read leaves no copy in RAM */
	rq = lsq_read_of(buf, 16, 5 * UNIT);
	rq.one_off = true;
	CHECK_EQ_INT(lsq_source_read(src, &rq), LSQ_OK);
	CHECK(!memcmp(buf, bytes + 5 * UNIT, 16));
	CHECK(!lsq_source_held(src, 5 * UNIT, 16, ~0u));

	/* a refetch goes past the RAM copy, and drops it */
	rq = lsq_read_of(buf, UNIT, UNIT);
	CHECK_EQ_INT(lsq_source_refetch(src, &rq), LSQ_OK);
	CHECK(!memcmp(buf, bytes + UNIT, UNIT));
	CHECK(!lsq_source_held(src, UNIT, UNIT, LSQ_HELD_RAM));

	/* the advised region is pinned on its first read (the pin layer is
	 * the top one; advise reaches it from there) */
	lsq_source_advise(src, PIN_OFF, FILE_BYTES - PIN_OFF);
	CHECK(lsq_source_held(src, PIN_OFF + 10, 100, LSQ_HELD_PIN));
	CHECK_EQ_INT(read_rq(src, &rq, buf, 100, PIN_OFF + 10), LSQ_OK);
	CHECK(!memcmp(buf, bytes + PIN_OFF + 10, 100));
	CHECK(rq.origin &&
	      !strcmp(rq.origin, "the pinned metadata region"));
	c = counters(src);
	CHECK(c.pinned == FILE_BYTES - PIN_OFF);

	/* a profile's prefetch reserves into RAM: one span, each unit kept
	 * as the image reads it, and a read of one is a prefetch hit;
	 * units in the pin are left out */
	for (unsigned i = 0; i < 3; i++)
		ext[i] = (struct lsq_extent){ (16 + 2 * i) * UNIT, UNIT };
	ext[3] = (struct lsq_extent){ PIN_OFF, UNIT };
	CHECK_EQ_INT(lsq_source_prefetch(src, ext, 4, LSQ_PREFETCH_RESERVE,
					 &fetched), LSQ_OK);
	CHECK(fetched == 5 * UNIT);
	for (unsigned i = 0; i < 3; i++)
		CHECK(lsq_source_held(src, ext[i].offset, UNIT, LSQ_HELD_RAM));
	c = counters(src);
	CHECK(c.prefetch_blocks == 3);
	CHECK_EQ_INT(read_rq(src, &rq, buf, UNIT, 18 * UNIT), LSQ_OK);
	CHECK(!memcmp(buf, bytes + 18 * UNIT, UNIT));
	CHECK(rq.checked);  /* 18 * UNIT is an even unit */
	c = counters(src);
	CHECK(c.prefetch_hits == 1 && c.block_cache_hits >= 2);

	/* background fetch: with cache_dir, into the disk cache, not RAM;
	 * what any layer holds is left out */
	for (unsigned i = 0; i < 3; i++)
		ext[i] = (struct lsq_extent){ (40 + i) * UNIT, UNIT };
	ext[3] = (struct lsq_extent){ 0, UNIT };  /* in RAM */
	CHECK_EQ_INT(lsq_source_prefetch(src, ext, 4, LSQ_PREFETCH_BACKGROUND,
					 &fetched), LSQ_OK);
	CHECK(fetched == 3 * UNIT);
	for (unsigned i = 0; i < 3; i++) {
		CHECK(lsq_source_held(src, ext[i].offset, UNIT,
				      LSQ_HELD_DISK));
		CHECK(!lsq_source_held(src, ext[i].offset, UNIT,
				       LSQ_HELD_RAM));
	}
	c = counters(src);
	CHECK(c.background_blocks == 3 && c.disk_writes >= 3);
	CHECK_EQ_INT(lsq_source_prefetch(src, ext, 3, LSQ_PREFETCH_BACKGROUND,
					 &fetched), LSQ_OK);
	CHECK(fetched == 0);
	/* a read of one comes from the disk cache */
	CHECK_EQ_INT(read_rq(src, &rq, buf, UNIT, 41 * UNIT), LSQ_OK);
	CHECK(!memcmp(buf, bytes + 41 * UNIT, UNIT));
	CHECK(rq.origin && !strncmp(rq.origin, "cache_dir ", 10));

	/* a file has no link to report */
	{
		struct lsq_link link;

		CHECK_EQ_INT(lsq_source_link(src, &link), LSQ_ERR_INVALID);
	}
	CHECK(c.names >= 20);
	lsq_source_destroy(src);

	/* without a persistent cache, background fetch keeps what it
	 * fetches in RAM */
	cache.dir = NULL;
	CHECK_EQ_INT(lsq_source_open_stack(path, &so, &src, err, sizeof(err),
					   warn, sizeof(warn)), LSQ_OK);
	CHECK(lsq_source_keeps(src) == (LSQ_HELD_PIN | LSQ_HELD_RAM));
	CHECK_EQ_INT(lsq_source_prefetch(src, ext, 3, LSQ_PREFETCH_BACKGROUND,
					 &fetched), LSQ_OK);
	CHECK(fetched == 3 * UNIT);
	CHECK(lsq_source_held(src, 41 * UNIT, UNIT, LSQ_HELD_RAM));
	lsq_source_destroy(src);

	/* no caching layer at all: the file alone */
	CHECK_EQ_INT(lsq_source_open_stack(path, NULL, &src, err, sizeof(err),
					   warn, sizeof(warn)), LSQ_OK);
	CHECK(!src->inner && lsq_source_keeps(src) == 0);
	CHECK_EQ_INT(lsq_source_prefetch(src, ext, 3, LSQ_PREFETCH_BACKGROUND,
					 &fetched), LSQ_OK);
	CHECK(fetched == 0);
	lsq_source_destroy(src);

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	return 0;
}
