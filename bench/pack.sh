#!/bin/bash
# bench/pack.sh: sqfs-lazy-pack against mksquashfs, gensquashfs and
# tar2sqfs on one real tree, for xz and zstd at 1 and 2 jobs (issue 5).
#
#   bench/pack.sh [--build DIR] [--quick] [--out DIR] [--tools LIST]
#                 [--comps LIST]
#
# --tools: comma-separated subset of sqfs-lazy-pack, sqfs-lazy-pack-tar,
# mksquashfs, gensquashfs, tar2sqfs (default: all); e.g. --tools
# sqfs-lazy-pack,mksquashfs for a shorter comparison. --comps: subset of
# xz, zstd (default: both). The tar is made only for the tools that read it.
#
# The tree is a copy of /usr/lib/x86_64-linux-gnu and /usr/share/{doc,
# locale,man} (about 1.1 GB here; --quick:
# /usr/share/vim only), made once per run so that package updates cannot
# change it mid-run; its size and file count go into meta.tsv. tar2sqfs
# reads a pax tar of the same tree made beforehand (not timed). Every tool
# gets block size 128K and the same compression settings: xz preset 6 with
# a dictionary of one block and no BCJ filter (every tool's default), zstd
# level 15 (every tool's default, also given explicitly). Each timed command
# ends with `sync FILE` (an fsync of the image only), because
# sqfs-lazy-pack fsyncs before its rename and the others do not.
# gensquashfs gets -k -x (keep mtimes and xattrs) and every tool writes an
# export table, so the images hold the same information.
#
# sqfs-lazy-pack-tar is our packer reading tar2sqfs's archive (zstd only,
# to keep the run short).
#
# Writes meta.tsv, runs.tsv and table.md into
# bench/results/<UTC stamp>-pack[-quick]/ (or --out DIR).
set -euo pipefail
cmdline="$0${*:+ $*}"
cd "$(dirname "$0")/.."
BENCH_PROG=pack.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh

BUILD=build
QUICK=0
OUT=
ALL_TOOLS=sqfs-lazy-pack,sqfs-lazy-pack-tar,mksquashfs,gensquashfs,tar2sqfs
TOOLS=$ALL_TOOLS
COMPS=xz,zstd
usage() {
	echo "usage: $0 [--build DIR] [--quick] [--out DIR] [--tools LIST]" \
		"[--comps LIST]" >&2
	echo "  tools: $ALL_TOOLS; comps: xz,zstd" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--quick) QUICK=1; shift ;;
	--out) OUT=$2; shift 2 ;;
	--tools) TOOLS=$2; shift 2 ;;
	--comps) COMPS=$2; shift 2 ;;
	*) usage ;;
	esac
