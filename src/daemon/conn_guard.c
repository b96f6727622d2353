/* SPDX-License-Identifier: MIT */
/*
 * conn_guard.c - the connection guard (conn_guard.h says why).
 *
 * The guard learns of the daemon's death from PR_SET_PDEATHSIG, which
 * fires when the thread that forked it exits: a killed process loses its
 * main thread at once even while another thread cannot leave the kernel.
 * Pipes or pidfds would not do: both wait for the last thread.
 *
 * The connection is named by its device number in fusectl
 * (/sys/fs/fuse/connections/N). The guard opens its `abort` file at
 * start and keeps it open: once the connection is gone, writing the stale
 * file aborts nothing, so a later mount that reuses N is never touched.
 *
 * With takeover, the guard also holds the connection's /dev/fuse file
 * (the daemon reads every request from that one file, never from clones
 * of it): when the daemon dies, the requests it had read stay queued on
 * that file instead of failing, and the guard starts a new daemon with
 * the same arguments on it, which replays the INIT, asks the kernel to
 * resend them, starts a guard of its own and says so ("k" on the
 * handshake socket); then this guard exits. A new daemon that does not
 * come up within START_TIMEOUT_S is killed and another tried, up to
 * MAX_ATTEMPTS, and MAX_QUICK_DEATHS daemons in a row that each die
 * within QUICK_DEATH_NS of taking over (a crash on what it is asked)
 * end the mount as before: the connection is aborted.
 */
#include "daemon/conn_guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/service_keeper.h"

#define FUSECTL_DIR "/sys/fs/fuse/connections"
#define TAKEOVER_ENV "SQFS_LAZY_TAKEOVER"
#define START_TIMEOUT_S 60
#define MAX_ATTEMPTS 3u
#define MAX_QUICK_DEATHS 5u
#define QUICK_DEATH_NS (2ull * 1000000000ull)

static volatile int guard_abort_fd = -1;
static volatile sig_atomic_t parent_died;
static char *cmdline_start;
static size_t cmdline_len;
static int saved_argc;
static char **saved_argv;

void lsq_conn_guard_set_argv(int argc, char **argv)
{
	saved_argc = argc;
	saved_argv = argv;
}

void lsq_conn_guard_set_cmdline(char *start, size_t len)
{
	cmdline_start = start;
	cmdline_len = len;
}

void lsq_conn_guard_rename(const char *name)
{
	if (cmdline_start && cmdline_len) {
		memset(cmdline_start, 0, cmdline_len);
		snprintf(cmdline_start, cmdline_len, "%s", name);
	}
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape_octal(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
					(s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

/* The fusectl name of the newest FUSE mount at `mountpoint` (a canonical
 * path), from /proc/self/mountinfo: a stat() of the mount point would ask
 * the daemon itself, which is not serving yet. */
static int find_connection(const char *mountpoint, uint64_t *id)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		unsigned major, minor;
		char path[4096], *sep;
		char fstype[64];

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &major, &minor,
			   path) != 3)
			continue;
		sep = strstr(line, " - ");
		if (!sep || sscanf(sep + 3, "%63s", fstype) != 1 ||
		    strncmp(fstype, "fuse", 4) != 0)
			continue;
		unescape_octal(path);
		if (strcmp(path, mountpoint) != 0)
			continue;
		/* the kernel's dev_t: major in the bits above 20 */
		*id = ((uint64_t)major << 20) | minor;
		found = 1;  /* keep looking: the last one is on top */
	}
	free(line);
	fclose(f);
	return found;
}

static void abort_connection(void)
{
	if (guard_abort_fd >= 0)
		(void)!write(guard_abort_fd, "1", 1);
}

/* Without takeover, the guard's whole job; with it, the main loop's
 * read is interrupted and it takes over. */
static bool takeover_armed;

static void on_parent_death(int sig)
{
	if (takeover_armed) {
		parent_died = 1;
		return;
	}
	abort_connection();
	_exit(0);
}

/* Root without a fusectl mount (containers, systems without systemd):
 * mount it in a mount namespace of the guard's own, open the file, and go
 * back. Staying there would keep that namespace's copies of every FUSE
 * mount alive, ours included: fusermount3 -u would then leave the
 * connection up and the daemon running. Once no process is in it, the
 * namespace goes and its mounts with it; the open file keeps only the
 * fusectl mount. */
