#!/usr/bin/env bash
# The caching-tier bench (issue 20): N concurrent mounts of one image
# (separate daemons, separate cache_dirs), each walking the tree and reading
# every third file, straight from the origin and through an nginx
# slice-caching tier (the config of docs/deploy.md), with an nginx origin
# and an S3 origin (versitygw; the tier reads a presigned URL). Reports the
# bytes and requests the origin served, and their ratio to one mount. See
# bench/README.md ("Caching tier").
#
# usage: bench/tier.sh [options]
#   --mounts N       concurrent mounts per row (default 10)
#   --share K        each mount reads every K-th regular file (default 3)
#   --usr-mib M      size of the /usr subset packed into the image (128)
#   --slices LIST    the tier's slice sizes (default 1m; e.g. 1m,256k)
#   --delays LIST    ms added between the nginx origin and its clients (the
#                    mounts of the direct rows, the tier) by latency_proxy.py
#                    (default 0; e.g. 0,20); the S3 rows run without
#   --origins LIST   nginx,s3 (default both; s3 needs versitygw from
#                    scripts/install-versitygw.sh, else its rows are left out)
#   --build DIR      meson build dir (default $SQFS_BENCH_BUILD or <repo>/build)
#   --work DIR       image, mounts, servers (default /tmp/sqfs-lazy-tier)
#   --results DIR    parent of the run's folder (default <repo>/bench/results)
#   -h, --help       this text
# Needs root (FUSE mounts), nginx, mksquashfs, curl, python3.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=tier.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

mounts=10 share=3 usr_mib=128 slices=1m delays=0 origins=nginx,s3
build=${SQFS_BENCH_BUILD:-$repo/build}
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-tier}
results=${SQFS_BENCH_RESULTS:-$here/results}
while [ $# -gt 0 ]; do
	case $1 in
	--mounts) mounts=${2:?}; shift ;;
	--share) share=${2:?}; shift ;;
	--usr-mib) usr_mib=${2:?}; shift ;;
	--slices) slices=${2:?}; shift ;;
	--delays) delays=${2:?}; shift ;;
	--origins) origins=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--work) work=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	-h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (try --help)" ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || die "needs root (FUSE mounts)"
[ -x "$build/sqfs-lazy-mount" ] || die "no build in $build"
for t in mksquashfs curl nginx python3 fusermount3; do
	command -v "$t" >/dev/null || die "$t missing"
done
build=$(cd "$build" && pwd)

mkdir -p "$work/mnt"
exec 9>"$work/lock"
flock -n 9 || die "another run uses $work"
run=$results/$(date -u +%Y%m%dT%H%M%SZ)-tier
mkdir -p "$run/raw"

cleanup() {
	local m
	for m in "$work"/mnt/*; do
		[ -d "$m" ] && unmount_one "$m" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_facts --command "$(sh_words bench/tier.sh --mounts "$mounts" \
	--share "$share" --usr-mib "$usr_mib" --slices "$slices" \
	--delays "$delays" --origins "$origins" --build "$build" \
	--work "$(cd "$work" && pwd)" --results "$(cd "$results" && pwd)")" \
	--typed "$cmdline" --build "$build" --bin sqfs-lazy-mount >"$run/meta.tsv"

python3 "$here/tier_bench.py" --build "$build" --work "$work" --run "$run" \
	--mounts "$mounts" --share "$share" --usr-mib "$usr_mib" \
	--slices "$slices" --delays "$delays" --origins "$origins"
meta_end "$run/meta.tsv"
echo "results: $run"
