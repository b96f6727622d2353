#!/usr/bin/env bash
# sqfs-lazy HTTP benchmark: the bench image served by nginx on 127.0.0.1 and
# used remotely in six ways, in one run, then again behind a proxy adding
# latency to every request. See bench/README.md ("HTTP").
#
# usage: bench/http.sh [options]
#   --quick              quick image, 3 s random runs, 10 s sequential cap,
#                        latencies 0,20
#   --readers LIST       comma list of download,httpdirfs,httpfs2,ratarmount,
#                        lazy-http,lazy-local (default: all; httpdirfs,
#                        httpfs2 and ratarmount are skipped with a warning
#                        when they are missing / cannot be installed and
#                        --readers was not given; httpfs2 gets the
#                        small-file row only)
#   --latency LIST       comma list of ms added per request by
#                        latency_proxy.py (default 0,2,20; quick 0,20); 0 is
#                        the direct rows; lazy-http gets every row, download
#                        the small-file row
#   --build DIR          meson build dir holding sqfs-lazy-mount
#                        (default $SQFS_BENCH_BUILD or <repo>/build)
#   --work DIR           image, downloads, mount points, nginx
#                        (default $SQFS_BENCH_WORK or /tmp/sqfs-lazy-bench)
#   --results DIR        parent of the per-run result directory
#                        (default $SQFS_BENCH_RESULTS or <repo>/bench/results)
#   --comp NAME          mksquashfs compressor of the image (default zstd)
#   --runtime SEC        seconds per random-read fio run (default 10, quick 3)
#   --seq-cap SEC        longest sequential pass (default 30, quick 10)
#   -h, --help           this text
# Extra mount arguments: SQFS_LAZY_ARGS, SQUASHFUSE_LL_ARGS, HTTPDIRFS_ARGS
# (default --no-range-check: httpdirfs 1.2.5 misreads nginx's 206 answer),
# RATARMOUNT_ARGS. ratarmount comes from a private venv, <work>/venv-ratarmount,
# made with pip on first use (RATARMOUNT=PATH uses another binary); httpfs2
# from its Debian package, installed with apt-get on first use.
# Needs root: drops the page cache and loop-mounts the image.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=http.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

quick=0
readers=
build=${SQFS_BENCH_BUILD:-$repo/build}
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-bench}
results=${SQFS_BENCH_RESULTS:-}
comp=zstd
runtime=
seqcap=
latencies=

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--readers) readers=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--work) work=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	--comp) comp=${2:?}; shift ;;
	--runtime) runtime=${2:?}; shift ;;
	--seq-cap) seqcap=${2:?}; shift ;;
	--latency) latencies=${2:?}; shift ;;
	-h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (try --help)" ;;
	esac
	shift
done

results=${results:-$here/results}
if [ "$quick" = 1 ]; then
	runtime=${runtime:-3} seqcap=${seqcap:-10} latencies=${latencies:-0,20}
	small_cap=${SQFS_BENCH_SMALL_CAP:-60}
else
	runtime=${runtime:-10} seqcap=${seqcap:-30} latencies=${latencies:-0,2,20}
	small_cap=${SQFS_BENCH_SMALL_CAP:-120}
fi
case $runtime$seqcap in *[!0-9]*) die "--runtime and --seq-cap take whole seconds" ;; esac
IFS=, read -r -a lat_list <<<"$latencies"
for l in "${lat_list[@]}"; do
	case $l in ''|*[!0-9]*) die "--latency takes whole milliseconds, e.g. 0,2,20" ;; esac
done
[ "$(id -u)" = 0 ] || die "needs root (drop_caches, loop mount)"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
for t in fio mksquashfs python3 curl mountpoint timeout fusermount3; do
	command -v "$t" >/dev/null || die "missing tool: $t"
done
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx_bin" ] || die "missing tool: nginx"
[ -d "$build" ] && build=$(cd "$build" && pwd)
lazy_bin=$build/sqfs-lazy-mount
cat_bin=$build/sqfs-lazy-cat
[ -x "$lazy_bin" ] || die "no executable $lazy_bin (use --build)"
[ -x "$cat_bin" ] || die "no executable $cat_bin (build the sqfs-lazy-cat target)"
"$lazy_bin" --version 2>&1 | grep -q '^http: libcurl' ||
	die "$lazy_bin was built without HTTP support (libcurl)"

