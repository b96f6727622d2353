/* SPDX-License-Identifier: MIT */
/*
 * request_loop.c - leader/followers request loop with adaptive busy polling.
 *
 * Why not libfuse's multi-threaded loop: there every worker sleeps in
 * read(/dev/fuse), so every request wakes a sleeping thread, usually on
 * another CPU, and the reply wakes the caller back. A metadata walk is a
 * chain of such round trips (find waits for each readdir), and on a
 * virtual machine those cross-CPU wakeups cost tens of microseconds each:
 * `find -type f` over 155k entries spent 2.4 s where the same walk with a
 * polling reader takes 1.5 s (docs/decisions.md has the figures).
 *
 * Here exactly one thread, the leader, reads /dev/fuse, non-blocking. When
 * the queue is empty it spins for a while before it sleeps in poll(), so a
 * request that follows closely costs no wakeup. The spin length adapts the
 * way the kernel's haltpoll governor does: it doubles when a request came
 * soon after the leader went to sleep, and halves when the spin was wasted,
 * so an idle mount does not burn CPU. The leader answers requests served
 * from memory itself and keeps reading; before a request that may take long
 * (a data read, anything that may wait for the network) it gives the seat
 * to a follower, waking or starting one, so reads still run in parallel.
 * It also gives the seat up when it finds requests already queued, so a
 * burst from many callers spreads over the threads.
 *
 * Followers wait on a condition variable, never on /dev/fuse: then a new
 * request wakes nobody while the leader spins. The leader spins only while
 * no other thread is answering a request: those need the CPUs (a
 * sequential reader keeps several threads decompressing), and the requests
 * they answer are not waiting to be read.
 *
 * While requests are being answered nobody spins, and handing the seat on
 * at every read would cost a second wakeup per request (the follower's)
 * and put the woken follower on a CPU a decompressing thread wants. So a
 * thread that ends a handed-off request while others are still busy does
 * not queue for the seat: it becomes a free reader, waiting on /dev/fuse
 * itself through its own epoll instance with EPOLLEXCLUSIVE, so a request
 * wakes exactly one of them and that one answers it, as in libfuse's loop.
 * A thread that stops reading wakes a follower only when nobody else is
 * left reading. Once no request is being answered, the next thread done
 * takes the seat and spinning resumes; free readers drain into followers.
 * With two readers decompressing on two CPUs (xz, 4 KiB random reads)
 * this took 2 jobs from 1.65x to 1.75x the IOPS of 1 job.
 *
 * Spinning covers our half of a round trip; the caller's half is its CPU
 * going idle while it waits, and on a VM without guest halt polling an
 * idle CPU halts, so the reply's wakeup is an interrupt to a halted vCPU
 * (tens of microseconds). -o idle_poll asks the kernel, through the CPU
 * latency PM QoS (/dev/cpu_dma_latency), to keep idle CPUs polling while
 * requests come, and drops the request IDLE_POLL_HOLD_MS after the last
 * one: find -type f over the bench tree 0.60 -> 0.33 s (docs/caching.md).
 *
 * Same-CPU answers (-o same_cpu, on by default): the caller's half can also
 * be avoided without touching the machine's settings. Once SAME_CPU_AFTER
 * quick requests came in a row, the leader binds itself to the CPU its
 * caller last ran on (field 39 of /proc/PID/stat, looked up at most every
 * CALLER_CHECK_NS) and answers as SCHED_IDLE (fuse/sched_idle.h). The
 * caller's request wakes the leader on the caller's own CPU; the caller
 * sleeps, the leader runs there, and its reply wakes the caller on a CPU
 * that counts as idle, so the caller stays and preempts it: no interrupt
 * to another vCPU either way. The leader then sleeps instead of spinning
 * (a spin would only delay the caller), and finds the caller's next
 * request already queued, which here is no sign of a burst. A request
 * handed to another thread ends the run: the leader goes back to any CPU
 * and SCHED_OTHER. Cold find -type f over the bench tree: 0.53 -> 0.36 s
 * (the kernel's own mount: 0.22 s). Tried first, with the whole daemon
 * bound to one CPU: the scheduler starts find on the other CPU and keeps
 * it there (1.15 s), hence the lookup of the caller's CPU.
 */
