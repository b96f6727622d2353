#!/usr/bin/env bash
# Build (or reuse) the benchmark images. See bench/README.md ("Data").
#
#   bench/mkdata.sh [--quick] [--work DIR] [--comps zstd,xz] [--force]
#
# One source tree, packed once per compressor (128 KiB blocks):
#   tree/     a deterministic subset of /usr (usr_subset.py), about
#             $SQFS_BENCH_USR_MIB MiB (default 1024, quick 64)
#   big.bin   one generated file (gendata.py, fixed seed) of
#             $SQFS_BENCH_BIG_MIB MiB (default 512, quick 128) for the fio
#             and sequential rows
# Writes <work>/data-<profile>-u<usr>-b<big>/image-<comp>.sqfs and a
# .stamp (key=value facts) next to each, and prints the image paths, one
# per line, in --comps order, as the last lines of stdout (progress goes to
# stderr). An image whose stamp carries the same parameter key is reused;
# the images of one directory always come from the same source tree (same
# manifest), so a partial rebuild after /usr changed repacks them all. The
# source tree is deleted after packing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-bench}
profile=full
comps=zstd,xz
force=0
seed=20240601
block=128K

while [ $# -gt 0 ]; do
	case $1 in
	--quick) profile=quick ;;
	--work) work=${2:?}; shift ;;
	--comps|--comp) comps=${2:?}; shift ;;
	--force) force=1 ;;
	-h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "mkdata: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

case $profile in
full)  usr_mib=${SQFS_BENCH_USR_MIB:-1024} big_mib=${SQFS_BENCH_BIG_MIB:-512} ;;
quick) usr_mib=${SQFS_BENCH_USR_MIB:-64} big_mib=${SQFS_BENCH_BIG_MIB:-128} ;;
esac
case $usr_mib$big_mib in *[!0-9]*) echo "mkdata: SQFS_BENCH_USR_MIB and SQFS_BENCH_BIG_MIB take whole MiB" >&2; exit 2 ;; esac
usr_src=${SQFS_BENCH_USR_SRC:-/usr}

log() { echo "mkdata: $*" >&2; }

dir=$work/data-$profile-u$usr_mib-b$big_mib
src=$dir/src
IFS=, read -r -a comp_list <<<"$comps"

mksq_common=(-b "$block" -noappend -processors 2 -no-xattrs
	-all-root -all-time 1700000000 -mkfs-time 1700000000 -no-progress)
gen_sum=$(cat "$here/gendata.py" "$here/usr_subset.py" | sha256sum | cut -c1-16)
key_of() {  # compressor
	echo "profile=$profile comp=$1 seed=$seed usr=$usr_src:$usr_mib big=$big_mib gen=$gen_sum mksquashfs=${mksq_common[*]}"
}
stamp_get() { sed -n "s/^$2=//p" "$1" 2>/dev/null | head -1; }

# Reuse when every image's stamp matches and they share one manifest.
reuse=1
manifests=
for c in "${comp_list[@]}"; do
	st=$dir/image-$c.stamp
	if [ "$force" = 1 ] || [ ! -f "$dir/image-$c.sqfs" ] || ! grep -qxF "key=$(key_of "$c")" "$st" 2>/dev/null; then
		reuse=0
	else
		manifests="$manifests $(stamp_get "$st" usr_manifest_sha256)"
	fi
done
if [ "$reuse" = 1 ] && [ "$(echo "$manifests" | tr ' ' '\n' | sort -u | grep -c .)" -le 1 ]; then
	for c in "${comp_list[@]}"; do
		log "reusing $dir/image-$c.sqfs"
	done
	for c in "${comp_list[@]}"; do echo "$dir/image-$c.sqfs"; done
	exit 0
fi

mkdir -p "$dir"
rm -rf "$src"
need=$(( (big_mib + usr_mib) * 2 * 1048576 + (256 << 20) ))
avail=$(df -B1 --output=avail "$dir" | tail -1 | tr -d ' ')
if [ "$avail" -lt "$need" ]; then
	log "need $((need >> 20)) MiB free in $dir, have $((avail >> 20)) MiB"
	exit 1
fi

log "source tree in $src: big.bin $big_mib MiB (gendata.py), tree/ = $usr_mib MiB subset of $usr_src (usr_subset.py)"
t0=$(date +%s)
python3 "$here/gendata.py" --out "$src" --seed "$seed" \
	--big-bytes $((big_mib << 20)) --tree-bytes 0 >"$dir/src.facts"
python3 "$here/usr_subset.py" --src "$usr_src" --out "$src/tree" --seed "$seed" \
	--bytes $((usr_mib << 20)) >>"$dir/src.facts"
touch -h -d @1700000000 "$src"
t1=$(date +%s)
manifest=$(stamp_get "$dir/src.facts" usr_manifest_sha256)
src_bytes=$(du -sb --apparent-size "$src" | cut -f1)

for c in "${comp_list[@]}"; do
	img=$dir/image-$c.sqfs st=$dir/image-$c.stamp
	if [ "$force" = 0 ] && [ -f "$img" ] && grep -qxF "key=$(key_of "$c")" "$st" 2>/dev/null &&
		[ "$(stamp_get "$st" usr_manifest_sha256)" = "$manifest" ]; then
		log "reusing $img (same manifest)"
		continue
	fi
	rm -f "$img" "$st"
	log "packing $img: mksquashfs SRC IMG -comp $c ${mksq_common[*]}"
	p0=$(date +%s)
	mksquashfs "$src" "$img" -comp "$c" "${mksq_common[@]}" >"$dir/mksquashfs-$c.log" 2>&1 || {
		log "mksquashfs failed, see $dir/mksquashfs-$c.log"
		tail -5 "$dir/mksquashfs-$c.log" >&2
		exit 1
	}
	p1=$(date +%s)
	img_bytes=$(stat -c %s "$img")
	{
		echo "key=$(key_of "$c")"
		cat "$dir/src.facts"
		echo "block_size=$block"
		echo "compressor=$c"
		echo "mksquashfs_cmd=mksquashfs SRC IMG -comp $c ${mksq_common[*]}"
		echo "mksquashfs_version=$(mksquashfs -version 2>&1 | head -1)"
		echo "source_bytes=$src_bytes"
		echo "image_bytes=$img_bytes"
		echo "ratio=$(awk -v a="$src_bytes" -v b="$img_bytes" 'BEGIN{printf "%.2f", a/b}')"
		echo "image_sha256=$(sha256sum "$img" | cut -d' ' -f1)"
		echo "gen_seconds=$((t1 - t0))"
		echo "pack_seconds=$((p1 - p0))"
		echo "created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	} >"$st.new"
	mv "$st.new" "$st"
	log "image $img: $((img_bytes >> 20)) MiB, ratio $(stamp_get "$st" ratio), pack $((p1 - p0)) s"
done
rm -rf "$src"
for c in "${comp_list[@]}"; do echo "$dir/image-$c.sqfs"; done
