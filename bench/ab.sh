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
# Output: bench/results/<UTC stamp>-ab/{meta.tsv,runs/before,runs/default,
# ab.md}.
# Needs root (run.sh drops caches and loop-mounts).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=ab.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
old=${1:?usage: bench/ab.sh OLD_BUILD NEW_BUILD [-- run.sh options]}
new=${2:?usage: bench/ab.sh OLD_BUILD NEW_BUILD [-- run.sh options]}
shift 2
[ "${1:-}" != -- ] || shift
run_args=("$@")
[ ${#run_args[@]} -gt 0 ] || run_args=(--fuse-uring off
	--readers kernel,lazy-local,lazy-http --comps zstd,xz
	--workloads rand1,rand2,mmap,seq,findsize,findtype,refetch
	--runtime 5 --repeat 3)
[ -d "$old" ] && old=$(cd "$old" && pwd)
[ -d "$new" ] && new=$(cd "$new" && pwd)
results=${SQFS_BENCH_RESULTS:-$here/results}
out=$results/$(date -u +%Y%m%dT%H%M%SZ)-ab
mkdir -p "$out"
# The run's facts: both builds' commits (before.measured_* for OLD_BUILD,
# measured_* for NEW_BUILD); each run.sh records its own too, in
# runs/{before,default}/*/meta.tsv, with this command as its caller.
effective=$(env_words SQFS_BENCH_RESULTS SQFS_BENCH_WORK SQFS_LAZY_ARGS \
	SQUASHFUSE_LL_ARGS)$(sh_words bench/ab.sh "$old" "$new" -- "${run_args[@]}")
run_facts --command "$effective" --typed "$cmdline" --build "$new" \
	--build-as before="$old" --bin sqfs-lazy-mount >"$out/meta.tsv"
export SQFS_BENCH_CALLER="${SQFS_BENCH_CALLER:+$SQFS_BENCH_CALLER > }$effective"
"$here/run.sh" --build "$old" --results "$out/runs/before" "${run_args[@]}"
"$here/run.sh" --build "$new" --results "$out/runs/default" "${run_args[@]}"
python3 "$here/knobs_report.py" "$out" default before | tee "$out/ab.md"
meta_end "$out/meta.tsv"
echo "ab: $out/ab.md" >&2