#include "fuse/request_loop.h"

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/long_work.h"
#include "fuse/sched_idle.h"

/* The shortest spin worth starting again after it had shrunk to nothing. */
#define SPIN_MIN_NS 10000u

/* idle_poll: how long the zero-latency request outlives the last request,
 * and the value that lifts it (PM_QOS_CPU_LATENCY_DEFAULT_VALUE). */
#define IDLE_POLL_HOLD_MS 2
#define CPU_LATENCY_NO_CONSTRAINT 2000000000

/* How often the leader looks up which CPU its callers run on; sooner
 * when it had to wait for CALLER_GONE_WAITS requests in a row: on the
 * caller's CPU the next request is usually queued by the time we look,
 * as the caller ran while we were off the CPU. */
#define CALLER_CHECK_NS 2000000u
#define CALLER_RECHECK_NS 100000u
#define CALLER_GONE_WAITS 3u

/* Same-CPU answers start after this many quick requests in a row: a mix
 * of quick requests and reads (tar, a build) hands the seat on at every
 * read, and rebinding the leader each time costs more than it saves. */
#define SAME_CPU_AFTER 16u

struct request_loop {
	struct fuse_session *se;
	struct lsq_request_loop_options opt;
	int fd;                 /* the session's /dev/fuse, non-blocking */
	int stop_fd;            /* eventfd, readable once the loop stops */
	uint64_t spin_max_ns;
	uint64_t spin_ns;       /* the current spin; only the leader uses it */
	atomic_bool stopping;
	atomic_uint busy;       /* threads answering a request they handed off */
	sem_t ended;            /* posted when a worker sees the session end */

	int qos_fd;             /* /dev/cpu_dma_latency; -1: no idle_poll */
	pthread_mutex_t qos_mu; /* orders the writes to qos_fd */
	atomic_bool qos_on;     /* our zero-latency request is in force */

	bool same_cpu;          /* the leader answers on the caller's CPU */
	cpu_set_t allowed;      /* CPUs we may run on */
	unsigned ncpu;          /* highest allowed CPU + 1 */
	atomic_uint *decompressing; /* per CPU: our decompressions there */
	atomic_int caller_cpu;  /* where the last caller looked up ran, -1 */
	atomic_uint_fast64_t caller_checked; /* when that was (ns) */
	atomic_uint quick_run;  /* quick requests since the last handoff */

	pthread_mutex_t mu;
	pthread_cond_t seat_free;
	bool seat_taken;        /* mu: a leader is reading */
	unsigned free_readers;  /* mu: threads reading without the seat */
	unsigned idle;          /* mu: followers waiting for the seat */
	unsigned nthreads;      /* mu */
	pthread_t *threads;     /* mu: opt.max_threads slots */
	int error;              /* mu: first fatal read error, -errno */
	bool spawn_warned;      /* mu */
};

static void *worker_main(void *arg);

/* A worker's own state for same-CPU answers. */
struct worker {
	struct lsq_idle_thread idle;
	int bound_cpu;          /* -1: may run on any allowed CPU */
	unsigned waits;         /* quick requests in a row we waited for */
	struct request_loop *lp;
	int decompress_cpu;     /* where its decompression counts, -1 */
	bool spread;            /* bound for that decompression only */
};

static __thread struct worker *current_worker;

/* What a thread does next; see the comment at the top. */
enum role { FOLLOWER, LEADER, FREE_READER };

/* Called with mu held. */
static void spawn_worker_locked(struct request_loop *lp)
{
	int err;

	if (lp->nthreads >= lp->opt.max_threads || atomic_load(&lp->stopping))
		return;
	err = pthread_create(&lp->threads[lp->nthreads], NULL, worker_main,
			     lp);
	if (err == 0) {
		lp->nthreads++;
		return;
	}
	if (!lp->spawn_warned)
		lsq_warn("cannot start a request thread (%s); going on with "
			 "%u", strerror(err), lp->nthreads);
	lp->spawn_warned = true;
}

