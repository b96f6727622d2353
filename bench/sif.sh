#!/usr/bin/env bash
# SIF files (issue 37): what Apptainer gets when it mounts a SIF's SquashFS
# partition with squashfuse_ll (its unprivileged path) and with us in its
# place, against the kernel's loop mount of the partition, in one run.
# The SIF wraps bench/run.sh's image (big.bin, 1 GiB, and a /usr subset);
# squashfuse_ll gets Apptainer's command line (-f -o offset=N), we get the
# SIF itself (the partition found from its descriptors). Rows, each cold
# (page cache dropped, fresh mount): fio 4 KiB random reads of big.bin for
# --runtime seconds (IOPS), and a full read of the tree (tar to /dev/null,
# seconds). Medians of --repeat runs.
#
# usage: bench/sif.sh [--image IMG] [--build DIR] [--runtime SEC] [--repeat N]
#   --image IMG   the SquashFS image to wrap (default: bench/run.sh's zstd
#                 image in $SQFS_BENCH_WORK, made by bench/mkdata.sh)
# Output: bench/results/<stamp>-sif/{meta.tsv,rows.tsv,table.md}. Root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_PROG=sif.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-bench}
build=$here/../build image= runtime=5 repeat=3
while [ $# -gt 0 ]; do
	case $1 in
	--image) image=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--runtime) runtime=${2:?}; shift ;;
	--repeat) repeat=${2:?}; shift ;;
	-h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || die "needs root (drops caches, loop-mounts)"
build=$(cd "$build" && pwd)
lazy=$build/sqfs-lazy-mount
siftool=${LSQ_SIFTOOL:-${LSQ_TEST_CACHE:-/var/cache/sqfs-lazy-tests}/bin/siftool-v2.25.0/siftool}
[ -x "$siftool" ] || bash "$here/../scripts/install-siftool.sh"
for t in fio squashfuse_ll tar "$lazy" "$siftool"; do
	command -v "$t" >/dev/null || die "$t missing"
done
if [ -z "$image" ]; then
	image=$(ls "$work"/data-*/image-zstd.sqfs 2>/dev/null | head -1 || true)
	[ -n "$image" ] || { "$here/mkdata.sh" >&2; image=$(ls "$work"/data-*/image-zstd.sqfs | head -1); }
fi
out=$here/results/$(date -u +%Y%m%dT%H%M%SZ)-sif
mkdir -p "$out" "$work/sif/mnt"
sif=$work/sif/image.sif
if [ ! -e "$sif" ] || [ "$image" -nt "$sif" ]; then
	rm -f "$sif"
	echo "Bootstrap: localimage" >"$work/sif/def"
	"$siftool" new "$sif" >/dev/null
	"$siftool" add "$sif" "$work/sif/def" --datatype 1 >/dev/null
	"$siftool" add "$sif" "$image" --datatype 4 --parttype 2 --partfs 1 --partarch 2 >/dev/null
fi
# the partition's offset, from the descriptors
offset=$(python3 - "$sif" <<'EOF'
import struct, sys
with open(sys.argv[1], "rb") as f:
    h = f.read(128)
    total, off = struct.unpack_from("<qq", h, 88)
    f.seek(off)
    raw = f.read(total * 585)
for i in range(total):
    d = raw[i * 585:(i + 1) * 585]
    t, used = struct.unpack_from("<iB", d, 0)
    if used and t == 0x4004 and struct.unpack_from("<i", d, 205)[0] == 2:
        print(struct.unpack_from("<q", d, 17)[0])
EOF
)
[ -n "$offset" ] || die "no primary partition in $sif"
run_facts --command "bench/sif.sh --image $image --build $build --runtime $runtime --repeat $repeat" \
	--typed "$0 $*" --build "$build" --bin sqfs-lazy-mount >"$out/meta.tsv"
mnt=$work/sif/mnt
pid=

mount_as() {  # READER
	pid=
	case $1 in
	kernel) mount -t squashfs -o "loop,ro,offset=$offset" "$sif" "$mnt" ;;
	squashfuse_ll) squashfuse_ll -f -o "offset=$offset" "$sif" "$mnt" 2>>"$out/daemon.log" & pid=$! ;;
	sqfs-lazy) "$lazy" -f "$sif" "$mnt" 2>>"$out/daemon.log" & pid=$! ;;
	esac
	for _ in $(seq 3000); do mountpoint -q "$mnt" && return 0; sleep 0.01; done
	die "$1: no mount"
}

unmount_it() {
	unmount_one "$mnt"
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
}
trap 'unmount_it' EXIT

printf 'reader\trow\trun\tvalue\n' >"$out/rows.tsv"
for r in $(seq "$repeat"); do
	for reader in kernel squashfuse_ll sqfs-lazy; do
		drop_caches
		mount_as "$reader"
		drop_caches
		iops=$(FIO_FILE=$mnt/big.bin FIO_NUMJOBS=1 FIO_RUNTIME=$runtime \
			FIO_IOENGINE=psync FIO_LOG=$out/fio-$reader-$r \
			fio --readonly --output-format=json "$here/fio/rand_read_4k.fio" |
			python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))')
		unmount_it
		printf '%s\trandom 4k IOPS, cold\t%s\t%s\n' "$reader" "$r" "$iops" >>"$out/rows.tsv"
		drop_caches
		mount_as "$reader"
		drop_caches
		t0=$(now_ns)
		tar -C "$mnt" -cf - . | cat >/dev/null
		secs=$(secs_since "$t0")
		unmount_it
		printf '%s\tfull read s, cold\t%s\t%s\n' "$reader" "$r" "$secs" >>"$out/rows.tsv"
		log "$reader run $r: $iops IOPS, full read $secs s"
	done
done
python3 - "$out/rows.tsv" >"$out/table.md" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med = {}
for row in sorted({(r["reader"], r["row"]) for r in rows}):
    vals = [float(r["value"]) for r in rows if (r["reader"], r["row"]) == row]
    med[row] = statistics.median(vals)
print("| row | kernel | squashfuse_ll | sqfs-lazy | sqfs-lazy / squashfuse_ll |")
print("|---|---:|---:|---:|---:|")
for name in ("random 4k IOPS, cold", "full read s, cold"):
    k, s, l = (med[(x, name)] for x in ("kernel", "squashfuse_ll", "sqfs-lazy"))
    better = l / s if "IOPS" in name else s / l
    print("| %s | %g | %g | %g | %.2fx |" % (name, k, s, l, better))
EOF
meta_end "$out/meta.tsv"
cat "$out/table.md"
echo "sif: $out/table.md" >&2
