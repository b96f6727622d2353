/* SPDX-License-Identifier: MIT */
#include "fuse/sched_idle.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

/* Waiting on the run queue this long since the last look, and for more
 * than half of that time, makes a thread answer plainly for PAUSE_NS.
 * Most, not any: a caller that runs on between its requests keeps us off
 * the CPU for a moment after each answer, which adds up over a walk. */
#define STARVED_NS 2000000u
#define PAUSE_NS 1000000000u

uint64_t lsq_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int lsq_bind_to_cpu(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof(one), &one);
}

static int set_policy(int policy)
{
	struct sched_param sp = { .sched_priority = 0 };

	return sched_setscheduler(0, policy, &sp);
}

static bool probe_ok;

static void *probe_main(void *arg)
{
	(void)arg;
	probe_ok = set_policy(SCHED_IDLE) == 0 && set_policy(SCHED_OTHER) == 0;
	return NULL;
}

static void probe_once(void)
{
	pthread_t tid;

	/* A thread of its own: it may stay SCHED_IDLE when it may not
	 * come back. */
	if (pthread_create(&tid, NULL, probe_main, NULL) == 0)
		pthread_join(tid, NULL);
}

bool lsq_sched_idle_allowed(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, probe_once);
	return probe_ok;
}

/* The second field of /proc/thread-self/schedstat: nanoseconds spent
 * runnable but waiting for the CPU. */
static bool read_run_delay(const struct lsq_idle_thread *t, uint64_t *out)
{
	char buf[96];
	ssize_t n = pread(t->schedstat_fd, buf, sizeof(buf) - 1, 0);
	char *p;

	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strchr(buf, ' ');
	if (!p)
		return false;
	*out = strtoull(p + 1, NULL, 10);
	return true;
}

void lsq_idle_thread_init(struct lsq_idle_thread *t)
{
	*t = (struct lsq_idle_thread){ .schedstat_fd = -1 };
	if (!lsq_sched_idle_allowed())
		return;
	t->schedstat_fd = open("/proc/thread-self/schedstat",
			       O_RDONLY | O_CLOEXEC);
	if (t->schedstat_fd >= 0 && !read_run_delay(t, &t->run_delay)) {
		close(t->schedstat_fd);
		t->schedstat_fd = -1;
	}
	t->run_delay_read = lsq_monotonic_ns();
}

void lsq_idle_thread_fini(struct lsq_idle_thread *t)
{
	lsq_idle_leave(t);
	if (t->schedstat_fd >= 0)
		close(t->schedstat_fd);
	t->schedstat_fd = -1;
}

bool lsq_idle_enter(struct lsq_idle_thread *t, uint64_t now)
{
	if (!t->idle && t->schedstat_fd >= 0 && now >= t->paused_until &&
	    set_policy(SCHED_IDLE) == 0)
		t->idle = true;
	return t->idle;
}

int lsq_idle_leave(struct lsq_idle_thread *t)
{
	int err;

	if (!t->idle)
		return 0;
	t->idle = false;
	if (set_policy(SCHED_OTHER) == 0)
		return 0;
	err = errno;
	/* Only if someone lowered our RLIMIT_NICE since the probe: never
	 * go idle again on this thread. */
	close(t->schedstat_fd);
	t->schedstat_fd = -1;
	return -err;
}

void lsq_idle_before_wait(struct lsq_idle_thread *t, uint64_t now)
{
	uint64_t delay;

	if (t->idle && now - t->run_delay_read > LSQ_STARVE_CHECK_NS &&
	    read_run_delay(t, &delay)) {
		t->run_delay = delay;
		t->run_delay_read = now;
	}
}

bool lsq_idle_check_starved(struct lsq_idle_thread *t, uint64_t now)
{
	uint64_t delay, waited;
	bool starved;

	if (t->schedstat_fd < 0 || !read_run_delay(t, &delay))
		return false;
	waited = delay - t->run_delay;
	starved = t->idle && waited > STARVED_NS &&
		  2 * waited > now - t->run_delay_read;
	if (starved) {
		lsq_debug("SCHED_IDLE thread waited %" PRIu64 " us of the last "
			  "%" PRIu64 " us for a CPU; answering plainly for a "
			  "while", waited / 1000, (now - t->run_delay_read) / 1000);
		t->paused_until = now + PAUSE_NS;
		lsq_idle_leave(t);
	}
	t->run_delay = delay;
	t->run_delay_read = now;
	return starved;
}
