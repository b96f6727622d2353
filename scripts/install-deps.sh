#!/bin/bash
# Install every build and test dependency with apt-get (Debian 12).
# Idempotent: installs only what is missing; needs root (or sudo).
set -euo pipefail

PKGS=(
	meson ninja-build pkg-config gcc clang
	libfuse3-dev fuse3 libcurl4-openssl-dev liburing-dev
	zlib1g-dev liblzma-dev liblz4-dev liblzo2-dev libzstd-dev libssl-dev
	libarchive-dev libarchive-tools zstd
	squashfs-tools squashfs-tools-ng squashfuse
	nginx-light fio valgrind attr python3 python3-pytest prometheus
	util-linux kmod procps openssl ca-certificates curl
	scdoc man-db groff-base debootstrap systemd systemd-container
	build-essential debhelper dpkg-dev fakeroot lintian
)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	SUDO=
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	echo "installing: ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