mkdir -p "$work" "$results"
exec 9>"$work/.run.lock"
flock -n 9 || die "another benchmark (run.sh or http.sh) is using $work"

# ratarmount (Python: fsspec HTTP + PySquashfsImage) in a private venv,
# installed with pip on first use. Prints the binary, or fails.
rm_venv=$work/venv-ratarmount
ratarmount_setup() {
	local b=${RATARMOUNT:-$rm_venv/bin/ratarmount}
	if [ -n "${RATARMOUNT:-}" ] || [ -x "$b" ] &&
		timeout 60 "$b" --version >/dev/null 2>&1; then
		echo "$b"; return 0
	fi
	[ -n "${RATARMOUNT:-}" ] && return 1
	log "installing ratarmount into $rm_venv (pip, once)"
	rm -rf "$rm_venv"
	{ python3 -m venv "$rm_venv" &&
		timeout 900 "$rm_venv/bin/pip" install -q ratarmount fsspec aiohttp \
			requests PySquashfsImage zstandard; } </dev/null >"$work/venv-ratarmount.log" 2>&1 9>&- ||
		return 1
	timeout 60 "$b" --version >/dev/null 2>&1 || return 1
	echo "$b"
}

# httpfs2 (issue 3's table) from its Debian package, installed once with
# apt-get like the other extras of the bench (scripts/install-deps.sh is for
# what CI needs; this is not). Idempotent: nothing happens when present.
httpfs2_setup() {
	command -v httpfs2 >/dev/null && return 0
	command -v apt-get >/dev/null || return 1
	log "installing httpfs2 (apt-get, once)"
	{ DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q --no-install-recommends httpfs2 ||
		{ timeout 600 apt-get update -q &&
			DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q --no-install-recommends httpfs2; }
	} </dev/null >"$work/apt-httpfs2.log" 2>&1 9>&- || return 1
	command -v httpfs2 >/dev/null
}

ratarmount_bin=
if [ -z "$readers" ]; then
	readers=download
	if command -v httpdirfs >/dev/null && command -v squashfuse_ll >/dev/null; then
		readers=$readers,httpdirfs
	else
		log "warning: httpdirfs or squashfuse_ll missing, skipping the httpdirfs reader"
	fi
	if command -v squashfuse_ll >/dev/null && httpfs2_setup; then
		readers=$readers,httpfs2
	else
		log "warning: httpfs2 (apt-get install httpfs2) or squashfuse_ll missing, skipping the httpfs2 reader"
	fi
	if ratarmount_bin=$(ratarmount_setup); then
		readers=$readers,ratarmount
	else
		log "warning: ratarmount could not be installed (see $work/venv-ratarmount.log), skipping the ratarmount reader"
	fi
	readers=$readers,lazy-http,lazy-local
fi
IFS=, read -r -a reader_list <<<"$readers"
for r in "${reader_list[@]}"; do
	case $r in
	download) grep -qw squashfs /proc/filesystems || die "kernel has no squashfs" ;;
	httpdirfs) command -v httpdirfs >/dev/null || die "missing httpdirfs"
		command -v squashfuse_ll >/dev/null || die "missing squashfuse_ll" ;;
	httpfs2) httpfs2_setup || die "missing httpfs2 (apt-get install httpfs2; see $work/apt-httpfs2.log)"
		command -v squashfuse_ll >/dev/null || die "missing squashfuse_ll" ;;
	ratarmount) [ -n "$ratarmount_bin" ] || ratarmount_bin=$(ratarmount_setup) ||
		die "ratarmount could not be installed (see $work/venv-ratarmount.log)" ;;
	lazy-http|lazy-local) ;;
	*) die "unknown reader $r" ;;
	esac
done
mk_args=(--work "$work" --comps "$comp")
[ "$quick" = 1 ] && mk_args+=(--quick)
img=$("$here/mkdata.sh" "${mk_args[@]}" | tail -1)
[ -f "$img" ] || die "no image"
stamp=${img%.sqfs}.stamp

