#!/bin/bash
# Run a command as on a kernel without FUSE over io_uring (before Linux
# 6.14, such as Debian 12's 6.1): the fuse module's enable_uring switch is
# turned off, so the kernel refuses rings, and hidden under an empty tmpfs
# in a private mount namespace, so the daemon and the tests see no switch at
# all. The machine's setting is put back afterwards. Without the switch
# (an older kernel already) the command just runs.
#
# The switch is machine-wide: whoever changes it holds an exclusive flock on
# /run/lock/sqfs-lazy-fuse-uring.lock until it is put back (the tests'
# util.fuse_uring_switch(), bench/run.sh --fuse-uring), so this waits for
# them and they for this: up to LSQ_URING_LOCK_WAIT seconds (default 3600).
set -uo pipefail

params=/sys/module/fuse/parameters
switch=$params/enable_uring
lock=/run/lock/sqfs-lazy-fuse-uring.lock
if [ ! -e "$switch" ]; then
	exec "$@"
fi
exec {lockfd}>>"$lock" || exit 1
if ! flock -x -w "${LSQ_URING_LOCK_WAIT:-3600}" "$lockfd"; then
	echo "$0: $lock is still held after ${LSQ_URING_LOCK_WAIT:-3600} s" \
		"(another process changes $switch; see /proc/locks)" >&2
	exit 1
fi
old=$(cat "$switch")
# put back before the lock goes (it goes when this shell exits)
trap 'echo "$old" > "$switch"' EXIT
echo N > "$switch"
# The namespace starts with a copy of every mount, FUSE mounts of other
# runs included: detach those copies, or their daemons would outlive their
# unmounts until this command ends. The command does not inherit the lock:
# a daemon it leaves behind must not hold it.
unshare --mount --propagation private -- sh -c '
	awk '"'"'$3 ~ /^fuse\./ { print $2 }'"'"' /proc/self/mounts |
		while read -r m; do umount -l "$(printf "%b" "$m")"; done
	mount -t tmpfs -o ro,size=4k none "$1" || exit 1
	[ ! -e "$1/enable_uring" ] || { echo "switch still visible" >&2; exit 1; }
	shift
	exec "$@"' sh "$params" "$@" {lockfd}>&-
