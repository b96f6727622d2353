#!/usr/bin/env bash
# What checking a signed image costs (issue 19): bench/knobs.sh on signed
# copies of the bench images, once on defaults (-o verify=auto with no
# keys: nothing is checked) and once with -o verify=KEY, in one sitting.
#
# usage: bench/verify_cost.sh [-- run.sh options]
#   run.sh options default to the issue-4 rows: --readers kernel,lazy-local,
#   lazy-http --comps zstd,xz --workloads rand1,rand2,mmap,seq,findsize,
#   findtype --runtime 5 --repeat 3
# The signed copies and a fresh key go to $SQFS_BENCH_WORK-signed (the
# originals in $SQFS_BENCH_WORK, default /tmp/sqfs-lazy-bench, are built by
# bench/mkdata.sh when missing and never changed). Needs root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_PROG=verify_cost.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
build=${SQFS_BENCH_BUILD:-$here/../build}
build=$(cd "$build" && pwd)
[ "${1:-}" != -- ] || shift
run_args=("$@")
[ ${#run_args[@]} -gt 0 ] || run_args=(--readers kernel,lazy-local,lazy-http
	--comps zstd,xz --workloads rand1,rand2,mmap,seq,findsize,findtype
	--runtime 5 --repeat 3)
comps=zstd,xz
for ((i = 0; i < ${#run_args[@]}; i++)); do
	[ "${run_args[i]}" != --comps ] || comps=${run_args[i + 1]}
done
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-bench}
signed=$work-signed
mkdir -p "$signed"
mapfile -t images < <(SQFS_BENCH_WORK=$work "$here/mkdata.sh" --comps "$comps" |
	tail -n "$(tr , '\n' <<<"$comps" | wc -l)")
key=$signed/key.pem
if [ ! -f "$key" ]; then
	openssl genpkey -algorithm ed25519 -out "$key" 2>/dev/null
	chmod 600 "$key"
	openssl pkey -in "$key" -pubout -out "$signed/pub.pem"
fi
for img in "${images[@]}"; do
	d=$signed/$(basename "$(dirname "$img")")
	mkdir -p "$d"
	base=$(basename "$img" .sqfs)
	if ! "$build/sqfs-lazy-sign" --verify "$signed/pub.pem" "$d/$base.sqfs" \
		2>/dev/null; then
		cp "$img" "$d/$base.sqfs.tmp"
		"$build/sqfs-lazy-sign" --key "$key" "$d/$base.sqfs.tmp"
		mv "$d/$base.sqfs.tmp" "$d/$base.sqfs"
	fi
	cp "$(dirname "$img")/$base.stamp" "$(dirname "$img")/src.facts" "$d/"
done
# knobs.sh's folder records this command as its caller (meta.tsv)
export SQFS_BENCH_CALLER="${SQFS_BENCH_CALLER:+$SQFS_BENCH_CALLER > }$(env_words \
	SQFS_BENCH_WORK)$(sh_words bench/verify_cost.sh -- "${run_args[@]}")"
SQFS_BENCH_WORK=$signed SQFS_BENCH_VERIFY_KEY=$signed/pub.pem \
	"$here/knobs.sh" --build "$build" --configs default,verify -- "${run_args[@]}"
