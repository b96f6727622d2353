/* SPDX-License-Identifier: MIT */
/*
 * main.c - sqfs-lazy-pack: options, the temporary output file (created in
 * OUTPUT's directory, renamed over OUTPUT only when the image is complete,
 * removed on any error and on SIGINT/SIGTERM/SIGHUP), and the three
 * phases: scan, data, tables.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/bind_cpu.h"
#include "common/log.h"
#include "format/ondisk.h"
#include "lsq/error.h"
#include "lsq_config.h"
#include "pack/pack.h"
#include "sign/sign_image.h"

static char tmp_path[PATH_MAX];
static volatile sig_atomic_t tmp_live;

static void on_signal(int sig)
{
	if (tmp_live)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: sqfs-lazy-pack [OPTIONS] SOURCE OUTPUT\n"
"Pack a directory tree or a tar archive (a file, or - for stdin; gzip, xz,\n"
"zstd, bzip2, lz4... compressed) into a SquashFS 4.0 image,\n"
"deterministically.\n"
"\n"
"  -b, --block-size SIZE   data block size, 4K..1M, a power of two (128K)\n"
"  -c, --compressor NAME   gzip, xz, lz4, lzo, zstd (gzip)\n"
"  -l, --level N           gzip 1-9 (9), zstd 1-22 (15), lzo 1-9 (8)\n"
"      --xz-bcj LIST       xz BCJ filters: x86,powerpc,ia64,arm,armthumb,sparc\n"
"      --lz4-hc            lz4 high-compression mode\n"
"  -j, --jobs N            compressor threads; the main thread reads and\n"
"                          writes next to them (number of CPUs)\n"
"      --serial            no threads: the reference block processor (the\n"
"                          image is the same as with any -j)\n"
"      --sign KEY.pem      append the signed block manifest that\n"
"                          sqfs-lazy-sign --key KEY.pem would (Ed25519 PEM)\n"
"      --reuse-layout[=SIZE]\n"
"                          end fragment blocks where the files say, about\n"
"                          every SIZE bytes of tails (4K), so that those of\n"
"                          unchanged small files repeat in the next version\n"
"      --order PROFILE     lay the files a startup profile lists out first,\n"
"                          in its order, and store it in the image so mounts\n"
"                          prefetch them (directory SOURCE only)\n"
"      --no-fragments      store tails as short blocks, no fragments\n"
"      --always-fragments  put tails of files >= block size in fragments too\n"
"      --no-xattrs         do not store extended attributes\n"
"      --no-exports        no export (NFS lookup) table\n"
"      --all-root          every file owned by 0:0\n"
"      --mtime T           every time stamp becomes T (seconds since 1970)\n"
"      --force             overwrite OUTPUT if it exists\n"
"      --skip-unreadable   leave out what cannot be read, with a warning\n"
"  -q, --quiet             no warnings, no summary\n"
"  -h, --help              this text\n"
"      --version           version and compressors\n"
"\n"
"SOURCE_DATE_EPOCH, when set, clamps every time stamp to it and is the\n"
"image's creation time.\n");
}

/* A directory is walked; "-" and anything else that opens (a file, a
 * pipe) is read as a tar archive. */
static int source_is_tar(const char *source, bool *tar)
{
	struct stat st;

	*tar = !strcmp(source, "-");
	if (*tar)
		return 0;
	if (stat(source, &st)) {
		pk_error("%s: %s", source, strerror(errno));
		return -1;
	}
	*tar = !S_ISDIR(st.st_mode);
	if (*tar && !LSQ_HAVE_LIBARCHIVE) {
		pk_error("%s: not a directory, and tar input is not built in "
			 "(needs libarchive)", source);
		return -1;
	}
	return 0;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || v > max)
		return -1;
	if (*end == 'K' || *end == 'k') {
		v <<= 10;
		end++;
	} else if (*end == 'M' || *end == 'm') {
		v <<= 20;
		end++;
	}
	if (*end || v > max)
		return -1;
	*out = v;
	return 0;
}

enum {
	OPT_XZ_BCJ = 256, OPT_LZ4_HC, OPT_SERIAL, OPT_NO_FRAG, OPT_ALWAYS_FRAG,
	OPT_NO_XATTRS, OPT_NO_EXPORTS, OPT_ALL_ROOT, OPT_MTIME, OPT_FORCE,
	OPT_VERSION, OPT_SKIP_UNREADABLE, OPT_ORDER, OPT_SIGN, OPT_REUSE,
};

