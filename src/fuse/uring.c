/* SPDX-License-Identifier: MIT */
/*
 * uring.c - FUSE over io_uring (kernel 6.14+, fuse.enable_uring=1).
 *
 * Why: over /dev/fuse, a request wakes whichever daemon thread reads, on
 * whichever CPU, and the caller's CPU goes idle until the reply. On a VM
 * without guest halt polling that idle CPU halts, and waking it for the
 * reply costs tens of microseconds; a metadata walk is a chain of such
 * round trips (find waits for each readdir). With io_uring the kernel
 * queues a request on the queue of the CPU its caller runs on, and the
 * thread it wakes for it is bound to that CPU: the caller blocks and our
 * thread runs in its place on the same CPU, with no cross-CPU wakeup for
 * the request. The scheduler still places the woken caller where it
 * likes at the reply.
 *
 * How: per CPU we may run on, a few threads bound to that CPU (one for
 * each other possible CPU: the kernel wants every queue registered). Each
 * owns a small ring and one ring entry
 * (a header buffer and a payload buffer the kernel copies requests into),
 * so a thread busy with a slow request (a network fetch) holds no entry
 * another request could wait on. A request is copied into one contiguous
 * buffer and handed to libfuse's fuse_session_process_buf(), as the
 * /dev/fuse loop does. libfuse sends every reply through the session's
 * custom writev, installed here: a reply to a ring request (ops.c answers
 * on the thread that received the request) goes into the thread's entry
 * and is committed with COMMIT_AND_FETCH, which also waits for the next
 * request; anything else (notifications, replies to /dev/fuse requests)
 * is written to /dev/fuse as before.
 *
 * Ring threads run as SCHED_OTHER throughout. Answering quick requests
 * as SCHED_IDLE, so that the woken caller kept its CPU, was tried and
 * removed (docs/decisions.md, 2026-11-25: without it 4 bench rows were
 * faster and none slower).
 *
 * Sequential readers: the kernel queues all of one reader's readahead
 * requests on its CPU's queue, so their blocks would decompress one after
 * the other there (xz, 1 MiB reads: 42 instead of 72 MiB/s). A thread
 * whose READ goes on with the queue's reads of that file (within
 * SEQ_WINDOW of where they reached) may therefore run on any CPU until
 * its queue sees another kind of request (float_for_read). Replies
 * are built in the ring payload itself (lsq_scratch_lend): no copy.
 *
 * The kernel switches from /dev/fuse to the rings only once every queue has
 * an entry registered, and it still sends INIT, FORGET and INTERRUPT over
 * /dev/fuse, so the /dev/fuse loop runs alongside. We do not announce
 * FUSE_OVER_IO_URING in the INIT reply: it would make the kernel hold every
 * request until the rings are up, and registration works without it.
 * At unmount the kernel ends every pending fetch with -ENOTCONN.
 *
 * Refusal: the kernel refuses every ring command once root switches
 * enable_uring off, the COMMIT_AND_FETCH that carries an answer included.
 * Refused at registration, before the rings carry anything, the threads
 * end and /dev/fuse serves the mount. Refused later, the request in hand
 * and every later one belong to the rings, and nothing lets their answers
 * go over /dev/fuse: its caller would wait for good. The daemon then ends
 * the connection instead (abandon_connection): one error line, and the
 * process exits, so the kernel aborts the connection and callers get
 * ENOTCONN.
 *
 * On by default (-o io_uring=off to stay on /dev/fuse); used only where
 * root has switched the kernel's support on. docs/decisions.md has the
 * figures and what was tried.
 */

#include "fuse/uring.h"

#include "lsq_config.h"

#include <stdlib.h>

#include "common/bind_cpu.h"
#include "common/log.h"
#include "common/scratch.h"

#if LSQ_HAVE_LIBURING

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The io_uring part of the FUSE ABI (7.42), which Debian 12's
 * <linux/fuse.h> predates. */
#define RING_IN_OUT_HEADER_SZ 128
#define RING_OP_IN_OUT_SZ 128
#define RING_CMD_REGISTER 1u
#define RING_CMD_COMMIT_AND_FETCH 2u