/* Waits as a follower until the seat is free; false when stopping. */
static bool take_seat(struct request_loop *lp)
{
	bool ok;

	pthread_mutex_lock(&lp->mu);
	while (lp->seat_taken && !atomic_load(&lp->stopping)) {
		lp->idle++;
		pthread_cond_wait(&lp->seat_free, &lp->mu);
		lp->idle--;
	}
	ok = !atomic_load(&lp->stopping);
	if (ok)
		lp->seat_taken = true;
	pthread_mutex_unlock(&lp->mu);
	return ok;
}

/* A reader is about to be busy: if it was the last one reading, a
 * follower takes the seat (or a new thread starts). */
static void stop_reading(struct request_loop *lp, enum role role)
{
	pthread_mutex_lock(&lp->mu);
	if (role == LEADER)
		lp->seat_taken = false;
	else
		lp->free_readers--;
	if (!lp->seat_taken && lp->free_readers == 0) {
		if (lp->idle)
			pthread_cond_signal(&lp->seat_free);
		else
			spawn_worker_locked(lp);
	}
	pthread_mutex_unlock(&lp->mu);
}

/* A thread that answered a handed-off request (was_reading false) or a
 * free reader that found the others idle: read on freely while requests
 * are being answered, else lead if the seat is free, else follow. */
static enum role settle(struct request_loop *lp, bool was_reading)
{
	enum role role;

	pthread_mutex_lock(&lp->mu);
	if (atomic_load_explicit(&lp->busy, memory_order_relaxed) > 0 &&
	    !atomic_load(&lp->stopping)) {
		if (!was_reading)
			lp->free_readers++;
		role = FREE_READER;
	} else {
		if (was_reading)
			lp->free_readers--;
		role = lp->seat_taken ? FOLLOWER : LEADER;
		if (role == LEADER)
			lp->seat_taken = true;
	}
	pthread_mutex_unlock(&lp->mu);
	return role;
}

static void end_loop(struct request_loop *lp, int err)
{
	pthread_mutex_lock(&lp->mu);
	if (err < 0 && lp->error == 0)
		lp->error = err;
	pthread_mutex_unlock(&lp->mu);
	fuse_session_exit(lp->se);
	sem_post(&lp->ended);
}

/* haltpoll's rule, after a spin that ended in sleep: a request that came
 * within the longest spin would have been caught by a longer one; a later
 * one means spinning is wasted while requests come that sparsely. */
static void adapt_spin(struct request_loop *lp, uint64_t waited_ns)
{
	if (waited_ns <= lp->spin_max_ns) {
		lp->spin_ns = lp->spin_ns ? lp->spin_ns * 2 : SPIN_MIN_NS;
		if (lp->spin_ns > lp->spin_max_ns)
			lp->spin_ns = lp->spin_max_ns;
	} else {
		lp->spin_ns /= 2;
		if (lp->spin_ns < SPIN_MIN_NS)
			lp->spin_ns = 0;
	}
}

/* Turns our CPU latency request on (idle CPUs poll) or off. */
static void set_idle_poll(struct request_loop *lp, bool on)
{
	int32_t value = on ? 0 : CPU_LATENCY_NO_CONSTRAINT;

	pthread_mutex_lock(&lp->qos_mu);
	if (atomic_load(&lp->qos_on) != on &&
	    write(lp->qos_fd, &value, sizeof(value)) == sizeof(value))
		atomic_store(&lp->qos_on, on);
	pthread_mutex_unlock(&lp->qos_mu);
}

/* Sleeps until /dev/fuse or the stop eventfd is readable, or timeout_ms
 * passed (-1: no timeout); 1 when woken, 0 on timeout. ep is the thread's
 * epoll instance (the fuse fd with EPOLLEXCLUSIVE), -1 if it could not be
 * made: then poll(), which wakes every sleeper. */
