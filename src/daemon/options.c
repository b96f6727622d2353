/* SPDX-License-Identifier: MIT */
/*
 * options.c - the command line of sqfs-lazy-mount.
 *
 * Every -o option is one row of mount_options[]: its name, how its value
 * is read and where it is stored, its bounds and its --help text. The
 * parser, --help and lsq_mount_options_fini() walk that table, and a test
 * holds the man page to --help, so an option is added in one place.
 */
#include "daemon/options.h"

#include "lsq_config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bind_cpu.h"
#include "common/log.h"
#include "common/url.h"
#include "lsq/error.h"

int lsq_parse_size(const char *s, uint64_t *out)
{
	const char *digits = s;
	unsigned long long v;
	unsigned shift = 0;
	int base = 10;
	char *end;

	/* strtoull would take leading blanks and signs, and "010" as octal */
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		digits = s + 2;
	}
	if (!(base == 16 ? isxdigit((unsigned char)digits[0])
			 : isdigit((unsigned char)digits[0])))
		return LSQ_ERR_INVALID;
	errno = 0;
	v = strtoull(digits, &end, base);
	if (errno == ERANGE)
		return LSQ_ERR_OVERFLOW;
	if (end[0] != '\0') {
		switch (end[0]) {
		case 'K': case 'k': shift = 10; break;
		case 'M': case 'm': shift = 20; break;
		case 'G': case 'g': shift = 30; break;
		case 'T': case 't': shift = 40; break;
		default: return LSQ_ERR_INVALID;
		}
		if (end[1] != '\0')
			return LSQ_ERR_INVALID;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return LSQ_ERR_OVERFLOW;
	*out = (uint64_t)v << shift;
	return LSQ_OK;
}

unsigned lsq_default_threads(void)
{
	uint64_t n = (uint64_t)lsq_online_cpus() * LSQ_THREADS_PER_CPU;

	if (n < 8)
		n = 8;
	return n > LSQ_MAX_THREADS ? LSQ_MAX_THREADS : (unsigned)n;
}

/* What an option's value is, and so how it is read, stored and shown. */
enum option_kind {
	OPT_FLAG,      /* no value; stores .set */
	OPT_SWITCH,    /* [=on|off]: 1 or 0 */
	OPT_SIZE,      /* SIZE up to .max (0: any) */
	OPT_COUNT,     /* an integer from .min to .max, no suffix; or a
			* word of .choices, meaning its index */
	OPT_SECONDS,   /* seconds >= 0; > 0 with .min 1 */
	OPT_TEXT,      /* a string the options own; "" refused */
	OPT_CHOICE,    /* one of .choices: its index */
	OPT_CUSTOM,    /* .parse reads it */
	OPT_IGNORED,   /* for mount(8), fstab and systemd, not for us */
	OPT_RETIRED,   /* refused; .help says what replaced it */
	OPT_FUSE,      /* libfuse's: handed on unread */
};

enum option_group {
	GROUP_MOUNT, GROUP_HTTP, GROUP_S3, GROUP_SIGNED, GROUP_SERVICE,
	GROUP_FUSE, GROUP_COUNT
};

struct mount_option {
	const char *name;
	/* the --help row's left column (defaults to name + syntax); "-":
	 * not a row of its own (a form shown in the row before) */
	const char *shown;
	enum option_kind kind;
	enum option_group group;
	size_t field, size;     /* where in struct lsq_mount_options; size 0:
				 * stored nowhere */
	uint64_t min, max;
	unsigned set;           /* OPT_FLAG: the value stored */
	bool pass;              /* also handed on to libfuse */
	const char *expect;     /* OPT_TEXT, OPT_CUSTOM: what a value is */
	const char *const *choices;
	int (*parse)(struct lsq_mount_options *opt, const char *name,
		     const char *value);
	const char *help;
	/* the default shown in --help: dflt, else show_default's, else
	 * the field's in a freshly defaulted struct; "": none shown */
	const char *dflt;
	void (*show_default)(char *buf, size_t size);
};

#define FIELD(f) .field = offsetof(struct lsq_mount_options, f),	\
		 .size = sizeof(((struct lsq_mount_options *)0)->f)

static int bad_value(const char *name, const char *value, const char *expect)
{
	lsq_err_log("invalid value '%s' for -o %s (expected %s)", value, name,
		    expect);
	return LSQ_ERR_INVALID;
}

/* A switch's value: absent, "on" or "1" is on; "off" or "0" off. */
static int parse_on_off(const char *name, const char *value, bool *out)
{
	if (!value || !strcmp(value, "1") || !strcmp(value, "on"))
		*out = true;
	else if (!strcmp(value, "0") || !strcmp(value, "off"))
		*out = false;
	else
		return bad_value(name, value, "on, off, 1 or 0");
	return LSQ_OK;
}

static int parse_seconds(const char *name, const char *value, bool positive,
			 double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(value, &end);
	if (value[0] == '\0' || *end != '\0' || errno || !isfinite(v) ||
	    v < 0 || value[0] == '-' || value[0] == '+' || value[0] == ' ')
		return bad_value(name, value, "seconds >= 0");
	if (positive && v <= 0)
		return bad_value(name, value, "seconds > 0");
	*out = v;
	return LSQ_OK;
}

/* "64M" when it is a whole number of a unit, plain bytes otherwise. */
static void format_size(char *buf, size_t size, uint64_t v)
{
	static const char units[] = "TGMK";

	for (int i = 0; i < 4; i++) {
		unsigned shift = 10u * (unsigned)(4 - i);

		if (v && v % (UINT64_C(1) << shift) == 0) {
			snprintf(buf, size, "%" PRIu64 "%c", v >> shift,
				 units[i]);
			return;
		}
	}
	snprintf(buf, size, "%" PRIu64, v);
}

/* ---- the options that need more than a kind ---- */