struct ring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

struct ring_req_header {
	char in_out[RING_IN_OUT_HEADER_SZ];
	char op_in[RING_OP_IN_OUT_SZ];
	struct ring_ent_in_out ent_in_out;
};

/* In the 80-byte command area of a 128-byte SQE. */
struct ring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

_Static_assert(sizeof(struct ring_req_header) == 288, "FUSE ring ABI");
_Static_assert(sizeof(struct ring_cmd_req) == 24, "FUSE ring ABI");

/* The most a reply's payload can be: libfuse's max_write and max_pages
 * (1 MiB); the kernel refuses payload buffers smaller than its maximum. */
#define PAYLOAD_CAP ((size_t)1 << 20)

/* Requests to a read-only file system carry names and small structures;
 * a larger one (a write the kernel should have refused) gets EIO. */
#define REQUEST_PAYLOAD_MAX ((size_t)64 << 10)

/* lsq_log_once() keys of our messages, apart from image offsets. */
#define LOG_KEY_REQUEST UINT64_C(0xf0e0000000000001)
#define LOG_KEY_NO_REPLY UINT64_C(0xf0e0000000000002)
#define LOG_KEY_REREGISTER UINT64_C(0xf0e0000000000003)
#define LOG_KEY_REFUSED UINT64_C(0xf0e0000000000004)

/* How far from the end of its queue's reads a READ may start and still
 * count as sequential (float_for_read): the readahead in flight. */
#define SEQ_WINDOW ((uint64_t)2 << 20)

/* How long a thread waits for the session's INIT before giving up. */
#define INIT_WAIT_MS 10000

struct ring_thread {
	struct lsq_uring *u;
	unsigned qid;
	pthread_t tid;
	bool started;
	bool ring_ready;        /* ring set up (by the thread itself) */
	struct io_uring ring;
	struct ring_req_header *hdr;
	char *payload;
	char *request;          /* contiguous copy for libfuse */
	struct iovec iov[2];
	uint64_t unique;        /* request being answered */
	bool replied;           /* its reply is in the entry */
	atomic_uint_fast64_t requests; /* answered; only this thread adds */
	bool seq_read;          /* the request continues a sequential read */
	bool floating;          /* may run on any CPU (float_for_read) */
};

/* Per CPU queue: where its last READ ended (sequential readers). */
struct ring_queue {
	atomic_uint_fast64_t last_read_ino;
	atomic_uint_fast64_t last_read_end;
};

struct lsq_uring {
	struct fuse_session *se;
	int fd;                   /* our own dup of the session's /dev/fuse */
	bool asked;               /* -o io_uring given: say why it is not used */
	unsigned nqueues;
	unsigned nthreads;
	atomic_bool stopping;
	atomic_bool abandoning;   /* a thread is ending the connection */
	atomic_uint registered; /* threads whose entry the kernel holds */
	struct ring_thread *threads;
	struct ring_queue *queues;
	cpu_set_t allowed;        /* CPUs the daemon may run on */
};

static __thread struct ring_thread *current_thread;

/* The custom writev of the session: replies to the request this thread
 * took from its ring go into the ring entry; everything else to fd. */
static ssize_t ring_writev(int fd, struct iovec *iov, int count,
			   void *userdata)
{
	struct ring_thread *t = current_thread;
	struct fuse_out_header *oh;
	size_t used = 0, total = 0;
	int i;

	if (!t || count < 1 || iov[0].iov_len != sizeof(*oh))
		return writev(fd, iov, count);
	oh = iov[0].iov_base;
	if (oh->unique != t->unique || t->replied)
		return writev(fd, iov, count);
	for (i = 1; i < count; i++) {
		if (iov[i].iov_len > PAYLOAD_CAP - used) {
			errno = EINVAL;  /* answer() then replies EIO */
			return -1;
		}
		/* A reply built in the lent payload (lsq_scratch_lend) is
		 * in place already. */
		if (iov[i].iov_base != t->payload + used)
			memmove(t->payload + used, iov[i].iov_base,
				iov[i].iov_len);
		used += iov[i].iov_len;
	}
	memcpy(t->hdr->in_out, oh, sizeof(*oh));
	t->hdr->ent_in_out.payload_sz = (uint32_t)used;
	t->replied = true;
	for (i = 0; i < count; i++)
		total += iov[i].iov_len;
	return (ssize_t)total;
}

