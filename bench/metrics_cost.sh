#!/usr/bin/env bash
# What -o metrics= costs (issue 36): the issue-4 rows (bench/knobs.sh,
# configurations default and metrics) and the program starts of
# bench/startup.sh, each without and then with -o metrics=unix:SOCK
# scraped every second, one build, one sitting. A scrape every second is
# far more often than a fleet's (15-60 s).
#
# usage: bench/metrics_cost.sh [--build DIR] [--startup "startup.sh options"]
#   --build DIR      meson build dir (default <repo>/build)
#   --startup OPTS   startup.sh options (default: --workloads python,gcc
#                    --rtts 0,50 --repeat 3 --rows lazy)
# Output: bench/results/<stamp>-knobs (the issue-4 table) and two
# <stamp>-startup runs; each line of scrapes-* is one answered scrape.
# Needs root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
build=$here/../build
startup_opts="--workloads python,gcc --rtts 0,50 --repeat 3 --rows lazy"
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=${2:?}; shift ;;
	--startup) startup_opts=${2:?}; shift ;;
	-h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "metrics_cost.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
build=$(cd "$build" && pwd)
"$here/knobs.sh" --configs default,metrics --build "$build" -- \
	--readers kernel,lazy-local,lazy-http --comps zstd \
	--workloads rand1,seq,findsize --runtime 5 --repeat 3
sock=/run/sqfs-lazy-bench-metrics.sock
scrapes=$(mktemp /tmp/sqfs-lazy-scrapes.XXXXXX)
# shellcheck disable=SC2086  # options word-split on purpose
"$here/startup.sh" --build "$build" $startup_opts
metrics_scraper "$sock" "$scrapes" &
scraper=$!
# shellcheck disable=SC2086
"$here/startup.sh" --build "$build" $startup_opts \
	--lazy-args "-o metrics=unix:$sock"
kill "$scraper"
wait "$scraper" 2>/dev/null || true
echo "metrics_cost: startup with metrics: $(wc -l <"$scrapes") scrapes answered" >&2
rm -f "$scrapes"