done
# in_list ITEM LIST: is ITEM one of the comma-separated LIST?
in_list() { case ",$2," in *",$1,"*) return 0 ;; esac; return 1; }
# check_list NAME LIST ALLOWED: every item of LIST is ALLOWED, none twice
check_list() {
	local item seen=,
	[ -n "$2" ] || { echo "$1: empty list" >&2; usage; }
	for item in ${2//,/ }; do
		if ! in_list "$item" "$3"; then
			echo "$1: unknown '$item'" >&2
			usage
		fi
		if in_list "$item" "$seen"; then
			echo "$1: '$item' twice" >&2
			usage
		fi
		seen=$seen$item,
	done
}
check_list --tools "$TOOLS" "$ALL_TOOLS"
check_list --comps "$COMPS" xz,zstd
want() { in_list "$1" "$TOOLS"; }
NEED_TAR=0
if want tar2sqfs || want sqfs-lazy-pack-tar; then
	NEED_TAR=1
fi
PACK=$(realpath "$BUILD/src/pack/sqfs-lazy-pack")
need=("$PACK")
for t in mksquashfs gensquashfs tar2sqfs; do
	if want $t; then need+=("$t"); fi
done
if [ $NEED_TAR = 1 ]; then need+=(tar); fi
for t in "${need[@]}"; do
	command -v "$t" >/dev/null || { echo "missing: $t" >&2; exit 1; }
done
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
if [ -z "$OUT" ]; then
	OUT=bench/results/$STAMP-pack
	[ $QUICK = 1 ] && OUT=$OUT-quick
fi
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
WORK=$(mktemp -d /var/tmp/lsq-bench-pack.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

if [ $QUICK = 1 ]; then
	SRCS=(/usr/share/vim)
else
	SRCS=(/usr/lib/x86_64-linux-gnu /usr/share/doc /usr/share/locale
	      /usr/share/man)
fi

echo "== copying ${SRCS[*]}" >&2
mkdir "$WORK/tree"
for s in "${SRCS[@]}"; do
	cp -a "$s" "$WORK/tree/$(basename "$s")"
done
TREE=$WORK/tree
TREE_BYTES=$(du -sb --apparent-size "$TREE" | cut -f1)
TREE_FILES=$(find "$TREE" -type f | wc -l)
TREE_ALL=$(find "$TREE" | wc -l)
if [ $NEED_TAR = 1 ]; then
	echo "== tar for tar2sqfs (not timed)" >&2
	tar -C "$TREE" --format=pax -cf "$WORK/tree.tar" .
	cat "$WORK/tree.tar" >/dev/null   # read once: warm page cache
fi
find "$TREE" -type f -exec cat {} + >/dev/null

# The run's facts, then the tree and the other tools' versions.
eff=(bench/pack.sh --build "$(realpath "$BUILD")" --out "$OUT" --tools "$TOOLS"
	--comps "$COMPS")
[ $QUICK = 0 ] || eff+=(--quick)
{
	run_facts --command "$(sh_words "${eff[@]}")" --typed "$cmdline" \
		--build "$BUILD" --bin src/pack/sqfs-lazy-pack
	printf 'tree_sources\t%s\n' "${SRCS[*]}"
	printf 'tree_bytes\t%s\n' "$TREE_BYTES"
	printf 'tree_files\t%s\n' "$TREE_FILES"
	printf 'tree_entries\t%s\n' "$TREE_ALL"
	printf 'tools\t%s\n' "$TOOLS"
	printf 'comps\t%s\n' "$COMPS"
	if [ $NEED_TAR = 1 ]; then
		printf 'tar_bytes\t%s\n' "$(stat -c %s "$WORK/tree.tar")"
	fi
	for t in gensquashfs tar2sqfs; do
		want $t || continue
		printf '%s_version\t%s\n' "$t" "$($t --version 2>&1 | head -1)"
	done
} >"$OUT/meta.tsv"
cat "$OUT/meta.tsv" >&2

printf 'tool\tcomp\tjobs\twall_s\tcpu_s\tbytes\n' >"$OUT/runs.tsv"
IMG=$WORK/out.sqfs
TIMEFORMAT='%R %U %S'

run() { # tool comp jobs -- command...; skipped unless --tools has tool
	local tool=$1 comp=$2 jobs=$3 t wall usr sys
	shift 4
	want "$tool" || return 0
	rm -f "$IMG"
	t=$( { time { "$@" >"$WORK/log" 2>&1 && sync "$IMG"; } ; } 2>&1 ) || {
		echo "FAILED: $*" >&2
		cat "$WORK/log" >&2
		exit 1
	}
	read -r wall usr sys <<<"$t"
	printf '%s\t%s\t%s\t%s\t%.2f\t%s\n' "$tool" "$comp" "$jobs" "$wall" \
		"$(echo "$usr + $sys" | bc)" "$(stat -c %s "$IMG")" |
		tee -a "$OUT/runs.tsv" >&2
	rm -f "$IMG"
}

for comp in ${COMPS//,/ }; do
	if [ "$comp" = xz ]; then
		lvl=6; mks=(); ours=()
	else
		lvl=15; mks=(-Xcompression-level 15); ours=(-l 15)
	fi
	for j in 1 2; do
		run sqfs-lazy-pack $comp $j -- "$PACK" -q --force -c $comp \
			"${ours[@]}" -b 128K -j $j "$TREE" "$IMG"
		run mksquashfs $comp $j -- mksquashfs "$TREE" "$IMG" -noappend \
			-quiet -no-progress -comp $comp "${mks[@]}" -b 128K \
			-processors $j
		run gensquashfs $comp $j -- gensquashfs -q -f -k -x -e \
			-c $comp -X level=$lvl -b 131072 -j $j -D "$TREE" "$IMG"
		run tar2sqfs $comp $j -- sh -c 'exec tar2sqfs -q -f -e -c "$1" \
			-X level="$2" -b 131072 -j "$3" "$4" <"$5"' sh $comp \
			$lvl $j "$IMG" "$WORK/tree.tar"
		if [ "$comp" = zstd ]; then
			# our tar input on tar2sqfs's archive (zstd only: time)
			run sqfs-lazy-pack-tar $comp $j -- "$PACK" -q --force \
				-c $comp "${ours[@]}" -b 128K -j $j \
				"$WORK/tree.tar" "$IMG"
		fi
	done
done
meta_end "$OUT/meta.tsv"

python3 bench/pack_report.py "$OUT"
echo "results: $OUT" >&2
