/* SPDX-License-Identifier: MIT */
/*
 * error.h - the single error enum of sqfs-lazy.
 *
 * Every internal function returns int: 0 (LSQ_OK) on success or a negative
 * enum lsq_err value. Out-parameters are left untouched on failure.
 * Conversion to errno happens in exactly one place: lsq_err_to_errno().
 */
#ifndef LSQ_ERROR_H
#define LSQ_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum lsq_err {
	LSQ_OK = 0,
	LSQ_ERR_NOMEM = -1,          /* allocation failed */
	LSQ_ERR_IO = -2,             /* the byte source failed to deliver */
	LSQ_ERR_TIMEOUT = -3,        /* the byte source timed out */
	LSQ_ERR_CORRUPT = -4,        /* image structure is inconsistent */
	LSQ_ERR_OVERFLOW = -5,       /* arithmetic on image values overflowed */
	LSQ_ERR_OUT_OF_BOUNDS = -6,  /* offset/index outside its table/image */
	LSQ_ERR_UNSUPPORTED = -7,    /* valid but unsupported feature */
	LSQ_ERR_CODEC = -8,          /* decompression failed */
	LSQ_ERR_REMOTE_CHANGED = -9, /* remote image changed under the mount */
	LSQ_ERR_NOT_FOUND = -10,     /* no such name */
	LSQ_ERR_NOT_DIR = -11,       /* directory operation on a non-dir */
	LSQ_ERR_IS_DIR = -12,        /* file operation on a directory */
	LSQ_ERR_NOT_LINK = -13,      /* readlink on a non-symlink */
	LSQ_ERR_NO_XATTR = -14,      /* no such extended attribute */
	LSQ_ERR_RANGE = -15,         /* caller's buffer is too small */
	LSQ_ERR_INVALID = -16,       /* bad argument from the caller */
	LSQ_ERR_NAME_TOO_LONG = -17, /* name longer than the format allows */
	LSQ_ERR_UNREACHABLE = -18,   /* no answer from the server (refused,
				      * reset, 5xx) after all retries */
};

/* Static, human-readable text for an lsq_err value (never NULL). */
const char *lsq_strerror(int err);

/* The errno a caller should see for an lsq_err value (EIO for image and
 * transport faults, ENOENT, ENOTDIR, ENODATA, ERANGE, ...). */
int lsq_err_to_errno(int err);

#ifdef __cplusplus
}
#endif
#endif