static int open_abort_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int home, err;

	if (fd >= 0 || errno != ENOENT || geteuid() != 0)
		return fd;
	home = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return -1;
	if (unshare(CLONE_NEWNS) != 0) {
		err = errno;
		close(home);
		errno = err;
		return -1;
	}
	/* source and type are ignored for MS_PRIVATE; strings, not NULL,
	 * keep checkers such as valgrind quiet */
	if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0 &&
	    mount("fusectl", FUSECTL_DIR, "fusectl", 0, NULL) == 0)
		fd = open(path, O_WRONLY | O_CLOEXEC);
	err = errno;
	if (setns(home, CLONE_NEWNS) != 0) {
		/* cannot leave: better no guard than a mount that outlives
		 * its unmount */
		if (fd >= 0)
			close(fd);
		fd = -1;
		err = errno;
	}
	close(home);
	errno = err;
	return fd;
}

/* Every file from 3 up but keep[] (-1: none): above all /dev/fuse,
 * unless it is kept for a takeover (a guard holding it keeps the
 * connection alive itself). close_range() needs Linux 5.9; older
 * kernels get a loop. */
static void close_other_fds(const int keep[3])
{
	int sorted[3], n = 0, from = 3, limit = 65536;
	bool ok = true;
	struct rlimit rl;

	for (int i = 0; i < 3; i++) {
		int j = n;

		if (keep[i] < 3)
			continue;
		while (j > 0 && sorted[j - 1] > keep[i]) {
			sorted[j] = sorted[j - 1];
			j--;
		}
		sorted[j] = keep[i];
		n++;
	}
	for (int i = 0; i < n && ok; i++) {
		if (sorted[i] > from)
			ok = close_range((unsigned)from,
					 (unsigned)sorted[i] - 1, 0) == 0;
		from = sorted[i] + 1;
	}
	if (ok && close_range((unsigned)from, ~0u, 0) == 0)
		return;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536)
		limit = (int)rl.rlim_cur;
	for (int fd = 3; fd < limit; fd++)
		if (fd != keep[0] && fd != keep[1] && fd != keep[2])
			close(fd);
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What a takeover needs after the daemon is gone. */
struct guard_state {
	const struct lsq_guard_takeover *tk;
	struct lsq_init_record init;
	bool have_init;
	char **argv;   /* a copy: the original is renamed */
	char exe[4096];
	const char *mountpoint;
	uint64_t started_ns;  /* when the daemon came up */
	bool upgrade;         /* the daemon leaves for a new binary */
	char upgrade_exe[4096];
};

static char **copy_argv(void)
{
	char **v = calloc((size_t)saved_argc + 1, sizeof(*v));

	if (!v)
		return NULL;
	for (int i = 0; i < saved_argc; i++)
		if (!(v[i] = strdup(saved_argv[i])))
			return NULL;
	return v;
}

