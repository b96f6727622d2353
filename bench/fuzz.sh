#!/bin/bash
# Run the libFuzzer targets for a while (default 300 s each).
#   bash bench/fuzz.sh [SECONDS] [TARGET...]
# Targets: superblock dir xattr image_walk http_response mount_options manifest metrics_request sif
# (default: all, one after the other; JOBS=N runs N at once). Corpora grow in $WORK/corpus-TARGET
# (seeded from tests/fuzz/corpus/TARGET, and the image targets also from
# tests/fuzz/crashers); crashes
# land in $WORK/findings. Once fixed, copy a crash into tests/fuzz/crashers
# (named crash-<sha1>, as libFuzzer names it) so it replays in every run.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] ||
	targets=(superblock dir xattr image_walk http_response mount_options manifest metrics_request sif)
WORK=${WORK:-/tmp/sqfs-lazy-fuzz}
JOBS=${JOBS:-1}
mkdir -p "$WORK/findings"
# clang's libFuzzer and ASan runtimes are a package of their own on Debian
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
	clang -fsanitize=fuzzer,address -x c - -o /dev/null 2>/dev/null || {
	echo "clang cannot link libFuzzer+ASan: apt-get install libclang-rt-dev" >&2
	exit 1
}
[ -f "$WORK/build/build.ninja" ] ||
	CC=clang meson setup "$WORK/build" -Dfuzzing=true \
		-Db_sanitize=address,undefined -Db_lundef=false >/dev/null
meson compile -C "$WORK/build" >/dev/null

run_target() {
	local target=$1 corpus="$WORK/corpus-$1" rc
	mkdir -p "$corpus"
	cp -n tests/fuzz/corpus/"$target"/* "$corpus/" 2>/dev/null || true
	case $target in
	http_response | mount_options | manifest | metrics_request | sif) ;;  # not images
	*) cp -n tests/fuzz/crashers/* "$corpus/" 2>/dev/null || true ;;
	esac
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	"$WORK/build/tests/fuzz/fuzz_$target" "$corpus" \
		-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -artifact_prefix="$WORK/findings/$target-" \
		-print_final_stats=1 >"$WORK/$target.log" 2>&1 && rc=0 || rc=$?
	echo "$target: exit $rc; $(grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$WORK/$target.log" | tr '\n' ' ')"
}

running=0
for t in "${targets[@]}"; do
	run_target "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$JOBS" ]; then
		wait -n || true
		running=$((running - 1))
	fi
done
wait
ls -l "$WORK/findings"
