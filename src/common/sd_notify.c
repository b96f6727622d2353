/* SPDX-License-Identifier: MIT */
#include "common/sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Fill addr from $NOTIFY_SOCKET; returns the address length or 0. */
static socklen_t notify_address(struct sockaddr_un *addr)
{
	const char *name = getenv("NOTIFY_SOCKET");
	size_t len;

	if (!name || (name[0] != '/' && name[0] != '@'))
		return 0;
	len = strlen(name);
	if (len < 2 || len > sizeof(addr->sun_path) - 1)
		return 0;
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	memcpy(addr->sun_path, name, len);
	if (name[0] == '@') {
		/* abstract: a leading NUL, and the length counts exactly the
		 * name (no terminating NUL, which would be part of it) */
		addr->sun_path[0] = '\0';
		return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	}
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
}

bool lsq_sd_notify_wanted(void)
{
	struct sockaddr_un addr;

	return notify_address(&addr) != 0;
}

int lsq_sd_notify(const char *state)
{
	struct sockaddr_un addr;
	socklen_t alen = notify_address(&addr);
	size_t len = strlen(state);
	ssize_t n;
	int fd, ret = 0;

	if (alen == 0)
		return 0;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = sendto(fd, state, len, MSG_NOSIGNAL, (struct sockaddr *)&addr,
		   alen);
	if (n < 0)
		ret = -errno;
	else if ((size_t)n != len)
		ret = -EMSGSIZE;
	close(fd);
	return ret;
}
