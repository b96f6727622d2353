/* SPDX-License-Identifier: MIT */
/*
 * takeover_io.c - the FUSE protocol side of a takeover (takeover_io.h
 * says why).
 */
#include "fuse/takeover_io.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/hex.h"

/* Linux 6.9's protocol 7.40; Debian 12's <linux/fuse.h> predates it. */
#define LSQ_FUSE_NOTIFY_RESEND 7
#define LSQ_FUSE_HAS_RESEND (1ull << 39)
/* The unique of a replayed INIT: odd, as no request of the kernel's but
 * an interrupt is, and never 0 (a notification's). */
#define REPLAY_UNIQUE 0x5ca1ab1e1ull

static lsq_init_seen_fn seen_fn;
static void *seen_ctx;
static atomic_bool seen;
static atomic_bool replaying;

void lsq_takeover_note_read(const void *buf, size_t len)
{
	const struct fuse_in_header *in = buf;
	struct lsq_init_record rec;

	/* INIT is the connection's first request, read before any other */
	if (atomic_load_explicit(&seen, memory_order_relaxed) ||
	    len < sizeof(*in) || in->opcode != FUSE_INIT ||
	    atomic_exchange(&seen, true))
		return;
	rec.len = len < LSQ_INIT_RECORD_MAX ? (uint32_t)len
					    : LSQ_INIT_RECORD_MAX;
	memcpy(rec.bytes, buf, rec.len);
	if (seen_fn)
		seen_fn(&rec, seen_ctx);
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	if (n > 0)
		lsq_takeover_note_read(buf, (size_t)n);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count,
			 void *userdata)
{
	const struct fuse_out_header *oh = iov[0].iov_base;

	if (atomic_load_explicit(&replaying, memory_order_relaxed) &&
	    iov[0].iov_len >= sizeof(*oh) && oh->unique == REPLAY_UNIQUE) {
		ssize_t total = 0;

		for (int i = 0; i < count; i++)
			total += (ssize_t)iov[i].iov_len;
		return total;
	}
	return writev(fd, iov, count);
}

static const struct fuse_custom_io takeover_io = {
	.read = io_read,
	.writev = io_writev,
};

int lsq_takeover_io_install(struct fuse_session *se, int fd,
			    lsq_init_seen_fn fn, void *ctx)
{
	seen_fn = fn;
	seen_ctx = ctx;
	return fuse_session_custom_io(se, &takeover_io, fd);
}

static const struct fuse_init_in *init_of(const struct lsq_init_record *rec)
{
	if (rec->len < sizeof(struct fuse_in_header) +
			       offsetof(struct fuse_init_in, unused))
		return NULL;
	return (const void *)(rec->bytes + sizeof(struct fuse_in_header));
}

bool lsq_takeover_kernel_resends(const struct lsq_init_record *rec)
{
	const struct fuse_init_in *init = init_of(rec);
	uint64_t flags;

	/* a test hides the feature, as on a kernel before 6.9 */
	if (!init || getenv("LSQ_TEST_KERNEL_NO_RESEND"))
		return false;
	flags = init->flags;
	if (flags & FUSE_INIT_EXT)
		flags |= (uint64_t)init->flags2 << 32;
	return (flags & LSQ_FUSE_HAS_RESEND) != 0;
}

int lsq_takeover_replay_init(struct fuse_session *se,
			     const struct lsq_init_record *rec)
{
	struct fuse_in_header *in;
	struct fuse_buf buf = { .size = rec->len };
	uint8_t copy[LSQ_INIT_RECORD_MAX];

	if (!init_of(rec))
		return -EINVAL;
	memcpy(copy, rec->bytes, rec->len);
	in = (void *)copy;
	if (in->opcode != FUSE_INIT || in->len > rec->len)
		return -EINVAL;
	in->unique = REPLAY_UNIQUE;
	buf.mem = copy;
	atomic_store(&replaying, true);
	fuse_session_process_buf(se, &buf);
	atomic_store(&replaying, false);
	return 0;
}

int lsq_takeover_resend(int fd)
{
	struct fuse_out_header oh = {
		.len = sizeof(oh),
		.error = LSQ_FUSE_NOTIFY_RESEND,
		.unique = 0,
	};

	if (write(fd, &oh, sizeof(oh)) == (ssize_t)sizeof(oh))
		return 0;
	return -errno;
}

char *lsq_init_record_encode(const struct lsq_init_record *rec)
{
	char *text = malloc(2 * (size_t)rec->len + 1);

	if (!text)
		return NULL;
	lsq_hex_encode(rec->bytes, rec->len, text);
	return text;
}

bool lsq_init_record_decode(const char *text, struct lsq_init_record *rec)
{
	size_t n = strlen(text);

	if (n % 2 || n / 2 > LSQ_INIT_RECORD_MAX || n == 0)
		return false;
	if (!lsq_hex_decode(text, n / 2, rec->bytes))
		return false;
	rec->len = (uint32_t)(n / 2);
	return init_of(rec) != NULL;
}
