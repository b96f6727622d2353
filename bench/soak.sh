#!/bin/bash
# Soak test over HTTP with injected faults (bench/soak.py does the work).
#   bash bench/soak.sh [MINUTES] [extra soak.py options]
# Builds ./build if needed, needs root (FUSE, loop mount) and mksquashfs.
# The report lands in bench/results/<UTC stamp>-soak/ (meta.tsv, report.json
# and the tail of the daemon's log). Exit status 1 on wrong bytes, errors other
# than EIO, an EIO outside the fault windows, under 90 % good reads in
# clean time, RSS growth after warm-up, a hung read or a daemon that died.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-5}
shift || true
[ -x build/sqfs-lazy-mount ] || { meson setup build >/dev/null 2>&1 || true; meson compile -C build >/dev/null; }
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)-soak
mkdir -p "$out"
# soak.py writes the run's facts (meta.tsv), with this command as caller
BENCH_PROG=soak.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
export SQFS_BENCH_CALLER="${SQFS_BENCH_CALLER:+$SQFS_BENCH_CALLER > }$(sh_words bench/soak.sh "$minutes" "$@")"
python3 bench/soak.py --seconds "$((minutes * 60))" --out "$out" "$@"