run_id=$(date -u +%Y%m%dT%H%M%SZ)-http
[ "$quick" = 1 ] && run_id=$run_id-quick
out=$results/$run_id
mkdir -p "$out/raw"
meas=$out/measurements.tsv
printf 'reader\tworkload\tstatus\tseconds\tiops\tmib_s\tio_bytes\thttp_requests\thttp_bytes\tclat_mean_us\tclat_p99_us\tiops_first_s\traw\treason\tload1\n' >"$meas"

# ------------------------------------------------------------ cleanup

hdir=$work/http                 # nginx config, logs, served directory
mnt_root=$work/mnt-http
dl=$work/download/image.sqfs    # the whole-image download
mkdir -p "$hdir/www" "$hdir/tmp" "$mnt_root" "$(dirname "$dl")"
mounted=()                      # mount points, in mount order
declare -A proxy_pid=() proxy_url=()  # latency_proxy.py per latency (ms)
fg_pids=()                      # foreground FUSE daemons started here (ratarmount -f)

unmount_all() {  # in reverse order: squashfuse_ll before httpdirfs below it
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		unmount_one "${mounted[$i]}"
	done
	mounted=()
	[ "${#fg_pids[@]}" = 0 ] || reap_fg
}

stop_proxies() {
	local l p n
	for l in "${!proxy_pid[@]}"; do
		p=${proxy_pid[$l]}
		kill -TERM "$p" 2>/dev/null || true
		n=0
		while kill -0 "$p" 2>/dev/null && [ "$n" -lt 50 ]; do
			sleep 0.1; n=$((n + 1))
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	proxy_pid=()
}

# Foreground daemons (ratarmount -f) whose mount is gone by now.
reap_fg() {
	local p n
	for p in "${fg_pids[@]}"; do
		n=0
		while kill -0 "$p" 2>/dev/null && [ "$n" -lt 50 ]; do
			sleep 0.1; n=$((n + 1))
		done
		if kill -0 "$p" 2>/dev/null; then
			log "daemon $p still running after its unmount, sending TERM"
			kill -TERM "$p" 2>/dev/null || true
			sleep 1
			kill -KILL "$p" 2>/dev/null || true
		fi
		wait "$p" 2>/dev/null || true
	done
	fg_pids=()
}