static int parse_block_cache(struct lsq_mount_options *opt, const char *name,
			     const char *value)
{
	if (lsq_parse_size(value, &opt->cache_opts.block_cache_bytes) != LSQ_OK)
		return bad_value(name, value,
				 "a size such as 4096, 0x1000 or 64M");
	opt->block_cache_given = true;
	return LSQ_OK;
}

static int parse_background(struct lsq_mount_options *opt, const char *name,
			    const char *value)
{
	char *end;
	double f;

	if (strcmp(value, "auto") == 0 || strcmp(value, "on") == 0) {
		opt->background = -1;
		return LSQ_OK;
	}
	if (strcmp(value, "off") == 0) {
		opt->background = 0;
		return LSQ_OK;
	}
	errno = 0;
	f = strtod(value, &end);
	if (errno || end == value || *end || !(f >= 0 && f <= 1))
		return bad_value(name, value, "off, auto or a fraction 0..1");
	opt->background = f;
	return LSQ_OK;
}

static int parse_mirror(struct lsq_mount_options *opt, const char *name,
			const char *value)
{
	char *copy;

	if (opt->http_opts.nmirrors == LSQ_HTTP_MAX_MIRRORS) {
		lsq_err_log("at most %d -o mirror= options",
			    LSQ_HTTP_MAX_MIRRORS);
		return LSQ_ERR_INVALID;
	}
	copy = strdup(value);
	if (!copy)
		return LSQ_ERR_NOMEM;
	opt->http_opts.mirrors[opt->http_opts.nmirrors++] = copy;
	return LSQ_OK;
}

static int parse_verify(struct lsq_mount_options *opt, const char *name,
			const char *value)
{
	char *copy;

	if (strcmp(value, "auto") == 0 || strcmp(value, "off") == 0) {
		if (opt->nverify_keys)
			return bad_value(name, value,
					 "keys, or one of auto and off");
		opt->verify = value[1] == 'u' ? -1 : 0;
		return LSQ_OK;
	}
	if (value[0] == '\0' || opt->verify == 0)
		return bad_value(name, value, "keys, or one of auto and off");
	if (opt->nverify_keys == LSQ_MAX_VERIFY_KEYS) {
		lsq_err_log("at most %d -o verify= keys", LSQ_MAX_VERIFY_KEYS);
		return LSQ_ERR_INVALID;
	}
	copy = strdup(value);
	if (!copy)
		return LSQ_ERR_NOMEM;
	opt->verify_keys[opt->nverify_keys++] = copy;
	opt->verify = 1;
	return LSQ_OK;
}

static void show_block_cache_default(char *buf, size_t size)
{
	char v[32];

	format_size(v, sizeof(v), LSQ_DEFAULT_REMOTE_BLOCK_CACHE);
	snprintf(buf, size, "%s for URLs, 0 for files: the page cache has "
		 "them", v);
}

#define STR_(x) #x
#define STR(x) STR_(x)

static const char *const log_levels[] = {
	"error", "warning", "info", "debug", NULL,
};
static const char *const decomp_words[] = { "percpu", "single", NULL };

/* Rows shown with "_netdev" */
#define MOUNT_ONLY(n) { n, "-", .kind = OPT_IGNORED }

