#!/usr/bin/env bash
# Build (or reuse) the benchmark image. See bench/README.md.
#
#   bench/mkdata.sh [--quick] [--work DIR] [--comp NAME] [--force]
#
# Generates the deterministic dataset with gendata.py, packs it with
# mksquashfs, writes IMAGE.stamp (key=value facts about the image) and prints
# the image path as the last line of stdout. Progress goes to stderr. An image
# whose stamp carries the same parameter key is reused; the generated source
# tree is deleted after packing (it can be regenerated bit for bit).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-bench}
profile=full
comp=zstd
force=0
seed=20240601
block=128K

while [ $# -gt 0 ]; do
	case $1 in
	--quick) profile=quick ;;
	--work) work=$2; shift ;;
	--comp) comp=$2; shift ;;
	--force) force=1 ;;
	-h|--help) sed -n '2,11p' "$0"; exit 0 ;;
	*) echo "mkdata: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

case $profile in
full)  big_bytes=$((1 << 30)); tree_bytes=$((350 << 20)) ;;
quick) big_bytes=$((128 << 20)); tree_bytes=$((32 << 20)) ;;
esac

log() { echo "mkdata: $*" >&2; }

dir=$work/data-$profile-$comp
img=$dir/image.sqfs
stamp=$dir/image.stamp
src=$dir/src

mksq_args=(-comp "$comp" -b "$block" -noappend -processors 2 -no-xattrs
	-all-root -all-time 1700000000 -mkfs-time 1700000000 -no-progress)
gen_sum=$(sha256sum "$here/gendata.py" | cut -c1-16)
key="profile=$profile comp=$comp seed=$seed big=$big_bytes tree=$tree_bytes gen=$gen_sum mksquashfs=${mksq_args[*]}"

if [ "$force" = 0 ] && [ -f "$img" ] && [ -f "$stamp" ] &&
	grep -qxF "key=$key" "$stamp"; then
	log "reusing $img"
	echo "$img"
	exit 0
fi

mkdir -p "$dir"
rm -rf "$src" "$img" "$stamp" "$stamp.gen" "$stamp.new"

need=$(( (big_bytes + tree_bytes) * 2 + (256 << 20) ))
avail=$(df -B1 --output=avail "$dir" | tail -1 | tr -d ' ')
if [ "$avail" -lt "$need" ]; then
	log "need $((need >> 20)) MiB free in $dir, have $((avail >> 20)) MiB"
	exit 1
fi

log "generating dataset ($profile: big file $((big_bytes >> 20)) MiB, tree $((tree_bytes >> 20)) MiB) in $src"
t0=$(date +%s)
python3 "$here/gendata.py" --out "$src" --seed "$seed" \
	--big-bytes "$big_bytes" --tree-bytes "$tree_bytes" >"$stamp.gen"
t1=$(date +%s)
log "packing with mksquashfs ${mksq_args[*]}"
mksquashfs "$src" "$img" "${mksq_args[@]}" >"$dir/mksquashfs.log" 2>&1 || {
	log "mksquashfs failed, see $dir/mksquashfs.log"
	tail -5 "$dir/mksquashfs.log" >&2
	exit 1
}
t2=$(date +%s)
src_bytes=$(du -sb --apparent-size "$src" | cut -f1)
rm -rf "$src"
img_bytes=$(stat -c %s "$img")
{
	echo "key=$key"
	cat "$stamp.gen"
	echo "block_size=$block"
	echo "compressor=$comp"
	echo "mksquashfs_cmd=mksquashfs SRC IMG ${mksq_args[*]}"
	echo "mksquashfs_version=$(mksquashfs -version 2>&1 | head -1)"
	echo "source_bytes=$src_bytes"
	echo "image_bytes=$img_bytes"
	echo "ratio=$(awk -v a="$src_bytes" -v b="$img_bytes" 'BEGIN{printf "%.2f", a/b}')"
	echo "image_sha256=$(sha256sum "$img" | cut -d' ' -f1)"
	echo "gen_seconds=$((t1 - t0))"
	echo "pack_seconds=$((t2 - t1))"
	echo "created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$stamp.new"
mv "$stamp.new" "$stamp"
rm -f "$stamp.gen"
log "image $img: $((img_bytes >> 20)) MiB, ratio $(grep '^ratio=' "$stamp" | cut -d= -f2), gen $((t1 - t0)) s, pack $((t2 - t1)) s"
echo "$img"