cleanup() {
	local rc=$? d
	trap - EXIT INT TERM
	unmount_all
	for d in "$mnt_root"/*; do
		is_mounted "$d" && unmount_one "$d"
	done
	reap_fg
	stop_proxies
	nginx_stop
	exit "$rc"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

# ------------------------------------------------------------ nginx

start_nginx() {
	nginx_start "$hdir" "location /compat/ { alias $hdir/www/; add_header Accept-Ranges bytes; }" ||
		die "could not start nginx"
	ln -sfn "$img" "$hdir/www/image.sqfs"
	url=$nginx_base/image.sqfs
	port_used=$nginx_port
	curl -s -f -o /dev/null -r 0-0 "$url" || die "nginx does not serve $url"
}

# One latency_proxy.py per latency > 0, in front of nginx. Each stops by
# itself when this script is gone or after --max-seconds.
start_proxies() {
	local l pf n
	proxy_url[0]=$url
	for l in "${lat_list[@]}"; do
		[ "$l" = 0 ] && continue
		[ -n "${proxy_pid[$l]:-}" ] && continue
		pf=$hdir/proxy-$l.port
		rm -f "$pf"
		python3 "$here/latency_proxy.py" --target "127.0.0.1:$port_used" \
			--delay-ms "$l" --port-file "$pf" --parent-pid $$ \
			--max-seconds $((7200 + 20 * (runtime + seqcap))) \
			9>&- </dev/null >/dev/null 2>>"$hdir/proxy-$l.log" &
		proxy_pid[$l]=$!
		n=0
		while [ ! -s "$pf" ] && [ "$n" -lt 100 ]; do
			kill -0 "${proxy_pid[$l]}" 2>/dev/null || break
			sleep 0.1; n=$((n + 1))
		done
		[ -s "$pf" ] || die "latency proxy ($l ms) did not start (see $hdir/proxy-$l.log)"
		proxy_url[$l]=http://127.0.0.1:$(cat "$pf")/image.sqfs
		curl -s -o /dev/null -r 0-0 "${proxy_url[$l]}" ||
			die "latency proxy ($l ms) does not answer"
		log "latency proxy: +$l ms per request at ${proxy_url[$l]}"
	done
}

log_mark() { access_mark "$hdir/access.log"; }
log_since() { access_since "$hdir/access.log" "$1"; }  # -> "requests bytes"

# ------------------------------------------------------------ mounts

# A row key is a reader, or a reader behind the latency proxy:
# READER@<ms>ms (lazy-http@20ms). Its mount point is $mnt_root/READER.
key_reader() { echo "${1%@*}"; }
key_url() {
	local l=0
	case $1 in *@*ms) l=${1#*@}; l=${l%ms} ;; esac
	echo "${proxy_url[$l]}"
}

# Mount for row key $1 on $mnt_root/<reader>. Every command returns once its
# mount is usable (daemon mode; ratarmount refuses to daemonize, so it runs
# with -f in the background and is polled until mounted), so the time of
# this function is what a user waits for. `download` fetches the image
# first when $2 is "fetch" (else it reuses the copy of the small-file row).
do_mount() {
	local key=$1 fetch=${2:-} r dir dlog=$out/raw/$1.daemon.log url n pid
	r=$(key_reader "$key")
	url=$(key_url "$key")
	dir=$mnt_root/$r
	mkdir -p "$dir"
	is_mounted "$dir" && unmount_one "$dir"
	case $r in
	download)
		if [ "$fetch" = fetch ] || [ ! -s "$dl" ]; then
			rm -f "$dl"
			curl -sS -f -o "$dl" "$url" 2>>"$dlog" || return 1
		fi
		mount -t squashfs -o loop,ro "$dl" "$dir" 2>>"$dlog" || return 1
		mounted+=("$dir") ;;
	httpfs2)
		# httpfs2 0.1.4 refuses a 206 answer without "Accept-Ranges: bytes",
		# which nginx sends only with 200: it reads through /compat/, the
		# same file with that header added (see start_nginx). Each command
		# is bounded, so a hang becomes a failed row.
		local hd=$mnt_root/httpfs2-raw
		mkdir -p "$hd"
		is_mounted "$hd" && unmount_one "$hd"
		timeout 60 httpfs2 -c /dev/null "${url%/image.sqfs}/compat/image.sqfs" "$hd" \
			9>&- </dev/null >>"$dlog" 2>&1 || { fail_reason="httpfs2 mount failed or timed out (60 s)"; return 1; }
		mounted+=("$hd")
		# shellcheck disable=SC2086
		timeout 60 squashfuse_ll ${SQUASHFUSE_LL_ARGS:-} "$hd/image.sqfs" "$dir" \
			9>&- </dev/null >>"$dlog" 2>&1 || {
			fail_reason="squashfuse_ll on httpfs2 failed or timed out (60 s): $(tail -1 "$dlog" | cut -c1-100)"
			return 1; }
		mounted+=("$dir") ;;
	httpdirfs)
		local hd=$mnt_root/httpdirfs-raw
		mkdir -p "$hd"
		is_mounted "$hd" && unmount_one "$hd"
		# shellcheck disable=SC2086 # word splitting intended
		httpdirfs ${HTTPDIRFS_ARGS---no-range-check} --single-file-mode "$url" "$hd" \
			9>&- </dev/null >>"$dlog" 2>&1 || return 1
		mounted+=("$hd")
		# shellcheck disable=SC2086
		squashfuse_ll ${SQUASHFUSE_LL_ARGS:-} "$hd/image.sqfs" "$dir" \
			9>&- </dev/null >>"$dlog" 2>&1 || return 1
		mounted+=("$dir") ;;
	ratarmount)
		# The index lives in memory: ratarmount reads all the metadata on
		# every mount, as issue 3 describes.
		# shellcheck disable=SC2086
		"$ratarmount_bin" -f --index-file :memory: ${RATARMOUNT_ARGS:-} "$url" "$dir" \
			9>&- </dev/null >>"$dlog" 2>&1 &
		pid=$!
		fg_pids+=("$pid")
		n=0
		until mountpoint -q "$dir"; do
			kill -0 "$pid" 2>/dev/null || return 1
			n=$((n + 1))
			[ "$n" -lt 6000 ] || return 1   # 60 s
			sleep 0.01
		done
		mounted+=("$dir") ;;
	lazy-http)
		# shellcheck disable=SC2086
		"$lazy_bin" ${SQFS_LAZY_ARGS:-} "$url" "$dir" 9>&- </dev/null >>"$dlog" 2>&1 || return 1
		mounted+=("$dir") ;;
	lazy-local)
		# shellcheck disable=SC2086
		"$lazy_bin" ${SQFS_LAZY_ARGS:-} "$img" "$dir" 9>&- </dev/null >>"$dlog" 2>&1 || return 1
		mounted+=("$dir") ;;
	esac
	mountpoint -q "$dir"
}

# ------------------------------------------------------------ rows

# record READER WORKLOAD STATUS SECONDS IOPS MIBS IO_BYTES REQUESTS BYTES
#        CLAT P99 FIRST RAW; $fail_reason (then cleared) and the load are
# added.
fail_reason=
record() {
	local IFS=$'\t'
	echo "$*"$'\t'"$fail_reason"$'\t'"$(cut -d' ' -f1 /proc/loadavg)" >>"$meas"
	fail_reason=
}

# Time from nothing (caches dropped, nothing mounted, no download) until
# one small file has been read, and what crossed the network for it.
small_row() {
	local r=$1 mark t0 t1 secs reqbytes got=$out/raw/$1.small.out
	unmount_all
	[ "$(key_reader "$r")" = download ] && rm -f "$dl"
	drop_caches
	mark=$(log_mark)
	t0=$(date +%s%N)
	local rc=0
	if ! do_mount "$r" fetch; then
		fail_reason=${fail_reason:-mount failed}
		rc=1
	else
		# bounded: a FUSE reader that hangs (httpfs2) must not stop the run
		timeout --foreground "$small_cap" cat "$mnt_root/$(key_reader "$r")$small_path" \
			>"$got" 2>>"$out/raw/$r.daemon.log" || rc=$?
		case $rc in
		0) ;;
		124) fail_reason="no answer within ${small_cap} s (cat timed out)" ;;
		*) fail_reason="cat failed: $(tail -1 "$out/raw/$r.daemon.log" | cut -c1-120)" ;;
		esac
	fi
	if [ "$rc" != 0 ]; then
		reqbytes=$(log_since "$mark")
		log "$r small: failed: $fail_reason (see $out/raw/$r.daemon.log)"
		# shellcheck disable=SC2086
		record "$r" small FAIL "$(secs_since "$t0")" "" "" "" $reqbytes "" "" "" ""
		unmount_all
		return 1
	fi
	t1=$(date +%s%N)
	reqbytes=$(log_since "$mark")
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", (b-a)/1e9}')
	if ! cmp -s "$got" "$out/raw/small.expected"; then
		log "$r small: WRONG CONTENT"
		fail_reason="wrong content"
		# shellcheck disable=SC2086
		record "$r" small FAIL "$secs" "" "" "" ${reqbytes} "" "" "" "raw/$r.small.out"
	else
		# shellcheck disable=SC2086
		record "$r" small ok "$secs" "" "" "$small_size" $reqbytes "" "" "" ""
		log "$(printf '%-10s %-6s' "$r" small) $(printf '%8.3f s' "$secs"), $(echo "$reqbytes" | awk '{printf "%d requests, %.0f bytes", $1, $2}')"
	fi
	if [ "$(key_reader "$r")" = lazy-http ]; then
		timeout 10 "$lazy_bin" --stats "$mnt_root/lazy-http" >"$out/raw/$r.small.stats.txt" 2>&1 || true
	fi
	unmount_all
}

fio_row() {  # reader workload jobfile numjobs [extra fio args]
	local r=$1 w=$2 job=$3 nj=$4 raw mark reqbytes vals
	shift 4
	raw=$out/raw/$r.$w.json
	unmount_all
	drop_caches
	if ! do_mount "$r"; then
		log "$r $w: mount failed (see $out/raw/$r.daemon.log)"
		record "$r" "$w" FAIL "" "" "" "" "" "" "" "" "" ""
		unmount_all
		return 1
	fi
	drop_caches
	mark=$(log_mark)
	if ! FIO_IOENGINE=psync FIO_FILE=$mnt_root/$(key_reader "$r")/big.bin FIO_NUMJOBS=$nj FIO_RUNTIME=$runtime \
		FIO_LOG=${raw%.json} timeout --foreground $((seqcap + runtime + 300)) \
		fio --readonly "$@" --output-format=json --output="$raw" \
		"$here/fio/$job" >/dev/null 2>"$raw.err"; then
		log "$r $w: fio failed: $(head -3 "$raw.err" | tr '\n' ' ')"
		record "$r" "$w" FAIL "" "" "" "" "" "" "" "" "" "raw/${raw##*/}"
		unmount_all
		return 1
	fi
	reqbytes=$(log_since "$mark")
	# vals: iops mib_s seconds bytes clat_mean_us clat_p99_us iops_first_s
	vals=$(python3 "$here/benchlib.py" fio-summary "$raw" "${raw%.json}") || {
		record "$r" "$w" FAIL "" "" "" "" "" "" "" "" "" "raw/${raw##*/}"
		unmount_all
		return 1
	}
	# shellcheck disable=SC2086
	set -- $vals
	# shellcheck disable=SC2086
	record "$r" "$w" ok "$3" "$1" "$2" "$4" $reqbytes "$5" "$6" "$7" "raw/${raw##*/}"
	log "$(printf '%-10s %-6s' "$r" "$w") $(printf '%9.0f IOPS %8.1f MiB/s %6.2f s' "$1" "$2" "$3"), $(echo "$reqbytes" | awk '{printf "%d requests, %.0f bytes", $1, $2}')"
	if [ "$(key_reader "$r")" = lazy-http ]; then
		timeout 10 "$lazy_bin" --stats "$mnt_root/lazy-http" >"$out/raw/$r.$w.stats.txt" 2>&1 || true
	fi
	unmount_all
}