/* The options, grouped as --help shows them. */
static const struct mount_option mount_options[] = {
	{ "offset", .kind = OPT_SIZE, FIELD(offset),
	  .help = "the image starts at byte SIZE of IMAGE",
	  .dflt = "0, or a SIF file's SquashFS partition" },
	{ "sif_partition", "sif_partition=ID", OPT_COUNT, FIELD(sif_partition),
	  .min = 1, .max = UINT32_MAX,
	  .help = "mount the SquashFS partition with object id ID of a SIF "
		  "file (siftool list shows them)",
	  .dflt = "the primary system partition" },
	{ "threads", .kind = OPT_COUNT, FIELD(threads),
	  .min = 1, .max = LSQ_MAX_THREADS,
	  .help = "at most N request threads; by default " STR(LSQ_THREADS_PER_CPU)
		  " per CPU, at least 8" },
	{ "io_uring", .kind = OPT_SWITCH, FIELD(io_uring),
	  .help = "take requests over io_uring, each answered on the CPU of "
		  "its caller, where the kernel offers it (fuse module "
		  "parameter enable_uring set to 1): faster metadata walks; "
		  "/dev/fuse elsewhere", .dflt = "on" },
	{ "busy_poll", .kind = OPT_RETIRED,
	  .help = "it tuned a request loop that no longer exists (requests "
		  "come over io_uring or libfuse's /dev/fuse loop); drop it" },
	{ "idle_poll", .kind = OPT_RETIRED,
	  .help = "it tuned a request loop that no longer exists (requests "
		  "come over io_uring or libfuse's /dev/fuse loop); drop it" },
	{ "same_cpu", .kind = OPT_RETIRED,
	  .help = "ring threads answer on their caller's CPU without it "
		  "(-o io_uring); drop it" },
	{ "decomp", "decomp=single|percpu|N", OPT_COUNT,
	  FIELD(image_opts.decomp_contexts), .choices = decomp_words,
	  .min = 1, .max = LSQ_MAX_DECOMP_CONTEXTS,
	  .expect = "percpu, single or an integer from 1 to 4096",
	  .help = "decompression contexts" },
	{ "metadata_cache", .kind = OPT_SIZE,
	  FIELD(image_opts.metadata_cache_bytes),
	  .help = "decompressed metadata cache" },
	{ "data_cache", .kind = OPT_SIZE, FIELD(image_opts.data_cache_bytes),
	  .help = "decompressed data block cache" },
	{ "fragment_cache", .kind = OPT_COUNT,
	  FIELD(image_opts.fragment_cache_blocks), .min = 1,
	  .max = UINT32_MAX, .help = "fragment blocks kept" },
	{ "block_cache", "block_cache=SIZE", OPT_CUSTOM,
	  .parse = parse_block_cache,
	  .help = "RAM cache of the compressed bytes read",
	  .show_default = show_block_cache_default },
	{ "prefetch_metadata", .kind = OPT_SWITCH, FIELD(prefetch_metadata),
	  .help = "read all metadata in one go at mount and keep it",
	  .dflt = "on for URLs, off for files" },
	{ "noprefetch_metadata", "-", OPT_FLAG, FIELD(prefetch_metadata),
	  .set = 0 },
	{ "cache_dir", "cache_dir=DIR", OPT_TEXT, FIELD(cache_opts.dir),
	  .expect = "a directory",
	  .help = "persistent cache of fetched bytes, reused by later mounts "
		  "of the same image; a verified image's blocks are kept by "
		  "digest, shared by every image mounted with DIR",
	  .dflt = "none" },
	{ "cache_size", .kind = OPT_SIZE, FIELD(cache_opts.dir_bytes),
	  .help = "bound of the cache_dir cache per image, and of the shared "
		  "block store per daemon" },
	{ "offline_ok", .kind = OPT_FLAG, FIELD(cache_opts.offline_ok),
	  .set = 1,
	  .help = "if the server cannot be reached at mount, mount anyway "
		  "from what cache_dir recorded and holds", .dflt = "off" },
	{ "record", .kind = OPT_TEXT, FIELD(record), .expect = "a file name",
	  .help = "write a startup profile to PATH when the mount ends: the "
		  "files read, in order (docs/prefetch.md)" },
	{ "prefetch", "prefetch=auto|off|PATH|URL", OPT_TEXT, FIELD(prefetch),
	  .expect = "auto, off, a file name or a URL",
	  .help = "fetch the blocks a startup profile lists, in the "
		  "background",
	  .dflt = "auto: the one learned in cache_dir, else the one stored "
		  "in the image by sqfs-lazy-pack --order, else URL.profile" },
	{ "learn", .kind = OPT_SWITCH, FIELD(learn),
	  .help = "with cache_dir, note what each mount's start reads and "
		  "prefetch it at the next mount of the same URL or file, new "
		  "versions included" },
	{ "takeover", .kind = OPT_SWITCH, FIELD(takeover),
	  .help = "if the daemon dies, a new one takes over the mount: "
		  "readers see a pause, not an error (Linux 6.9 or later, "
		  "not with io_uring rings; docs/takeover.md)",
	  .dflt = "on, unless requests come over io_uring rings" },
	{ "background", "background=off|auto|FRACTION", OPT_CUSTOM,
	  .parse = parse_background,
	  .help = "fetch the image (or FRACTION of its bytes) over spare "
		  "bandwidth, behind the reads, into cache_dir or else half "
		  "of block_cache", .dflt = "auto: URLs; off for metered links" },
	{ "metrics", "metrics=HOST:PORT|unix:PATH", OPT_TEXT, FIELD(metrics),
	  .expect = "HOST:PORT or unix:PATH",
	  .help = "serve the counters to Prometheus at GET /metrics; put it "
		  "on localhost or behind your scraper's network "
		  "(docs/metrics.md)", .dflt = "off" },
	{ "entry_timeout", .kind = OPT_SECONDS, FIELD(entry_timeout),
	  .help = "kernel name cache timeout" },
	{ "attr_timeout", .kind = OPT_SECONDS, FIELD(attr_timeout),
	  .help = "kernel attribute cache timeout" },
	{ "uid", .kind = OPT_COUNT, FIELD(uid), .max = LSQ_KEEP_OWNER - 1,
	  .help = "report every entry as owned by user N (squashfuse's "
		  "option)", .dflt = "the image's owners" },
	{ "gid", .kind = OPT_COUNT, FIELD(gid), .max = LSQ_KEEP_OWNER - 1,
	  .help = "report every entry as owned by group N",
	  .dflt = "the image's groups" },
	{ "dev", "dev, nodev", OPT_FLAG, FIELD(dev), .set = 1,
	  .help = "honour device files", .dflt = "nodev" },
	{ "nodev", "-", OPT_FLAG, FIELD(dev), .set = 0 },
	{ "suid", "suid, nosuid", OPT_FLAG, FIELD(suid), .set = 1,
	  .help = "honour set-user/group-id bits", .dflt = "nosuid" },
	{ "nosuid", "-", OPT_FLAG, FIELD(suid), .set = 0 },
	{ "ro", .kind = OPT_FLAG,
	  .help = "accepted; the mount is always read-only" },
	/* mount(8) may add rw on its own: refusing it would break fstab
	 * lines. Warned about once loglevel= is known. */
	{ "rw", "-", OPT_FLAG, FIELD(ignored_rw), .set = 1 },
	{ "debug", .kind = OPT_FLAG, FIELD(debug), .set = 1,
	  .help = "same as -d" },

	{ "max_connections", .kind = OPT_COUNT, .group = GROUP_HTTP,
	  FIELD(http_opts.max_connections), .min = 1,
	  .max = LSQ_MAX_HTTP_CONNECTIONS,
	  .help = "parallel connections/requests" },
	{ "retries", .kind = OPT_COUNT, .group = GROUP_HTTP,
	  FIELD(http_opts.retries), .min = 0, .max = 100,
	  .help = "retries of a failed request" },
	{ "connect_timeout", .kind = OPT_SECONDS, .group = GROUP_HTTP,
	  FIELD(http_opts.connect_timeout), .min = 1,
	  .help = "connection timeout" },
	{ "timeout", .kind = OPT_SECONDS, .group = GROUP_HTTP,
	  FIELD(http_opts.timeout), .min = 1,
	  .help = "total time of one request" },
	{ "readahead", .kind = OPT_SIZE, .group = GROUP_HTTP,
	  FIELD(http_opts.readahead), .max = LSQ_MAX_HTTP_READAHEAD,
	  .help = "fetched ahead of sequential reads, 0 disables" },
	{ "header_file", .kind = OPT_TEXT, .group = GROUP_HTTP,
	  FIELD(http_opts.header_file), .expect = "a file name",
	  .help = "extra request headers, 'Name: value' per line; must not "
		  "be readable by others" },
	{ "cacert", .kind = OPT_TEXT, .group = GROUP_HTTP,
	  FIELD(http_opts.cacert), .expect = "a file name",
	  .help = "CA certificates for https", .dflt = "the system's" },
	{ "insecure", .kind = OPT_FLAG, .group = GROUP_HTTP,
	  FIELD(http_opts.insecure), .set = 1,
	  .help = "do not verify TLS certificates", .dflt = "off" },
	{ "mirror", "mirror=URL", OPT_CUSTOM, .group = GROUP_HTTP,
	  .parse = parse_mirror,
	  .help = "another copy of the same image, for failover; may be "
		  "repeated (up to " STR(LSQ_HTTP_MAX_MIRRORS) ")" },
	{ "url_command", "url_command=CMD", OPT_TEXT, .group = GROUP_HTTP,
	  FIELD(http_opts.url_command), .expect = "a command",
	  .help = "a program printing a fresh URL of the image (a signed "
		  "URL); run at mount and when the URL is refused or about to "
		  "expire; words split at spaces, no shell; IMAGE then only "
		  "names it" },

	{ "aws_profile", "aws_profile=NAME", OPT_TEXT, .group = GROUP_S3,
	  FIELD(http_opts.aws_profile), .expect = "a profile name",
	  .help = "profile of the AWS shared files",
	  .dflt = "AWS_PROFILE, else default" },
	{ "credentials_file", .kind = OPT_TEXT, .group = GROUP_S3,
	  FIELD(http_opts.credentials_file), .expect = "a file name",
	  .help = "take credentials only from this file; must not be "
		  "readable by group or others" },
	{ "region", "region=NAME", OPT_TEXT, .group = GROUP_S3,
	  FIELD(http_opts.region), .expect = "a region name",
	  .help = "signing region", .dflt = "AWS_REGION, else us-east-1" },
	{ "endpoint", "endpoint=URL", OPT_TEXT, .group = GROUP_S3,
	  FIELD(http_opts.endpoint), .expect = "a URL",
	  .help = "another S3 service, path-style",
	  .dflt = "https://s3.REGION.amazonaws.com" },

	{ "verify", "verify=PUBKEY.pem|auto|off", OPT_CUSTOM,
	  .group = GROUP_SIGNED, .parse = parse_verify,
	  .help = "with keys, check every block against the image's signed "
		  "manifest and refuse the mount without a good one (may be "
		  "repeated: any of the keys); auto: verify when the image "
		  "has a manifest and " LSQ_KEYS_DIR " holds keys",
	  .dflt = "auto" },
	{ "manifest", .kind = OPT_TEXT, .group = GROUP_SIGNED,
	  FIELD(manifest), .expect = "a file name",
	  .help = "a detached manifest", .dflt = "the image's own" },

	{ "loglevel", "loglevel=LEVEL", OPT_CHOICE, .group = GROUP_SERVICE,
	  FIELD(log_level), .choices = log_levels,
	  .expect = "error, warning, info or debug",
	  .help = "error, warning, info or debug; stderr with -f, syslog "
		  "(the journal) without", .dflt = "info" },
	{ "_netdev", "_netdev, nofail, noauto, auto, defaults, user, nouser, "
		     "users, owner,\n  group, comment=, x-*",
	  OPT_IGNORED, .group = GROUP_SERVICE,
	  .help = "for mount(8), fstab and systemd: ignored here" },
	MOUNT_ONLY("nofail"), MOUNT_ONLY("noauto"), MOUNT_ONLY("auto"),
	MOUNT_ONLY("defaults"), MOUNT_ONLY("user"), MOUNT_ONLY("nouser"),
	MOUNT_ONLY("users"), MOUNT_ONLY("owner"), MOUNT_ONLY("group"),
	MOUNT_ONLY("comment"),

	{ "allow_other", .kind = OPT_FLAG, .group = GROUP_FUSE,
	  FIELD(allow_other), .set = 1, .pass = true,
	  .help = "let all users in", .dflt = "off" },
	{ "allow_root", .kind = OPT_FUSE, .group = GROUP_FUSE,
	  .help = "let root in as well as the mounting user" },
	{ "default_permissions", .kind = OPT_FUSE, .group = GROUP_FUSE,
	  .help = "the kernel checks the image's mode bits (always on)" },
	{ "auto_unmount", .kind = OPT_FUSE, .group = GROUP_FUSE,
	  .help = "unmount when the daemon dies" },
	{ "max_read", .kind = OPT_COUNT, .group = GROUP_FUSE,
	  FIELD(max_read), .min = 1, .max = UINT32_MAX, .pass = true,
	  .help = "largest read request in bytes", .dflt = "" },  /* 0: libfuse's */
	{ "max_readahead", "max_readahead=N", OPT_FUSE, .group = GROUP_FUSE,
	  .help = "kernel readahead in bytes", .dflt = "the kernel's" },
	{ "max_background", "max_background=N", OPT_FUSE, .group = GROUP_FUSE,
	  .help = "queued background requests", .dflt = "the kernel's" },
	{ "congestion_threshold", "congestion_threshold=N", OPT_FUSE,
	  .group = GROUP_FUSE,
	  .help = "background requests before the kernel backs off" },
	{ "fsname", "fsname=NAME", OPT_FUSE, .group = GROUP_FUSE,
	  .help = "source in /proc/mounts", .dflt = "the image path" },
	{ "subtype", "subtype=NAME", OPT_FUSE, .group = GROUP_FUSE,
	  .help = "type fuse.NAME", .dflt = "sqfs-lazy" },
};

