/* SPDX-License-Identifier: MIT */
/*
 * file_io.h - whole transfers on a descriptor, and small files read whole
 * (keys, manifests, credentials, profiles).
 */
#ifndef LSQ_COMMON_FILE_IO_H
#define LSQ_COMMON_FILE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* len bytes at offset, all of them, through short transfers and EINTR:
 * LSQ_OK, LSQ_ERR_IO with errno set, or for a read LSQ_ERR_OUT_OF_BOUNDS
 * when the file ends first. */
int lsq_pread_full(int fd, void *buf, size_t len, uint64_t offset);
int lsq_pwrite_full(int fd, const void *buf, size_t len, uint64_t offset);

/* The regular file at path, whole, in a malloc'd buffer with a NUL after
 * its *len bytes; a file that shrinks meanwhile gives what it still has.
 * *st (NULL: not wanted) is taken from the open descriptor, so the file
 * checked is the file read. Returns LSQ_OK, LSQ_ERR_NOMEM, LSQ_ERR_IO
 * (errno: open's, fstat's or read's), or LSQ_ERR_INVALID with errno
 * EISDIR, EINVAL for another kind of file or EFBIG for more than max
 * bytes. A buffer given up on is wiped first: it may hold a key. */
int lsq_read_small_file(const char *path, size_t max, char **buf,
			size_t *len, struct stat *st);

struct lsq_file_part {
	const void *data;
	size_t len;
};

/* Replace path with a file of mode 0600 holding the n parts, written
 * whole to a fresh file in path's directory and renamed over it, so a
 * reader (another daemon on the same cache_dir) sees the old file or the
 * new one, never a part. LSQ_OK, LSQ_ERR_INVALID (path too long) or
 * LSQ_ERR_IO; nothing is left behind on failure. */
int lsq_replace_file(const char *path, const struct lsq_file_part *parts,
		     size_t n);

#endif
