#!/bin/bash
# Build siftool, which the SIF tests wrap SquashFS images with (tests/http/test_sif.py),
# once per version, into a cache outside the repository:
#   /var/cache/sqfs-lazy-tests/bin/siftool-$VERSION/siftool
# (LSQ_TEST_CACHE overrides the directory). Idempotent: nothing is done when
# the binary is there, so only the first run on a machine pays for the build.
# Needs Go (go in PATH or /usr/local/go/bin); the modules come from the Go
# module proxy. siftool (BSD-3-Clause) is the SIF format's own tool.
set -euo pipefail

VERSION=v2.25.0
CACHE=${LSQ_TEST_CACHE:-/var/cache/sqfs-lazy-tests}
DEST=$CACHE/bin/siftool-$VERSION

if [ -x "$DEST/siftool" ]; then
	exit 0
fi
GO=$(command -v go || true)
[ -n "$GO" ] || GO=/usr/local/go/bin/go
if [ ! -x "$GO" ]; then
	echo "install-siftool: no Go toolchain (go); the SIF tests need it" >&2
	exit 1
fi
mkdir -p "$DEST"
echo "building siftool $VERSION into $DEST (once)" >&2
# build in a scratch GOPATH-free directory so no go.mod around us matters
cd /
GOBIN=$DEST.tmp "$GO" install "github.com/apptainer/sif/v2/cmd/siftool@$VERSION"
mv "$DEST.tmp/siftool" "$DEST/siftool"
rmdir "$DEST.tmp"
