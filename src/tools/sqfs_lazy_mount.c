/* SPDX-License-Identifier: MIT */
/* sqfs-lazy-mount: everything lives in src/fuse/, see daemon.c. */
#include "daemon/daemon.h"

int main(int argc, char **argv)
{
	return lsq_mount_main(argc, argv);
}