/* Start a new daemon on the connection; true once it says it serves. */
static bool start_successor(struct guard_state *gs,
			    const struct lsq_takeover_count *count,
			    uint64_t died_ns, unsigned attempt)
{
	char *hex = lsq_init_record_encode(&gs->init), *env = NULL;
	int hs[2], status;
	struct pollfd pfd;
	char ok = 0;
	pid_t pid;
	int n;

	if (!hex || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, hs) ||
	    asprintf(&env, "fd=3 handshake=4 why=%s died=%llu crash=%u upgrade=%u quick=%u init=%s mnt=%s",
		     gs->upgrade ? "upgrade" : "crash",
		     (unsigned long long)died_ns, count->crash, count->upgrade,
		     count->quick_deaths, hex, gs->mountpoint) < 0) {
		free(hex);
		lsq_warn("takeover: cannot prepare a new daemon: %s",
			 strerror(errno));
		return false;
	}
	free(hex);
	pid = fork();
	if (pid == 0) {
		/* above every fd the dups below could land on */
		int fuse = fcntl(gs->tk->fuse_fd, F_DUPFD, 10);
		int sock = fcntl(hs[1], F_DUPFD, 10);
		int keeper = gs->tk->keeper_fd >= 0
				     ? fcntl(gs->tk->keeper_fd, F_DUPFD, 10)
				     : -1;

		sigset_t none;

		if (fuse < 0 || sock < 0 || dup2(fuse, 3) != 3 ||
		    dup2(sock, 4) != 4 ||
		    (keeper >= 0 && (dup2(keeper, LSQ_KEEPER_FD) !=
					     LSQ_KEEPER_FD ||
				     setenv(LSQ_KEEPER_ENV, LSQ_KEEPER_FD_STR, 1) != 0)))
			_exit(127);
		close(fuse);
		close(sock);
		if (keeper >= 0)
			close(keeper);
		/* the guard's dispositions are not the daemon's */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGUSR1, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setenv(TAKEOVER_ENV, env, 1);
		if (gs->upgrade)
			gs->argv[0] = gs->upgrade_exe;  /* as ps shows it */
		execv(gs->upgrade ? gs->upgrade_exe : gs->exe, gs->argv);
		_exit(127);
	}
	free(env);
	close(hs[1]);
	if (pid < 0) {
		close(hs[0]);
		lsq_warn("takeover: cannot start a new daemon: %s",
			 strerror(errno));
		return false;
	}
	pfd = (struct pollfd){ .fd = hs[0], .events = POLLIN };
	do
		n = poll(&pfd, 1, START_TIMEOUT_S * 1000);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		n = (int)read(hs[0], &ok, 1);
	close(hs[0]);
	if (n == 1 && ok == 'k')
		return true;
	/* it died, or hangs: make sure it is gone before the next try */
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	lsq_warn("takeover: new daemon %d (attempt %u of %u) did not come up (%s)",
		 (int)pid, attempt, MAX_ATTEMPTS,
		 n == 0 ? "it ended"
			: n < 0 ? strerror(errno) : "no answer in time");
	return false;
}

/* A task's state letter from /proc/.../stat ('?' when unreadable). */
static char task_state(const char *path)
{
	char st[512], *close_paren;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return '?';
	n = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	st[n] = '\0';
	close_paren = strrchr(st, ')');
	return close_paren && close_paren[1] ? close_paren[2] : '?';
}

/* Whether no thread of pid can read a request any more: every one has
 * ended (a zombie, or reaped) or waits uninterruptibly in the kernel
 * (the page store's notify_store on a page whose READ is queued: it
 * reads nothing). The main thread turns zombie first while the others
 * still die: one of them may still take a request off the connection,
 * and taken after the new daemon's resend it would be lost. */
static bool ended(pid_t pid)
{
	char path[64];
	struct dirent *de;
	bool done = true;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return true;
	while (done && (de = readdir(dir))) {
		char stat_path[320], state;

		if (de->d_name[0] == '.')
			continue;
		snprintf(stat_path, sizeof(stat_path), "/proc/%d/task/%s/stat",
			 (int)pid, de->d_name);
		state = task_state(stat_path);
		done = state == '?' || state == 'Z' || state == 'X' ||
		       state == 'D';
	}
	closedir(dir);
	return done;
}

/* The daemon is gone: start another on the connection, or abort it. */
static void __attribute__((noreturn)) take_over(struct guard_state *gs,
					       pid_t daemon)
{
	struct lsq_takeover_count count = gs->tk->count;
	uint64_t now = realtime_ns();

	if (!gs->have_init) {
		lsq_warn("takeover: the daemon died before its first request, or this kernel cannot resend requests; aborting the connection (readers get ENOTCONN)");
		abort_connection();
		_exit(0);
	}
	/* its other threads end a moment after the main one: until then it
	 * holds its files (cache_dir's lock), and one may still read a
	 * request (ended()). A thread that cannot end until the READ it
	 * waits on is answered (conn_guard.h) does not hold us up past a
	 * second. */
	for (int i = 0; i < 100 && !ended(daemon); i++)
		usleep(10000);
	if (gs->upgrade) {
		count.upgrade++;
		count.quick_deaths = 0;
	} else {
		count.crash++;
		count.quick_deaths = now - gs->started_ns < QUICK_DEATH_NS
					     ? count.quick_deaths + 1 : 0;
	}
	if (count.quick_deaths >= MAX_QUICK_DEATHS) {
		lsq_warn("takeover: %u daemons in a row died within %llu s of taking over; aborting the connection (readers get ENOTCONN)",
			 count.quick_deaths,
			 (unsigned long long)(QUICK_DEATH_NS / 1000000000ull));
		abort_connection();
		_exit(0);
	}
	for (unsigned attempt = 1; attempt <= MAX_ATTEMPTS; attempt++)
		if (start_successor(gs, &count, now, attempt))
			_exit(0);
	lsq_warn("takeover: no new daemon came up in %u attempts; aborting the connection (readers get ENOTCONN)",
		 MAX_ATTEMPTS);
	abort_connection();
	_exit(0);
}