static const struct option long_opts[] = {
	{ "block-size", required_argument, NULL, 'b' },
	{ "compressor", required_argument, NULL, 'c' },
	{ "level", required_argument, NULL, 'l' },
	{ "xz-bcj", required_argument, NULL, OPT_XZ_BCJ },
	{ "lz4-hc", no_argument, NULL, OPT_LZ4_HC },
	{ "jobs", required_argument, NULL, 'j' },
	{ "serial", no_argument, NULL, OPT_SERIAL },
	{ "no-fragments", no_argument, NULL, OPT_NO_FRAG },
	{ "always-fragments", no_argument, NULL, OPT_ALWAYS_FRAG },
	{ "no-xattrs", no_argument, NULL, OPT_NO_XATTRS },
	{ "no-exports", no_argument, NULL, OPT_NO_EXPORTS },
	{ "all-root", no_argument, NULL, OPT_ALL_ROOT },
	{ "mtime", required_argument, NULL, OPT_MTIME },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "skip-unreadable", no_argument, NULL, OPT_SKIP_UNREADABLE },
	{ "order", required_argument, NULL, OPT_ORDER },
	{ "sign", required_argument, NULL, OPT_SIGN },
	{ "reuse-layout", optional_argument, NULL, OPT_REUSE },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static int bad(const char *what, const char *arg)
{
	pk_error("invalid %s '%s' (see --help)", what, arg);
	return 2;
}