static int wait_readable(struct request_loop *lp, int ep, int timeout_ms)
{
	struct epoll_event ev;
	struct pollfd pfd[2];
	int n;

	if (ep >= 0) {
		n = epoll_wait(ep, &ev, 1, timeout_ms);
	} else {
		pfd[0] = (struct pollfd){ .fd = lp->fd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = lp->stop_fd,
					  .events = POLLIN };
		n = poll(pfd, 2, timeout_ms);
	}
	if (n < 0)
		return errno == EINTR ? 1 : -errno;
	return n > 0;
}

static int make_epoll(struct request_loop *lp)
{
	struct epoll_event fuse_ev = { .events = EPOLLIN | EPOLLEXCLUSIVE };
	struct epoll_event stop_ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -1;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lp->fd, &fuse_ev) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, lp->stop_fd, &stop_ev) < 0) {
		close(ep);
		return -1;
	}
	return ep;
}

/* The CPU a task last ran on: field 39 of /proc/PID/stat; -1 if unknown
 * (gone, hidden by hidepid, or in a pid namespace we cannot see). */
static int task_cpu(uint32_t pid)
{
	char path[32], buf[1024], *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');  /* the command name may hold anything */
	for (field = 2; p && field < 39; field++)
		p = strchr(p + 1, ' ');
	return p ? atoi(p + 1) : -1;
}

/* Back to a plain thread: SCHED_OTHER, any allowed CPU. */
static void answer_anywhere(struct request_loop *lp, struct worker *w)
{
	lsq_idle_leave(&w->idle);
	if (w->bound_cpu >= 0 &&
	    sched_setaffinity(0, sizeof(lp->allowed), &lp->allowed) == 0)
		w->bound_cpu = -1;
}

/* The leader is about to answer a quick request itself: do it on the
 * caller's CPU, as SCHED_IDLE (fuse/sched_idle.h), so the reply wakes the
 * caller where it sleeps and the CPU is handed straight back. */
static void answer_on_callers_cpu(struct request_loop *lp, struct worker *w,
				  const struct fuse_in_header *in, bool waited)
{
	uint64_t now, since;
	int cpu;

	if (!lp->same_cpu)
		return;
	if (atomic_load_explicit(&lp->quick_run, memory_order_relaxed) <
	    SAME_CPU_AFTER) {
		atomic_fetch_add_explicit(&lp->quick_run, 1,
					  memory_order_relaxed);
		return;
	}
	now = lsq_monotonic_ns();
	w->waits = waited ? w->waits + 1 : 0;
	since = now - atomic_load_explicit(&lp->caller_checked,
					   memory_order_relaxed);
	if (in->pid && (since > CALLER_CHECK_NS ||
			(w->waits >= CALLER_GONE_WAITS &&
			 since > CALLER_RECHECK_NS))) {
		atomic_store_explicit(&lp->caller_checked, now,
				      memory_order_relaxed);
		atomic_store_explicit(&lp->caller_cpu, task_cpu(in->pid),
				      memory_order_relaxed);
	}
	cpu = atomic_load_explicit(&lp->caller_cpu, memory_order_relaxed);
	if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &lp->allowed) ||
	    !lsq_idle_enter(&w->idle, now)) {
		answer_anywhere(lp, w);
		return;
	}
	if (w->bound_cpu != cpu && lsq_bind_to_cpu(cpu) == 0)
		w->bound_cpu = cpu;
}

/* Decompressions go where none of ours runs. The scheduler puts a thread
 * woken by a caller or by the network next to its waker, so two readers'
 * blocks often decompressed on one CPU while the other idled: xz 4 KiB
 * random reads with 2 jobs, first second, 605-625 -> 653-678 IOPS
 * locally, 522-551 -> 556-614 over HTTP. Not for a leader answering on
 * its caller's CPU: it decompresses there while the caller waits. */
