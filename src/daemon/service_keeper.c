/* SPDX-License-Identifier: MIT */
/*
 * service_keeper.c - the service's main process (service_keeper.h says
 * why).
 */
#include "daemon/service_keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/conn_guard.h"

/* One message, written whole (below PIPE_BUF): a kind and a pid. */
struct keeper_msg {
	char kind;  /* 'S' serving, 'E' clean end */
	int32_t pid;
} __attribute__((packed));

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
	stop_asked = 1;
}

static void tell(int fd, char kind)
{
	struct keeper_msg msg = { .kind = kind, .pid = (int32_t)getpid() };

	if (fd >= 0)
		(void)!write(fd, &msg, sizeof(msg));
}

void lsq_keeper_serving(int fd)
{
	tell(fd, 'S');
}

void lsq_keeper_clean_end(int fd)
{
	tell(fd, 'E');
}

static void __attribute__((noreturn)) keep(int rd)
{
	struct sigaction sa = { .sa_handler = on_stop };
	pid_t serving = 0;
	bool clean = false, forward = false;

	prctl(PR_SET_NAME, "sqfs-lazy-keep");
	lsq_conn_guard_rename("sqfs-lazy-keeper");
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	for (;;) {
		struct pollfd pfd = { .fd = rd, .events = POLLIN };
		struct keeper_msg msg;
		int n = poll(&pfd, 1, 1000), err = errno;

		while (waitpid(-1, NULL, WNOHANG) > 0)
			;  /* the first daemon, once gone */
		if (stop_asked) {
			stop_asked = 0;
			forward = true;
			/* a takeover under way: the next daemon gets it */
			if (serving > 0 && kill(serving, SIGTERM) != 0)
				serving = 0;
		}
		if (n < 0 && err != EINTR)
			break;
		if (n <= 0)
			continue;
		n = (int)read(rd, &msg, sizeof(msg));
		if (n == 0)
			break;  /* every daemon and guard has gone */
		if (n != (int)sizeof(msg))
			continue;
		if (msg.kind == 'S') {
			serving = msg.pid;
			clean = false;
			if (forward)
				kill(serving, SIGTERM);
		} else if (msg.kind == 'E') {
			clean = true;
		}
	}
	_exit(clean ? 0 : 1);
}

int lsq_keeper_attach(bool want)
{
	const char *env = getenv(LSQ_KEEPER_ENV);
	int fds[2];
	pid_t pid;

	if (env) {
		int fd = atoi(env);

		unsetenv(LSQ_KEEPER_ENV);
		if (fd < 3 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
			return -1;
		return fd;
	}
	if (!want)
		return -1;
	if (pipe2(fds, O_CLOEXEC) != 0) {
		lsq_warn("takeover: no keeper process (%s); a crash of the daemon ends the service",
			 strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		lsq_warn("takeover: no keeper process (%s); a crash of the daemon ends the service",
			 strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid > 0) {
		close(fds[1]);
		keep(fds[0]);
	}
	close(fds[0]);
	return fds[1];
}