# ------------------------------------------------------------ metadata

# The small file: the first regular file under /tree (depth first, in
# directory order) between 100 and 4096 bytes: a fixed choice for a given
# image, found by benchlib.py's own parser of the image.
log "looking for a small file in the image"
small_path= small_size=
read -r small_size small_path < <(python3 - "$here" "$img" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import benchlib
for path, ino in benchlib.Image(sys.argv[2]).walk("/tree"):
    if 100 <= ino["size"] <= 4096:
        print(ino["size"], path)
        break
EOF
) || true
[ -n "$small_path" ] || die "no small file found in $img"
"$cat_bin" "$img" "$small_path" >"$out/raw/small.expected" || die "sqfs-lazy-cat $small_path failed"
sb=$(python3 - "$img" <<'EOF'
import struct, sys
with open(sys.argv[1], "rb") as f:
    d = f.read(96)
v = struct.unpack("<IIIIIHHHHHHQQQQQQQQ", d)
block_size, bytes_used, inode_table = v[3], v[12], v[15]
print(block_size, bytes_used, inode_table, bytes_used - inode_table)
EOF
)
read -r block_size bytes_used inode_table_start meta_bytes <<<"$sb"

start_nginx
log "nginx $("$nginx_bin" -v 2>&1 | sed 's/.*: //') on 127.0.0.1:$port_used serves $img as $url"
start_proxies