#define N_OPTIONS (sizeof(mount_options) / sizeof(mount_options[0]))

static const struct mount_option *find_option(const char *name)
{
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (strcmp(mount_options[i].name, name) == 0)
			return &mount_options[i];
	return NULL;
}

static void *field_of(struct lsq_mount_options *opt,
		      const struct mount_option *o)
{
	return (char *)opt + o->field;
}

/* Integer fields come in three widths: bool; int, unsigned or an enum;
 * uint64_t. Only non-negative values are stored through here. */
static void store_int(void *p, size_t size, uint64_t v)
{
	uint32_t v32 = (uint32_t)v;

	if (size == 1)
		*(bool *)p = v != 0;
	else if (size == 4)
		memcpy(p, &v32, 4);
	else if (size == 8)
		memcpy(p, &v, 8);
}

static uint64_t load_int(const void *p, size_t size)
{
	uint32_t v32;
	uint64_t v;

	if (size == 1)
		return *(const bool *)p;
	if (size == 4) {
		memcpy(&v32, p, 4);
		return v32;
	}
	memcpy(&v, p, 8);
	return v;
}

static int parse_count(const struct mount_option *o, const char *value,
		       uint64_t *out)
{
	char expect[64];
	uint64_t v;

	snprintf(expect, sizeof(expect), "an integer from %" PRIu64
		 " to %" PRIu64, o->min, o->max);
	/* counts take no K/M/G: "threads=1K" is more likely a typo */
	if (lsq_parse_size(value, &v) != LSQ_OK || strpbrk(value, "KkMmGgTt") ||
	    v < o->min || v > o->max)
		return bad_value(o->name, value, o->expect ? o->expect : expect);
	*out = v;
	return LSQ_OK;
}

