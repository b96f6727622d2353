/* SPDX-License-Identifier: MIT */
/*
 * fuzz_mount_options.c - arbitrary bytes as the mount daemon's command
 * line through lsq_mount_options_parse() and lsq_mount_options_fini():
 * no crash, no leak, no out-of-bounds access, whatever the arguments.
 *
 * The input is split at NUL bytes into argv[1..]; each argument is its own
 * malloc() of exactly its length plus NUL, so ASan sees over-reads. Commas
 * inside an argument reach the parser unchanged (-o a=1,b=2).
 *
 * Files: the parser only stores the paths of header_file=, cacert=,
 * record=, prefetch= and cache_dir= (they are opened at mount time, not
 * here); the one file-system access is realpath()+stat() of the mount
 * point and of a local image. So every positional argument but an
 * http(s) URL as the image becomes TMP/NAME, TMP a fresh temp
 * directory (with a subdirectory "mnt"), NAME the argument with each '/'
 * turned into '_' and ".." into "mnt": mount points resolve inside TMP,
 * never elsewhere. (No chdir: the replay driver opens relative paths.)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 64

static char tmp[] = "/tmp/lsq-fuzz-options-XXXXXX";

/* The image may be a URL: the parser only redacts it, no file access */
static bool is_web_url(const char *a)
{
	return !strncmp(a, "http://", 7) || !strncmp(a, "https://", 8);
}

static void cleanup(void)
{
	char mnt[sizeof(tmp) + 4];

	snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
	rmdir(mnt);
	rmdir(tmp);
}

static void setup_once(void)
{
	static bool done;
	char mnt[sizeof(tmp) + 4];
	if (done)
		return;
	done = true;
	if (!mkdtemp(tmp))
		abort();
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
	if (mkdir(mnt, 0700))
		abort();
	atexit(cleanup);
	/* the parser reports bad options with fprintf(stderr): point that
	 * FILE at /dev/null, but leave fd 2 to libFuzzer and the sanitizers,
	 * which write their findings and statistics there */
	stderr = fopen("/dev/null", "w");
	if (!stderr)
		abort();
}

static bool positional(const char *a, bool after_dashdash)
{
	return after_dashdash || a[0] != '-' || a[1] == '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsq_mount_options opt;
	char *argv[MAX_ARGS + 2];
	int argc = 1;
	bool dashdash = false, prev_o = false;
	int npos = 0;
	size_t i = 0;

	setup_once();
	lsq_log_set_level(LSQ_LOG_SILENT);
	argv[0] = strdup("sqfs-lazy-mount");
	while (i < size && argc <= MAX_ARGS) {
		const uint8_t *nul = memchr(data + i, '\0', size - i);
		size_t n = nul ? (size_t)(nul - (data + i)) : size - i;
		char *a = malloc(n + 1);

		memcpy(a, data + i, n);
		a[n] = '\0';
		i += n + 1;
		if (!prev_o && positional(a, dashdash) &&
		    !(npos++ == 0 && is_web_url(a))) {
			for (char *c = a; *c; c++)
				if (*c == '/')
					*c = '_';
			char *path = malloc(sizeof(tmp) + n + 4); /* n or "mnt" */

			sprintf(path, "%s/%s", tmp, strcmp(a, "..") ? a : "mnt");
			free(a);
			a = path;
		} else if (!dashdash && !strcmp(a, "--")) {
			dashdash = true;
		}
		prev_o = !dashdash && !prev_o && !strcmp(a, "-o");
		argv[argc++] = a;
	}
	argv[argc] = NULL;
	(void)lsq_mount_options_parse(&opt, argc, argv);
	lsq_mount_options_fini(&opt);
	for (int k = 0; k < argc; k++)
		free(argv[k]);
	return 0;
}
