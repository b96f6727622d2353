#!/bin/bash
# Run a command as on a kernel without FUSE over io_uring (before Linux
# 6.14, such as Debian 12's 6.1): the fuse module's enable_uring switch is
# turned off, so the kernel refuses rings, and hidden under an empty tmpfs
# in a private mount namespace, so the daemon and the tests see no switch at
# all. The machine's setting is put back afterwards. Without the switch
# (an older kernel already) the command just runs.
set -uo pipefail

params=/sys/module/fuse/parameters
switch=$params/enable_uring
if [ ! -e "$switch" ]; then
	exec "$@"
fi
old=$(cat "$switch")
trap 'echo "$old" > "$switch"' EXIT
echo N > "$switch"
# The namespace starts with a copy of every mount, FUSE mounts of other
# runs included: detach those copies, or their daemons would outlive their
# unmounts until this command ends.
unshare --mount --propagation private -- sh -c '
	awk '"'"'$3 ~ /^fuse\./ { print $2 }'"'"' /proc/self/mounts |
		while read -r m; do umount -l "$(printf "%b" "$m")"; done
	mount -t tmpfs -o ro,size=4k none "$1" || exit 1
	[ ! -e "$1/enable_uring" ] || { echo "switch still visible" >&2; exit 1; }
	shift
	exec "$@"' sh "$params" "$@"