/* Reads value into o's field; the value is checked for presence already. */
static int store_value(struct lsq_mount_options *opt,
		       const struct mount_option *o, const char *value)
{
	void *p = field_of(opt, o);
	char expect[64], max[32];
	uint64_t v;
	bool on;
	int err;

	switch (o->kind) {
	case OPT_FLAG:
		if (o->size)
			store_int(p, o->size, (uint64_t)o->set);
		return LSQ_OK;
	case OPT_SWITCH:
		err = parse_on_off(o->name, value, &on);
		if (!err)
			store_int(p, o->size, on);
		return err;
	case OPT_SIZE:
		if (lsq_parse_size(value, &v) != LSQ_OK)
			return bad_value(o->name, value,
					 "a size such as 4096, 0x1000 or 64M");
		if (o->max && v > o->max) {
			format_size(max, sizeof(max), o->max);
			snprintf(expect, sizeof(expect), "a size up to %s", max);
			return bad_value(o->name, value, expect);
		}
		store_int(p, o->size, v);
		return LSQ_OK;
	case OPT_COUNT:
	case OPT_CHOICE:
		for (int i = 0; o->choices && o->choices[i]; i++)
			if (strcmp(value, o->choices[i]) == 0) {
				store_int(p, o->size, (uint64_t)i);
				return LSQ_OK;
			}
		if (o->kind == OPT_CHOICE)
			return bad_value(o->name, value, o->expect);
		err = parse_count(o, value, &v);
		if (!err)
			store_int(p, o->size, v);
		return err;
	case OPT_SECONDS:
		return parse_seconds(o->name, value, o->min > 0, (double *)p);
	case OPT_TEXT: {
		char *copy;

		if (value[0] == '\0')
			return bad_value(o->name, value, o->expect);
		copy = strdup(value);
		if (!copy)
			return LSQ_ERR_NOMEM;
		free(*(char **)p);
		*(char **)p = copy;
		return LSQ_OK;
	}
	case OPT_CUSTOM:
		return o->parse(opt, o->name, value);
	case OPT_IGNORED:
	case OPT_FUSE:
		return LSQ_OK;
	case OPT_RETIRED:
		lsq_err_log("-o %s was removed: %s", o->name, o->help);
		return LSQ_ERR_INVALID;
	}
	return LSQ_ERR_INVALID;
}

static int pass_on(struct fuse_args *pass, const char *item)
{
	char *arg;
	int ret;

	if (asprintf(&arg, "-o%s", item) < 0)
		return LSQ_ERR_NOMEM;
	ret = fuse_opt_add_arg(pass, arg);
	free(arg);
	return ret ? LSQ_ERR_NOMEM : LSQ_OK;
}

/* One -o item, "name" or "name=value". Ours are consumed; the rest is
 * queued for libfuse in pass, which refuses what it does not know. */
static int parse_item(struct lsq_mount_options *opt, char *item,
		      struct fuse_args *pass)
{
	char *value = strchr(item, '=');
	const struct mount_option *o;
	int err;

	if (value)
		*value++ = '\0';
	/* x-systemd.*, x-mount.* and other userspace notes */
	if (strncmp(item, "x-", 2) == 0)
		return LSQ_OK;
	o = find_option(item);
	if (o && o->kind == OPT_FLAG && value) {
		lsq_err_log("-o %s takes no value", item);
		return LSQ_ERR_INVALID;
	}
	if (o && !value && o->kind != OPT_FLAG && o->kind != OPT_SWITCH &&
	    o->kind != OPT_IGNORED && o->kind != OPT_FUSE &&
	    o->kind != OPT_RETIRED) {
		lsq_err_log("-o %s needs a value", item);
		return LSQ_ERR_INVALID;
	}
	err = o ? store_value(opt, o, value) : LSQ_OK;
	if (err || (o && !o->pass && o->kind != OPT_FUSE))
		return err;
	if (value)
		value[-1] = '=';
	return pass_on(pass, item);
}

