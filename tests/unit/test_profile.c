/* SPDX-License-Identifier: MIT */
/*
 * test_profile.c - startup profile text (src/profile/profile.c) and the
 * in-image record header (src/profile/record.c): parse what
 * write_entry wrote, skip bad lines without failing, normalise ranges.
 */
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "lsq/error.h"
#include "profile/profile.h"
#include "profile/record.h"

static void test_round_trip(void)
{
	static const char *paths[] = { "usr/bin/python3", "a\tb\nc\\d", "x" };
	struct lsq_profile_range r[] = { { 0, 131071 }, { 262144, 393215 } };
	struct lsq_profile p;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f != NULL);
	CHECK(lsq_profile_write_entry(f, paths[0], r, 2, 0) == LSQ_OK);
	CHECK(lsq_profile_write_entry(f, paths[1], NULL, 0, 3) == LSQ_OK);
	CHECK(lsq_profile_write_entry(f, paths[2], r + 1, 1, 2) == LSQ_OK);
	CHECK(fclose(f) == 0);
	CHECK(strstr(buf, "usr/bin/python3\t0-131071,262144-393215\n") == buf);
	CHECK(strstr(buf, "a\\tb\\nc\\\\d\t\tmissed=3\n") != NULL);
	CHECK(strstr(buf, "x\t262144-393215\tmissed=2\n") != NULL);

	CHECK(lsq_profile_parse(buf, len, &p) == LSQ_OK);
	CHECK(p.count == 3 && p.bad_lines == 0);
	for (size_t i = 0; i < 3; i++)
		CHECK(strcmp(p.entries[i].path, paths[i]) == 0);
	CHECK(p.entries[0].nranges == 2 && p.entries[0].ranges[1].first == 262144 &&
	      p.entries[0].ranges[1].last == 393215);
	CHECK(p.entries[1].nranges == 0 && p.entries[1].ranges == NULL);
	CHECK(p.entries[2].nranges == 1);
	CHECK(p.entries[0].missed == 0 && p.entries[1].missed == 3 &&
	      p.entries[2].missed == 2);
	lsq_profile_free(&p);
	free(buf);
}

static void test_bad_lines_are_skipped(void)
{
	static const char text[] =
		"# comment\n"
		"\n"
		"/usr/lib/a.so\t10-19,0-9,30-39,35-40\textra field\r\n"
		"./b\n"
		"c/../d\n"          /* .. component */
		"e//f\n"            /* empty component */
		"g\t5-1\n"          /* last < first */
		"h\tx-3\n"          /* not a number */
		"i\t1-2,\n"         /* trailing comma */
		"j\t99999999999999999999-1\n" /* overflow */
		"/\n"               /* nothing left */
		"k";                /* no final newline */
	struct lsq_profile p;

	CHECK(lsq_profile_parse(text, sizeof(text) - 1, &p) == LSQ_OK);
	CHECK(p.count == 3);
	CHECK(p.bad_lines == 7);
	CHECK(strcmp(p.entries[0].path, "usr/lib/a.so") == 0);
	/* sorted and merged: 0-9 and 10-19 touch, 30-39 and 35-40 overlap */
	CHECK(p.entries[0].nranges == 2);
	CHECK(p.entries[0].ranges[0].first == 0 && p.entries[0].ranges[0].last == 19);
	CHECK(p.entries[0].ranges[1].first == 30 && p.entries[0].ranges[1].last == 40);
	CHECK(strcmp(p.entries[1].path, "b") == 0);
	CHECK(strcmp(p.entries[2].path, "k") == 0);
	lsq_profile_free(&p);
	lsq_profile_free(NULL);

	CHECK(lsq_profile_parse("", 0, &p) == LSQ_OK && p.count == 0);
	lsq_profile_free(&p);
}

/* A run's reads first, in its order; what it did not read after, aged;
 * ranges of a path read again widen; old entries age out. */