static void start_decompression(struct worker *w)
{
	struct request_loop *lp = w->lp;
	int cpu = sched_getcpu();

	w->decompress_cpu = -1;
	if (cpu < 0 || (unsigned)cpu >= lp->ncpu)
		return;
	if (w->bound_cpu < 0 && atomic_load_explicit(&lp->decompressing[cpu],
						     memory_order_relaxed)) {
		for (unsigned i = 1; i < lp->ncpu; i++) {
			int c = (int)(((unsigned)cpu + i) % lp->ncpu);

			if (!CPU_ISSET(c, &lp->allowed) ||
			    atomic_load_explicit(&lp->decompressing[c],
						 memory_order_relaxed))
				continue;
			if (lsq_bind_to_cpu(c) == 0) {
				cpu = c;
				w->spread = true;
			}
			break;
		}
	}
	w->decompress_cpu = cpu;
	atomic_fetch_add_explicit(&lp->decompressing[cpu], 1,
				  memory_order_relaxed);
}

static void end_decompression(struct worker *w)
{
	struct request_loop *lp = w->lp;

	if (w->decompress_cpu >= 0)
		atomic_fetch_sub_explicit(&lp->decompressing[w->decompress_cpu],
					  1, memory_order_relaxed);
	w->decompress_cpu = -1;
	/* Widening the mask moves nothing: we stay where we are. */
	if (w->spread &&
	    sched_setaffinity(0, sizeof(lp->allowed), &lp->allowed) == 0)
		w->spread = false;
}

/* lsq_long_work_hook of the workers: a source read or a decompression
 * wants the thread's fair share of the CPU. On the caller's CPU we go
 * SCHED_IDLE again as soon as it is done: a reply sent as SCHED_OTHER
 * would make the scheduler wake the caller on another CPU. */
static void worker_long_work(enum lsq_long_work what, bool done)
{
	struct worker *w = current_worker;

	if (!w)
		return;
	if (!done) {
		lsq_idle_leave(&w->idle);
		if (what == LSQ_WORK_DECOMPRESS && w->lp->decompressing)
			start_decompression(w);
		return;
	}
	if (what == LSQ_WORK_DECOMPRESS && w->lp->decompressing)
		end_decompression(w);
	if (w->bound_cpu >= 0)
		lsq_idle_enter(&w->idle, lsq_monotonic_ns());
}

/* The next request into buf: > 0 its size, 0 the session ended, < 0 a
 * read error, -EAGAIN (free readers only) when woken for nothing while no
 * request is being answered: time to settle. *queued tells whether the
 * request was waiting already. Only the leader spins. */
static int next_request(struct request_loop *lp, struct fuse_buf *buf,
			bool *queued, enum role role, int ep, struct worker *w)
{
	uint64_t start = 0;
	bool slept = false;

	*queued = true;
	for (;;) {
		int res;

		if (atomic_load(&lp->stopping) || fuse_session_exited(lp->se))
			return 0;
		res = fuse_session_receive_buf(lp->se, buf);
		if (res > 0) {
			/* spin_ns is the seat's: free readers leave it */
			if (slept && role == LEADER)
				adapt_spin(lp, lsq_monotonic_ns() - start);
			if (lp->qos_fd >= 0 && !atomic_load_explicit(
					&lp->qos_on, memory_order_relaxed))
				set_idle_poll(lp, true);
			return res;
		}
		if (res == 0)
			return 0;       /* unmounted: libfuse marked the exit */
		if (res != -EAGAIN && res != -EINTR)
			return res;
		if (res == -EINTR)
			continue;
		*queued = false;
		if (role == FREE_READER) {
			if (slept && atomic_load_explicit(&lp->busy,
						memory_order_relaxed) == 0)
				return -EAGAIN;
		} else {
			if (!start)
				start = lsq_monotonic_ns();
			/* On the caller's CPU a spin only delays the
			 * caller; our wakeup there is a local one. */
			if (!slept && !w->idle.idle &&
			    lsq_monotonic_ns() - start < lp->spin_ns &&
			    atomic_load_explicit(&lp->busy,
						 memory_order_relaxed) == 0) {
				/* Like haltpoll, spin only on a CPU nobody
				 * else wants: a spinner that kept its CPU
				 * from a runnable task would delay the very
				 * caller it waits for. */
				sched_yield();
				continue;
			}
		}
		slept = true;
		if (lp->qos_fd >= 0 &&
		    atomic_load_explicit(&lp->qos_on, memory_order_relaxed)) {
			res = wait_readable(lp, ep, IDLE_POLL_HOLD_MS);
			if (res == 0)
				set_idle_poll(lp, false);  /* requests stopped */
		} else {
			uint64_t before = w->idle.idle ? lsq_monotonic_ns() : 0;
			uint64_t after;

			if (before)
				lsq_idle_before_wait(&w->idle, before);

			res = wait_readable(lp, ep, -1);
			after = before ? lsq_monotonic_ns() : 0;
			/* A long wait as SCHED_IDLE: were we starved? */
			if (after - before > LSQ_STARVE_CHECK_NS &&
			    lsq_idle_check_starved(&w->idle, after))
				answer_anywhere(lp, w);
		}
		if (res < 0)
			return res;
	}
}