static ssize_t plain_read(int fd, void *buf, size_t len, void *userdata)
{
	return read(fd, buf, len);
}

static const struct fuse_custom_io ring_io = {
	.writev = ring_writev,
	.read = plain_read,
};

/* Queues a REGISTER or COMMIT_AND_FETCH for the thread's entry, to be
 * submitted with the next wait. */
static int prep_cmd(struct ring_thread *t, uint32_t op, uint64_t commit)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	struct ring_cmd_req *req;

	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe));  /* SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = t->u->fd;
	sqe->cmd_op = op;
	if (op == RING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)t->iov;
		sqe->len = 2;
	}
	req = (struct ring_cmd_req *)sqe->cmd;
	req->commit_id = commit;
	req->qid = (uint16_t)t->qid;
	return 0;
}

static int submit_cmd(struct ring_thread *t, uint32_t op, uint64_t commit)
{
	int res = prep_cmd(t, op, commit);

	if (res)
		return res;
	return io_uring_submit(&t->ring) == 1 ? 0 : -EIO;
}

/* Sequential reads: the kernel queues all of one reader's readahead
 * requests on its CPU's queue, and that queue's threads are bound to it,
 * so their blocks would decompress one after the other on that CPU. A
 * thread answering a READ that goes on with the queue's reads of the
 * same file (follows_last_read) therefore lets the scheduler place it on
 * any CPU, as /dev/fuse threads are, and stays so while the stream goes
 * on: woken for its next READ, it lands on an idle CPU instead of waiting
 * behind its sibling. The first other request binds it back to its
 * queue's CPU (answer()), next to its callers. Random reads stay bound:
 * requests that do not come in parallel gain nothing from another CPU. */
static void float_for_read(struct ring_thread *t)
{
	if (!t->seq_read || t->floating || CPU_COUNT(&t->u->allowed) < 2)
		return;
	if (sched_setaffinity(0, sizeof(t->u->allowed), &t->u->allowed) == 0)
		t->floating = true;
}

/* The long-work listener of the ring threads' reads: a source read or a
 * decompression is ahead. Floating only then costs cached reads no
 * system call. */
static void ring_long_work(enum lsq_long_work what, bool done)
{
	struct ring_thread *t = current_thread;

	(void)what;
	if (t && !done && t->unique)
		float_for_read(t);
}

lsq_long_work_fn lsq_uring_long_work(void)
{
	return current_thread ? ring_long_work : NULL;
}

/* Submits what is queued (the commit of a reply, which also fetches the
 * next request) and waits for the next completion. */
static int wait_next(struct ring_thread *t, struct io_uring_cqe **cqe)
{
	/* The kernel ends our fetch at unmount; the timeout only bounds
	 * how long a stop waits when it does not. */
	struct __kernel_timespec ts = { .tv_sec = 1 };
	int res;

	*cqe = NULL;
	res = io_uring_submit_and_wait_timeout(&t->ring, cqe, 1, &ts, NULL);
	if (res < 0)
		return res;
	/* liburing returns the count submitted, and may return it with no
	 * completion when the wait ended early: wait again. */
	return *cqe ? 0 : -ETIME;
}

/* Whether a READ goes on with the queue's reads of the same file;
 * records it. */
static bool follows_last_read(struct ring_queue *q, uint64_t ino,
			      const struct fuse_read_in *r)
{
	uint64_t end = atomic_load_explicit(&q->last_read_end,
					    memory_order_relaxed);
	bool same = atomic_load_explicit(&q->last_read_ino,
					 memory_order_relaxed) == ino;
	/* Readahead keeps several READs of a file in flight and the
	 * queue's threads take them in any order: near the end so far
	 * counts, and a READ behind it does not pull the end back. */
	bool seq = same && r->offset <= end + SEQ_WINDOW &&
		   r->offset + SEQ_WINDOW >= end;

	atomic_store_explicit(&q->last_read_ino, ino, memory_order_relaxed);
	if (!same || r->offset + r->size > end)
		atomic_store_explicit(&q->last_read_end, r->offset + r->size,
				      memory_order_relaxed);
	return seq;
}

