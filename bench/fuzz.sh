#!/bin/bash
# Run the libFuzzer targets for a while (default 300 s each).
#   bash bench/fuzz.sh [SECONDS]
# Crashes land in $WORK/findings; copy a fixed one into tests/fuzz/crashers.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
WORK=${WORK:-/tmp/sqfs-lazy-fuzz}
mkdir -p "$WORK/findings"
[ -f "$WORK/build/build.ninja" ] ||
	CC=clang meson setup "$WORK/build" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
meson compile -C "$WORK/build" >/dev/null
for target in image_walk; do
	corpus="$WORK/corpus-$target"
	mkdir -p "$corpus"
	cp -n tests/fuzz/corpus/$target/* "$corpus/" 2>/dev/null || true
	"$WORK/build/tests/fuzz/fuzz_$target" "$corpus" \
		-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
		-artifact_prefix="$WORK/findings/" -print_final_stats=1
done
