/* SPDX-License-Identifier: MIT */
/* source_file.c - a local file as byte source (pread, no shared offset). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "lsq/error.h"
#include "lsq/source.h"

struct file_source {
	struct lsq_source base;
	int fd;
	uint64_t base_offset;
};

static int file_read(struct lsq_source *src, struct lsq_read *rq)
{
	struct file_source *fs = (struct file_source *)src;
	uint8_t *p = rq->buf;
	size_t len = rq->len;
	uint64_t offset = rq->offset + fs->base_offset;

	while (len > 0) {
		ssize_t n = pread(fs->fd, p, len, (off_t)offset);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			lsq_log_once(offset, LSQ_LOG_ERROR,
				     "%s: read of %zu bytes at 0x%llx failed: %s",
				     src->name, len, (unsigned long long)offset,
				     strerror(errno));
			return LSQ_ERR_IO;
		}
		if (n == 0) {
			/* The file shrank after open: the image changed. */
			lsq_log_once(offset, LSQ_LOG_ERROR,
				     "%s: unexpected end of file at 0x%llx",
				     src->name, (unsigned long long)offset);
			return LSQ_ERR_IO;
		}
		p += n;
		len -= (size_t)n;
		offset += (uint64_t)n;
	}
	return LSQ_OK;
}

static void file_advise(struct lsq_source *src, uint64_t offset, uint64_t len)
{
	struct file_source *fs = (struct file_source *)src;

	(void)posix_fadvise(fs->fd, (off_t)(offset + fs->base_offset),
			    (off_t)len, POSIX_FADV_WILLNEED);
}

static void file_destroy(struct lsq_source *src)
{
	struct file_source *fs = (struct file_source *)src;

	close(fs->fd);
	free(src->name);
	free(fs);
}

static const struct lsq_source_ops file_ops = {
	.read = file_read,
	.advise = file_advise,
	.destroy = file_destroy,
};

int lsq_source_file_open(const char *path, uint64_t base_offset,
			 struct lsq_source **out)
{
	struct file_source *fs;
	struct stat st;
	int fd, saved;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return LSQ_ERR_IO;
	if (fstat(fd, &st) < 0)
		goto fail_close;
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		goto fail_close;
	}
	if (S_ISBLK(st.st_mode)) {
		off_t end = lseek(fd, 0, SEEK_END);

		if (end < 0)
			goto fail_close;
		st.st_size = end;
	}
	if ((uint64_t)st.st_size < base_offset) {
		close(fd);
		return LSQ_ERR_OUT_OF_BOUNDS;
	}
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		goto fail_close;
	fs->base.name = strdup(path);
	if (!fs->base.name) {
		free(fs);
		goto fail_close;
	}
	fs->base.ops = &file_ops;
	fs->base.size = (uint64_t)st.st_size - base_offset;
	fs->fd = fd;
	fs->base_offset = base_offset;
	/* The file's identity as far as the metadata tells; a persistent
	 * cache keyed by it forgets the file when it is replaced. */
	if (asprintf(&fs->base.identity, "file\n%ju:%ju\n%jd\n%jd.%09ld\n%ju",
		     (uintmax_t)st.st_dev, (uintmax_t)st.st_ino,
		     (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec,
		     st.st_mtim.tv_nsec, (uintmax_t)base_offset) < 0)
		fs->base.identity = NULL;
	*out = &fs->base;
	return LSQ_OK;

fail_close:
	saved = errno;
	close(fd);
	errno = saved;
	return saved == ENOMEM ? LSQ_ERR_NOMEM : LSQ_ERR_IO;
}
