/* SPDX-License-Identifier: MIT */
/*
 * daemon.c - start-up and shut-down of sqfs-lazy-mount.
 *
 * The order is what scripts rely on:
 *  1. options, checked completely (ours, then libfuse's through
 *     fuse_session_new(), which mounts nothing);
 *  2. the image, opened and validated, so a bad one fails with one line
 *     and nothing mounted;
 *  3. signal handlers, then the mount;
 *  4. without -f, fuse_daemonize(): its parent exits 0 only once the child
 *     is detached, and the mount already exists by then, so a script can
 *     use it as soon as the command returns (requests wait in the kernel
 *     until the loop picks them up);
 *  5. the request loop, until SIGTERM/SIGINT/SIGHUP or an unmount; under a
 *     service manager ($NOTIFY_SOCKET) a thread tells it READY=1 once the
 *     mount point answers a stat() through the loop, and STOPPING=1 is
 *     sent when the loop ends;
 *  6. unmount, remove the handlers, destroy the session, close the image.
 */
#include "daemon/daemon.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <syslog.h>

#include "codec/codec.h"
#include "common/log.h"
#include "common/sd_notify.h"
#include "common/url.h"
#include "daemon/background_policy.h"
#include "daemon/conn_guard.h"
#include "daemon/service_keeper.h"
#include "daemon/metrics.h"
#include "daemon/options.h"
#include "daemon/signed_image.h"
#include "daemon/status.h"
#include "fuse/mount.h"
#include "fuse/stats.h"
#include "fuse/takeover_io.h"
#include "fuse/uring.h"
#include "lsq/error.h"
#include "lsq/source.h"
#include "profile/learned.h"
#include "profile/recorder.h"
#include "profile/startup.h"

#define PROG "sqfs-lazy-mount"

/* A thread that waits for SIGUSR1 and logs the counters, so nothing is
 * logged from a signal handler. */
struct stats_watcher {
	pthread_t thread;
	struct lsq_mount *m;
	atomic_bool stop;
	bool running;
};

static void log_stats(struct lsq_mount *m)
{
	struct lsq_counter_set set;
	char line[4096];

	lsq_stats_collect(m, &set);
	lsq_stats_format_line(&set, line, sizeof(line));
	lsq_log(LSQ_LOG_INFO, "stats: %s", line);
}

static void *watch_stats(void *arg)
{
	struct stats_watcher *w = arg;
	sigset_t set;
	int sig;

	pthread_setname_np(pthread_self(), "sqfs-stats");
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (atomic_load(&w->stop))
			break;
		log_stats(w->m);
	}
	return NULL;
}

