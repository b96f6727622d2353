/* SPDX-License-Identifier: MIT */
#include "fuse/options.h"

#include "lsq_config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t n = (cpus > 0 ? (uint64_t)cpus : 1) * LSQ_THREADS_PER_CPU;

	if (n < 8)
		n = 8;
	return n > LSQ_MAX_THREADS ? LSQ_MAX_THREADS : (unsigned)n;
}

static int bad_value(const char *name, const char *value, const char *expect)
{
	lsq_err_log("invalid value '%s' for -o %s (expected %s)", value, name,
		    expect);
	return LSQ_ERR_INVALID;
}

/* A switch: "name" or "name=on|1" turns it on, "name=off|0" off. */
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

/* An on/off option whose default depends on other things: 1 or 0 once
 * given, the caller's -1 until then. */
static int parse_on_off_given(const char *name, const char *value, int *out)
{
	bool on;
	int err = parse_on_off(name, value, &on);

	if (!err)
		*out = on ? 1 : 0;
	return err;
}

static int parse_uint(const char *name, const char *value, uint64_t min,
		      uint64_t max, uint64_t *out)
{
	char expect[64];
	uint64_t v;

	snprintf(expect, sizeof(expect), "an integer from %" PRIu64
		 " to %" PRIu64, min, max);
	/* counts take no K/M/G: "threads=1K" is more likely a typo */
	if (lsq_parse_size(value, &v) != LSQ_OK || strpbrk(value, "KkMmGgTt") ||
	    v < min || v > max)
		return bad_value(name, value, expect);
	*out = v;
	return LSQ_OK;
}

static int parse_seconds(const char *name, const char *value, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(value, &end);
	if (value[0] == '\0' || *end != '\0' || errno || !isfinite(v) ||
	    v < 0 || value[0] == '-' || value[0] == '+' || value[0] == ' ')
		return bad_value(name, value, "seconds >= 0");
	*out = v;
	return LSQ_OK;
}

static int parse_bytes(const char *name, const char *value, uint64_t *out)
{
	if (lsq_parse_size(value, out) != LSQ_OK)
		return bad_value(name, value, "a size such as 4096, 0x1000 or 64M");
	return LSQ_OK;
}

static int parse_decomp(const char *value, unsigned *out)
{
	uint64_t n;

	if (strcmp(value, "single") == 0) {
		*out = 1;
		return LSQ_OK;
	}
	if (strcmp(value, "percpu") == 0) {
		*out = 0;
		return LSQ_OK;
	}
	if (lsq_parse_size(value, &n) != LSQ_OK || strpbrk(value, "KkMmGgTt") ||
	    n < 1 || n > LSQ_MAX_DECOMP_CONTEXTS)
		return bad_value("decomp", value, "single, percpu or a count "
				 "from 1 to 4096");
	*out = (unsigned)n;
	return LSQ_OK;
}

