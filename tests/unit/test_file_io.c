/* SPDX-License-Identifier: MIT */
/*
 * test_file_io.c - lsq_replace_file(): the parts in order, mode 0600, an
 * old file replaced, nothing left behind when it cannot be written; and
 * the lower-case hex our file names and records use (common/hex.h).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_io.h"
#include "common/hex.h"
#include "harness/check.h"
#include "lsq/error.h"

static size_t entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void replace(void)
{
	char dir[] = "/tmp/lsq-file-io-XXXXXX", path[64], missing[96];
	char *buf = NULL;
	size_t len = 0;
	struct stat st;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/f", dir);
	CHECK(lsq_replace_file(path, (const struct lsq_file_part[]){
		{ "old", 3 } }, 1) == LSQ_OK);
	CHECK(lsq_replace_file(path, (const struct lsq_file_part[]){
		{ "head", 4 }, { "", 0 }, { "-tail\n", 6 } }, 3) == LSQ_OK);
	CHECK(lsq_read_small_file(path, 100, &buf, &len, &st) == LSQ_OK);
	CHECK(len == 10 && memcmp(buf, "head-tail\n", 10) == 0);
	CHECK((st.st_mode & 07777) == 0600);
	free(buf);
	CHECK(entries(dir) == 1);  /* no temporary file left */
	/* a directory that is not there: an error, nothing written */
	snprintf(missing, sizeof(missing), "%s/no/f", dir);
	CHECK(lsq_replace_file(missing, (const struct lsq_file_part[]){
		{ "x", 1 } }, 1) == LSQ_ERR_IO);
	CHECK(entries(dir) == 1);
	CHECK(unlink(path) == 0 && rmdir(dir) == 0);
}

static void hex(void)
{
	const uint8_t in[] = { 0x00, 0x7f, 0xa5, 0xff };
	uint8_t out[4] = { 0 };
	char text[9];

	lsq_hex_encode(in, sizeof(in), text);
	CHECK(strcmp(text, "007fa5ff") == 0);
	CHECK(lsq_hex_decode(text, 4, out) && memcmp(in, out, 4) == 0);
	/* ours are lower-case: anything else is not one of our names */
	CHECK(!lsq_hex_decode("007FA5FF", 4, out));
	CHECK(!lsq_hex_decode("00 7fa5f", 4, out));
	CHECK(!lsq_hex_decode("0g", 1, out));
	CHECK(lsq_hex_digit('f') == 15 && lsq_hex_digit('F') == -1 &&
	      lsq_hex_digit('/') == -1 && lsq_hex_digit(':') == -1);
}

int main(void)
{
	replace();
	hex();
	return 0;
}