static bool may_answer_inline(const struct request_loop *lp,
			      const struct fuse_buf *buf, size_t len)
{
	const struct fuse_in_header *in = buf->mem;

	if (!lp->opt.answer_inline || (buf->flags & FUSE_BUF_IS_FD) ||
	    len < sizeof(*in))
		return false;
	return lp->opt.answer_inline(lp->opt.ctx, in->opcode);
}

static void *worker_main(void *arg)
{
	struct request_loop *lp = arg;
	struct fuse_buf buf = { .mem = NULL };
	enum role role = FOLLOWER;
	int ep = make_epoll(lp);
	struct worker w = { .bound_cpu = -1, .lp = lp, .decompress_cpu = -1 };

	pthread_setname_np(pthread_self(), "sqfs-worker");
	/* A thread inherits policy and CPU from the one that started it,
	 * which may have been answering on a caller's CPU. */
	if (lp->same_cpu) {
		struct sched_param sp = { .sched_priority = 0 };

		sched_setscheduler(0, SCHED_OTHER, &sp);
	}
	if (CPU_COUNT(&lp->allowed) > 0)
		sched_setaffinity(0, sizeof(lp->allowed), &lp->allowed);
	lsq_idle_thread_init(&w.idle);
	current_worker = &w;
	lsq_long_work_hook = worker_long_work;
	for (;;) {
		bool queued;
		int res;

		if (role == FOLLOWER) {
			if (!take_seat(lp))
				break;
			role = LEADER;
		}
		res = next_request(lp, &buf, &queued, role, ep, &w);
		if (res == -EAGAIN) {
			role = settle(lp, true);
			continue;
		}
		if (res <= 0) {
			end_loop(lp, res);
			break;
		}
		/* On the caller's CPU, the caller's next request is always
		 * queued by the time we look: it ran as soon as we replied. */
		if ((queued && !w.idle.idle) ||
		    !may_answer_inline(lp, &buf, (size_t)res)) {
			atomic_fetch_add_explicit(&lp->busy, 1,
						  memory_order_relaxed);
			stop_reading(lp, role);
			atomic_store_explicit(&lp->quick_run, 0,
					      memory_order_relaxed);
			answer_anywhere(lp, &w);
			fuse_session_process_buf(lp->se, &buf);
			atomic_fetch_sub_explicit(&lp->busy, 1,
						  memory_order_relaxed);
			role = settle(lp, false);
			continue;
		}
		if (role == LEADER)
			answer_on_callers_cpu(lp, &w, buf.mem, !queued);
		else
			answer_anywhere(lp, &w);
		fuse_session_process_buf(lp->se, &buf);
		if (role == FREE_READER &&
		    atomic_load_explicit(&lp->busy, memory_order_relaxed) == 0)
			role = settle(lp, true);
	}
	if (ep >= 0)
		close(ep);
	current_worker = NULL;
	lsq_long_work_hook = NULL;
	lsq_idle_thread_fini(&w.idle);
	free(buf.mem);
	return NULL;
}