/* After 'U': a 4-byte length and the new binary's path. */
static bool read_path(int sock, char *path, size_t size)
{
	uint32_t len;

	if (read(sock, &len, sizeof(len)) != (ssize_t)sizeof(len) ||
	    len == 0 || len >= size ||
	    read(sock, path, len) != (ssize_t)len)
		return false;
	path[len] = '\0';
	return true;
}

/* After 'I': a 4-byte length and the record, the kernel's INIT. */
static bool read_init(int sock, struct lsq_init_record *rec)
{
	uint32_t len;

	if (read(sock, &len, sizeof(len)) != (ssize_t)sizeof(len) ||
	    len == 0 || len > LSQ_INIT_RECORD_MAX ||
	    read(sock, rec->bytes, len) != (ssize_t)len)
		return false;
	rec->len = len;
	return true;
}

static void __attribute__((noreturn))
guard_main(int sock, pid_t parent, uint64_t id, const char *mountpoint,
	   const struct lsq_guard_takeover *tk)
{
	struct sigaction sa = { .sa_handler = on_parent_death };
	struct guard_state gs = { .tk = tk, .mountpoint = mountpoint,
				  .started_ns = realtime_ns() };
	sigset_t hup;
	char path[128], cmd;
	int status;

	if (tk) {
		ssize_t n = readlink("/proc/self/exe", gs.exe,
				     sizeof(gs.exe) - 1);
		char *deleted;

		gs.argv = copy_argv();
		if (n > 0) {
			gs.exe[n] = '\0';
			/* replaced on disk (an upgrade): start what is
			 * there now */
			deleted = strstr(gs.exe, " (deleted)");
			if (deleted && deleted[10] == '\0')
				*deleted = '\0';
		}
		if (tk->init) {
			gs.init = *tk->init;
			gs.have_init = true;
		}
		takeover_armed = gs.argv && n > 0;
	}

	/* first: tools looking for the daemon by its argv find it alone */
	prctl(PR_SET_NAME, "sqfs-lazy-guard");
	lsq_conn_guard_rename("sqfs-lazy-guard");
	/* the daemon's stop signals are for the daemon: it disarms us */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGHUP, &sa, NULL);
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	sigprocmask(SIG_UNBLOCK, &hup, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGHUP) != 0 || getppid() != parent)
		_exit(1);
	close_other_fds((const int[3]){ sock,
					takeover_armed ? tk->fuse_fd : -1,
					takeover_armed ? tk->keeper_fd : -1 });

	snprintf(path, sizeof(path), FUSECTL_DIR "/%" PRIu64 "/abort", id);
	guard_abort_fd = open_abort_file(path);
	status = guard_abort_fd >= 0 ? 0 : errno;
	if (write(sock, &status, sizeof(status)) != sizeof(status) || status)
		_exit(1);
	for (;;) {
		ssize_t n = read(sock, &cmd, 1);

		if (n < 0 && errno == EINTR) {
			if (parent_died)
				take_over(&gs, parent);
			continue;
		}
		if (n == 1 && cmd == 'I') {
			gs.have_init = read_init(sock, &gs.init);
			continue;
		}
		if (n == 1 && cmd == 'U') {
			gs.upgrade = read_path(sock, gs.upgrade_exe,
					       sizeof(gs.upgrade_exe));
			continue;
		}
		/* the daemon gone with its end, not disarmed */
		if (takeover_armed && !(n == 1 && cmd == 'q'))
			take_over(&gs, parent);
		_exit(0); /* disarmed, or the daemon closed its end */
	}
}