/* Hands the request now in the entry to libfuse; returns the unique to
 * commit, with the reply (or an error reply) in the entry. */
static uint64_t answer(struct ring_thread *t)
{
	const struct fuse_in_header *in = (const void *)t->hdr->in_out;
	struct fuse_out_header *oh = (void *)t->hdr->in_out;
	uint32_t payload = t->hdr->ent_in_out.payload_sz;
	uint64_t unique = in->unique;
	uint32_t opcode = in->opcode; /* in_out takes the reply header */
	size_t op_len;
	struct fuse_buf buf;

	/* The kernel put in_args[0] (the opcode's fixed part, maybe empty)
	 * in op_in and the rest in the payload; in->len counts them all. */
	if (in->len < sizeof(*in) || payload > REQUEST_PAYLOAD_MAX ||
	    in->len - sizeof(*in) < payload ||
	    in->len - sizeof(*in) - payload > RING_OP_IN_OUT_SZ) {
		lsq_log_once(LOG_KEY_REQUEST, LSQ_LOG_WARNING,
			     "io_uring: cannot take a request (opcode %u, length "
			     "%u, payload %u); answering EIO", opcode,
			     in->len, payload);
		goto fail;
	}
	op_len = in->len - sizeof(*in) - payload;
	memcpy(t->request, in, sizeof(*in));
	memcpy(t->request + sizeof(*in), t->hdr->op_in, op_len);
	memcpy(t->request + sizeof(*in) + op_len, t->payload, payload);
	t->unique = unique;
	t->replied = false;
	t->seq_read = opcode == FUSE_READ &&
		      op_len >= sizeof(struct fuse_read_in) &&
		      follows_last_read(&t->u->queues[t->qid], in->nodeid,
					(const void *)t->hdr->op_in);
	if (!t->seq_read && t->floating) {
		/* back with the caller; outside our cpuset: run anywhere */
		(void)lsq_bind_to_cpu(t->qid);
		t->floating = false;
	}
	buf = (struct fuse_buf){ .size = in->len, .mem = t->request };
	fuse_session_process_buf(t->u->se, &buf);
	t->unique = 0;
	if (t->replied)
		return unique;
	/* Every request the kernel sends over a ring wants an answer. */
	lsq_log_once(LOG_KEY_NO_REPLY, LSQ_LOG_WARNING,
		     "io_uring: no reply to opcode %u; answering EIO",
		     opcode);
fail:
	memset(oh, 0, sizeof(*oh));
	oh->len = sizeof(*oh);
	oh->error = -EIO;
	oh->unique = unique;
	t->hdr->ent_in_out.payload_sz = 0;
	return unique;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Registers the entry; once the kernel holds it, returns 0 and the first
 * request (or the end) comes as the REGISTER's completion. */
static int register_entry(struct ring_thread *t)
{
	struct __kernel_timespec ts = { .tv_nsec = 50 * 1000000 };
	struct io_uring_cqe *cqe;
	unsigned waited = 0;
	int res;

	for (;;) {
		if (atomic_load(&t->u->stopping))
			return -ECANCELED;
		res = submit_cmd(t, RING_CMD_REGISTER, 0);
		if (res)
			return res;
		/* No completion within 50 ms: the kernel keeps the entry
		 * waiting for a request, i.e. accepted it. */
		res = io_uring_wait_cqe_timeout(&t->ring, &cqe, &ts);
		if (res == -ETIME)
			return 0;
		if (res)
			return res;
		res = cqe->res;
		if (res >= 0)
			return 0; /* a request came already: leave the cqe */
		io_uring_cqe_seen(&t->ring, cqe);
		/* -EAGAIN: INIT not answered yet */
		if (res != -EAGAIN || waited >= INIT_WAIT_MS)
			return res;
		sleep_ms(1);
		waited++;
	}
}

/* Whether the connection has ended (unmounted or aborted): /dev/fuse then
 * polls POLLERR, as libfuse's unmount checks too. */
static bool connection_gone(const struct lsq_uring *u)
{
	struct pollfd p = { .fd = u->fd, .events = 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLNVAL));
}

