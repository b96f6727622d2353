#!/usr/bin/env bash
# Two builds in one sitting (the "before and after" of a change): bench/run.sh
# once with each, the new build last, then bench/knobs_report.py's table of
# the old build's rows against the new one's (ratios against the kernel of
# each run, changes counted only past the rows' noise).
#
# usage: bench/ab.sh OLD_BUILD NEW_BUILD [-- run.sh options]
#   run.sh options default to the issue-4 matrix: --fuse-uring off
#   --readers kernel,lazy-local,lazy-http --comps zstd,xz --workloads
#   rand1,rand2,mmap,seq,findsize,findtype,refetch --runtime 5 --repeat 3
# Output: bench/results/<UTC stamp>-ab/{runs/before,runs/default,ab.md}.
# Needs root (run.sh drops caches and loop-mounts).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
old=${1:?usage: bench/ab.sh OLD_BUILD NEW_BUILD [-- run.sh options]}
new=${2:?usage: bench/ab.sh OLD_BUILD NEW_BUILD [-- run.sh options]}
shift 2
[ "${1:-}" != -- ] || shift
run_args=("$@")
[ ${#run_args[@]} -gt 0 ] || run_args=(--fuse-uring off
	--readers kernel,lazy-local,lazy-http --comps zstd,xz
	--workloads rand1,rand2,mmap,seq,findsize,findtype,refetch
	--runtime 5 --repeat 3)
out=${SQFS_BENCH_RESULTS:-$here/results}/$(date -u +%Y%m%dT%H%M%SZ)-ab
mkdir -p "$out"
{
	echo "old: $old ($(git -C "$old" rev-parse --short HEAD 2>/dev/null || echo '?'))"
	echo "new: $new ($(git -C "$new" rev-parse --short HEAD 2>/dev/null || echo '?'))"
	echo "run.sh ${run_args[*]}"
} >"$out/README"
"$here/run.sh" --build "$old" --results "$out/runs/before" "${run_args[@]}"
"$here/run.sh" --build "$new" --results "$out/runs/default" "${run_args[@]}"
python3 "$here/knobs_report.py" "$out" default before | tee "$out/ab.md"
echo "ab: $out/ab.md" >&2