static void block_stop_signals(sigset_t *old)
{
	sigset_t set;

	/* libfuse's handlers for these end the session; they must interrupt
	 * the main thread's wait, so no worker may take them. */
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

int lsq_request_loop_run(struct fuse_session *se,
			 const struct lsq_request_loop_options *opt)
{
	struct request_loop lp = {
		.se = se,
		.opt = *opt,
		.fd = fuse_session_fd(se),
		.spin_max_ns = (uint64_t)opt->busy_poll_us * 1000u,
	};
	sigset_t old;
	int flags, ret;
	bool started;
	unsigned i, n;

	if (lp.opt.max_threads == 0)
		lp.opt.max_threads = 1;
	lp.spin_ns = lp.spin_max_ns;
	lp.threads = calloc(lp.opt.max_threads, sizeof(*lp.threads));
	lp.stop_fd = eventfd(0, EFD_CLOEXEC);
	flags = fcntl(lp.fd, F_GETFL);
	if (!lp.threads || lp.stop_fd < 0 || flags < 0 ||
	    fcntl(lp.fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		ret = lp.threads ? -errno : -ENOMEM;
		free(lp.threads);
		if (lp.stop_fd >= 0)
			close(lp.stop_fd);
		return ret ? ret : -EIO;
	}
	lp.qos_fd = -1;
	if (opt->idle_poll) {
		/* Opening adds a request without a constraint. */
		lp.qos_fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
		if (lp.qos_fd < 0)
			lsq_warn("idle_poll: cannot open /dev/cpu_dma_latency "
				 "(%s); idle CPUs will halt as usual",
				 strerror(errno));
	}
	if (sched_getaffinity(0, sizeof(lp.allowed), &lp.allowed) != 0)
		CPU_ZERO(&lp.allowed);
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &lp.allowed))
			lp.ncpu = i + 1;
	/* Without it decompressions are not spread: fine. */
	if (CPU_COUNT(&lp.allowed) > 1)
		lp.decompressing = calloc(lp.ncpu, sizeof(*lp.decompressing));
	lp.same_cpu = opt->same_cpu && CPU_COUNT(&lp.allowed) > 1 &&
		      lsq_sched_idle_allowed();
	atomic_init(&lp.caller_cpu, -1);
	atomic_init(&lp.caller_checked, 0);
	atomic_init(&lp.quick_run, 0);
	pthread_mutex_init(&lp.qos_mu, NULL);
	atomic_init(&lp.qos_on, false);
	atomic_init(&lp.stopping, false);
	atomic_init(&lp.busy, 0);
	sem_init(&lp.ended, 0, 0);
	pthread_mutex_init(&lp.mu, NULL);
	pthread_cond_init(&lp.seat_free, NULL);

	block_stop_signals(&old);
	pthread_mutex_lock(&lp.mu);
	spawn_worker_locked(&lp);
	started = lp.nthreads > 0;  /* under mu: workers start others */
	pthread_mutex_unlock(&lp.mu);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!started) {
		ret = -EAGAIN;
		goto out;
	}

	/* A stop signal interrupts the wait (libfuse's handlers install
	 * without SA_RESTART); the timeout covers one delivered elsewhere. */
	while (!fuse_session_exited(se)) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		sem_timedwait(&lp.ended, &until);
	}
	atomic_store(&lp.stopping, true);
	if (eventfd_write(lp.stop_fd, 1) != 0)
		lsq_warn("request loop: cannot wake the reader: %s",
			 strerror(errno));
	/* No thread starts once stopping is set, so nthreads is final. */
	pthread_mutex_lock(&lp.mu);
	pthread_cond_broadcast(&lp.seat_free);
	n = lp.nthreads;
	pthread_mutex_unlock(&lp.mu);
	for (i = 0; i < n; i++)
		pthread_join(lp.threads[i], NULL);
	ret = lp.error;

out:
	if (lp.qos_fd >= 0)
		close(lp.qos_fd);  /* drops our request */
	pthread_mutex_destroy(&lp.qos_mu);
	fcntl(lp.fd, F_SETFL, flags);
	pthread_cond_destroy(&lp.seat_free);
	pthread_mutex_destroy(&lp.mu);
	sem_destroy(&lp.ended);
	close(lp.stop_fd);
	free(lp.threads);
	free(lp.decompressing);
	return ret;
}