/* Split "a,b\,c" into items at unescaped commas. Escapes stay in place:
 * libfuse removes them from what it is handed, and none of our own values
 * needs a comma. */
static int parse_o(struct lsq_mount_options *opt, const char *arg,
		   struct fuse_args *pass)
{
	char *copy = strdup(arg);
	char *item, *p;
	int err = LSQ_OK;

	if (!copy)
		return LSQ_ERR_NOMEM;
	item = copy;
	for (p = copy;; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p != ',' && *p != '\0')
			continue;
		{
			bool last = *p == '\0';

			*p = '\0';
			if (*item)
				err = parse_item(opt, item, pass);
			if (err || last)
				break;
			item = p + 1;
		}
	}
	free(copy);
	return err;
}
static void set_defaults(struct lsq_mount_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->mode = LSQ_MODE_MOUNT;
	opt->offset = LSQ_OFFSET_AUTO;
	opt->uid = opt->gid = LSQ_KEEP_OWNER;
	opt->threads = lsq_default_threads();
	opt->io_uring = -1;
	opt->takeover = -1;
	opt->entry_timeout = LSQ_DEFAULT_TIMEOUT;
	opt->attr_timeout = LSQ_DEFAULT_TIMEOUT;
	lsq_image_options_default(&opt->image_opts);
	lsq_http_options_default(&opt->http_opts);
	opt->cache_opts.dir_bytes = LSQ_DEFAULT_CACHE_SIZE;
	opt->prefetch_metadata = -1;
	opt->background = -1;
	opt->learn = true;
	opt->verify = -1;
	opt->fuse_args = (struct fuse_args)FUSE_ARGS_INIT(0, NULL);
	opt->log_level = LSQ_LOG_INFO;
}

/* fsname reaches libfuse through its own option parser: escape , and \. */
static char *escape_opt(const char *s)
{
	size_t n = 0;
	char *out, *q;

	for (const char *p = s; *p; p++)
		n += (*p == ',' || *p == '\\') ? 2 : 1;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	q = out;
	for (const char *p = s; *p; p++) {
		if (*p == ',' || *p == '\\')
			*q++ = '\\';
		*q++ = *p;
	}
	*q = '\0';
	return out;
}

static bool has_option(const struct fuse_args *pass, const char *prefix)
{
	size_t len = strlen(prefix);

	for (int i = 0; i < pass->argc; i++)
		if (strncmp(pass->argv[i] + 2, prefix, len) == 0)
			return true;
	return false;
}

/* argv for libfuse: our fixed mount options first, the user's after. */
static int build_fuse_args(struct lsq_mount_options *opt,
			   const struct fuse_args *pass)
{
	char *path = NULL, *esc = NULL, *fixed = NULL;
	int err = LSQ_ERR_NOMEM;
	int n;

	if (fuse_opt_add_arg(&opt->fuse_args, "sqfs-lazy-mount"))
		goto out;

	/* The absolute path tells which image is mounted wherever
	 * /proc/mounts is read from. */
	/* URLs: without their credentials, /proc/mounts is world-readable */
	path = lsq_source_is_url(opt->image) ? lsq_url_redact(opt->image)
					     : realpath(opt->image, NULL);
	esc = escape_opt(path ? path : opt->image);
	if (!esc)
		goto out;
	n = asprintf(&fixed, "-oro,%s,%s%s%s%s%s",
		     opt->dev ? "dev" : "nodev",
		     opt->suid ? "suid" : "nosuid",
		     has_option(pass, "fsname=") ? "" : ",fsname=",
		     has_option(pass, "fsname=") ? "" : esc,
		     has_option(pass, "subtype=") ? "" : ",subtype=sqfs-lazy",
		     /* the kernel applies the image's modes, as for its own
		      * squashfs (and other users cannot bypass them) */
		     has_option(pass, "default_permissions")
			     ? "" : ",default_permissions");
	if (n < 0) {
		fixed = NULL;
		goto out;
	}
	if (fuse_opt_add_arg(&opt->fuse_args, fixed))
		goto out;
	for (int i = 0; i < pass->argc; i++)
		if (fuse_opt_add_arg(&opt->fuse_args, pass->argv[i]))
			goto out;
	if (opt->debug && fuse_opt_add_arg(&opt->fuse_args, "-d"))
		goto out;
	err = LSQ_OK;
out:
	free(fixed);
	free(esc);
	free(path);
	return err;
}

/* Absolute, since the daemon moves to "/" and must still find it to
 * unmount; and a directory, as the image's root is one. */
static int check_mountpoint(const char *arg, char **out)
{
	struct stat st;
	char *path;

	path = realpath(arg, NULL);
	if (!path || stat(path, &st) != 0) {
		lsq_err_log("bad mount point '%s': %s", arg, strerror(errno));
		free(path);
		return LSQ_ERR_INVALID;
	}
	if (!S_ISDIR(st.st_mode)) {
		lsq_err_log("bad mount point '%s': %s", arg, strerror(ENOTDIR));
		free(path);
		return LSQ_ERR_INVALID;
	}
	*out = path;
	return LSQ_OK;
}

static int usage_error(const char *what, const char *arg)
{
	if (arg)
		lsq_err_log("%s '%s' (see --help)", what, arg);
	else
		lsq_err_log("%s (see --help)", what);
	return LSQ_ERR_INVALID;
}