/* A ring command failed with err while the rings carry the connection's
 * requests: an answer the kernel refused, or an entry it would not take
 * back, leaves callers waiting on a queue nobody serves. Unless the
 * connection is ending anyway (unmount, stop), end it: one error line,
 * then the process exits. The kernel aborts a connection whose /dev/fuse
 * is closed, and the connection guard (conn_guard.c) writes its fusectl
 * abort as our main thread dies, even should another thread of ours be
 * stuck in the kernel: every caller gets ENOTCONN, and the mount point
 * stays until it is unmounted, as after a crash. A clean stop would not
 * do: nothing wakes the /dev/fuse loop, and the page store may wait on a
 * page whose READ is one of the unanswered requests. Returns when the
 * connection is ending anyway, or another thread ends it. */
static void abandon_connection(struct ring_thread *t, int err)
{
	struct lsq_uring *u = t->u;

	if (atomic_load(&u->stopping) || connection_gone(u) ||
	    atomic_exchange(&u->abandoning, true))
		return;
	if (err == -EOPNOTSUPP)
		lsq_err_log("io_uring: the kernel refused FUSE io_uring "
			    "(enable_uring switched off?); aborting the "
			    "connection");
	else
		lsq_err_log("io_uring: queue %u: %s; aborting the connection",
			    t->qid, strerror(-err));
	_exit(EXIT_FAILURE);
}

static void *ring_thread_main(void *arg)
{
	struct ring_thread *t = arg;
	struct lsq_uring *u = t->u;
	struct io_uring_cqe *cqe;
	int res;

	pthread_setname_np(pthread_self(), "sqfs-ring");
	(void)lsq_bind_to_cpu(t->qid);  /* outside our cpuset: anywhere */
	current_thread = t;
	/* answer() copies each request out of the payload first, so
	 * replies may be built in it. */
	lsq_scratch_lend(LSQ_SCRATCH_REPLY, t->payload, PAYLOAD_CAP);
	/* Only this thread submits, and completions (a request for us)
	 * matter only when it waits: the kernel then runs their work in
	 * our wait instead of interrupting us for it. */
	res = io_uring_queue_init(2, &t->ring, IORING_SETUP_SQE128 |
				  IORING_SETUP_SINGLE_ISSUER |
				  IORING_SETUP_DEFER_TASKRUN);
	if (res == -EINVAL)  /* before 6.1; FUSE rings came in 6.14 */
		res = io_uring_queue_init(2, &t->ring, IORING_SETUP_SQE128);
	if (res == 0) {
		t->ring_ready = true;
		res = register_entry(t);
	}
	if (res == -EOPNOTSUPP) {
		/* switched off since lsq_uring_start() looked: the rings carry
		 * nothing yet (unless every queue has an entry already; then
		 * the first answer is refused too, and the loop below ends
		 * the connection) */
		lsq_log_once(LOG_KEY_REFUSED,
			     u->asked ? LSQ_LOG_INFO : LSQ_LOG_DEBUG,
			     "io_uring: the kernel refused FUSE io_uring "
			     "(enable_uring switched off?); requests come over "
			     "/dev/fuse");
		return NULL;
	}
	if (res) {
		if (res != -ECANCELED)
			lsq_debug("io_uring: queue %u: cannot register: %s",
				  t->qid, strerror(-res));
		return NULL;
	}
	atomic_fetch_add(&u->registered, 1);
	for (;;) {
		uint64_t unique;

		res = wait_next(t, &cqe);
		if (res == -EINTR || res == -ETIME) {
			if (atomic_load(&u->stopping))
				break;
			continue;
		}
		if (res) {
			/* the commit in hand may not have gone in */
			abandon_connection(t, res);
			break;
		}
		res = cqe->res;
		io_uring_cqe_seen(&t->ring, cqe);
		if (res == -ENOTCONN || res == -ECONNABORTED ||
		    res == -ECANCELED)
			break;  /* unmounted */
		if (res >= 0) {
			unique = answer(t);
			atomic_store_explicit(&t->requests,
				atomic_load_explicit(&t->requests,
						     memory_order_relaxed) + 1,
				memory_order_relaxed);
			res = prep_cmd(t, RING_CMD_COMMIT_AND_FETCH,
				       unique);
			if (res == 0)
				continue;
		}
		/* enable_uring switched off: the kernel refuses every ring
		 * command, this answer's commit included (fuse_uring_cmd()
		 * checks the switch first, so an unmount that raced it
		 * looks the same: abandon_connection() tells) */
		if (res == -EOPNOTSUPP) {
			abandon_connection(t, res);
			break;
		}
		/* The kernel dropped our entry: a queue whose entries all
		 * went would leave its CPU's callers waiting for good, so
		 * hand it a fresh one, or end the connection if it will not
		 * take one. */
		lsq_log_once(LOG_KEY_REREGISTER, LSQ_LOG_WARNING,
			     "io_uring: queue %u: %s; "
			     "registering again", t->qid, strerror(-res));
		res = register_entry(t);
		if (res == 0)
			continue;
		if (res != -ECANCELED)
			abandon_connection(t, res);
		break;
	}
	atomic_fetch_sub(&u->registered, 1);
	current_thread = NULL;
	return NULL;
}

