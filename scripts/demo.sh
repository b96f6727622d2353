#!/bin/bash
# The built-in demo: install, build, pack a sample tree, mount the image
# lazily with sqfs-lazy-mount, read a little from it and show how few bytes
# of the image that cost.
#
#   SAMPLE_DIR=/some/tree bash scripts/demo.sh     (default: /usr/include)
#
# Today the image is read from a local file; serving it over HTTP from
# 127.0.0.1 arrives with the HTTP source (issue 3), through the same seam.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
SAMPLE_DIR=${SAMPLE_DIR:-/usr/include}

bash scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

work=$(mktemp -d /tmp/sqfs-lazy-demo.XXXXXX)
mnt="$work/mnt"
cleanup() {
	fusermount3 -u -z "$mnt" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir "$mnt"

echo "== packing $SAMPLE_DIR (mksquashfs, zstd, 128 KiB blocks)"
mksquashfs "$SAMPLE_DIR" "$work/sample.sqfs" -comp zstd -noappend -quiet -no-progress >/dev/null
size=$(stat -c %s "$work/sample.sqfs")
echo "   image: $size bytes"

echo "== mounting with sqfs-lazy-mount"
"$root/build/sqfs-lazy-mount" "$work/sample.sqfs" "$mnt"
grep " $mnt " /proc/mounts

echo "== reading from the mount"
first=$(cd "$mnt" && find . -type f -size +4k -print -quit)
echo "   entries in the root: $(ls "$mnt" | wc -l)"
echo "   sha256 of $first: $(sha256sum < "$mnt/$first" | cut -c1-16)..."

echo "== what the daemon read from the image"
"$root/build/sqfs-lazy-mount" --stats "$mnt"
read_bytes=$("$root/build/sqfs-lazy-mount" --stats "$mnt" | awk '$1=="source_bytes"{print $2}')
echo "   => $read_bytes of $size image bytes ($(( read_bytes * 100 / size ))%) were read"
