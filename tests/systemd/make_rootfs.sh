#!/bin/bash
# A minimal Debian 12 root file system with systemd, for the container test
# (tests/systemd/test_container.py boots it with systemd-nspawn -b).
#
# usage: make_rootfs.sh CACHE_DIR   -> prints the rootfs path
#
# The rootfs is built once per package list and kept under CACHE_DIR as
# rootfs-<hash>; a build takes ~35-60 s, later runs reuse it. The mirror is
# the first one this machine's apt uses (never a fixed host).
set -euo pipefail

cache=${1:?usage: make_rootfs.sh CACHE_DIR}
suite=bookworm
# systemd as PID 1, fuse3 for mount.fuse3/fusermount3, and the libraries
# sqfs-lazy-mount links (libcurl4 is dlopen()ed for http:// images).
pkgs=systemd,systemd-sysv,dbus,fuse3,libfuse3-3,zlib1g,liblzma5,liblz4-1,libzstd1,liblzo2-2,libcurl4,ca-certificates
key=$(printf '%s %s %s\n' "$suite" "$pkgs" "$(uname -m)" | sha256sum | cut -c1-16)
root=$cache/rootfs-$key

if [ -e "$root/.complete" ]; then
	echo "$root"
	exit 0
fi

mirror() {
	local f u
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		# deb822: "URIs: a b"; take the first http(s) one of a main suite
		u=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f" |
			grep -v -- '-security' | grep -E '^https?://' | head -n1 || true)
		[ -n "$u" ] && { echo "$u"; return; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -e "$f" ] || continue
		u=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\//) { print $i; exit } }' "$f" |
			grep -v -- '-security' | head -n1 || true)
		[ -n "$u" ] && { echo "$u"; return; }
	done
	return 1
}

m=$(mirror) || { echo "make_rootfs.sh: no http(s) mirror in /etc/apt/sources.list*" >&2; exit 1; }
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log=$tmp.log
if ! debootstrap --variant=minbase --include="$pkgs" "$suite" "$tmp/root" "$m" >"$log" 2>&1; then
	tail -n 20 "$log" >&2
	echo "make_rootfs.sh: debootstrap failed (log: $log)" >&2
	exit 1
fi
rm -f "$log"
r=$tmp/root
# No getty on a console nobody reads, nothing that waits for a network or
# a clock; the container boots in well under a second.
chroot "$r" systemctl mask console-getty.service getty@tty1.service \
	systemd-timesyncd.service systemd-networkd-wait-online.service \
	apt-daily.timer apt-daily-upgrade.timer >/dev/null 2>&1 || true
echo sqfs-lazy-test >"$r/etc/hostname"
rm -rf "$r/var/cache/apt/archives/"*.deb
touch "$r/.complete"
# Another run may have finished first: keep one.
if ! mv -T "$r" "$root" 2>/dev/null; then
	[ -e "$root/.complete" ] || { echo "make_rootfs.sh: cannot store $root" >&2; exit 1; }
fi
echo "$root"
