/* SPDX-License-Identifier: MIT */
/*
 * sd_notify.h - the service manager's readiness protocol, without libsystemd.
 *
 * systemd (Type=notify) passes a datagram socket in $NOTIFY_SOCKET: a path,
 * or "@name" for a socket in the abstract namespace. A service sends
 * newline-separated "KEY=value" assignments to it: READY=1 once it serves,
 * STATUS=<one line for systemctl status>, STOPPING=1 when it shuts down.
 * Without $NOTIFY_SOCKET every call is a no-op.
 */
#ifndef LSQ_SD_NOTIFY_H
#define LSQ_SD_NOTIFY_H

#include <stdbool.h>

/* Whether $NOTIFY_SOCKET names a socket we could send to. */
bool lsq_sd_notify_wanted(void);

/* Send state (for example "READY=1\nSTATUS=serving") in one datagram.
 * Returns 0 when sent or when no manager listens, -errno on failure.
 * Thread-safe: opens its own socket per call. */
int lsq_sd_notify(const char *state);

#endif