static void start_watcher(struct stats_watcher *w, struct lsq_mount *m)
{
	sigset_t all, old;
	int err;

	w->m = m;
	atomic_init(&w->stop, false);
	/* All signals blocked in the watcher: SIGTERM must reach the main
	 * thread, whose wait in the session loop it interrupts. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&w->thread, NULL, watch_stats, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		lsq_warn("SIGUSR1 stats disabled: cannot start thread: %s",
			 strerror(err));
		return;
	}
	w->running = true;
}

static void stop_watcher(struct stats_watcher *w)
{
	if (!w->running)
		return;
	atomic_store(&w->stop, true);
	pthread_kill(w->thread, SIGUSR1);
	pthread_join(w->thread, NULL);
	w->running = false;
}

/* Under systemd's Type=notify: READY=1 only once the mount answers, which
 * a stat() of the mount point proves (the kernel forwards it to our loop,
 * and st_dev is then the FUSE connection's, not the directory's below). */
struct ready_notifier {
	pthread_t thread;
	const char *mountpoint;
	dev_t dev_below;        /* st_dev of the mount point before mounting */
	const char *shown_image; /* what STATUS= names; never has a password */
	atomic_bool stop;       /* the loop has ended: give up, say nothing */
	bool running;
};

static void *notify_when_ready(void *arg)
{
	struct ready_notifier *r = arg;
	struct stat st;
	char *state = NULL;
	int err;

	pthread_setname_np(pthread_self(), "sqfs-ready");
	/* the stat blocks until the loop answers, or fails once the
	 * session is torn down; a stale st_dev means no mount (yet) */
	for (int tries = 0; tries < 1000; tries++) {
		if (atomic_load(&r->stop) || stat(r->mountpoint, &st) != 0)
			return NULL;
		if (st.st_dev != r->dev_below)
			break;
		usleep(10 * 1000);
	}
	if (atomic_load(&r->stop))
		return NULL;
	if (st.st_dev == r->dev_below) {
		lsq_warn("%s: no mount answering; READY=1 not sent",
			 r->mountpoint);
		return NULL;
	}
	if (asprintf(&state, "READY=1\nSTATUS=serving %s on %s",
		     r->shown_image, r->mountpoint) < 0)
		return NULL;
	err = lsq_sd_notify(state);
	if (err < 0)
		lsq_warn("cannot notify the service manager: %s",
			 strerror(-err));
	else
		lsq_info("%s: mounted %s, ready", r->mountpoint,
			 r->shown_image);
	free(state);
	return NULL;
}

static void start_ready_notifier(struct ready_notifier *r)
{
	sigset_t all, old;
	int err;

	if (!lsq_sd_notify_wanted())
		return;
	atomic_init(&r->stop, false);
	/* signals belong to the main thread (see start_watcher) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&r->thread, NULL, notify_when_ready, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		lsq_warn("cannot start the readiness thread: %s",
			 strerror(err));
		return;
	}
	r->running = true;
}

/* libfuse's messages once stderr is /dev/null. */
__attribute__((format(printf, 2, 0)))
static void log_from_fuse(enum fuse_log_level level, const char *fmt,
			  va_list ap)
{
	enum lsq_log_level lvl;
	char line[1024];
	size_t len;

	vsnprintf(line, sizeof(line), fmt, ap);
	len = strlen(line);
	while (len > 0 && line[len - 1] == '\n')
		line[--len] = '\0';
	if (len == 0)
		return;
	if (level <= FUSE_LOG_ERR)
		lvl = LSQ_LOG_ERROR;
	else if (level == FUSE_LOG_WARNING)
		lvl = LSQ_LOG_WARNING;
	else if (level <= FUSE_LOG_INFO)
		lvl = LSQ_LOG_INFO;
	else
		lvl = LSQ_LOG_DEBUG;
	lsq_log(lvl, "%s", line);
}

/* libfuse's session loop. Its workers sleep in read(/dev/fuse); a loop of
 * our own that spun for the next request and answered metadata walks on
 * the caller's CPU paid on this project's bench VM once and then no longer
 * (docs/decisions.md, 2026-11-25), so the plain loop it is. */
static int run_loop(struct fuse_session *se,
		    const struct lsq_mount_options *opt, bool one_fd)
{
	struct fuse_loop_config *cfg;
	int ret;

	if (opt->single_thread)
		return fuse_session_loop(se);
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	/* One /dev/fuse descriptor per worker spares them a shared queue;
	 * a takeover needs every request read from the one file the guard
	 * holds (clones die with the daemon, failing what they had read). */
	fuse_loop_cfg_set_clone_fd(cfg, !one_fd);
	fuse_loop_cfg_set_max_threads(cfg, opt->threads);
	ret = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return ret;
}

/* The image through the source stack (src/source/source_stack.c);
 * messages name it without the credentials a URL may carry. */
static int open_image(const struct lsq_mount_options *opt,
		      struct lsq_image **img)
{
	struct lsq_cache_options copts =
		lsq_mount_cache_options(opt, lsq_source_is_url(opt->image));
	struct lsq_source_stack_options so = {
		/* an explicit offset= wins over a SIF's partition */
		.offset = opt->offset == LSQ_OFFSET_AUTO ? 0 : opt->offset,
		.find_sif = opt->offset == LSQ_OFFSET_AUTO,
		.sif_partition = opt->sif_partition,
		.http = &opt->http_opts,
		.cache = &copts,
	};
	struct lsq_image_options iopts;
	struct lsq_source *src;
	char errbuf[512] = "", warn[1024];
	char *shown;
	int err;

	err = lsq_source_open_stack(opt->image, &so, &src, errbuf,
				    sizeof(errbuf), warn, sizeof(warn));
	if (warn[0])
		lsq_warn("%s", warn);
	if (err) {
		lsq_err_log("%s", errbuf);
		return err;
	}
	shown = lsq_url_redact(opt->image);
	errbuf[0] = '\0';
	iopts = opt->image_opts;
	err = lsq_mount_open_verifier(opt, src, &iopts.verifier, errbuf,
				      sizeof(errbuf));
	/* each unit is hashed once as it is loaded, not on every read, and
	 * a signed image's blocks go to cache_dir's shared store; one that
	 * cannot be opened leaves the image's own cache file in charge */
	if (!err && iopts.verifier) {
		struct lsq_unit_checks units = {
			.digest_of = lsq_verifier_digest,
			.check = lsq_verifier_check,
			.ctx = iopts.verifier,
		};

		if (lsq_source_use_units(src, &units, warn, sizeof(warn)))
			lsq_warn("%s", warn);
	}
	if (!err)
		err = lsq_image_open(src, &iopts, img, errbuf, sizeof(errbuf));
	if (err) {
		lsq_err_log("%s: %s", shown ? shown : "the image",
			    errbuf[0] ? errbuf : lsq_strerror(err));
		lsq_verifier_destroy(iopts.verifier);
		lsq_source_destroy(src);
	}
	free(shown);
	return err;
}

/* The startup profile's prefetch: a worker per speculative connection
 * (readers have a pool of their own), since over a long round trip each
 * request costs its worker a round trip and a profile's files lie apart
 * (docs/prefetch.md); what is prefetched stays within half the RAM cache,
 * so it does not evict itself. */
static void start_profile(struct lsq_startup_profile *p,
			  const struct lsq_mount_options *opt,
			  struct lsq_image *img)
{
	bool remote = lsq_source_is_url(opt->image);
	struct lsq_cache_options co = lsq_mount_cache_options(opt, remote);
	struct lsq_prefetch_options po = {
		.workers = remote ? opt->http_opts.max_connections : 1,
		.budget_bytes = co.block_cache_bytes
					? co.block_cache_bytes / 2
					: LSQ_DEFAULT_REMOTE_BLOCK_CACHE / 2,
	};

	lsq_startup_profile_start(p, img, &po);
}

/* --takeover MNT from a new binary: its pid, once it asked (SIGUSR2). */
static volatile sig_atomic_t handover_to;
static struct fuse_session *handover_se;

static void on_handover(int sig, siginfo_t *si, void *uctx)
{
	if (si->si_uid != 0 && si->si_uid != getuid())
		return;
	handover_to = si->si_pid;
	fuse_session_exit(handover_se);
}

/* SIGUSR2 asks for a handover, only where the guard can take over;
 * elsewhere it is ignored rather than fatal. */
static void handle_handover(struct fuse_session *se, bool on)
{
	struct sigaction sa = { .sa_sigaction = on_handover,
				.sa_flags = SA_SIGINFO };

	handover_se = se;
	if (!on)
		sa = (struct sigaction){ .sa_handler = SIG_IGN };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
}

/* Whether the mount is to be taken over should its daemon die. A
 * takeover needs /dev/fuse: rings die with the daemon, and what they had
 * read with them. -o takeover makes io_uring=auto mean off; takeover=auto
 * (the default) gives way to rings the kernel offers. */
static bool takeover_wanted(const struct lsq_mount_options *opt)
{
	bool rings = !opt->single_thread && opt->io_uring != 0 &&
		     (opt->io_uring > 0 ||
		      (opt->takeover < 0 && lsq_uring_offered()));

	return opt->takeover != 0 && !rings;
}

/* The daemon's side of a takeover (src/daemon/conn_guard.c). */
struct takeover {
	bool asked;              /* -o takeover, not the default's */
	bool on;                 /* the guard may start a new daemon */
	bool inherited;          /* this daemon took the connection over */
	bool leaving;            /* handed over: no unmount at the end */
	struct lsq_inherited from;
	struct lsq_conn_guard *guard;
	struct lsq_mount *m;
};

static void tell_guard_init(const struct lsq_init_record *rec, void *ctx)
{
	struct takeover *t = ctx;

	/* asked for, a warning; the default's is quiet (--stats says
	 * takeover_ready 0): an unprivileged mount or an old kernel is no
	 * problem to report on every mount */
	enum lsq_log_level level = t->asked ? LSQ_LOG_WARNING : LSQ_LOG_DEBUG;

	if (!lsq_takeover_kernel_resends(rec)) {
		lsq_log(level, "takeover: off (this kernel cannot resend requests; Linux 6.9 or later can)");
		return;
	}
	if (lsq_conn_guard_send_init(t->guard, rec))
		atomic_store(&t->m->takeover_ready, true);
	else
		lsq_log(level, "takeover: off (no connection guard: it needs fusectl at /sys/fs/fuse/connections, or root to mount it)");
}

/* A new daemon on an inherited connection: the INIT the kernel sent the
 * first daemon replayed, the requests the dead one had read resent. */
static int carry_on(struct fuse_session *se, struct takeover *t)
{
	int err;

	fcntl(t->from.fuse_fd, F_SETFD, FD_CLOEXEC);
	fcntl(t->from.handshake_fd, F_SETFD, FD_CLOEXEC);
	if (lsq_takeover_io_install(se, t->from.fuse_fd, NULL, NULL) != 0 ||
	    lsq_takeover_replay_init(se, &t->from.init) != 0) {
		lsq_err_log("takeover: cannot set up the inherited connection");
		return -1;
	}
	err = lsq_takeover_resend(t->from.fuse_fd);
	if (err) {
		lsq_err_log("takeover: the kernel refused to resend requests: %s",
			    strerror(-err));
		return -1;
	}
	return 0;
}

/* A daemon that took over did not mount: libfuse does not know the mount
 * point, so the unmount at a clean stop is ours. */
static void unmount_inherited(const char *mountpoint)
{
	pid_t pid;

	if (geteuid() == 0) {
		if (umount2(mountpoint, MNT_DETACH) != 0 && errno != EINVAL)
			lsq_warn("%s: unmount: %s", mountpoint,
				 strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", "-q",
		       mountpoint, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static void say_taken_over(struct takeover *t, const char *mountpoint)
{
	struct timespec now;
	double paused;

	clock_gettime(CLOCK_REALTIME, &now);
	paused = ((double)now.tv_sec * 1e9 + (double)now.tv_nsec -
		  (double)t->from.died_ns) / 1e9;
	lsq_warn("takeover: process %d serves %s %s (takeover %u; readers paused %.3f s)",
		 (int)getpid(), mountpoint,
		 t->from.upgrade ? "in place of the daemon before it (upgrade)"
				 : "after its daemon died",
		 t->from.count.crash + t->from.count.upgrade, paused);
	(void)!write(t->from.handshake_fd, "k", 1);
	close(t->from.handshake_fd);
}

/* fuse_session_mount() keeps a copy of the mount point that only
 * fuse_session_unmount() frees; a daemon that hands the mount over must
 * not unmount, so for LeakSanitizer that copy is not a leak. */
static int mount_session(struct fuse_session *se, const char *mountpoint)
{
	int ret;

#ifdef __SANITIZE_ADDRESS__
	__lsan_disable();
#endif
	ret = fuse_session_mount(se, mountpoint);
#ifdef __SANITIZE_ADDRESS__
	__lsan_enable();
#endif
	return ret;
}

static int run_mount(struct lsq_mount_options *opt)
{
	struct lsq_mount m = {
		.entry_timeout = opt->entry_timeout,
		.attr_timeout = opt->attr_timeout,
		.max_read = opt->max_read,
		.uid = opt->uid,
		.gid = opt->gid,
		.handles_lock = PTHREAD_MUTEX_INITIALIZER,
	};
	struct stats_watcher watcher = { .running = false };
	struct lsq_metrics metrics = LSQ_METRICS_OFF;
	struct lsq_startup_profile profile = { 0 };
	bool served = false;
	struct ready_notifier ready = { .running = false };
	struct lsq_uring *uring = NULL;
	struct lsq_conn_guard guard = { .pid = 0 };
	struct takeover tk = { .guard = &guard, .m = &m };
	bool inherit_err = false, wanted;
	int keeper;
	struct fuse_session *se;
	struct stat below;
	char *shown = NULL, *canonical = NULL, *learned_path = NULL;
	sigset_t usr1;
	int status = 1;
	int ret;

	/* Blocked from the start, so an early SIGUSR1 cannot kill us; every
	 * thread created later inherits the mask and only the watcher takes
	 * it, with sigwait(). */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	tk.inherited = lsq_conn_guard_inherited(&tk.from, &inherit_err);
	if (inherit_err) {
		lsq_err_log("takeover: the connection handed over does not parse");
		return 1;
	}
	tk.asked = opt->takeover > 0;
	wanted = takeover_wanted(opt);
	/* a service's main process must outlive the daemons of a takeover */
	keeper = lsq_keeper_attach(!tk.inherited && wanted &&
				   opt->foreground && lsq_sd_notify_wanted());

	/* libfuse's connection tunables (max_readahead, ...) are not known
	 * to fuse_session_new(); take them out first, apply them in init. */
	m.conn_opts = fuse_parse_conn_info_opts(&opt->fuse_args);
	if (!m.conn_opts)
		return 1;
	/* Checks the remaining options; nothing is mounted yet. */
	se = fuse_session_new(&opt->fuse_args, &lsq_fuse_ops,
			      sizeof(lsq_fuse_ops), &m);
	if (!se)
		goto out_free;
	m.se = se; /* for notifications (page store) */
	/* the daemon before wrote its profile when it handed over (and a
	 * killed one writes none): this one's would overwrite it with
	 * only what came after */
	if (opt->record && tk.inherited)
		lsq_info("record=%s: written by the daemon before the takeover; not recorded again",
			 opt->record);
	else if (opt->record &&
	    lsq_recorder_create(opt->record, &m.recorder) != LSQ_OK) {
		lsq_err_log("record=%s: %s", opt->record, strerror(errno));
		goto out_destroy;
	}
	m.no_neighbour_push = opt->record != NULL;
	/* with cache_dir, every mount learns what its start reads */
	learned_path = opt->learn ? lsq_learned_profile_path(opt->cache_opts.dir,
							     opt->image)
				  : NULL;
	if (learned_path && !m.recorder &&
	    lsq_recorder_create_learning(LSQ_LEARN_MAX_FILES,
					 LSQ_LEARN_MAX_NODES,
					 &m.recorder) != LSQ_OK) {
		free(learned_path);
		learned_path = NULL;
	}
	if (open_image(opt, &m.img))
		goto out_destroy;
	m.root = lsq_image_root(m.img);
	shown = lsq_url_redact(opt->image);
	m.shown_image = shown;
	m.local_image = !lsq_source_is_url(opt->image);
	if (m.recorder)
		lsq_recorder_set_granule(m.recorder,
					 lsq_image_info(m.img)->block_size);
	lsq_startup_profile_load(&profile, &(struct lsq_profile_sources){
			.want = opt->prefetch, .image = opt->image,
			.learned_path = learned_path, .http = &opt->http_opts },
		m.img);

	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy;
	/* a daemon that took over must not look at the mount point: that
	 * asks the mount, which nobody serves until it does */
	if (tk.inherited) {
		canonical = strdup(tk.from.mountpoint);
		below.st_dev = 0;
	} else if (stat(opt->mountpoint, &below) != 0) {
		lsq_err_log("%s: %s", opt->mountpoint, strerror(errno));
		goto out_remove_handlers;
	} else {
		/* before the mount: resolving the path afterwards would
		 * ask us */
		canonical = realpath(opt->mountpoint, NULL);
	}
	m.mountpoint = canonical ? canonical : opt->mountpoint;
	m.started = time(NULL);
	if (opt->metrics) {
		char why[512];

		/* bound now, so a taken port is the mount's error; after a
		 * takeover the dead daemon may hold it a while yet */
		if (lsq_metrics_bind(&metrics, opt->metrics,
				     canonical ? canonical : opt->mountpoint,
				     opt->image, why, sizeof(why)) != 0) {
			if (!tk.inherited) {
				lsq_err_log("%s", why);
				goto out_remove_handlers;
			}
			lsq_warn("%s; no metrics after the takeover", why);
		}
	}
	tk.on = wanted || tk.inherited;
	if (tk.asked && !wanted)
		lsq_warn("takeover: off (not with io_uring=on)");
	if (tk.inherited) {
		if (carry_on(se, &tk) != 0)
			goto out_remove_handlers;
		if (!opt->foreground) {
			openlog(PROG, LOG_PID, LOG_DAEMON);
			lsq_log_use_syslog(true);
			fuse_set_log_func(log_from_fuse);
		}
		m.takeovers_crash = tk.from.count.crash;
		m.takeovers_upgrade = tk.from.count.upgrade;
	} else {
		if (mount_session(se, opt->mountpoint) != 0)
			goto out_remove_handlers;
		if (!opt->foreground) {
			if (fuse_daemonize(0) != 0)
				goto out_unmount;
			openlog(PROG, LOG_PID, LOG_DAEMON);
			lsq_log_use_syslog(true);
			fuse_set_log_func(log_from_fuse);
		}
		if (tk.on && lsq_takeover_io_install(se, fuse_session_fd(se),
						     tell_guard_init, &tk)) {
			lsq_warn("takeover: off (cannot watch the connection)");
			tk.on = false;
		}
	}

	lsq_conn_guard_start(&guard, canonical, &(struct lsq_guard_takeover){
		.fuse_fd = tk.on ? (tk.inherited ? tk.from.fuse_fd
						 : fuse_session_fd(se))
				 : -1,
		.count = tk.from.count,
		.init = tk.inherited ? &tk.from.init : NULL,
		.keeper_fd = keeper });
	/* without a guard nobody would start the next daemon */
	tk.on = tk.on && guard.pid > 0;
	if (tk.inherited) {
		atomic_store(&m.takeover_ready, tk.on);
		say_taken_over(&tk, opt->mountpoint);
	}
	handle_handover(se, tk.on);
	lsq_keeper_serving(keeper);
	/* no fork after this point: background fetches may use threads */
	lsq_source_allow_threads(lsq_image_source(m.img));
	start_profile(&profile, opt, m.img);
	lsq_background_policy_start(opt, m.img);
	if (opt->io_uring != 0 && !opt->single_thread && !tk.on)
		uring = lsq_uring_start(se, opt->threads, opt->io_uring > 0);
	m.uring = uring;  /* before the stats watcher reads it */
	start_watcher(&watcher, &m);
	lsq_metrics_start(&metrics, &m);
	ready.mountpoint = opt->mountpoint;
	ready.dev_below = below.st_dev;
	ready.shown_image = shown ? shown : "the image";
	if (!tk.inherited)
		start_ready_notifier(&ready);
	lsq_debug("%s: serving requests", opt->mountpoint);
	served = true;
	ret = run_loop(se, opt, tk.on);
	if (handover_to) {
		char link[64], exe[4096];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/%d/exe", (int)handover_to);
		n = readlink(link, exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = '\0';
			lsq_conn_guard_send_upgrade(&guard, exe);
			tk.leaving = true;
			lsq_info("%s: handing over to a new daemon from %s",
				 opt->mountpoint, exe);
		} else {
			lsq_warn("%s: process %d asked for a takeover and is gone; unmounting",
				 opt->mountpoint, (int)handover_to);
		}
	}
	atomic_store(&ready.stop, true);
	/* a daemon that leaves is not the service stopping */
	if (!tk.leaving) {
		lsq_sd_notify("STOPPING=1\nSTATUS=unmounting");
		lsq_info("%s: unmounting", opt->mountpoint);
	}
	stop_watcher(&watcher);
	lsq_metrics_stop(&metrics);
	/* before the unmount closes the channel the store thread writes to */
	lsq_page_store_stop(&m.page_store, tk.leaving);
	/* > 0 is the signal that ended the loop: a clean stop */
	if (ret < 0)
		lsq_err_log("%s: request loop failed: %s", opt->mountpoint,
			    strerror(-ret));
	else
		status = 0;

out_unmount:
	if (tk.leaving)
		;  /* the guard holds the connection for the next daemon */
	else if (tk.inherited)
		unmount_inherited(canonical ? canonical : opt->mountpoint);
	else
		fuse_session_unmount(se);
	if (!tk.leaving)
		lsq_conn_guard_disarm(&guard);
	if (!tk.leaving && status == 0)
		lsq_keeper_clean_end(keeper);
	lsq_uring_stop(uring);  /* the unmount ended the rings' fetches */
	m.uring = NULL;         /* freed: the final stats line must not read it */
out_remove_handlers:
	lsq_metrics_stop(&metrics);  /* again after a clean stop: a no-op */
	free(canonical);
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	/* after the destroy: a stat() still waiting for the loop has failed
	 * with the connection */
	if (ready.running)
		pthread_join(ready.thread, NULL);
	free(shown);
	/* the loop is over: nothing reads or names nodes any more */
	if (served)
		lsq_learned_profile_save(learned_path, m.recorder);
	free(learned_path);
	lsq_recorder_finish(m.recorder, served);
	if (m.img && !m.local_image)
		log_stats(&m);  /* the final counters of a remote image */
	lsq_image_close(m.img);
	lsq_startup_profile_fini(&profile);
out_free:
	free(m.conn_opts);
	return status;
}

static void print_version(void)
{
	printf(PROG " %s\n", LSQ_VERSION);
	printf("compressors: %s\n", lsq_codec_list());
	printf("libfuse: %s\n", fuse_pkgversion());
	printf("http: %s\n", lsq_source_http_backend());
}

/* URL credentials ("http://user:pw@host/x", also inside -o mirror=...)
 * must not stay readable in /proc/PID/cmdline, which every user can read:
 * each such argument is copied for the parser and the original bytes are
 * overwritten with '*'. The copies live as long as the process. */
static void hide_url_credentials(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char *copy;

		if (!strstr(argv[i], "://") || !strchr(argv[i], '@'))
			continue;
		copy = strdup(argv[i]);
		if (!copy)
			continue; /* left visible rather than lost */
		if (lsq_url_scrub(argv[i]))
			argv[i] = copy;
		else
			free(copy);
	}
}

int lsq_mount_main(int argc, char **argv)
{
	struct lsq_mount_options opt;
	int status = 1;
	int err;

	lsq_log_set_prefix(PROG);
	if (argc > 0)
		lsq_conn_guard_set_cmdline(argv[0], (size_t)(argv[argc - 1] +
			strlen(argv[argc - 1]) + 1 - argv[0]));
	hide_url_credentials(argc, argv);
	lsq_conn_guard_set_argv(argc, argv);
	err = lsq_mount_options_parse(&opt, argc, argv);
	if (err == LSQ_ERR_NOMEM)
		lsq_err_log("%s", lsq_strerror(err));
	if (err)
		goto out;

	switch (opt.mode) {
	case LSQ_MODE_HELP:
		lsq_mount_options_help(stdout);
		status = 0;
		break;
	case LSQ_MODE_VERSION:
		print_version();
		status = 0;
		break;
	case LSQ_MODE_STATS:
		status = lsq_print_stats(opt.mountpoint);
		break;
	case LSQ_MODE_STATUS:
		status = lsq_print_status(opt.mountpoint);
		break;
	case LSQ_MODE_TAKEOVER:
		status = lsq_takeover_mount(opt.mountpoint);
		break;
	case LSQ_MODE_MOUNT:
		status = run_mount(&opt);
		break;
	}
out:
	lsq_mount_options_fini(&opt);
	return status;
}