# The command with every option's effective value and the environment the
# run reads: two runs that differ show different lines.
effective=$(env_words SQFS_LAZY_ARGS SQUASHFUSE_LL_ARGS HTTPDIRFS_ARGS \
	RATARMOUNT_ARGS RATARMOUNT SQFS_BENCH_SMALL_CAP SQFS_BENCH_USR_MIB \
	SQFS_BENCH_BIG_MIB)$(sh_words bench/http.sh --readers "$readers" \
	--latency "$latencies" --build "$build" --work "$(cd "$work" && pwd)" \
	--results "$(cd "$results" && pwd)" --comp "$comp" --runtime "$runtime" \
	--seq-cap "$seqcap" $([ "$quick" = 0 ] || echo --quick))
{
	run_facts --command "$effective" --typed "$cmdline" --build "$build" \
		--bin sqfs-lazy-mount --bin sqfs-lazy-cat
	printf 'readers\t%s\n' "$readers"
	printf 'quick\t%s\n' "$quick"
	printf 'fio_runtime_s\t%s\n' "$runtime"
	printf 'seq_cap_s\t%s\n' "$seqcap"
	printf 'latencies_ms\t%s\n' "$latencies"
	printf 'curl_version\t%s\n' "$(curl --version | head -1)"
	printf 'url\t%s\n' "$url"
	if command -v httpdirfs >/dev/null; then
		printf 'httpdirfs_version\t%s\n' "$(httpdirfs --version 2>&1 | head -1)"
	fi
	if [ -n "$ratarmount_bin" ]; then
		printf 'ratarmount_version\t%s\n' "$(timeout 60 "$ratarmount_bin" --version 2>&1 | head -1 || true)"
		printf 'ratarmount_deps\t%s\n' "$(timeout 60 "$ratarmount_bin" --version 2>&1 |
			grep -E '^(ratarmountcore|PySquashfsImage|fsspec|aiohttp|mfusepy|zstandard) ' | paste -sd, || true)"
		printf 'ratarmount_args\t%s\n' "-f --index-file :memory: ${RATARMOUNT_ARGS:-}"
	fi
	printf 'sqfs_lazy_args\t%s\n' "${SQFS_LAZY_ARGS:-}"
	printf 'squashfuse_ll_args\t%s\n' "${SQUASHFUSE_LL_ARGS:-}"
	printf 'httpdirfs_args\t%s\n' "${HTTPDIRFS_ARGS---no-range-check}"
	if command -v httpfs2 >/dev/null; then
		printf 'httpfs2_version\t%s\n' "$(dpkg-query -W -f='${Version}' httpfs2 2>/dev/null || echo '?')"
	fi
	printf 'small_cap_s\t%s\n' "$small_cap"
	printf 'small_path\t%s\n' "$small_path"
	printf 'small_size\t%s\n' "$small_size"
	printf 'block_size\t%s\n' "$block_size"
	printf 'bytes_used\t%s\n' "$bytes_used"
	printf 'inode_table_start\t%s\n' "$inode_table_start"
	printf 'metadata_bytes\t%s\n' "$meta_bytes"
	printf 'image\t%s\n' "$img"
	sed 's/=/\t/; s/^/image./' "$stamp"
} >"$out/meta.tsv"

