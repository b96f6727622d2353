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

# manifest: the manifests of two seed images, signed with a throwaway key
# (so these seeds change on every run; any valid signature will do, the
# target parses without checking it): a detached one, and the tail of an
# embedded one from its body on (what a mount reads). Needs a build of
# sqfs-lazy-sign: LSQ_BUILD_DIR, default ../../build.
sign=${LSQ_BUILD_DIR:-../../build}/sqfs-lazy-sign
if [ -x "$sign" ]; then
	mkdir -p corpus/manifest
	openssl genpkey -algorithm ed25519 -out "$tmp/key.pem" 2>/dev/null
	chmod 600 "$tmp/key.pem"
	"$sign" --key "$tmp/key.pem" --detached corpus/manifest/tiny_gzip.manifest \
		"$tmp/tiny_gzip.sqfs"
	"$sign" --key "$tmp/key.pem" "$tmp/bigdir_gzip.sqfs"
	# the body starts at bytes_used (superblock bytes 40..47) rounded up
	# to 4096
	used=$(od -An -t u8 -j 40 -N 8 "$tmp/bigdir_gzip.sqfs" | tr -d ' ')
	tail -c +$(( (used + 4095) / 4096 * 4096 + 1 )) "$tmp/bigdir_gzip.sqfs" \
		>corpus/manifest/bigdir_gzip.tail
else
	echo "no $sign: corpus/manifest left as it is" >&2
fi
ls -l corpus/*/