int lsq_mount_options_parse(struct lsq_mount_options *opt, int argc,
			    char **argv)
{
	struct fuse_args pass = FUSE_ARGS_INIT(0, NULL);
	const char *pos[2];
	bool only_operands = false;
	int npos = 0;
	int err = LSQ_OK;

	set_defaults(opt);

	for (int i = 1; i < argc && !err; i++) {
		const char *a = argv[i];

		if (only_operands || a[0] != '-' || a[1] == '\0') {
			if (npos == 2) {
				err = usage_error("unexpected argument", a);
				break;
			}
			pos[npos++] = a;
		} else if (strcmp(a, "--") == 0) {
			only_operands = true;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			opt->mode = LSQ_MODE_HELP;
		} else if (strcmp(a, "-V") == 0 ||
			   strcmp(a, "--version") == 0) {
			if (opt->mode != LSQ_MODE_HELP)
				opt->mode = LSQ_MODE_VERSION;
		} else if (strcmp(a, "--stats") == 0) {
			if (opt->mode == LSQ_MODE_MOUNT)
				opt->mode = LSQ_MODE_STATS;
		} else if (strcmp(a, "--status") == 0) {
			if (opt->mode == LSQ_MODE_MOUNT)
				opt->mode = LSQ_MODE_STATUS;
		} else if (strcmp(a, "--takeover") == 0) {
			if (opt->mode == LSQ_MODE_MOUNT)
				opt->mode = LSQ_MODE_TAKEOVER;
		} else if (strcmp(a, "-f") == 0) {
			opt->foreground = true;
		} else if (strcmp(a, "-d") == 0 || strcmp(a, "--debug") == 0) {
			opt->debug = true;
		} else if (strcmp(a, "-s") == 0) {
			opt->single_thread = true;
		} else if (strcmp(a, "-o") == 0) {
			if (i + 1 == argc)
				err = usage_error("-o needs an argument", NULL);
			else
				err = parse_o(opt, argv[++i], &pass);
		} else if (strncmp(a, "-o", 2) == 0) {
			err = parse_o(opt, a + 2, &pass);
		} else {
			err = usage_error("unknown option", a);
		}
	}
	if (err)
		goto out;
	if (opt->debug)
		opt->foreground = true;
	/* every message from here on obeys -o loglevel= (or -d) */
	lsq_log_set_level(opt->debug ? LSQ_LOG_DEBUG : opt->log_level);
	if (opt->ignored_rw)
		lsq_warn("ignoring -o rw: the mount is always read-only");

	switch (opt->mode) {
	case LSQ_MODE_HELP:
	case LSQ_MODE_VERSION:
		break;
	case LSQ_MODE_STATS:
	case LSQ_MODE_STATUS:
	case LSQ_MODE_TAKEOVER:
		if (npos != 1) {
			err = usage_error(opt->mode == LSQ_MODE_STATS ?
					  "--stats takes exactly one MOUNTPOINT" :
					  opt->mode == LSQ_MODE_STATUS ?
					  "--status takes exactly one MOUNTPOINT" :
					  "--takeover takes exactly one MOUNTPOINT",
					  NULL);
			break;
		}
		opt->mountpoint = strdup(pos[0]);
		if (!opt->mountpoint)
			err = LSQ_ERR_NOMEM;
		break;
	case LSQ_MODE_MOUNT:
		if (npos != 2) {
			err = usage_error(npos ? "missing MOUNTPOINT"
					       : "missing IMAGE and MOUNTPOINT",
					  NULL);
			break;
		}
		opt->image = pos[0];
		if (opt->manifest && opt->verify == 0) {
			err = usage_error("-o manifest needs verification (-o verify=off given)",
					  NULL);
			break;
		}
		if (opt->cache_opts.offline_ok && !opt->cache_opts.dir) {
			err = usage_error("-o offline_ok needs -o cache_dir",
					  NULL);
			break;
		}
		err = check_mountpoint(pos[1], &opt->mountpoint);
		if (err)
			break;
		err = build_fuse_args(opt, &pass);
		break;
	}
out:
	fuse_opt_free_args(&pass);
	return err;
}

void lsq_mount_options_fini(struct lsq_mount_options *opt)
{
	fuse_opt_free_args(&opt->fuse_args);
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (mount_options[i].kind == OPT_TEXT) {
			char **p = field_of(opt, &mount_options[i]);

			free(*p);
			*p = NULL;
		}
	for (unsigned i = 0; i < opt->http_opts.nmirrors; i++)
		free((char *)opt->http_opts.mirrors[i]);
	opt->http_opts.nmirrors = 0;
	for (unsigned i = 0; i < opt->nverify_keys; i++)
		free(opt->verify_keys[i]);
	opt->nverify_keys = 0;
	free(opt->mountpoint);
	opt->mountpoint = NULL;
}

struct lsq_cache_options
lsq_mount_cache_options(const struct lsq_mount_options *opt, bool remote)
{
	struct lsq_cache_options c = opt->cache_opts;

	if (!opt->block_cache_given)
		c.block_cache_bytes = remote ? LSQ_DEFAULT_REMOTE_BLOCK_CACHE : 0;
	c.pin_metadata = opt->prefetch_metadata < 0 ? remote
						    : opt->prefetch_metadata;
	return c;
}


/* ---- --help, from the table ---- */

static const struct {
	const char *title, *footer;
} option_groups[GROUP_COUNT] = {
	[GROUP_MOUNT] = { "Mount options:", NULL },
	[GROUP_HTTP] = { "Options for http:// and https:// images "
			 "(docs/http-source.md):",
			 "Proxies come from the usual http_proxy, https_proxy "
			 "and no_proxy environment variables." },
	[GROUP_S3] = { "Options for s3://BUCKET/KEY images (docs/s3.md):",
		       NULL },
	[GROUP_SIGNED] = { "Signed images (docs/manifest.md):", NULL },
	[GROUP_SERVICE] = { "Options for running under mount(8), fstab and "
			    "systemd (docs/systemd.md):",
			    "With $NOTIFY_SOCKET set (systemd Type=notify), "
			    "READY=1 is sent once the mount answers, "
			    "STOPPING=1 when it ends." },
	[GROUP_FUSE] = { "Options handed to libfuse (see mount.fuse3(8)):",
			 "and other generic options such as noexec, noatime, "
			 "context=..." },
};