# ------------------------------------------------------------------ run

load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN{exit !(l > 0.5)}'; then
	log "warning: load average is $load before the start; figures will be noisy"
fi
log "readers: $readers; small file $small_path ($small_size bytes); fio random ${runtime}s, sequential cap ${seqcap}s; results in $out"
t_start=$(date +%s)
for r in "${reader_list[@]}"; do
	small_row "$r" || true
done
for r in "${reader_list[@]}"; do
	[ "$r" = httpfs2 ] && continue   # issue 3's table: small file only
	fio_row "$r" rand1 rand_read_4k.fio 1 || true
	fio_row "$r" rand2 rand_read_4k.fio 2 || true
	fio_row "$r" seq seq_read_1m.fio 1 --runtime="$seqcap" || true
done
# Behind the latency proxy: every row for lazy-http, the small-file row
# (the download) for download.
for l in "${lat_list[@]}"; do
	[ "$l" = 0 ] && continue
	for r in "${reader_list[@]}"; do
		case $r in
		download) small_row "$r@${l}ms" || true ;;
		lazy-http)
			small_row "$r@${l}ms" || true
			fio_row "$r@${l}ms" rand1 rand_read_4k.fio 1 || true
			fio_row "$r@${l}ms" rand2 rand_read_4k.fio 2 || true
			fio_row "$r@${l}ms" seq seq_read_1m.fio 1 --runtime="$seqcap" || true ;;
		esac
	done
done
unmount_all
rm -f "$dl"
find "$out/raw" -name '*.err' -size 0 -delete
cp "$hdir/access.log" "$out/raw/access.log"
stop_proxies
for l in "${lat_list[@]}"; do
	[ -f "$hdir/proxy-$l.log" ] && cp "$hdir/proxy-$l.log" "$out/raw/proxy-${l}ms.log"
done
t_end=$(date +%s)
printf 'bench_seconds\t%s\n' "$((t_end - t_start))" >>"$out/meta.tsv"
meta_end "$out/meta.tsv"
log "measurements took $((t_end - t_start)) s"

python3 "$here/http_report.py" "$out" | tee "$out/table.txt"
ln -sfn "$run_id" "$results/latest-http"
log "results: $out/results.json (table: $out/table.txt)"
