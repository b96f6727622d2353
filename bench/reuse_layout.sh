#!/usr/bin/env bash
# Reuse across versions (issue 19): how much of version 2 of a tree a
# client holding version 1's units must fetch, per packer layout.
#
#   bench/reuse_layout.sh [--build DIR] [--src DIR] [--mib N] [--pct P]
#                         [--seed S] [--work DIR] [--results DIR]
#
# v1: a deterministic subset of --src (bench/usr_subset.py, about --mib MiB;
# default /usr, 256). v2: a copy with --pct % of its regular files (default
# 5) changed, removed or added, a third each (bench/reuse_layout.py
# mutate, seeded). Each variant packs v1, v2 and the changed/added files
# alone with default settings (gzip, 128 KiB blocks), and
# sqfs-lazy-sign --key signs all three. bench/reuse_layout.py report then
# counts the bytes of v2's units whose SHA-256 is not among v1's, data
# (data and fragment blocks) and metadata apart, against the reference:
# the data units of the changed files' own image plus all of v2's
# metadata. The issue's target: fetched <= 1.3 x reference.
#
# Variants: sqfs-lazy-pack (default layout), sqfs-lazy-pack --reuse-layout
# (4K, the default) and --reuse-layout=16K, sqfs-lazy-pack --no-fragments,
# mksquashfs (defaults), mksquashfs -no-fragments. Output:
# results/<UTC>-reuse-layout/{meta.tsv,runs.tsv,table.md,mutate.txt,
# subset.txt}.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=reuse_layout
. "$here/lib.sh"

build=$here/../build
src=/usr
mib=256
pct=5
seed=19
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-bench}-reuse
results=$here/results
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=${2:?}; shift ;;
	--src) src=${2:?}; shift ;;
	--mib) mib=${2:?}; shift ;;
	--pct) pct=${2:?}; shift ;;
	--seed) seed=${2:?}; shift ;;
	--work) work=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	-h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
build=$(cd "$build" && pwd)
pack=$build/src/pack/sqfs-lazy-pack
sign=$build/sqfs-lazy-sign
[ -x "$pack" ] && [ -x "$sign" ] || die "build $build first"
command -v mksquashfs >/dev/null || die "mksquashfs is needed"

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=$results/$stamp-reuse-layout
mkdir -p "$out"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

log "v1: $mib MiB of $src"
python3 "$here/usr_subset.py" --src "$src" --out "$work/v1" \
	--bytes $((mib * 1048576)) >"$out/subset.txt"
log "v2: $pct% of the files changed, removed or added (seed $seed)"
cp -a "$work/v1" "$work/v2"
python3 "$here/reuse_layout.py" mutate --v2 "$work/v2" \
	--changed "$work/changed" --pct "$pct" --seed "$seed" >"$out/mutate.txt"
cat "$out/mutate.txt" >&2

openssl genpkey -algorithm ed25519 -out "$work/key.pem" 2>/dev/null
chmod 600 "$work/key.pem"

run_facts --command "$(sh_words bench/reuse_layout.sh --build "$build" \
	--src "$src" --mib "$mib" --pct "$pct" --seed "$seed" --work "$work" \
	--results "$(cd "$results" && pwd)")" --typed "$cmdline" \
	--build "$build" --bin src/pack/sqfs-lazy-pack --bin sqfs-lazy-sign \
	>"$out/meta.tsv"

variants=(lazy lazy-reuse lazy-reuse16k lazy-nofrag mksquashfs mksquashfs-nofrag)
do_pack() { # VARIANT TREE IMAGE
	local v=$1 tree=$2 img=$3
	case $v in
	lazy) "$pack" -q --force "$tree" "$img" ;;
	lazy-reuse) "$pack" -q --force --reuse-layout "$tree" "$img" ;;
	lazy-reuse16k) "$pack" -q --force --reuse-layout=16K "$tree" "$img" ;;
	lazy-nofrag) "$pack" -q --force --no-fragments "$tree" "$img" ;;
	mksquashfs) mksquashfs "$tree" "$img" -noappend -quiet -no-progress \
		-mkfs-time 1700000000 >/dev/null ;;
	mksquashfs-nofrag) mksquashfs "$tree" "$img" -noappend -quiet \
		-no-progress -mkfs-time 1700000000 -no-fragments >/dev/null ;;
	esac
	"$sign" --key "$work/key.pem" "$img"
}

tsv=$out/runs.tsv
for v in "${variants[@]}"; do
	log "$v: pack v1, v2, the changed files; sign"
	for t in v1 v2 changed; do
		do_pack "$v" "$work/$t" "$work/$v-$t.sqfs"
	done
	python3 "$here/reuse_layout.py" report --name "$v" \
		--v1 "$work/$v-v1.sqfs" --v2 "$work/$v-v2.sqfs" \
		--changed-img "$work/$v-changed.sqfs" --sign "$sign" --tsv "$tsv" >&2
	rm -f "$work/$v-"*.sqfs
done
meta_end "$out/meta.tsv"

python3 "$here/reuse_layout.py" table "$tsv" >"$out/table.md"
cat "$out/table.md"
log "results in $out"
