#!/bin/bash
# The unmount-after-load reproducer (issue 21, docs/hardening.md "Known
# issues"): runs the concurrency test's case (16 threads hammering a mount,
# then fusermount3 -u, then the daemon must exit within 15 s) up to N
# times, optionally beside CPU burners, and stops at the first daemon that
# outlives its unmount; the test then prints each thread's kernel stack and
# the pids whose mount namespace still holds the mount.
#   bash bench/unmount_loop.sh [N] [BURNERS] [-k PYTEST_SELECTION]
# Defaults: N=50, BURNERS=2 (busy loops, one per CPU of this 2-CPU VM),
# selection "file and dev_fuse". Build dir: $LSQ_BUILD_DIR or ./build.
# Exit status 1 at the first hang, with its report in the output.
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-50}
burners=${2:-2}
shift 2 2>/dev/null || shift $#
sel=("-k" "file and dev_fuse")
[ $# -gt 0 ] && sel=("$@")
export LSQ_BUILD_DIR=${LSQ_BUILD_DIR:-$PWD/build}
pids=()
for _ in $(seq "$burners"); do
	( while :; do :; done ) &
	pids+=($!)
done
trap '[ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null' EXIT
for i in $(seq "$n"); do
	out=$(python3 -m pytest -q -p no:cacheprovider tests/concurrency \
		"${sel[@]}" 2>&1)
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "$out" | tail -40
		echo "iteration $i of $n: FAILED" >&2
		exit 1
	fi
	echo "iteration $i of $n: ok ($(echo "$out" | tail -1))"
done
echo "$n iterations, no daemon outlived its unmount"
