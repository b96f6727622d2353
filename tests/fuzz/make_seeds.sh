#!/bin/bash
# Regenerate the small seed images of the fuzz corpora (deterministic:
# fixed tree, times and a single packer thread). Each seed stays a few KB:
# libFuzzer mutates small inputs far better than large ones, and the repo
# carries them forever.
#   bash tests/fuzz/make_seeds.sh
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
OPTS=(-noappend -quiet -no-progress -mkfs-time 0 -all-time 0
    -processors 1 -all-root -b 4K)
mk() { mksquashfs "$1" "$2" "${OPTS[@]}" "${@:3}"; }

# tiny: a few of each kind of inode, two data blocks, a fragment, xattrs
t=$tmp/tiny
mkdir -p "$t/d/e"
printf 'hello\n' >"$t/d/small"
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7) % 251 for i in range(4200)))' >"$t/twoblocks"
ln -s d/small "$t/link"
ln "$t/d/small" "$t/d/hard"
mkfifo "$t/fifo"
setfattr -n user.a -v 1 "$t/d/small"
setfattr -n user.long -v "$(printf 'v%.0s' $(seq 300))" "$t/twoblocks"
setfattr -n trusted.t -v x "$t/d"
mk "$t" "$tmp/tiny_raw.sqfs" -noI -noD -noF -noX -nopad
mk "$t" "$tmp/tiny_gzip.sqfs" -comp gzip -nopad
# bigdir: a listing over one metadata block, so it gets a directory index
b=$tmp/bigdir
mkdir -p "$b/dir"
for i in $(seq 1 400); do : >"$b/dir/name_$(printf %04d "$i")_padding"; done
mk "$b" "$tmp/bigdir_gzip.sqfs" -comp gzip -nopad

mkdir -p corpus/superblock corpus/dir corpus/xattr corpus/image_walk
cp "$tmp/tiny_raw.sqfs" "$tmp/tiny_gzip.sqfs" corpus/superblock/
cp "$tmp/tiny_raw.sqfs" "$tmp/bigdir_gzip.sqfs" corpus/dir/
cp "$tmp/tiny_raw.sqfs" "$tmp/tiny_gzip.sqfs" corpus/xattr/
cp "$tmp/tiny_raw.sqfs" corpus/image_walk/
ls -l corpus/*/
