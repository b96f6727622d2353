#!/bin/bash
# The whole test suite (the README's test command; .ci/run runs it after
# installing dependencies). docs/testing.md describes it.
#   1. a warnings-as-errors build and every meson suite (unit, integration,
#      http, ...), then scripts/demo.sh (the README's first command) on that
#      build;
#   2. an ASan+UBSan build running every suite again but 'debian' (the
#      packages are built from the source tree, not from this build), the
#      integration one on a subset of its images (LSQ_ASAN_IMAGES);
#   3. a ThreadSanitizer build running the suite 'tsan' only (the
#      concurrency test with the daemon under TSan, the block cache unit
#      test); reports fail the test, tests/tsan.supp lists the few
#      justified suppressions for uninstrumented libraries.
# Every build has every optional feature of meson_options.txt forced on
# (-Dlzo=enabled ...): a missing library is a configure error here, never a
# feature silently left out of what is tested.
# A skipped test is a failure unless LSQ_ALLOW_SKIPS=1; either way the
# summary lists every skip with its reason (tests/tally.py). A missing
# pytest, or a pytest suite that collected no test, is a failure.
# Ends with one line "N passed, N failed ...".
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
TSAN_BUILD=${TSAN_BUILD:-build-tsan}

# what each stage did, for tests/tally.py --stages (tab-separated)
stages=$(mktemp)
trap 'rm -f "$stages"' EXIT
record() {
	local IFS=$'\t'
	echo "$*" >>"$stages"
}

# -Dname=enabled for every feature option of meson_options.txt
features=$(meson introspect --buildoptions meson.build 2>/dev/null | python3 -c '
import json, sys
for o in json.load(sys.stdin):
    if o["section"] == "user" and o["type"] == "combo" and \
            sorted(o["choices"]) == ["auto", "disabled", "enabled"]:
        print("-D%s=enabled" % o["name"])
')
if [ -z "$features" ]; then
	echo "cannot list the feature options of meson_options.txt" >&2
	record fail "meson introspect" "no feature option found to force on"
fi
# shellcheck disable=SC2206 # one word per option
features=($features)

# configure DIR (reconfigure it if it exists, so the options apply there
# too); a failure prints meson's output and is recorded
setup() {
	local dir=$1 out
	shift
	if [ -f "$dir/build.ninja" ]; then
		out=$(meson setup --reconfigure "$dir" "${features[@]}" "$@" 2>&1)
	else
		out=$(meson setup "$dir" "${features[@]}" "$@" 2>&1)
	fi || {
		printf '%s\n' "$out" | tail -n 20 >&2
		record fail "$dir: meson setup" "configure failed: $(printf '%s\n' "$out" |
			grep -m1 -E 'ERROR|error' || echo 'see above')"
		return 1
	}
}

# build DIR and run meson test there; tally.py reads its logs afterwards
run_suites() {
	local dir=$1 rc
	shift
	if ! meson compile -C "$dir" >/dev/null; then
		meson compile -C "$dir"
		record fail "$dir: meson compile" "the build failed"
		return
	fi
	# results of an earlier run must not be read as this one's
	rm -f "$dir"/junit-*.xml "$dir/meson-logs/testlog.json"
	meson test -C "$dir" --print-errorlogs "$@"
	rc=$?
	record meson "$dir" "$rc"
}

# Without pytest meson defines no pytest suite, and the run would pass on
# the C tests alone.
if ! command -v pytest-3 >/dev/null && ! command -v pytest >/dev/null; then
	echo "pytest is not installed: the mount, HTTP and packer suites cannot run" >&2
	record fail pytest "not installed: the mount, HTTP and packer suites cannot run"
fi

# the summary's own logic, before anything depends on it
if python3 -m doctest tests/tally.py; then
	record pass "tests/tally.py doctests"
else
	record fail "tests/tally.py doctests" "the tally's self-test failed"
fi

echo "== build with -Werror and every feature, run every suite"
setup "$BUILD" -Dwerror=true && run_suites "$BUILD"

echo "== the README's first command: scripts/demo.sh"
if bash scripts/demo.sh; then
	record pass scripts/demo.sh
else
	echo "scripts/demo.sh failed" >&2
	record fail scripts/demo.sh "exited non-zero"
fi

echo "== ASan+UBSan build: every suite, fewer images"
setup "$ASAN_BUILD" -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false &&
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
LSQ_IMAGES=${LSQ_ASAN_IMAGES:-lz4hc-4k,xz-bcj-1m,lzma,gzip-uncompressed,zstd-noxattr,ng-xz} \
	run_suites "$ASAN_BUILD" --no-suite debian --timeout-multiplier 3

echo "== TSan build: concurrency tests"
setup "$TSAN_BUILD" -Dwerror=true -Db_sanitize=thread -Db_lundef=false &&
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:suppressions=$PWD/tests/tsan.supp} \
	run_suites "$TSAN_BUILD" --suite tsan --timeout-multiplier 3

echo "== summary"
python3 tests/tally.py --stages "$stages"
