/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/errmsg.h"
#include "lsq/error.h"

int lsq_fail(int ret, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

const char *lsq_strerror(int err)
{
	switch (err) {
	case LSQ_OK: return "success";
	case LSQ_ERR_NOMEM: return "out of memory";
	case LSQ_ERR_IO: return "I/O error reading the image";
	case LSQ_ERR_TIMEOUT: return "timed out reading the image";
	case LSQ_ERR_CORRUPT: return "corrupt image";
	case LSQ_ERR_OVERFLOW: return "arithmetic overflow on image values";
	case LSQ_ERR_OUT_OF_BOUNDS: return "offset or index out of bounds";
	case LSQ_ERR_UNSUPPORTED: return "unsupported feature";
	case LSQ_ERR_CODEC: return "decompression failed";
	case LSQ_ERR_REMOTE_CHANGED: return "remote image changed";
	case LSQ_ERR_NOT_FOUND: return "not found";
	case LSQ_ERR_NOT_DIR: return "not a directory";
	case LSQ_ERR_IS_DIR: return "is a directory";
	case LSQ_ERR_NOT_LINK: return "not a symbolic link";
	case LSQ_ERR_NO_XATTR: return "no such attribute";
	case LSQ_ERR_RANGE: return "buffer too small";
	case LSQ_ERR_INVALID: return "invalid argument";
	case LSQ_ERR_NAME_TOO_LONG: return "name too long";
	case LSQ_ERR_UNREACHABLE: return "server unreachable";
	}
	return "unknown error";
}

/* The one table of what users see. Everything the image or the network did
 * wrong is EIO: the caller cannot fix it and must not mistake it for a
 * missing file. */
int lsq_err_to_errno(int err)
{
	switch (err) {
	case LSQ_OK: return 0;
	case LSQ_ERR_NOMEM: return ENOMEM;
	case LSQ_ERR_NOT_FOUND: return ENOENT;
	case LSQ_ERR_NOT_DIR: return ENOTDIR;
	case LSQ_ERR_IS_DIR: return EISDIR;
	case LSQ_ERR_NOT_LINK: return EINVAL;
	case LSQ_ERR_NO_XATTR: return ENODATA;
	case LSQ_ERR_RANGE: return ERANGE;
	case LSQ_ERR_INVALID: return EINVAL;
	case LSQ_ERR_NAME_TOO_LONG: return ENAMETOOLONG;
	case LSQ_ERR_UNSUPPORTED: return EOPNOTSUPP;
	case LSQ_ERR_IO:
	case LSQ_ERR_UNREACHABLE:
	case LSQ_ERR_TIMEOUT:
	case LSQ_ERR_CORRUPT:
	case LSQ_ERR_OVERFLOW:
	case LSQ_ERR_OUT_OF_BOUNDS:
	case LSQ_ERR_CODEC:
	case LSQ_ERR_REMOTE_CHANGED:
		return EIO;
	}
	return EIO;
}
