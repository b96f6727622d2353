#!/usr/bin/env bash
# The knob audit (issue 22): bench/run.sh once on defaults and once with
# each tuning option changed alone, in one sitting on
# one machine, then one table of what each option moves (bench/knobs_report.py).
# Every configuration's figures are ratios against the kernel measured in
# its own run, so drift between runs cancels. See bench/README.md ("Knobs").
#
# usage: bench/knobs.sh [options] [-- run.sh options]
#   --configs LIST  names from the list below, run in that order (default:
#                   all); the table compares each with default, or
#                   with the first one named when default is not run
#   --build DIR     meson build dir (default $SQFS_BENCH_BUILD or <repo>/build)
#   --results DIR   parent of the run's folder (default <repo>/bench/results)
#   -h, --help      this text
# run.sh options default to: --readers kernel,lazy-local --comps zstd,xz
#   --workloads rand1,rand2,mmap,seq,findsize,findtype --runtime 5 --repeat 3
# Configurations (FUSE over io_uring is off unless named):
#   default       no option: requests over /dev/fuse, libfuse's loop
#   uring         enable_uring=1: requests over FUSE io_uring (default on)
#   uring+off     enable_uring=1 with -o io_uring=off: what the rings move
#                 on a kernel that offers them
#   verify        -o verify=$SQFS_BENCH_VERIFY_KEY: what checking a signed
#                 image costs (bench/verify_cost.sh signs the images)
#   metrics       -o metrics=unix:SOCK, scraped every second while the
#                 run lasts: what the endpoint and the histograms cost
#   metrics-storm the same, scraped by three clients as fast as it answers
#   takeover      -o takeover: every request read from one /dev/fuse file
#                 (libfuse's clone_fd off), what a takeover needs
# Needs root (run.sh drops caches, loop-mounts, sets enable_uring).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=knobs.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
build=${SQFS_BENCH_BUILD:-$repo/build}
results=${SQFS_BENCH_RESULTS:-$here/results}
configs=default,uring
run_args=(--readers kernel,lazy-local --comps zstd,xz
	  --workloads rand1,rand2,mmap,seq,findsize,findtype
	  --runtime 5 --repeat 3)
while [ $# -gt 0 ]; do
	case $1 in
	--configs) configs=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	-h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--) shift; run_args=("$@"); break ;;
	*) echo "knobs.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done

out=$results/$(date -u +%Y%m%dT%H%M%SZ)-knobs
mkdir -p "$out"
[ -d "$build" ] && build=$(cd "$build" && pwd)
# The run's facts (each configuration's run.sh records its own in
# runs/NAME/*/meta.tsv, with this command as its caller).
effective=$(env_words SQFS_BENCH_WORK SQFS_BENCH_VERIFY_KEY)$(sh_words \
	bench/knobs.sh --configs "$configs" --build "$build" \
	--results "$(cd "$results" && pwd)" -- "${run_args[@]}")
run_facts --command "$effective" --typed "$cmdline" --build "$build" \
	--bin sqfs-lazy-mount >"$out/meta.tsv"
export SQFS_BENCH_CALLER="${SQFS_BENCH_CALLER:+$SQFS_BENCH_CALLER > }$effective"
IFS=, read -ra names <<<"$configs"
for name in "${names[@]}"; do
	uring=off args=
	case $name in
	default) ;;
	uring) uring=on ;;
	uring+off) uring=on args="-o io_uring=off" ;;
	verify) args="-o verify=${SQFS_BENCH_VERIFY_KEY:?verify needs signed images and SQFS_BENCH_VERIFY_KEY (bench/verify_cost.sh)}" ;;
	metrics|metrics-storm) args="-o metrics=unix:$out/metrics.sock" ;;
	takeover) args="-o takeover" ;;
	*) echo "knobs.sh: unknown configuration $name" >&2; exit 2 ;;
	esac
	echo "== $name (enable_uring $uring${args:+, $args})" >&2
	scraper=
	if [ "$name" = metrics ]; then
		metrics_scraper "$out/metrics.sock" "$out/scrapes-$name" &
		scraper=$!
	elif [ "$name" = metrics-storm ]; then
		for _ in 1 2 3; do
			metrics_scraper "$out/metrics.sock" "$out/scrapes-$name" 0 &
			scraper="$scraper $!"
		done
	fi
	SQFS_LAZY_ARGS=$args "$here/run.sh" --build "$build" \
		--results "$out/runs/$name" --fuse-uring "$uring" "${run_args[@]}"
	if [ -n "$scraper" ]; then
		# shellcheck disable=SC2086 # one pid or three
		kill $scraper
		wait $scraper 2>/dev/null || true
		echo "== $name: $(wc -l <"$out/scrapes-$name") scrapes answered" >&2
	fi
done
# the defaults are the reference, whatever order the runs took; without
# them the first configuration named
ref=${names[0]}
for name in "${names[@]}"; do [ "$name" != default ] || ref=default; done
report=("$ref")
for name in "${names[@]}"; do [ "$name" = "$ref" ] || report+=("$name"); done
python3 "$here/knobs_report.py" "$out" "${report[@]}" | tee "$out/knobs.md"
meta_end "$out/meta.tsv"
echo "knobs: $out/knobs.md" >&2