static int parse_args(int argc, char **argv, struct pk_opts *o)
{
	const char *comp = "gzip", *bcj = NULL, *sde;
	uint64_t v, level = 0, reuse = 0;
	bool lz4_hc = false;
	char err[128];
	int c, ret;

	memset(o, 0, sizeof(*o));
	o->block_size = 128 * 1024;
	o->jobs = lsq_online_cpus();
	while ((c = getopt_long(argc, argv, "b:c:l:j:qh", long_opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'b':
			if (parse_u64(optarg, 1 << 20, &v) || v < 4096 ||
			    (v & (v - 1)))
				return bad("block size", optarg);
			o->block_size = (uint32_t)v;
			break;
		case 'c':
			comp = optarg;
			break;
		case 'l':
			if (parse_u64(optarg, 100, &level) || level == 0)
				return bad("level", optarg);
			break;
		case OPT_XZ_BCJ:
			bcj = optarg;
			break;
		case OPT_LZ4_HC:
			lz4_hc = true;
			break;
		case 'j':
			if (parse_u64(optarg, 1024, &v) || v == 0)
				return bad("job count", optarg);
			o->jobs = (unsigned)v;
			break;
		case OPT_SERIAL: o->serial = true; break;
		case OPT_NO_FRAG: o->no_fragments = true; break;
		case OPT_ALWAYS_FRAG: o->always_fragments = true; break;
		case OPT_NO_XATTRS: o->no_xattrs = true; break;
		case OPT_NO_EXPORTS: o->no_exports = true; break;
		case OPT_ALL_ROOT: o->all_root = true; break;
		case OPT_FORCE: o->force = true; break;
		case OPT_SKIP_UNREADABLE: o->skip_unreadable = true; break;
		case OPT_ORDER: o->order = optarg; break;
		case OPT_SIGN: o->sign_key = optarg; break;
		case OPT_REUSE:
			if (!optarg) {
				reuse = PK_REUSE_TARGET_DEFAULT;
				break;
			}
			if (parse_u64(optarg, 1 << 20, &reuse) || reuse < 512)
				return bad("--reuse-layout size", optarg);
			break;
		case OPT_MTIME:
			if (parse_u64(optarg, UINT32_MAX, &v) ||
			    strpbrk(optarg, "KkMm"))
				return bad("time", optarg);
			o->have_mtime = true;
			o->mtime = (uint32_t)v;
			break;
		case 'q': o->quiet = true; break;
		case 'h':
			usage(stdout);
			exit(0);
		case OPT_VERSION:
			printf("sqfs-lazy-pack %s\ncompressors: %s\n"
			       "inputs: directory%s\n", LSQ_VERSION,
			       lsq_comp_available(),
			       LSQ_HAVE_LIBARCHIVE ? " tar" : "");
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	o->source = argv[optind];
	o->output = argv[optind + 1];
	if (source_is_tar(o->source, &o->tar))
		return 1;
	if (o->order && o->tar) {
		/* tar data streams in archive order; reordering would mean
		 * spooling the listed files */
		pk_error("--order needs a directory SOURCE, not a tar archive");
		return 2;
	}
	if (o->no_fragments && o->always_fragments) {
		pk_error("--no-fragments and --always-fragments exclude each other");
		return 2;
	}
	o->block_log = (unsigned)__builtin_ctz(o->block_size);
	if (reuse && o->no_fragments) {
		pk_error("--reuse-layout places fragments; --no-fragments stores none");
		return 2;
	}
	/* more than a block of tails between ends would never be reached */
	o->reuse_target = reuse < o->block_size ? (uint32_t)reuse :
						  o->block_size;
	sde = getenv("SOURCE_DATE_EPOCH");
	if (sde && *sde) {
		if (parse_u64(sde, UINT32_MAX, &v) || strpbrk(sde, "KkMm"))
			return bad("SOURCE_DATE_EPOCH", sde);
		o->have_clamp = true;
		o->clamp = (uint32_t)v;
	}
	ret = lsq_comp_cfg_init(&o->comp, comp, o->block_size);
	if (ret == LSQ_ERR_UNSUPPORTED) {
		pk_error("compressor %s is not built in (have: %s)", comp,
			 lsq_comp_available());
		return 2;
	}
	if (ret)
		return bad("compressor", comp);
	o->comp.level = (int)level;
	o->comp.lz4_hc = lz4_hc;
	if (bcj && lsq_comp_parse_bcj(&o->comp, bcj))
		return bad("BCJ filter list", bcj);
	if (lsq_comp_cfg_check(&o->comp, err, sizeof(err))) {
		pk_error("%s", err);
		return 2;
	}
	return 0;
}

static int make_temp(const char *output)
{
	const char *slash = strrchr(output, '/');
	int n, fd;

	if (slash)
		n = snprintf(tmp_path, sizeof(tmp_path), "%.*s/.%s.XXXXXX",
			     (int)(slash - output), output, slash + 1);
	else
		n = snprintf(tmp_path, sizeof(tmp_path), ".%s.XXXXXX", output);
	if (n < 0 || (size_t)n >= sizeof(tmp_path)) {
		pk_error("%s: path too long", output);
		return -1;
	}
	fd = mkstemp(tmp_path);
	if (fd < 0) {
		pk_error("%s: cannot create a temporary file next to it: %s",
			 output, strerror(errno));
		return -1;
	}
	tmp_live = 1;
	return fd;
}

static void free_ctx(struct pk_ctx *ctx)
{
	pk_tree_free(ctx->root);
	free(ctx->ids);
	for (size_t i = 0; i < ctx->nxsets; i++)
		free(ctx->xsets[i].data);
	free(ctx->xsets);
	free(ctx->links);
	free(ctx->frag_start);
	free(ctx->frag_size);
}

int main(int argc, char **argv)
{
	struct pk_opts o;
	struct pk_ctx ctx;
	struct pk_bp *bp = NULL;
	struct pk_order ord = { 0 };
	struct lsq_sign_key *key = NULL;
	struct lsq_signed_info signed_info = { 0 };
	struct sigaction sa;
	uint8_t comp_opts[16];
	size_t comp_len;
	struct stat st;
	mode_t mask;
	int ret;

	ret = parse_args(argc, argv, &o);
	if (ret)
		return ret;
	if (o.sign_key) {
		char why[512];

		/* before anything is packed: a key that cannot sign is one
		 * line, and no image */
		if (lsq_sign_key_load_private(o.sign_key, &key, why,
					      sizeof(why))) {
			pk_error("%s", why);
			return 1;
		}
		/* the reader's own messages would be a second line */
		lsq_log_set_prefix("sqfs-lazy-pack");
		lsq_log_set_level(LSQ_LOG_SILENT);
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.opt = &o;
	ctx.fd = -1;
	if (lstat(o.output, &st) == 0) {
		if (!o.force) {
			pk_error("%s exists (use --force to overwrite)",
				 o.output);
			lsq_sign_key_destroy(key);
			return 1;
		}
		ctx.skip_valid = true;
		ctx.skip_dev = st.st_dev;
		ctx.skip_ino = st.st_ino;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	ctx.progress = !o.quiet && isatty(STDERR_FILENO);
	ctx.streaming = o.tar;
	ctx.start_time = pk_now();
	if (!o.tar) {
		ret = pk_scan(&ctx);
		if (!ret && o.order)
			ret = pk_order_prepare(&ctx, o.order, &ord);
		if (ret)
			goto out;
	}
	ctx.fd = make_temp(o.output);
	if (ctx.fd < 0) {
		ret = LSQ_ERR_IO;
		goto out;
	}
	comp_len = lsq_comp_options(&o.comp, comp_opts);
	ctx.pos = SQUASHFS_SUPERBLOCK_SIZE + (comp_len ? 2 + comp_len : 0);
	ret = o.order ? pk_order_write_record(&ctx, &ord,
					      comp_len ? 2 + comp_len : 0)
		      : LSQ_OK;
	if (!ret)
		ret = pk_bp_create(&ctx, &bp);
	if (!ret && o.order)
		ret = pk_order_add_files(bp, &ord);
	if (!ret)
		ret = o.tar ? pk_tar_read(&ctx, bp) :
			      pk_bp_add_tree(bp, ctx.root);
	if (!ret)
		ret = pk_bp_finish(bp);
	pk_bp_destroy(bp);
	if (!ret) {
		pk_tree_prune(ctx.root);
		ret = pk_write_tables(&ctx, comp_opts, comp_len);
	}
	if (ctx.progress)
		pk_progress(&ctx, true);
	if (ret)
		goto out;
	if (key) {
		/* the finished image, signed as sqfs-lazy-sign --key signs it
		 * (the same code): the rename shows it only once signed */
		char why[512];

		ret = lsq_sign_image(tmp_path, key, NULL, &signed_info, why,
				     sizeof(why));
		if (ret) {
			pk_error("%s: cannot sign: %s", o.output, why);
			goto out;
		}
	}
	mask = umask(0);
	umask(mask);
	if (fchmod(ctx.fd, 0666 & ~mask) || fsync(ctx.fd) || close(ctx.fd)) {
		pk_error("%s: %s", tmp_path, strerror(errno));
		ctx.fd = -1;
		ret = LSQ_ERR_IO;
		goto out;
	}
	ctx.fd = -1;
	if (rename(tmp_path, o.output)) {
		pk_error("cannot rename %s to %s: %s", tmp_path, o.output,
			 strerror(errno));
		ret = LSQ_ERR_IO;
		goto out;
	}
	tmp_live = 0;
	if (!o.quiet && ctx.skipped)
		fprintf(stderr, "sqfs-lazy-pack: %llu unreadable entries left "
			"out\n", (unsigned long long)ctx.skipped);
	if (!o.quiet)
		fprintf(stderr,
			"sqfs-lazy-pack: %s: %u inodes, %llu files, %llu bytes "
			"in, %llu bytes image (%.1f%%), %llu bytes saved by "
			"dedup, %.2f s\n",
			o.output, ctx.inode_count,
			(unsigned long long)(ctx.files - ctx.skipped_files),
			(unsigned long long)ctx.bytes_in,
			(unsigned long long)ctx.pos,
			ctx.bytes_in ? 100.0 * (double)ctx.pos /
					       (double)ctx.bytes_in : 0.0,
			(unsigned long long)ctx.dedup_bytes,
			pk_now() - ctx.start_time);
	if (!o.quiet && key)
		fprintf(stderr, "sqfs-lazy-pack: %s: signed %zu units, "
			"manifest of %zu bytes, file %llu bytes\n", o.output,
			signed_info.units, signed_info.manifest_len,
			(unsigned long long)signed_info.image_size);
out:
	if (ctx.fd >= 0)
		close(ctx.fd);
	if (tmp_live) {
		unlink(tmp_path);
		tmp_live = 0;
	}
	free_ctx(&ctx);
	pk_order_fini(&ord);
	lsq_sign_key_destroy(key);
	if (ret)
		pk_error("%s not written", o.output);
	return ret ? 1 : 0;
}
