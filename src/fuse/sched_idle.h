/* SPDX-License-Identifier: MIT */
/*
 * sched_idle.h - a request thread that answers on its caller's CPU as
 * SCHED_IDLE, and notices when that starves it.
 *
 * Why: a thread that answers a quick request (a readdir from memory) on
 * the CPU where the caller sleeps, as SCHED_IDLE, hands that CPU straight
 * back with its reply: a CPU running only SCHED_IDLE tasks counts as
 * idle, so the woken caller stays there and preempts us at once. No
 * cross-CPU wakeup, no halted vCPU to wake (uring.c, "Same-CPU
 * handoff"). The ring threads of FUSE over io_uring (uring.c) use it;
 * /dev/fuse requests go through libfuse's loop.
 *
 * The price: next to a busy task on the same CPU, a SCHED_IDLE thread gets
 * almost no CPU, and requests would wait with it. So a thread goes back to
 * SCHED_OTHER before work that takes a while (common/long_work.h), and,
 * after a long wait for a request, reads its run queue wait from
 * /proc/thread-self/schedstat: if it spent most of the time since its last
 * look (taken at most a millisecond before the wait) waiting for the CPU,
 * it answers plainly for a while.
 */
#ifndef LSQ_FUSE_SCHED_IDLE_H
#define LSQ_FUSE_SCHED_IDLE_H

#include <stdbool.h>
#include <stdint.h>

/* After a wait for a request longer than this, look for starvation: it
 * shows as one, and the hot path (requests microseconds apart) reads
 * nothing. */
#define LSQ_STARVE_CHECK_NS 1000000u

struct lsq_idle_thread {
	bool idle;              /* runs as SCHED_IDLE */
	uint64_t paused_until;  /* starved lately: no SCHED_IDLE before (ns) */
	int schedstat_fd;       /* -1: starvation unseen, so never idle */
	uint64_t run_delay;     /* run queue wait when last read (ns) */
	uint64_t run_delay_read; /* when that was (ns) */
};

/* Whether our threads may go SCHED_IDLE and come back (root, CAP_SYS_NICE
 * or RLIMIT_NICE); probed once per process on a throwaway thread. */
bool lsq_sched_idle_allowed(void);

/* Called on the thread itself. */
void lsq_idle_thread_init(struct lsq_idle_thread *t);
void lsq_idle_thread_fini(struct lsq_idle_thread *t);

/* Goes SCHED_IDLE unless starvation paused that; true if idle now. */
bool lsq_idle_enter(struct lsq_idle_thread *t, uint64_t now);

/* Back to SCHED_OTHER; < 0 (-errno) only if the switch was refused. */
int lsq_idle_leave(struct lsq_idle_thread *t);

/* Before a wait for a request: takes a fresh look at the run queue wait
 * if the last one is older than LSQ_STARVE_CHECK_NS. Then the caller's own
 * runs, which keep an idle thread waiting a moment after every answer,
 * add at most that much to what the check after the wait sees. */
void lsq_idle_before_wait(struct lsq_idle_thread *t, uint64_t now);

/* After a wait for a request of more than LSQ_STARVE_CHECK_NS: true when
 * the thread was starved, has left SCHED_IDLE and stays plain for a
 * while. */
bool lsq_idle_check_starved(struct lsq_idle_thread *t, uint64_t now);

/* Binds the calling thread to one CPU; 0 or -1 (errno), as
 * sched_setaffinity. */
int lsq_bind_to_cpu(int cpu);

uint64_t lsq_monotonic_ns(void);

#endif
