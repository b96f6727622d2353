#!/usr/bin/env bash
# Cold program start from a remote image (issue 18), in one run: a Python
# 3.11 start from a rootfs image served by nginx on 127.0.0.1, directly
# (0 ms) and behind bench/latency_proxy.py adding a round trip per request
# (and one per new connection) on a link capped at --rate-mbit. See
# bench/README.md ("Startup").
#
# usage: bench/startup.sh [options]
#   --rtts LIST      round trips in ms (default 0,20,50; 0 = nginx directly)
#   --repeat N       runs per row and round trip; medians reported (3)
#   --rows LIST      kernel,curl,lazy,profile,order,seq (default: all)
#   --rate-mbit R    link cap behind the proxy (default 1000)
#   --build DIR      meson build dir (default $SQFS_BENCH_BUILD or <repo>/build)
#   --work DIR       tree, images, mounts, nginx (default /tmp/sqfs-lazy-startup)
#   --results DIR    parent of the run's folder (default <repo>/bench/results)
#   -h, --help       this text
# Rows: kernel = loop mount of the local image; curl = download through the
# link, then loop mount; lazy = sqfs-lazy-mount URL; profile = the same with
# -o prefetch= of a profile recorded (-o record=, at 0 ms) by one start;
# order = an image packed by sqfs-lazy-pack --order that profile, mounted
# plainly; seq = 1 MiB reads of the tree's largest file through the lazy
# mount. Each row's time runs from the mount command to the program's exit
# (for curl: from the download's start). Needs root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=startup.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

rtts=0,20,50 repeat=3 rows=kernel,curl,lazy,profile,order,seq rate=1000
build=${SQFS_BENCH_BUILD:-$repo/build}
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-startup}
results=${SQFS_BENCH_RESULTS:-$here/results}
while [ $# -gt 0 ]; do
	case $1 in
	--rtts) rtts=${2:?}; shift ;;
	--repeat) repeat=${2:?}; shift ;;
	--rows) rows=${2:?}; shift ;;
	--rate-mbit) rate=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--work) work=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	-h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (try --help)" ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || die "needs root (drop_caches, loop mounts)"
mount_bin=$build/sqfs-lazy-mount
pack_bin=$build/src/pack/sqfs-lazy-pack
[ -x "$mount_bin" ] && [ -x "$pack_bin" ] || die "no build in $build"
for t in mksquashfs curl nginx python3.11; do
	command -v "$t" >/dev/null || die "$t missing"
done
IFS=, read -r -a rtt_list <<<"$rtts"
has_row() { case ",$rows," in *",$1,"*) return 0 ;; esac; return 1; }

run=$results/$(date -u +%Y%m%dT%H%M%SZ)-startup
mkdir -p "$run/raw" "$work/mnt" "$work/nginx/www"
exec 9>"$work/lock"
flock -n 9 || die "another run uses $work"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
tsv=$run/raw/runs.tsv
printf 'row\trtt_ms\trep\tseconds\trequests\tbytes\tstats\n' >"$tsv"
mnt=$work/mnt
declare -A proxy_pid=() proxy_port=()

