/* SPDX-License-Identifier: MIT */
#include "common/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lsq/error.h"

static int full_io(int fd, void *buf, size_t len, uint64_t offset,
		   bool write)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = write ? pwrite(fd, p, len, (off_t)offset)
				  : pread(fd, p, len, (off_t)offset);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return LSQ_ERR_IO;
		if (n == 0) {
			if (!write)
				return LSQ_ERR_OUT_OF_BOUNDS;
			errno = EIO;
			return LSQ_ERR_IO;
		}
		p += n;
		len -= (size_t)n;
		offset += (uint64_t)n;
	}
	return LSQ_OK;
}

int lsq_pread_full(int fd, void *buf, size_t len, uint64_t offset)
{
	return full_io(fd, buf, len, offset, false);
}

int lsq_pwrite_full(int fd, const void *buf, size_t len, uint64_t offset)
{
	return full_io(fd, (void *)buf, len, offset, true);
}

int lsq_read_small_file(const char *path, size_t max, char **out,
			size_t *len, struct stat *st_out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = LSQ_OK, e;
	struct stat st;
	size_t got = 0;
	char *buf = NULL;

	if (fd < 0)
		return LSQ_ERR_IO;
	if (fstat(fd, &st) != 0) {
		ret = LSQ_ERR_IO;
	} else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		errno = S_ISDIR(st.st_mode) ? EISDIR :
			!S_ISREG(st.st_mode) ? EINVAL : EFBIG;
		ret = LSQ_ERR_INVALID;
	} else if (!(buf = malloc((size_t)st.st_size + 1))) {
		ret = LSQ_ERR_NOMEM;
	}
	while (!ret && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n == 0)
			break;  /* shrank meanwhile: what is there is taken */
		if (n > 0)
			got += (size_t)n;
		else if (errno != EINTR)
			ret = LSQ_ERR_IO;
	}
	e = errno;
	close(fd);
	errno = e;
	if (ret) {
		if (buf)
			explicit_bzero(buf, got);
		free(buf);
		return ret;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	if (st_out)
		*st_out = st;
	return LSQ_OK;
}

int lsq_replace_file(const char *path, const struct lsq_file_part *parts,
		     size_t n)
{
	char tmp[PATH_MAX];
	uint64_t at = 0;
	int fd, ret = LSQ_OK;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return LSQ_ERR_INVALID;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return LSQ_ERR_IO;
	for (size_t i = 0; i < n && !ret; i++) {
		ret = lsq_pwrite_full(fd, parts[i].data, parts[i].len, at);
		at += parts[i].len;
	}
	if (!ret && fchmod(fd, 0600) != 0)
		ret = LSQ_ERR_IO;
	if (close(fd) != 0 && !ret)
		ret = LSQ_ERR_IO;
	if (!ret && rename(tmp, path) != 0)
		ret = LSQ_ERR_IO;
	if (ret)
		(void)unlink(tmp);
	return ret;
}