#define HELP_COLUMN 26
#define HELP_WIDTH 79

/* text as words from column col (where the cursor is) up to HELP_WIDTH,
 * lines after the first starting at column indent. */
static void print_wrapped(FILE *out, const char *text, int col, int indent)
{
	const char *p = text;
	bool first = true;

	while (*p) {
		size_t word = strcspn(p, " ");

		if (!first && col + 1 + (int)word > HELP_WIDTH) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (!first) {
			fputc(' ', out);
			col++;
		}
		first = false;
		fwrite(p, 1, word, out);
		col += (int)word;
		p += word;
		p += strspn(p, " ");
	}
	fputc('\n', out);
}

/* How a value is written after "name=" in the left column. */
static const char *value_syntax(const struct mount_option *o)
{
	switch (o->kind) {
	case OPT_SWITCH: return "[=on|off]";
	case OPT_SIZE: return "=SIZE";
	case OPT_COUNT: return "=N";
	case OPT_SECONDS: return "=SECONDS";
	case OPT_TEXT: return "=PATH";
	default: return "";
	}
}

static void format_default(const struct mount_option *o,
			   const struct lsq_mount_options *d, char *buf,
			   size_t size)
{
	const void *p = (const char *)d + o->field;

	if (o->dflt) {
		snprintf(buf, size, "%s", o->dflt);
	} else if (o->show_default) {
		o->show_default(buf, size);
	} else if (o->kind == OPT_SWITCH) {
		snprintf(buf, size, "%s", load_int(p, o->size) ? "on" : "off");
	} else if (o->kind == OPT_SIZE) {
		format_size(buf, size, load_int(p, o->size));
	} else if (o->kind == OPT_COUNT) {
		uint64_t v = load_int(p, o->size);
		size_t nwords = 0;

		while (o->choices && o->choices[nwords])
			nwords++;
		if (v < nwords)
			snprintf(buf, size, "%s", o->choices[v]);
		else
			snprintf(buf, size, "%" PRIu64, v);
	} else if (o->kind == OPT_SECONDS) {
		snprintf(buf, size, "%g", *(const double *)p);
	} else {
		buf[0] = '\0';
	}
}

static void print_option(FILE *out, const struct mount_option *o,
			 const struct lsq_mount_options *d)
{
	char left[128], dflt[160], *text;
	const char *last_line;
	int col;

	if (o->shown)
		snprintf(left, sizeof(left), "%s", o->shown);
	else
		snprintf(left, sizeof(left), "%s%s", o->name, value_syntax(o));
	format_default(o, d, dflt, sizeof(dflt));
	if (o->kind == OPT_COUNT && o->max)
		text = NULL, col = asprintf(&text, "%s (%" PRIu64 "..%" PRIu64
					    "%s%s)", o->help, o->min, o->max,
					    dflt[0] ? ", default " : "", dflt);
	else if (dflt[0])
		col = asprintf(&text, "%s (default %s)", o->help, dflt);
	else
		col = asprintf(&text, "%s", o->help);
	if (col < 0)
		return;
	fprintf(out, "  %s", left);
	last_line = strrchr(left, '\n');
	col = (int)strlen(last_line ? last_line + 1 : left) +
	      (last_line ? 0 : 2);
	if (col + 2 <= HELP_COLUMN)
		fprintf(out, "%*s", HELP_COLUMN - col, "");
	else
		fputs("  ", out);
	print_wrapped(out, text, col + 2 <= HELP_COLUMN ? HELP_COLUMN
			: col + 2, HELP_COLUMN);
	free(text);
}

void lsq_mount_options_help(FILE *out)
{
	struct lsq_mount_options d;

	set_defaults(&d);
	fputs(
"Usage: sqfs-lazy-mount [OPTIONS] IMAGE MOUNTPOINT\n"
"       sqfs-lazy-mount --stats MOUNTPOINT\n"
"       sqfs-lazy-mount --status MOUNTPOINT\n"
"       sqfs-lazy-mount --takeover MOUNTPOINT\n"
"\n"
"Mount the SquashFS 4.0 image IMAGE read-only on MOUNTPOINT with FUSE.\n"
"IMAGE is a file or an http://, https://, file:// or s3:// URL.\n"
"Without -f the command returns once the mount is usable.\n"
"\n"
"Options:\n"
"  -f                      stay in the foreground, log to stderr\n"
"  -d, --debug             log every FUSE request; implies -f\n"
"  -s                      single-threaded request loop\n"
"  -o OPT[,OPT...]         mount options (below); may be repeated\n"
"  --stats MOUNTPOINT      print the counters of a running mount\n"
"  --status MOUNTPOINT     a summary of a running mount for a person\n"
"  --takeover MOUNTPOINT   replace the daemon of a mount (takeover on, as by\n"
"                          default) with this binary, without unmounting\n"
"  -h, --help              print this help and exit\n"
"  -V, --version           print the version and compressors and exit\n",
	      out);
	for (int g = 0; g < GROUP_COUNT; g++) {
		fprintf(out, "\n%s\n", option_groups[g].title);
		for (size_t i = 0; i < N_OPTIONS; i++) {
			const struct mount_option *o = &mount_options[i];

			if (o->group != (enum option_group)g ||
			    o->kind == OPT_RETIRED ||
			    (o->shown && strcmp(o->shown, "-") == 0))
				continue;
			print_option(out, o, &d);
		}
		if (option_groups[g].footer) {
			fputs("  ", out);
			print_wrapped(out, option_groups[g].footer, 2, 4);
		}
	}
	fputs(
"\n"
"SIZE is decimal or 0x hex with an optional K, M, G or T suffix (powers of\n"
"1024). SIGUSR1 logs the counters; SIGTERM, SIGINT or fusermount3 -u\n"
"unmount.\n", out);
}