cleanup() {
	unmount_one "$mnt" || true
	for r in "${!proxy_pid[@]}"; do
		kill -TERM "${proxy_pid[$r]}" 2>/dev/null || true
		stop_pid "${proxy_pid[$r]}" 5
	done
	nginx_stop || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- data
# The rootfs of the issue: Debian's python3.11 with its compiled standard
# library, and /usr/lib/x86_64-linux-gnu as filler (what makes the image
# large, as real rootfs images are).
tree=$work/tree
stamp="python3.11 $(stat -c %s /usr/bin/python3.11) $(du -s --apparent-size /usr/lib/python3.11 /usr/lib/x86_64-linux-gnu | awk '{s += $1} END {print s}')"
if [ "$(cat "$work/tree.stamp" 2>/dev/null)" != "$stamp" ]; then
	log "building the tree (about 800 MB)"
	rm -rf "$tree"
	mkdir -p "$tree/usr/bin" "$tree/usr/lib"
	cp -a /usr/bin/python3.11 "$tree/usr/bin/"
	cp -a /usr/lib/python3.11 /usr/lib/x86_64-linux-gnu "$tree/usr/lib/"
	echo "$stamp" >"$work/tree.stamp"
	rm -f "$work/img.stamp"
fi
img=$work/nginx/www/img.sqfs
if [ "$(cat "$work/img.stamp" 2>/dev/null)" != "$stamp" ]; then
	log "mksquashfs -comp zstd (about a minute)"
	mksquashfs "$tree" "$img" -comp zstd -noappend -quiet -no-progress \
		-processors "$(nproc)" >/dev/null
	echo "$stamp" >"$work/img.stamp"
fi
big=$(cd "$tree" && find usr -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)

# ---------------------------------------------------------------- network
nginx_start "$work/nginx" || die "nginx did not start"
# 0 ms: nginx directly, as the issue measured it; "link": through a proxy
# adding nothing but the cap, the baseline of the sequential row
url_for() {  # RTT|link NAME
	if [ "$1" = 0 ]; then
		echo "$nginx_base/$2"
	elif [ "$1" = link ]; then
		echo "http://127.0.0.1:${proxy_port[0]}/$2"
	else
		echo "http://127.0.0.1:${proxy_port[$1]}/$2"
	fi
}
for r in "${rtt_list[@]}"; do
	python3 "$here/latency_proxy.py" --target "127.0.0.1:$nginx_port" \
		--delay-ms "$r" --rate-mbit "$rate" --handshake \
		--port-file "$work/proxy-$r.port" --parent-pid $$ \
		>/dev/null 2>"$run/raw/proxy-$r.log" &
	proxy_pid[$r]=$!
	for _ in $(seq 50); do [ -s "$work/proxy-$r.port" ] && break; sleep 0.1; done
	proxy_port[$r]=$(cat "$work/proxy-$r.port")
	rm -f "$work/proxy-$r.port"
done

# ---------------------------------------------------------------- rows
workload() {
	"$mnt/usr/bin/python3.11" -I -c "import json, asyncio, email.mime.multipart, http.client, xml.etree.ElementTree, sqlite3, decimal, unittest, argparse, logging.handlers, urllib.request, csv, zipfile, tarfile, ssl, concurrent.futures, multiprocessing, pathlib, subprocess, typing, dataclasses, statistics, sys; assert sys.prefix == '$mnt/usr', sys.prefix"
}

record() {  # ROW RTT REP SECONDS [MARK]: one line of runs.tsv
	local req=- bytes=- st=-
	if [ -n "${5:-}" ]; then
		read -r req bytes < <(access_since "$work/nginx/access.log" "$5")
	fi
	[ -s "$run/raw/stats" ] && st=$(awk '{printf "%s%s=%s", (NR > 1 ? "," : ""), $1, $2}' "$run/raw/stats")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$req" "$bytes" "$st" >>"$tsv"
	: >"$run/raw/stats"
	log "$1 ${2}ms #$3: $4 s, $req requests, $bytes bytes"
}

lazy_start() {  # ROW RTT REP IMAGE [mount options]
	local row=$1 r=$2 rep=$3 name=$4 t0 mark
	shift 4
	drop_caches
	mark=$(access_mark "$work/nginx/access.log")
	t0=$(now_ns)
	if "$mount_bin" "$@" "$(url_for "$r" "$name")" "$mnt" 2>>"$run/raw/daemon.log" &&
		workload 2>>"$run/raw/workload.log"; then
		local secs
		secs=$(secs_since "$t0")
		"$mount_bin" --stats "$mnt" >"$run/raw/stats" 2>/dev/null || true
		unmount_one "$mnt"
		record "$row" "$r" "$rep" "$secs" "$mark"
	else
		unmount_one "$mnt"
		record "$row" "$r" "$rep" FAIL "$mark"
	fi
}

if has_row kernel; then
	for rep in $(seq "$repeat"); do
		drop_caches
		t0=$(now_ns)
		mount -t squashfs -o loop,ro "$img" "$mnt"
		workload
		secs=$(secs_since "$t0")
		unmount_one "$mnt"
		record kernel 0 "$rep" "$secs"
	done
fi
if has_row curl; then
	for r in "${rtt_list[@]}"; do
		for rep in $(seq "$repeat"); do
			drop_caches
			rm -f "$work/download.sqfs"
			mark=$(access_mark "$work/nginx/access.log")
			t0=$(now_ns)
			curl -sf -o "$work/download.sqfs" "$(url_for "$r" img.sqfs)"
			mount -t squashfs -o loop,ro "$work/download.sqfs" "$mnt"
			workload
			secs=$(secs_since "$t0")
			unmount_one "$mnt"
			record curl "$r" "$rep" "$secs" "$mark"
		done
	done
	rm -f "$work/download.sqfs"
fi
if has_row lazy; then
	for r in "${rtt_list[@]}"; do
		for rep in $(seq "$repeat"); do
			lazy_start lazy "$r" "$rep" img.sqfs
		done
	done
fi
profile=$work/start.prof
if has_row profile || has_row order; then
	rm -f "$profile"
	drop_caches
	"$mount_bin" -o "record=$profile" "$nginx_base/img.sqfs" "$mnt"
	workload
	unmount_one "$mnt"   # waits for the daemon, which writes the profile
	cp "$profile" "$run/raw/start.prof"
	log "profile: $(grep -vc '^#' "$profile") files"
fi
if has_row profile; then
	for r in "${rtt_list[@]}"; do
		for rep in $(seq "$repeat"); do
			lazy_start profile "$r" "$rep" img.sqfs -o "prefetch=$profile"
		done
	done
fi
if has_row order; then
	log "sqfs-lazy-pack --order (zstd, 128K blocks)"
	"$pack_bin" -q -c zstd --force --order "$profile" "$tree" \
		"$work/nginx/www/img-order.sqfs"
	for r in "${rtt_list[@]}"; do
		for rep in $(seq "$repeat"); do
			lazy_start order "$r" "$rep" img-order.sqfs
		done
	done
fi
if has_row seq; then
	# through the capped link at every round trip up to 20 ms (0 ms: the
	# cap alone), so the ratio is the latency's cost only
	for r in "${rtt_list[@]}"; do
		[ "$r" -le 20 ] || continue
		for rep in $(seq "$repeat"); do
			drop_caches
			mark=$(access_mark "$work/nginx/access.log")
			"$mount_bin" "$(url_for "$([ "$r" = 0 ] && echo link || echo "$r")" img.sqfs)" "$mnt"
			t0=$(now_ns)
			dd if="$mnt/$big" of=/dev/null bs=1M 2>/dev/null
			secs=$(secs_since "$t0")
			"$mount_bin" --stats "$mnt" >"$run/raw/stats" 2>/dev/null || true
			unmount_one "$mnt"
			record "seq:$(stat -c %s "$tree/$big")" "$r" "$rep" "$secs" "$mark"
		done
	done
fi

{
	meta_common "$repo" | grep -v '^loadavg_start'
	printf 'loadavg_start\t%s\n' "$load_start"
	printf 'cmdline\t%s\n' "$cmdline"
	printf 'build\t%s\n' "$build"
	printf 'rate_mbit\t%s\n' "$rate"
	printf 'image_bytes\t%s\n' "$(stat -c %s "$img")"
	printf 'seq_file\t%s\n' "$big"
	printf 'loadavg_end\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$run/meta.tsv"
python3 "$here/startup_report.py" "$run"
