/* SPDX-License-Identifier: MIT */
/*
 * signed_image.h - which keys a mount checks the image's manifest with
 * (-o verify=, -o manifest=), and the verifier built from them.
 *
 * verify=KEY... : a good manifest signed by one of the keys is required.
 * verify=auto (default): the *.pem files of the system's key directory
 * (LSQ_KEYS_DIR, or $SQFS_LAZY_KEYS_DIR) are the keys; a manifest is
 * required only when -o manifest= names one; without keys nothing is
 * checked and the image's tail is not even read. verify=off: nothing.
 * A manifest that is present but fails (another key, altered, another
 * image) always refuses the mount: a signature that does not verify is
 * worse than none.
 */
#ifndef LSQ_DAEMON_SIGNED_IMAGE_H
#define LSQ_DAEMON_SIGNED_IMAGE_H

#include <stddef.h>

#include "daemon/options.h"
#include "image/verify.h"

/* *out: the verifier, or NULL when the mount checks nothing. On failure
 * one line in err; the mount must be refused. */
int lsq_mount_open_verifier(const struct lsq_mount_options *opt,
			    struct lsq_source *src, struct lsq_verifier **out,
			    char *err, size_t errlen);

#endif
