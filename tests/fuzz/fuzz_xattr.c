/* SPDX-License-Identifier: MIT */
/*
 * fuzz_xattr.c - libFuzzer target: xattr decoding. For every inode:
 * listxattr sizing and listing, getxattr of every listed name (sizing, a
 * too-small buffer and the full value), and names that are not there.
 * Must never crash, hang or leak, nor report a value size larger than
 * the image could hold.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

static void visit(struct lsq_image *img, const struct lsq_inode *ino,
		  void *ctx)
{
	static const char *absent[] = { "user.", "user.nope", "trusted.x",
					"security.selinux", "system.posix_acl",
					"bogus" };
	uint8_t small[3];
	char *names, *value;
	size_t len = 0, vlen;
	const size_t image_size = *(const size_t *)ctx;

	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		(void)lsq_image_getxattr(img, ino, absent[i], NULL, 0, &vlen);
	if (lsq_image_listxattr(img, ino, NULL, 0, &len) || len == 0)
		return;
	(void)lsq_image_listxattr(img, ino, (char *)small, 1, &vlen);
	names = malloc(len);
	if (!names)
		return;
	if (lsq_image_listxattr(img, ino, names, len, &len)) {
		free(names);
		return;
	}
	for (size_t i = 0; i < len;) {
		const char *name = names + i;
		size_t nlen = strnlen(name, len - i);

		if (nlen == len - i)
			abort(); /* the API promises NUL-terminated names */
		if (lsq_image_getxattr(img, ino, name, NULL, 0, &vlen)) {
			i += nlen + 1;
			continue;
		}
		/* A value cannot be longer than the whole image unpacks to
		 * (a metadata block: >= 3 bytes on disk, <= 8 KiB of data);
		 * a larger size is the corruption check in image/xattr.c
		 * failing (crashers/crash-014c05c9...). */
		if (vlen > (image_size / 3 + 1) * 8192u)
			abort();
		/* allocate at most 16 MiB: memory stays bounded under the
		 * fuzzer; the bound above still catches a lying size */
		if (vlen <= (16u << 20)) {
			(void)lsq_image_getxattr(img, ino, name, small,
						 sizeof(small), &vlen);
			value = malloc(vlen ? vlen : 1);
			if (value) {
				(void)lsq_image_getxattr(img, ino, name, value,
							 vlen, &vlen);
				free(value);
			}
		}
		i += nlen + 1;
	}
	free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsq_image *img = fuzz_open(data, size);

	if (!img)
		return 0;
	fuzz_walk(img, 300, visit, &size);
	lsq_image_close(img);
	return 0;
}
