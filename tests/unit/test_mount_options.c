/* SPDX-License-Identifier: MIT */
/*
 * test_mount_options.c - the option table of sqfs-lazy-mount
 * (src/daemon/options.c): every option lands in its own field with its own
 * width, the defaults hold until an option is given, a later option wins,
 * libfuse's options are handed on and ours are not, bad values and retired
 * options are refused, and --help lists what the table has.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/options.h"
#include "harness/check.h"
#include "lsq/error.h"

static int parse(struct lsq_mount_options *opt, const char *o)
{
	char *argv[] = { "sqfs-lazy-mount", "-o", (char *)o, "img", "/tmp",
			 NULL };

	return lsq_mount_options_parse(opt, 5, argv);
}

static bool handed_on(const struct lsq_mount_options *opt, const char *arg)
{
	for (int i = 0; i < opt->fuse_args.argc; i++)
		if (strcmp(opt->fuse_args.argv[i], arg) == 0)
			return true;
	return false;
}

static void check_defaults(void)
{
	struct lsq_mount_options opt;

	CHECK_EQ_INT(parse(&opt, "ro"), LSQ_OK);
	CHECK_EQ_INT(opt.io_uring, -1);
	CHECK(opt.offset == LSQ_OFFSET_AUTO);  /* 0, or a SIF's partition */
	CHECK_EQ_INT(opt.sif_partition, 0);
	CHECK(opt.uid == LSQ_KEEP_OWNER && opt.gid == LSQ_KEEP_OWNER);
	CHECK_EQ_INT(opt.prefetch_metadata, -1);
	CHECK_EQ_INT(opt.verify, -1);
	CHECK(opt.background == -1);
	CHECK(opt.learn && !opt.dev && !opt.suid && !opt.allow_other);
	CHECK_EQ_INT(opt.threads, lsq_default_threads());
	CHECK(opt.entry_timeout == LSQ_DEFAULT_TIMEOUT);
	CHECK_EQ_INT(opt.cache_opts.dir_bytes, LSQ_DEFAULT_CACHE_SIZE);
	CHECK_EQ_INT(opt.log_level, LSQ_LOG_INFO);
	CHECK(opt.http_opts.header_file == NULL && opt.record == NULL);
	CHECK(handed_on(&opt, "-oro,nodev,nosuid,fsname=img,"
			"subtype=sqfs-lazy,default_permissions"));
	lsq_mount_options_fini(&opt);
}

static void check_every_field(void)
{
	struct lsq_mount_options opt;

	CHECK_EQ_INT(parse(&opt,
		"offset=4K,threads=3,io_uring=off,decomp=single,"
		"metadata_cache=1M,data_cache=2M,fragment_cache=4000000000,"
		"block_cache=0x10,prefetch_metadata=on,cache_dir=/c,"
		"cache_size=5M,offline_ok,record=/r,prefetch=off,learn=off,"
		"background=0.5,metrics=unix:/m,entry_timeout=1.5,"
		"attr_timeout=2,dev,suid,debug,max_connections=9,retries=0,"
		"connect_timeout=3,timeout=4,readahead=64M,header_file=/h,"
		"cacert=/ca,insecure,mirror=http://m1,mirror=http://m2,"
		"url_command=cmd x,aws_profile=p,credentials_file=/cf,"
		"region=r,endpoint=http://e,verify=/k.pem,manifest=/mf,"
		"loglevel=warning,_netdev,comment=x,x-systemd.automount,"
		"allow_other,max_read=4096,noexec,sif_partition=3,uid=0,"
		"gid=4294967294"), LSQ_OK);
	CHECK_EQ_INT(opt.sif_partition, 3);
	CHECK_EQ_INT(opt.uid, 0);
	CHECK(opt.gid == 4294967294u);
	CHECK_EQ_INT(opt.offset, 4096);
	CHECK_EQ_INT(opt.threads, 3);
	CHECK_EQ_INT(opt.io_uring, 0);
	CHECK_EQ_INT(opt.image_opts.decomp_contexts, 1);
	CHECK_EQ_INT(opt.image_opts.metadata_cache_bytes, 1 << 20);
	CHECK_EQ_INT(opt.image_opts.data_cache_bytes, 2 << 20);
	CHECK(opt.image_opts.fragment_cache_blocks == 4000000000u);
	CHECK_EQ_INT(opt.cache_opts.block_cache_bytes, 16);
	CHECK(opt.block_cache_given);
	CHECK_EQ_INT(opt.prefetch_metadata, 1);
	CHECK(strcmp(opt.cache_opts.dir, "/c") == 0);
	CHECK_EQ_INT(opt.cache_opts.dir_bytes, 5 << 20);
	CHECK_EQ_INT(opt.cache_opts.offline_ok, 1);
	CHECK(strcmp(opt.record, "/r") == 0);
	CHECK(strcmp(opt.prefetch, "off") == 0);
	CHECK(!opt.learn);
	CHECK(opt.background == 0.5);
	CHECK(strcmp(opt.metrics, "unix:/m") == 0);
	CHECK(opt.entry_timeout == 1.5 && opt.attr_timeout == 2);
	CHECK(opt.dev && opt.suid && opt.debug && opt.foreground);
	CHECK_EQ_INT(opt.http_opts.max_connections, 9);
	CHECK_EQ_INT(opt.http_opts.retries, 0);
	CHECK(opt.http_opts.connect_timeout == 3 && opt.http_opts.timeout == 4);
	CHECK_EQ_INT(opt.http_opts.readahead, 64 << 20);
	CHECK(strcmp(opt.http_opts.header_file, "/h") == 0);
	CHECK(strcmp(opt.http_opts.cacert, "/ca") == 0);
	CHECK_EQ_INT(opt.http_opts.insecure, 1);
	CHECK_EQ_INT(opt.http_opts.nmirrors, 2);
	CHECK(strcmp(opt.http_opts.mirrors[1], "http://m2") == 0);
	CHECK(strcmp(opt.http_opts.url_command, "cmd x") == 0);
	CHECK(strcmp(opt.http_opts.aws_profile, "p") == 0);
	CHECK(strcmp(opt.http_opts.credentials_file, "/cf") == 0);
	CHECK(strcmp(opt.http_opts.region, "r") == 0);
	CHECK(strcmp(opt.http_opts.endpoint, "http://e") == 0);
	CHECK_EQ_INT(opt.nverify_keys, 1);
	CHECK_EQ_INT(opt.verify, 1);
	CHECK(strcmp(opt.manifest, "/mf") == 0);
	CHECK_EQ_INT(opt.log_level, LSQ_LOG_WARNING);
	CHECK(opt.allow_other);
	CHECK_EQ_INT(opt.max_read, 4096);
	/* libfuse's are handed on, ours and mount(8)'s are not */
	CHECK(handed_on(&opt, "-oallow_other"));
	CHECK(handed_on(&opt, "-omax_read=4096"));
	CHECK(handed_on(&opt, "-onoexec"));
	CHECK(handed_on(&opt, "-d"));
	for (int i = 0; i < opt.fuse_args.argc; i++) {
		CHECK(strstr(opt.fuse_args.argv[i], "threads") == NULL);
		CHECK(strstr(opt.fuse_args.argv[i], "_netdev") == NULL);
		CHECK(strstr(opt.fuse_args.argv[i], "x-systemd") == NULL);
	}
	lsq_mount_options_fini(&opt);
	CHECK(opt.http_opts.header_file == NULL && opt.manifest == NULL);
}

