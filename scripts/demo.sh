#!/bin/bash
# The built-in demo: install, build, pack a sample tree, serve the image
# from nginx on 127.0.0.1, mount it lazily over HTTP with sqfs-lazy-mount,
# read from it and show how little of the image crossed the network.
#
#   SAMPLE_DIR=/some/tree bash scripts/demo.sh     (default: /usr/include)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
SAMPLE_DIR=${SAMPLE_DIR:-/usr/include}

bash scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

work=$(mktemp -d /tmp/sqfs-lazy-demo.XXXXXX)
mnt="$work/mnt"
nginx_pid=
cleanup() {
	fusermount3 -u -z "$mnt" 2>/dev/null || true
	[ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$mnt" "$work/www" "$work/nginx"
chmod 755 "$work" "$work/www"

PACK="$root/build/src/pack/sqfs-lazy-pack"
if [ -x "$PACK" ]; then
	echo "== packing $SAMPLE_DIR with sqfs-lazy-pack"
	"$PACK" -q "$SAMPLE_DIR" "$work/www/sample.sqfs"
else
	echo "== packing $SAMPLE_DIR with mksquashfs (zstd, 128 KiB blocks)"
	mksquashfs "$SAMPLE_DIR" "$work/www/sample.sqfs" -comp zstd -noappend -quiet -no-progress >/dev/null
fi
size=$(stat -c %s "$work/www/sample.sqfs")
echo "   image: $size bytes"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 64; }
http {
	access_log $work/nginx/access.log;
	client_body_temp_path $work/nginx;
	proxy_temp_path $work/nginx;
	fastcgi_temp_path $work/nginx;
	uwsgi_temp_path $work/nginx;
	scgi_temp_path $work/nginx;
	server {
		listen 127.0.0.1:$port;
		root $work/www;
	}
}
CONF
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
nginx_pid=$!
for _ in $(seq 100); do
	python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.1)" 2>/dev/null && break
	sleep 0.05
done
url="http://127.0.0.1:$port/sample.sqfs"
echo "== serving it at $url (nginx)"

echo "== mounting $url with sqfs-lazy-mount"
"$root/build/sqfs-lazy-mount" "$url" "$mnt"
grep " $mnt " /proc/mounts

echo "== reading from the mount"
first=$(cd "$mnt" && find . -type f -size +4k -print -quit)
echo "   entries in the root: $(ls "$mnt" | wc -l)"
echo "   sha256 of $first: $(sha256sum < "$mnt/$first" | cut -c1-16)..."
cmp -s "$mnt/$first" "$SAMPLE_DIR/$first" || { echo "demo: $first differs from $SAMPLE_DIR/$first" >&2; exit 1; }

echo "== what was fetched"
"$root/build/sqfs-lazy-mount" --stats "$mnt" | grep -E '^(http_|source_)'
fetched=$("$root/build/sqfs-lazy-mount" --stats "$mnt" | awk '$1=="http_bytes"{print $2}')
echo "   => $fetched of $size image bytes crossed the network ($(( fetched * 100 / size ))%), in $(wc -l < "$work/nginx/access.log") HTTP requests"
[ "$fetched" -gt 0 ] && [ "$fetched" -lt "$size" ] || { echo "demo: expected a part of the image to be fetched, got $fetched of $size bytes" >&2; exit 1; }
