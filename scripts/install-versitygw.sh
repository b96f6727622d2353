#!/bin/bash
# Build versitygw, the S3 server the s3:// tests start (tests/http/test_s3.py),
# once per version, into a cache outside the repository:
#   /var/cache/sqfs-lazy-tests/bin/versitygw-$VERSION/versitygw
# (LSQ_TEST_CACHE overrides the directory). Idempotent: nothing is done when
# the binary is there, so only the first run on a machine pays for the build.
# Needs Go (go in PATH or /usr/local/go/bin); the modules come from the Go
# module proxy. versitygw is Apache-2.0 and checks Signature Version 4.
set -euo pipefail

VERSION=v1.8.0
CACHE=${LSQ_TEST_CACHE:-/var/cache/sqfs-lazy-tests}
DEST=$CACHE/bin/versitygw-$VERSION

if [ -x "$DEST/versitygw" ]; then
	exit 0
fi
GO=$(command -v go || true)
[ -n "$GO" ] || GO=/usr/local/go/bin/go
if [ ! -x "$GO" ]; then
	echo "install-versitygw: no Go toolchain (go); the s3 tests need it" >&2
	exit 1
fi
mkdir -p "$DEST"
echo "building versitygw $VERSION into $DEST (once)" >&2
# build in a scratch GOPATH-free directory so no go.mod around us matters
cd /
GOBIN=$DEST.tmp "$GO" install "github.com/versity/versitygw/cmd/versitygw@$VERSION"
mv "$DEST.tmp/versitygw" "$DEST/versitygw"
rmdir "$DEST.tmp"