void lsq_conn_guard_start(struct lsq_conn_guard *g, const char *mountpoint,
			  const struct lsq_guard_takeover *tk)
{
	pid_t parent = getpid();
	uint64_t id;
	int sv[2], status = 0;
	ssize_t n;

	g->pid = 0;
	g->disarm_fd = -1;
	if (!mountpoint || !find_connection(mountpoint, &id)) {
		lsq_debug("no connection guard: %s not found in mountinfo",
			  mountpoint ? mountpoint : "the mount point");
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	g->pid = fork();
	if (g->pid == 0) {
		close(sv[0]);
		guard_main(sv[1], parent, id, mountpoint,
			   tk && tk->fuse_fd >= 0 ? tk : NULL);
	}
	close(sv[1]);
	n = -1;
	while (g->pid > 0 &&
	       (n = read(sv[0], &status, sizeof(status))) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(status) || status) {
		lsq_debug("no connection guard for %s: %s", mountpoint,
			  status ? strerror(status) : "it did not start");
		close(sv[0]);
		if (g->pid > 0)
			waitpid(g->pid, NULL, 0);
		g->pid = 0;
		return;
	}
	g->disarm_fd = sv[0];
	lsq_debug("connection %" PRIu64 " guarded by process %d", id,
		  (int)g->pid);
}

bool lsq_conn_guard_send_init(struct lsq_conn_guard *g,
			      const struct lsq_init_record *rec)
{
	uint8_t msg[1 + sizeof(uint32_t) + LSQ_INIT_RECORD_MAX];
	uint32_t len = rec->len;
	size_t size = 1 + sizeof(len) + len;

	if (g->pid <= 0)
		return false;
	msg[0] = 'I';
	memcpy(msg + 1, &len, sizeof(len));
	memcpy(msg + 1 + sizeof(len), rec->bytes, len);
	return send(g->disarm_fd, msg, size, MSG_NOSIGNAL) == (ssize_t)size;
}

void lsq_conn_guard_send_upgrade(struct lsq_conn_guard *g, const char *exe)
{
	uint8_t msg[1 + sizeof(uint32_t) + 4096];
	uint32_t len = (uint32_t)strlen(exe);

	if (g->pid <= 0 || len >= 4096)
		return;
	msg[0] = 'U';
	memcpy(msg + 1, &len, sizeof(len));
	memcpy(msg + 1 + sizeof(len), exe, len);
	(void)send(g->disarm_fd, msg, 1 + sizeof(len) + len, MSG_NOSIGNAL);
}

bool lsq_conn_guard_inherited(struct lsq_inherited *out, bool *err)
{
	const char *env = getenv(TAKEOVER_ENV);
	unsigned long long died = 0;
	const char *init, *mnt;
	char hex[2 * LSQ_INIT_RECORD_MAX + 1], why[16];
	bool ok;

	*err = false;
	if (!env)
		return false;
	memset(out, 0, sizeof(*out));
	init = strstr(env, " init=");
	mnt = init ? strstr(init, " mnt=") : NULL;
	ok = sscanf(env, "fd=%d handshake=%d why=%15s died=%llu crash=%u upgrade=%u quick=%u",
		    &out->fuse_fd, &out->handshake_fd, why, &died,
		    &out->count.crash, &out->count.upgrade,
		    &out->count.quick_deaths) == 7 &&
	     mnt && (size_t)(mnt - init - 6) < sizeof(hex) &&
	     strlen(mnt + 5) < sizeof(out->mountpoint);
	if (ok) {
		memcpy(hex, init + 6, (size_t)(mnt - init - 6));
		hex[mnt - init - 6] = '\0';
		strcpy(out->mountpoint, mnt + 5);
		ok = lsq_init_record_decode(hex, &out->init);
	}
	out->died_ns = died;
	out->upgrade = ok && strcmp(why, "upgrade") == 0;
	unsetenv(TAKEOVER_ENV);
	*err = !ok;
	return true;
}

void lsq_conn_guard_disarm(struct lsq_conn_guard *g)
{
	if (g->pid <= 0)
		return;
	(void)send(g->disarm_fd, "q", 1, MSG_NOSIGNAL);
	close(g->disarm_fd);
	waitpid(g->pid, NULL, 0);
	g->pid = 0;
	g->disarm_fd = -1;
}
