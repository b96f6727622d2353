#!/bin/bash
# The whole test suite (the README's test command; .ci/run runs it after
# installing dependencies):
#   1. a warnings-as-errors build and every meson suite (unit, integration),
#      then scripts/demo.sh (the README's first command) on that build;
#   2. an ASan+UBSan build running every suite again, the integration one
#      on a subset of its images (LSQ_ASAN_IMAGES);
#   3. a ThreadSanitizer build running the suite 'tsan' only (the
#      concurrency test with the daemon under TSan, the block cache unit
#      test); reports fail the test, tests/tsan.supp lists the few
#      justified suppressions for uninstrumented libraries.
# A missing pytest, or a pytest suite that collected no test, is a failure.
# Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
TSAN_BUILD=${TSAN_BUILD:-build-tsan}
passed=0
failed=0

setup() {
	local dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson configure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
}

# add one build's results (pytest suites count their cases)
tally() {
	local p f s
	read -r p f s < <(python3 tests/tally.py "$1" 2>/dev/null || echo "0 1 0")
	passed=$((passed + p))
	failed=$((failed + f))
	if [ -n "${CI:-}" ] && [ "$s" -gt 0 ]; then
		echo "CI: $s test(s) skipped; skips are failures in CI" >&2
		failed=$((failed + s))
	fi
}

run_suites() {
	local dir=$1
	shift
	if ! meson compile -C "$dir" >/dev/null; then
		meson compile -C "$dir"
		failed=$((failed + 1))
		return
	fi
	rm -f "$dir"/junit-*.xml
	meson test -C "$dir" --print-errorlogs "$@"
	tally "$dir"
}

# Without pytest meson defines no pytest suite, and the run would pass on
# the C tests alone.
if ! command -v pytest-3 >/dev/null && ! command -v pytest >/dev/null; then
	echo "pytest is not installed: the mount, HTTP and packer suites cannot run" >&2
	failed=$((failed + 1))
fi

echo "== build with -Werror and run every suite"
setup "$BUILD" -Dwerror=true
run_suites "$BUILD"

echo "== the README's first command: scripts/demo.sh"
if bash scripts/demo.sh; then
	passed=$((passed + 1))
else
	echo "scripts/demo.sh failed" >&2
	failed=$((failed + 1))
fi

echo "== ASan+UBSan build: every suite, fewer images"
setup "$ASAN_BUILD" -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
LSQ_IMAGES=${LSQ_ASAN_IMAGES:-lz4hc-4k,xz-bcj-1m,lzma,gzip-uncompressed,zstd-noxattr,ng-xz} \
	run_suites "$ASAN_BUILD" --timeout-multiplier 3

echo "== TSan build: concurrency tests"
setup "$TSAN_BUILD" -Dwerror=true -Db_sanitize=thread -Db_lundef=false
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:suppressions=$PWD/tests/tsan.supp} \
	run_suites "$TSAN_BUILD" --suite tsan --timeout-multiplier 3

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