static void free_thread_buffers(struct ring_thread *t)
{
	free(t->hdr);
	free(t->payload);
	free(t->request);
}

static int init_thread(struct lsq_uring *u, struct ring_thread *t,
		       unsigned qid)
{
	t->u = u;
	t->qid = qid;
	t->hdr = malloc(sizeof(*t->hdr));
	t->payload = malloc(PAYLOAD_CAP);
	t->request = malloc(sizeof(struct fuse_in_header) +
			    RING_OP_IN_OUT_SZ + REQUEST_PAYLOAD_MAX);
	if (!t->hdr || !t->payload || !t->request) {
		free_thread_buffers(t);
		return -ENOMEM;
	}
	memset(t->hdr, 0, sizeof(*t->hdr));
	t->iov[0] = (struct iovec){ t->hdr, sizeof(*t->hdr) };
	t->iov[1] = (struct iovec){ t->payload, PAYLOAD_CAP };
	return 0;
}

/* The fuse module's switch; absent on kernels without FUSE over io_uring. */
bool lsq_uring_offered(void)
{
	char c = 'N';
	FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "re");

	if (!f)
		return false;
	if (fread(&c, 1, 1, f) != 1)
		c = 'N';
	fclose(f);
	return c == 'Y' || c == '1';
}

/* The kernel numbers queues 0..num_possible_cpus()-1. */
static unsigned possible_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);

	return n > 0 ? (unsigned)n : 1;
}

/* Threads for queue qid: callers run only on the CPUs we may run on (the
 * online ones in our cpuset); the other queues get one thread, as the
 * kernel wants every queue registered before it uses the rings. */
static unsigned queue_threads(const struct lsq_uring *u, unsigned qid,
			      unsigned per_queue)
{
	return CPU_ISSET(qid, &u->allowed) ? per_queue : 1;
}