static void check_later_wins(void)
{
	struct lsq_mount_options opt;

	CHECK_EQ_INT(parse(&opt, "dev,nodev,suid,nosuid,prefetch_metadata,"
			   "noprefetch_metadata,record=/a,record=/b,rw,"
			   "decomp=single,decomp=percpu"), LSQ_OK);
	CHECK_EQ_INT(opt.image_opts.decomp_contexts, 0);
	CHECK(!opt.dev && !opt.suid && opt.ignored_rw);
	CHECK_EQ_INT(opt.prefetch_metadata, 0);
	CHECK(strcmp(opt.record, "/b") == 0);
	lsq_mount_options_fini(&opt);
}

static void check_refused(void)
{
	static const char *const bad[] = {
		"threads=0", "threads=1025", "threads=1K", "threads",
		"readahead=65M", "offset=1Q", "timeout=0", "connect_timeout=0",
		"entry_timeout=-1", "entry_timeout=x", "insecure=1", "dev=1",
		"loglevel=loud", "loglevel", "io_uring=maybe", "cache_dir=",
		"record=", "decomp=0", "decomp=4097", "background=2",
		"retries=101", "max_connections=65", "max_read=0",
		"uid=4294967295", "uid=-1", "gid=x", "sif_partition=0",
		"busy_poll", "idle_poll=1", "same_cpu=on",
		"verify=off,verify=/k.pem", "verify=/k.pem,verify=auto",
		"mirror=a,mirror=a,mirror=a,mirror=a,mirror=a,mirror=a,"
		"mirror=a,mirror=a,mirror=a",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lsq_mount_options opt;
		int err = parse(&opt, bad[i]);

		if (err != LSQ_ERR_INVALID)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK_EQ_INT(err, LSQ_ERR_INVALID);
		lsq_mount_options_fini(&opt);
	}
}

/* --help has a row for each option the table lists, and none retired. */
static void check_help(void)
{
	static const char *const rows[] = {
		"  offset=SIZE ", "  threads=N ", "  io_uring[=on|off] ",
		"  cache_dir=DIR ", "  dev, nodev ", "  loglevel=LEVEL ",
		"  max_read=N ", "  verify=PUBKEY.pem|auto|off ",
		"  readahead=SIZE ",
	};
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	CHECK(f != NULL);
	lsq_mount_options_help(f);
	CHECK(fclose(f) == 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (!strstr(text, rows[i]))
			fprintf(stderr, "no row: %s\n", rows[i]);
		CHECK(strstr(text, rows[i]) != NULL);
	}
	CHECK(strstr(text, "(1..1024, default ") != NULL);
	CHECK(strstr(text, "readahead=SIZE          fetched ahead") != NULL);
	CHECK(strstr(text, "busy_poll") == NULL);
	CHECK(strstr(text, "same_cpu") == NULL);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		CHECK(strlen(line) <= 79);
	free(text);
}

int main(void)
{
	lsq_log_set_level(LSQ_LOG_SILENT);
	check_defaults();
	check_every_field();
	check_later_wins();
	check_refused();
	check_help();
	printf("mount options: ok\n");
	return 0;
}