static void test_merge(void)
{
	static const char old_text[] =
		"lib/a\t0-9\n"
		"lib/gone\t\tmissed=1\n"
		"lib/b\n"
		"lib/c\t100-199\n"
		"lib/old\t\tmissed=2\n";
	static const char run_text[] =
		"bin/new\n"
		"lib/c\t0-9,150-299\n"
		"lib/a\t20-29\n"
		"bin/new\t5-6\n";        /* a duplicate keeps its first place */
	struct lsq_profile old, run, out, again;

	CHECK(lsq_profile_parse(old_text, sizeof(old_text) - 1, &old) == 0);
	CHECK(lsq_profile_parse(run_text, sizeof(run_text) - 1, &run) == 0);
	CHECK(lsq_profile_merge(&run, &old, 2, 100, &out) == LSQ_OK);
	CHECK(out.count == 5);
	CHECK(strcmp(out.entries[0].path, "bin/new") == 0 &&
	      out.entries[0].nranges == 0 && out.entries[0].missed == 0);
	CHECK(strcmp(out.entries[1].path, "lib/c") == 0 &&
	      out.entries[1].nranges == 2 &&
	      out.entries[1].ranges[0].first == 0 &&
	      out.entries[1].ranges[0].last == 9 &&
	      out.entries[1].ranges[1].first == 100 &&
	      out.entries[1].ranges[1].last == 299);
	CHECK(strcmp(out.entries[2].path, "lib/a") == 0 &&
	      out.entries[2].nranges == 2 && out.entries[2].ranges[1].first == 20);
	/* not read this time: after the run's, one more miss each */
	CHECK(strcmp(out.entries[3].path, "lib/gone") == 0 &&
	      out.entries[3].missed == 2);
	CHECK(strcmp(out.entries[4].path, "lib/b") == 0 &&
	      out.entries[4].missed == 1);
	/* lib/old had missed its 2 allowed merges: gone */

	/* the next run reads nothing: everything ages, lib/gone leaves */
	{
		struct lsq_profile none = { 0 };

		CHECK(lsq_profile_merge(&none, &out, 2, 100, &again) == 0);
		CHECK(again.count == 4);
		for (size_t i = 0; i < again.count; i++)
			CHECK(strcmp(again.entries[i].path, "lib/gone") != 0 &&
			      again.entries[i].missed >= 1);
		lsq_profile_free(&again);
	}
	/* bounded */
	CHECK(lsq_profile_merge(&run, &old, 2, 2, &again) == 0);
	CHECK(again.count == 2);
	lsq_profile_free(&again);
	lsq_profile_free(&out);
	lsq_profile_free(&run);
	lsq_profile_free(&old);
}

/* A file whose name starts with '#' (at the image root) is learned like
 * any other: written, it must not read back as a comment, or every merge
 * would drop it and the next start would never prefetch it. */
static void test_hash_names_survive_merges(void)
{
	static const char *paths[] = { "#notes", "d/#x", "#" };
	struct lsq_profile p, run, out;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f != NULL);
	for (size_t i = 0; i < 3; i++)
		CHECK(lsq_profile_write_entry(f, paths[i], NULL, 0, 1) ==
		      LSQ_OK);
	CHECK(fclose(f) == 0);
	CHECK(lsq_profile_parse(buf, len, &p) == LSQ_OK);
	CHECK(p.count == 3 && p.bad_lines == 0);
	for (size_t i = 0; i < p.count && i < 3; i++)
		CHECK(strcmp(p.entries[i].path, paths[i]) == 0 &&
		      p.entries[i].missed == 1);
	/* read again: first, not aged */
	CHECK(lsq_profile_parse("./#notes\n", 9, &run) == LSQ_OK);
	CHECK(run.count == 1);
	CHECK(lsq_profile_merge(&run, &p, 3, 100, &out) == LSQ_OK);
	CHECK(out.count == 3 && strcmp(out.entries[0].path, "#notes") == 0 &&
	      out.entries[0].missed == 0 && out.entries[1].missed == 2 &&
	      out.entries[2].missed == 2);
	lsq_profile_free(&out);
	lsq_profile_free(&run);
	lsq_profile_free(&p);
	free(buf);
}

static void test_record_header(void)
{
	static const char text[] = "usr/bin/x\n";
	uint8_t h[LSQ_PROFILE_RECORD_HEADER];
	uint32_t len, crc;

	CHECK(lsq_profile_record_offset(0) == 96);
	CHECK(lsq_profile_record_offset(2 + 8) == 112);
	CHECK(lsq_profile_record_offset(2 + 6) == 104);
	lsq_profile_record_encode(h, text, sizeof(text) - 1);
	CHECK(lsq_profile_record_decode(h, &len, &crc) == LSQ_OK);
	CHECK(len == sizeof(text) - 1);
	CHECK(lsq_profile_record_check(text, len, crc));
	CHECK(!lsq_profile_record_check("usr/bin/y\n", len, crc));
	h[0] ^= 1;
	CHECK(lsq_profile_record_decode(h, &len, &crc) == LSQ_ERR_NOT_FOUND);
	h[0] ^= 1;
	h[11] = 0x7f;  /* length far over the maximum */
	CHECK(lsq_profile_record_decode(h, &len, &crc) == LSQ_ERR_CORRUPT);
}

int main(void)
{
	test_round_trip();
	test_bad_lines_are_skipped();
	test_merge();
	test_hash_names_survive_merges();
	test_record_header();
	return 0;
}