/* Options libfuse also knows, which we must see too; they are passed on. */
static int note_fuse_option(struct lsq_mount_options *opt, const char *name,
			    const char *value)
{
	uint64_t v;
	int err;

	if (strcmp(name, "max_read") == 0 && value) {
		err = parse_uint(name, value, 1, UINT32_MAX, &v);
		if (err)
			return err;
		opt->max_read = (unsigned)v;
	} else if (strcmp(name, "allow_other") == 0) {
		opt->allow_other = true;
	}
	return LSQ_OK;
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

/* Options for mount(8), fstab and systemd rather than for us; they reach
 * us when the daemon is started by a mount helper or by hand with an fstab
 * line's options. Also loglevel=, which concerns how the daemon runs.
 * Returns true when name was one of them, *err telling if it was valid. */
static bool parse_service_option(struct lsq_mount_options *opt,
				 const char *name, const char *value, int *err)
{
	static const char *const mount_only[] = {
		"_netdev", "nofail", "noauto", "auto", "defaults", "user",
		"nouser", "users", "owner", "group", "comment",
	};
	static const char *const levels[] = {
		"error", "warning", "info", "debug",
	};

	*err = LSQ_OK;
	if (strncmp(name, "x-", 2) == 0)
		return true;  /* x-systemd.*, x-mount.* and other userspace notes */
	for (size_t i = 0; i < sizeof(mount_only) / sizeof(mount_only[0]); i++)
		if (strcmp(name, mount_only[i]) == 0)
			return true;
	if (strcmp(name, "loglevel") != 0)
		return false;
	for (size_t i = 0; value && i < sizeof(levels) / sizeof(levels[0]); i++)
		if (strcmp(value, levels[i]) == 0) {
			opt->log_level = (enum lsq_log_level)i;
			return true;
		}
	*err = bad_value(name, value ? value : "",
			 "error, warning, info or debug");
	return true;
}

/* One -o item, "name" or "name=value". Ours are consumed; the rest is
 * queued for libfuse in pass. */
static int parse_item(struct lsq_mount_options *opt, char *item,
		      struct fuse_args *pass)
{
	char *value = strchr(item, '=');
	const char *name = item;
	uint64_t v;
	int err;

	if (value)
		*value++ = '\0';
	if (parse_service_option(opt, name, value, &err))
		return err;

#define IS(n) (strcmp(name, n) == 0)
#define NEED_VALUE()							\
	do {								\
		if (!value) {						\
			lsq_err_log("-o %s needs a value", name);	\
			return LSQ_ERR_INVALID;				\
		}							\
	} while (0)
#define NO_VALUE()							\
	do {								\
		if (value) {						\
			lsq_err_log("-o %s takes no value", name);	\
			return LSQ_ERR_INVALID;				\
		}							\
	} while (0)

	if (IS("offset")) {
		NEED_VALUE();
		return parse_bytes(name, value, &opt->offset);
	} else if (IS("threads")) {
		NEED_VALUE();
		err = parse_uint(name, value, 1, LSQ_MAX_THREADS, &v);
		if (!err)
			opt->threads = (unsigned)v;
		return err;
	} else if (IS("busy_poll") || IS("idle_poll") || IS("same_cpu")) {
		/* tuned request loops that are gone (docs/decisions.md); an
		 * fstab line that names them must still mount */
		lsq_warn("-o %s has no effect any more", name);
		return LSQ_OK;
	} else if (IS("io_uring")) {
		return parse_on_off_given(name, value, &opt->io_uring);
	} else if (IS("decomp")) {
		NEED_VALUE();
		return parse_decomp(value, &opt->image_opts.decomp_contexts);
	} else if (IS("metadata_cache")) {
		NEED_VALUE();
		return parse_bytes(name, value,
				   &opt->image_opts.metadata_cache_bytes);
	} else if (IS("data_cache")) {
		NEED_VALUE();
		return parse_bytes(name, value,
				   &opt->image_opts.data_cache_bytes);
	} else if (IS("fragment_cache")) {
		NEED_VALUE();
		err = parse_uint(name, value, 1, UINT32_MAX, &v);
		if (!err)
			opt->image_opts.fragment_cache_blocks = (uint32_t)v;
		return err;
	} else if (IS("entry_timeout")) {
		NEED_VALUE();
		return parse_seconds(name, value, &opt->entry_timeout);
	} else if (IS("attr_timeout")) {
		NEED_VALUE();
		return parse_seconds(name, value, &opt->attr_timeout);
	} else if (IS("max_connections")) {
		NEED_VALUE();
		err = parse_uint(name, value, 1, LSQ_MAX_HTTP_CONNECTIONS, &v);
		if (!err)
			opt->http_opts.max_connections = (unsigned)v;
		return err;
	} else if (IS("retries")) {
		NEED_VALUE();
		err = parse_uint(name, value, 0, 100, &v);
		if (!err)
			opt->http_opts.retries = (unsigned)v;
		return err;
	} else if (IS("connect_timeout") || IS("timeout")) {
		double t;

		NEED_VALUE();
		err = parse_seconds(name, value, &t);
		if (!err && t <= 0)
			err = bad_value(name, value, "seconds > 0");
		if (!err && IS("timeout"))
			opt->http_opts.timeout = t;
		else if (!err)
			opt->http_opts.connect_timeout = t;
		return err;
	} else if (IS("readahead")) {
		NEED_VALUE();
		err = parse_bytes(name, value, &opt->http_opts.readahead);
		if (!err && opt->http_opts.readahead > LSQ_MAX_HTTP_READAHEAD)
			err = bad_value(name, value, "a size up to 64M");
		return err;
	} else if (IS("header_file") || IS("cacert") ||
		   IS("credentials_file") || IS("aws_profile") ||
		   IS("region") || IS("endpoint") || IS("url_command")) {
		const char **slot = IS("cacert") ? &opt->http_opts.cacert
			: IS("credentials_file") ? &opt->http_opts.credentials_file
			: IS("aws_profile") ? &opt->http_opts.aws_profile
			: IS("region") ? &opt->http_opts.region
			: IS("endpoint") ? &opt->http_opts.endpoint
			: IS("url_command") ? &opt->http_opts.url_command
			: &opt->http_opts.header_file;
		char *copy;

		NEED_VALUE();
		if (value[0] == '\0')
			return bad_value(name, value, IS("url_command")
					 ? "a command" : "a file name");
		copy = strdup(value);
		if (!copy)
			return LSQ_ERR_NOMEM;
		free((char *)*slot);
		*slot = copy;
		return LSQ_OK;
	} else if (IS("mirror")) {
		char *copy;

		NEED_VALUE();
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
	} else if (IS("insecure")) {
		NO_VALUE();
		opt->http_opts.insecure = 1;
		return LSQ_OK;
	} else if (IS("block_cache")) {
		NEED_VALUE();
		opt->block_cache_given = true;
		return parse_bytes(name, value,
				   &opt->cache_opts.block_cache_bytes);
	} else if (IS("noprefetch_metadata")) {
		NO_VALUE();
		opt->prefetch_metadata = 0;
		return LSQ_OK;
	} else if (IS("prefetch_metadata")) {
		return parse_on_off_given(name, value, &opt->prefetch_metadata);
	} else if (IS("learn")) {
		int on = 1;
		int ret = parse_on_off_given(name, value, &on);

		opt->learn = on != 0;
		return ret;
	} else if (IS("background")) {
		char *end;
		double f;

		NEED_VALUE();
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
			return bad_value(name, value,
					 "off, auto or a fraction 0..1");
		opt->background = f;
		return LSQ_OK;
	} else if (IS("record") || IS("prefetch") || IS("metrics")) {
		char **slot = IS("record")     ? &opt->record :
			      IS("metrics")    ? &opt->metrics :
						 &opt->prefetch;
		char *copy;

		NEED_VALUE();
		if (value[0] == '\0')
			return bad_value(name, value, IS("record") ?
					 "a file name" : IS("metrics") ?
					 "HOST:PORT or unix:PATH" :
					 "auto, off, a file name or a URL");
		copy = strdup(value);
		if (!copy)
			return LSQ_ERR_NOMEM;
		free(*slot);
		*slot = copy;
		return LSQ_OK;
	} else if (IS("cache_dir")) {
		char *copy;

		NEED_VALUE();
		if (value[0] == '\0')
			return bad_value(name, value, "a directory");
		copy = strdup(value);
		if (!copy)
			return LSQ_ERR_NOMEM;
		free((char *)opt->cache_opts.dir);
		opt->cache_opts.dir = copy;
		return LSQ_OK;
	} else if (IS("cache_size")) {
		NEED_VALUE();
		return parse_bytes(name, value, &opt->cache_opts.dir_bytes);
	} else if (IS("verify")) {
		char *copy;

		NEED_VALUE();
		if (strcmp(value, "auto") == 0 || strcmp(value, "off") == 0) {
			if (opt->nverify_keys)
				return bad_value(name, value,
						 "keys, or one of auto and off");
			opt->verify = value[1] == 'u' ? -1 : 0;
			return LSQ_OK;
		}
		if (value[0] == '\0' || opt->verify == 0)
			return bad_value(name, value,
					 "keys, or one of auto and off");
		if (opt->nverify_keys == LSQ_MAX_VERIFY_KEYS) {
			lsq_err_log("at most %d -o verify= keys",
				    LSQ_MAX_VERIFY_KEYS);
			return LSQ_ERR_INVALID;
		}
		copy = strdup(value);
		if (!copy)
			return LSQ_ERR_NOMEM;
		opt->verify_keys[opt->nverify_keys++] = copy;
		opt->verify = 1;
		return LSQ_OK;
	} else if (IS("manifest")) {
		NEED_VALUE();
		if (value[0] == '\0')
			return bad_value(name, value, "a file name");
		free(opt->manifest);
		opt->manifest = strdup(value);
		return opt->manifest ? LSQ_OK : LSQ_ERR_NOMEM;
	} else if (IS("offline_ok")) {
		NO_VALUE();
		opt->cache_opts.offline_ok = 1;
		return LSQ_OK;
	} else if (IS("dev") || IS("nodev")) {
		NO_VALUE();
		opt->dev = IS("dev");
		return LSQ_OK;
	} else if (IS("suid") || IS("nosuid")) {
		NO_VALUE();
		opt->suid = IS("suid");
		return LSQ_OK;
	} else if (IS("ro")) {
		NO_VALUE();
		return LSQ_OK;
	} else if (IS("rw")) {
		/* mount(8) may add rw on its own; refusing would break fstab.
		 * Warned about once loglevel= is known. */
		opt->ignored_rw = true;
		return LSQ_OK;
	} else if (IS("debug")) {
		NO_VALUE();
		opt->debug = true;
		opt->foreground = true;
		return LSQ_OK;
	}
#undef IS
#undef NEED_VALUE
#undef NO_VALUE

	err = note_fuse_option(opt, name, value);
	if (err)
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

	memset(opt, 0, sizeof(*opt));
	opt->mode = LSQ_MODE_MOUNT;
	opt->threads = lsq_default_threads();
	opt->io_uring = -1;
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
		} else if (strcmp(a, "-f") == 0) {
			opt->foreground = true;
		} else if (strcmp(a, "-d") == 0 || strcmp(a, "--debug") == 0) {
			opt->debug = true;
			opt->foreground = true;
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
		if (npos != 1) {
			err = usage_error(opt->mode == LSQ_MODE_STATS ?
					  "--stats takes exactly one MOUNTPOINT" :
					  "--status takes exactly one MOUNTPOINT",
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
	free((char *)opt->http_opts.header_file);
	free((char *)opt->http_opts.cacert);
	free((char *)opt->http_opts.credentials_file);
	free((char *)opt->http_opts.aws_profile);
	free((char *)opt->http_opts.region);
	free((char *)opt->http_opts.endpoint);
	free((char *)opt->http_opts.url_command);
	for (unsigned i = 0; i < opt->http_opts.nmirrors; i++)
		free((char *)opt->http_opts.mirrors[i]);
	memset(&opt->http_opts, 0, sizeof(opt->http_opts));
	free((char *)opt->cache_opts.dir);
	opt->cache_opts.dir = NULL;
	free(opt->record);
	free(opt->prefetch);
	free(opt->metrics);
	opt->record = opt->prefetch = opt->metrics = NULL;
	for (unsigned i = 0; i < opt->nverify_keys; i++)
		free(opt->verify_keys[i]);
	opt->nverify_keys = 0;
	free(opt->manifest);
	opt->manifest = NULL;
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

void lsq_mount_options_help(FILE *out)
{
	struct lsq_image_options d;
	struct lsq_http_options h;
	char meta[32], data[32], decomp[32], ra[32], bc[32], csize[32];

	lsq_image_options_default(&d);
	lsq_http_options_default(&h);
	format_size(ra, sizeof(ra), h.readahead);
	format_size(bc, sizeof(bc), LSQ_DEFAULT_REMOTE_BLOCK_CACHE);
	format_size(csize, sizeof(csize), LSQ_DEFAULT_CACHE_SIZE);
	format_size(meta, sizeof(meta), d.metadata_cache_bytes);
	format_size(data, sizeof(data), d.data_cache_bytes);
	if (d.decomp_contexts == 0)
		snprintf(decomp, sizeof(decomp), "percpu");
	else if (d.decomp_contexts == 1)
		snprintf(decomp, sizeof(decomp), "single");
	else
		snprintf(decomp, sizeof(decomp), "%u", d.decomp_contexts);

	fprintf(out,
"Usage: sqfs-lazy-mount [OPTIONS] IMAGE MOUNTPOINT\n"
"       sqfs-lazy-mount --stats MOUNTPOINT\n"
"       sqfs-lazy-mount --status MOUNTPOINT\n"
"\n"
"Mount the SquashFS 4.0 image IMAGE read-only on MOUNTPOINT with FUSE.\n"
"IMAGE is a file or an http://, https:// or file:// URL.\n"
"Without -f the command returns once the mount is usable.\n"
"\n"
"Options:\n"
"  -f                      stay in the foreground, log to stderr\n"
"  -d, --debug             log every FUSE request; implies -f\n"
"  -s                      single-threaded request loop\n"
"  -o OPT[,OPT...]         mount options (below); may be repeated\n"
"  --stats MOUNTPOINT      print the counters of a running mount\n"
"  --status MOUNTPOINT     a summary of a running mount for a person\n"
"  -h, --help              print this help and exit\n"
"  -V, --version           print the version and compressors and exit\n"
"\n"
"Mount options:\n"
"  offset=SIZE             the image starts at byte SIZE of IMAGE (default 0)\n"
"  threads=N               at most N request threads, 1..%u (default %u per\n"
"                          CPU, at least 8: here %u)\n"
"  io_uring[=on|off]       take requests over io_uring, each answered on the\n"
"                          CPU of its caller, where the kernel offers it (fuse\n"
"                          module parameter enable_uring set to 1): faster\n"
"                          metadata walks (default on; /dev/fuse elsewhere)\n"
"  decomp=single|percpu|N  decompression contexts (default %s)\n"
"  metadata_cache=SIZE     decompressed metadata cache (default %s)\n"
"  data_cache=SIZE         decompressed data block cache (default %s)\n"
"  fragment_cache=N        fragment blocks kept (default %" PRIu32 ")\n"
"  block_cache=SIZE        RAM cache of the compressed bytes read (default\n"
"                          %s for URLs, 0 for files: the page cache has them)\n"
"  prefetch_metadata[=on|off]  read all metadata in one go at mount and keep\n"
"                          it (default on for URLs, off for files)\n"
"  cache_dir=DIR           persistent cache of fetched bytes, reused by later\n"
"                          mounts of the same image; a verified image's blocks\n"
"                          are kept by digest, shared by every image mounted\n"
"                          with DIR (default none)\n"
"  cache_size=SIZE         bound of the cache_dir cache per image, and of the\n"
"                          shared block store per daemon (default %s)\n"
"  offline_ok              if the server cannot be reached at mount, mount\n"
"                          anyway from what cache_dir recorded and holds\n"
"                          (default off)\n"
"  record=PATH             write a startup profile to PATH when the mount\n"
"                          ends: the files read, in order (docs/prefetch.md)\n"
"  prefetch=auto|off|PATH|URL  fetch the blocks a startup profile lists, in\n"
"                          the background (default auto: the one learned in\n"
"                          cache_dir, else the one stored in the image by\n"
"                          sqfs-lazy-pack --order, else URL.profile)\n"
"  learn[=on|off]          with cache_dir, note what each mount's start reads\n"
"                          and prefetch it at the next mount of the same\n"
"                          URL or file, new versions included (default on)\n"
"  background=off|auto|FRACTION  fetch the image (or FRACTION of its bytes)\n"
"                          over spare bandwidth, behind the reads, into\n"
"                          cache_dir or else half of block_cache (default\n"
"                          auto: URLs; off for metered links)\n"
"  metrics=HOST:PORT|unix:PATH  serve the counters to Prometheus at\n"
"                          GET /metrics (default off; put it on localhost or\n"
"                          behind your scraper's network: docs/metrics.md)\n"
"  entry_timeout=SECONDS   kernel name cache timeout (default %.0f)\n"
"  attr_timeout=SECONDS    kernel attribute cache timeout (default %.0f)\n"
"  dev, nodev              honour device files (default nodev)\n"
"  suid, nosuid            honour set-user/group-id bits (default nosuid)\n"
"  ro                      accepted; the mount is always read-only\n"
"  debug                   same as -d\n",
		LSQ_MAX_THREADS, LSQ_THREADS_PER_CPU, lsq_default_threads(),
		decomp, meta, data,
		d.fragment_cache_blocks, bc, csize, LSQ_DEFAULT_TIMEOUT,
		LSQ_DEFAULT_TIMEOUT);
	/* two parts: C99 promises string literals of 4095 bytes only */
	fprintf(out,
"\n"
"Options for http:// and https:// images (docs/http-source.md):\n"
"  max_connections=N       parallel connections/requests, 1..%u (default %u)\n"
"  retries=N               retries of a failed request, 0..100 (default %u)\n"
"  connect_timeout=SECONDS connection timeout (default %.0f)\n"
"  timeout=SECONDS         total time of one request (default %.0f)\n"
"  readahead=SIZE          fetched ahead of sequential reads, 0 disables,\n"
"                          up to 64M (default %s)\n"
"  header_file=PATH        extra request headers, 'Name: value' per line;\n"
"                          must not be readable by others\n"
"  cacert=PATH             CA certificates for https (default: the system's)\n"
"  insecure                do not verify TLS certificates (default off)\n"
"  mirror=URL              another copy of the same image, for failover;\n"
"                          may be repeated (up to %d)\n"
"  url_command=CMD         a program printing a fresh URL of the image (a\n"
"                          signed URL); run at mount and when the URL is\n"
"                          refused or about to expire; words split at\n"
"                          spaces, no shell; IMAGE then only names it\n"
"  Proxies come from the usual http_proxy, https_proxy and no_proxy\n"
"  environment variables.\n"
"\n"
"Options for s3://BUCKET/KEY images (docs/s3.md):\n"
"  aws_profile=NAME        profile of the AWS shared files (else AWS_PROFILE,\n"
"                          else default)\n"
"  credentials_file=PATH   take credentials only from this file; must not\n"
"                          be readable by group or others\n"
"  region=NAME             signing region (else AWS_REGION, else us-east-1)\n"
"  endpoint=URL            another S3 service, path-style (default\n"
"                          https://s3.REGION.amazonaws.com)\n"
"\n"
"Signed images (docs/manifest.md):\n"
"  verify=PUBKEY.pem       check every block against the image's signed\n"
"                          manifest; refuse the mount without a good one;\n"
"                          may be repeated (any of the keys)\n"
"  verify=auto|off         auto (default): verify when the image has a\n"
"                          manifest and " LSQ_KEYS_DIR " holds keys\n"
"  manifest=PATH           a detached manifest (default: the image's own)\n"
"\n"
"Options handed to libfuse (see mount.fuse3(8)):\n"
"  allow_other             let all users in (default off)\n"
"  allow_root              let root in as well as the mounting user\n"
"  default_permissions     the kernel checks the image's mode bits (always on)\n"
"  auto_unmount            unmount when the daemon dies\n"
"  max_read=N              largest read request in bytes\n"
"  max_readahead=N         kernel readahead in bytes (default: the kernel's)\n"
"  max_background=N        queued background requests (default: the kernel's)\n"
"  congestion_threshold=N  background requests before the kernel backs off\n"
"  fsname=NAME             source in /proc/mounts (default: the image path)\n"
"  subtype=NAME            type fuse.NAME (default sqfs-lazy)\n"
"  and other generic options such as noexec, noatime, context=...\n"
"\n"
"SIZE is decimal or 0x hex with an optional K, M, G or T suffix (powers of\n"
"1024). SIGUSR1 logs the counters; SIGTERM, SIGINT or fusermount3 -u\n"
"unmount.\n",
		LSQ_MAX_HTTP_CONNECTIONS,
		h.max_connections, h.retries, h.connect_timeout, h.timeout,
		ra, LSQ_HTTP_MAX_MIRRORS);
}
