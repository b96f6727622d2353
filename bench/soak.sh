#!/bin/bash
# Soak test over HTTP with injected faults (bench/soak.py does the work).
#   bash bench/soak.sh [MINUTES] [extra soak.py options]
# Builds ./build if needed, needs root (FUSE, loop mount) and mksquashfs.
# The report lands in bench/results/<UTC stamp>-soak/ (report.json and the
# tail of the daemon's log). Exit status 1 on wrong bytes, errors other
# than EIO, an EIO outside the fault windows, under 90 % good reads in
# clean time, RSS growth after warm-up, a hung read or a daemon that died.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-5}
shift || true
[ -x build/sqfs-lazy-mount ] || { meson setup build >/dev/null 2>&1 || true; meson compile -C build >/dev/null; }
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)-soak
mkdir -p "$out"
{
	echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "host $(nproc) CPUs, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
	echo "command: bench/soak.sh $minutes $*"
} >"$out/README"
python3 bench/soak.py --seconds "$((minutes * 60))" --out "$out" "$@"