struct lsq_uring *lsq_uring_start(struct fuse_session *se, unsigned threads,
				  bool asked)
{
	struct lsq_uring *u;
	unsigned per_queue, q, i, n;
	int cpus;

	if (!lsq_uring_offered()) {
		lsq_log(asked ? LSQ_LOG_INFO : LSQ_LOG_DEBUG,
			"io_uring: the kernel does not offer FUSE over "
			"io_uring (Linux 6.14+, /sys/module/fuse/parameters/"
			"enable_uring); requests come over /dev/fuse");
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->se = se;
	u->asked = asked;
	/* Our own reference to /dev/fuse: fuse_session_unmount() closes the
	 * session's descriptor before lsq_uring_stop() stops the threads,
	 * and their commands must not name a closed or reused one. */
	u->fd = fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, 3);
	if (u->fd < 0) {
		lsq_debug("io_uring: dup of /dev/fuse: %s; using /dev/fuse",
			  strerror(errno));
		free(u);
		return NULL;
	}
	u->nqueues = possible_cpus();
	if (sched_getaffinity(0, sizeof(u->allowed), &u->allowed) != 0)
		CPU_ZERO(&u->allowed);  /* then no thread floats */
	cpus = CPU_COUNT(&u->allowed);
	per_queue = threads / (unsigned)(cpus > 0 ? cpus : 1);
	if (per_queue < 2)
		per_queue = 2;
	for (q = 0; q < u->nqueues; q++)
		u->nthreads += queue_threads(u, q, per_queue);
	atomic_init(&u->stopping, false);
	atomic_init(&u->abandoning, false);
	atomic_init(&u->registered, 0);
	u->threads = calloc(u->nthreads, sizeof(*u->threads));
	u->queues = calloc(u->nqueues, sizeof(*u->queues));
	if (!u->threads || !u->queues) {
		u->nthreads = 0;
		goto fail;
	}
	i = 0;
	for (q = 0; q < u->nqueues; q++) {
		for (n = queue_threads(u, q, per_queue); n > 0; n--, i++) {
			if (init_thread(u, &u->threads[i], q)) {
				lsq_debug("io_uring: out of memory; using "
					  "/dev/fuse");
				u->nthreads = i;
				goto fail;
			}
		}
	}
	/* From here on libfuse sends every message through ring_writev. */
	if (fuse_session_custom_io(se, &ring_io, fuse_session_fd(se)) != 0) {
		lsq_debug("io_uring: libfuse refused the reply hook");
		goto fail;
	}
	for (n = 0; n < u->nthreads; n++) {
		struct ring_thread *t = &u->threads[n];

		if (pthread_create(&t->tid, NULL, ring_thread_main, t) != 0)
			break;
		t->started = true;
	}
	if (n < u->nthreads)
		lsq_warn("io_uring: started %u of %u ring threads", n,
			 u->nthreads);
	lsq_debug("io_uring: %u queues, %u threads (%u per CPU we run on)",
		  u->nqueues, u->nthreads, per_queue);
	return u;

fail:
	for (i = 0; i < u->nthreads; i++)
		free_thread_buffers(&u->threads[i]);
	free(u->threads);
	free(u->queues);
	close(u->fd);
	free(u);
	return NULL;
}

void lsq_uring_get_stats(const struct lsq_uring *u, uint64_t *threads,
			 uint64_t *requests)
{
	uint64_t sum = 0;

	*threads = 0;
	*requests = 0;
	if (!u)
		return;
	for (unsigned i = 0; i < u->nthreads; i++)
		sum += atomic_load_explicit(&u->threads[i].requests,
					    memory_order_relaxed);
	*threads = atomic_load(&u->registered);
	*requests = sum;
}

void lsq_uring_stop(struct lsq_uring *u)
{
	unsigned i;

	if (!u)
		return;
	atomic_store(&u->stopping, true);
	for (i = 0; i < u->nthreads; i++) {
		if (u->threads[i].started)
			pthread_join(u->threads[i].tid, NULL);
		if (u->threads[i].ring_ready)
			io_uring_queue_exit(&u->threads[i].ring);
		free_thread_buffers(&u->threads[i]);
	}
	free(u->threads);
	free(u->queues);
	close(u->fd);
	free(u);
}

#else /* !LSQ_HAVE_LIBURING */

bool lsq_uring_offered(void)
{
	return false;
}

struct lsq_uring *lsq_uring_start(struct fuse_session *se, unsigned threads,
				  bool asked)
{
	(void)se;
	(void)threads;
	lsq_log(asked ? LSQ_LOG_WARNING : LSQ_LOG_DEBUG,
		"io_uring: not built in (no liburing); requests come over "
		"/dev/fuse");
	return NULL;
}

void lsq_uring_stop(struct lsq_uring *u)
{
	(void)u;
}

void lsq_uring_get_stats(const struct lsq_uring *u, uint64_t *threads,
			 uint64_t *requests)
{
	(void)u;
	*threads = 0;
	*requests = 0;
}

lsq_long_work_fn lsq_uring_long_work(void)
{
	return NULL;
}

#endif
