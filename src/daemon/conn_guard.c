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
 */
#include "daemon/conn_guard.h"

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
#include <unistd.h>

#include "common/log.h"

#define FUSECTL_DIR "/sys/fs/fuse/connections"

static volatile int guard_abort_fd = -1;
static char *cmdline_start;
static size_t cmdline_len;

void lsq_conn_guard_set_cmdline(char *start, size_t len)
{
	cmdline_start = start;
	cmdline_len = len;
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

static void on_parent_death(int sig)
{
	if (guard_abort_fd >= 0)
		(void)!write(guard_abort_fd, "1", 1);
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

/* Above all /dev/fuse: a guard holding it would keep the connection
 * alive itself. close_range() needs Linux 5.9; older kernels get a loop. */
static void close_other_fds(int keep)
{
	struct rlimit rl;
	int limit = 65536;

	if ((keep == 3 || close_range(3, (unsigned)keep - 1, 0) == 0) &&
	    close_range((unsigned)keep + 1, ~0u, 0) == 0)
		return;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536)
		limit = (int)rl.rlim_cur;
	for (int fd = 3; fd < limit; fd++)
		if (fd != keep)
			close(fd);
}

static void __attribute__((noreturn))
guard_main(int sock, pid_t parent, uint64_t id)
{
	struct sigaction sa = { .sa_handler = on_parent_death };
	sigset_t hup;
	char path[128], cmd;
	int status;

	/* first: tools looking for the daemon by its argv find it alone */
	prctl(PR_SET_NAME, "sqfs-lazy-guard");
	if (cmdline_start && cmdline_len) {
		memset(cmdline_start, 0, cmdline_len);
		snprintf(cmdline_start, cmdline_len, "sqfs-lazy-guard");
	}
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
	close_other_fds(sock);

	snprintf(path, sizeof(path), FUSECTL_DIR "/%" PRIu64 "/abort", id);
	guard_abort_fd = open_abort_file(path);
	status = guard_abort_fd >= 0 ? 0 : errno;
	if (write(sock, &status, sizeof(status)) != sizeof(status) || status)
		_exit(1);
	for (;;) {
		ssize_t n = read(sock, &cmd, 1);

		if (n < 0 && errno == EINTR)
			continue;
		_exit(0); /* disarmed, or the daemon closed its end */
	}
}

void lsq_conn_guard_start(struct lsq_conn_guard *g, const char *mountpoint)
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
		guard_main(sv[1], parent, id);
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
