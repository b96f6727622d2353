#!/usr/bin/env bash
# How long readers pause when the daemon of a takeover mount is killed
# or upgraded (issue 33), in one run: 8 readers read a mount in a loop,
# each read timed and checked against the source tree, while the serving
# daemon is killed (kill -9) and upgraded (`COPY --takeover MNT`, from a
# second copy of the binary); a local image, and over HTTP (nginx on
# 127.0.0.1, 0 ms directly, other round trips through
# bench/latency_proxy.py). See bench/README.md ("Takeover").
#
# usage: bench/takeover.sh [options]
#   --rows LIST        local,http (default both; http: one row per --rtts)
#   --rtts LIST        round trips in ms for the http rows (default 0,20)
#   --kills N          kill -9's of the serving daemon per row (20)
#   --upgrades N       live upgrades per row, spread among the kills (5)
#   --settle S         seconds between a new daemon serving and the next
#                      takeover (2.3; a daemon dying within 2 s of taking
#                      over counts towards a crash loop)
#   --readers N        reader threads (8)
#   --plain-seconds S  the same readers on a mount with takeover=off
#                      (30; 0: no such phase)
#   --quick            3 kills, 1 upgrade, --rtts 20, --plain-seconds 10
#                      (options given too take precedence)
#   --build DIR        meson build dir (default $SQFS_BENCH_BUILD or <repo>/build)
#   --work DIR         tree, image, mounts, nginx (default /tmp/sqfs-lazy-takeover)
#   --results DIR      parent of the run's folder (default <repo>/bench/results)
#   -h, --help         this text
# Per row: mount with -o takeover; 2 s of reads; the takeovers, each
# --settle s after the previous new daemon serves; then a baseline as long
# as the takeovers took, same mount and readers, no takeover; unmount;
# then a mount with takeover=off for --plain-seconds. The pause of a
# takeover is the longest read in flight across it. Targets: max pause
# <= 1 s locally, <= 1 s + 2 round trips over HTTP; no read error, no
# wrong byte. A read in flight for 10 s, or a takeover not done in 20 s,
# is a hang: the row stops (raw/ROW.MODE.hang.txt) and its mount is
# ended. Needs root (FUSE mounts of root's, kill of the daemons).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=takeover.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

rows=local,http rtts= kills= upgrades= settle=2.3 readers=8 plain_s= quick=0
build=${SQFS_BENCH_BUILD:-$repo/build}
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-takeover}
results=${SQFS_BENCH_RESULTS:-$here/results}
while [ $# -gt 0 ]; do
	case $1 in
	--rows) rows=${2:?}; shift ;;
	--rtts) rtts=${2:?}; shift ;;
	--kills) kills=${2:?}; shift ;;
	--upgrades) upgrades=${2:?}; shift ;;
	--settle) settle=${2:?}; shift ;;
	--readers) readers=${2:?}; shift ;;
	--plain-seconds) plain_s=${2:?}; shift ;;
	--quick) quick=1 ;;
	--build) build=${2:?}; shift ;;
	--work) work=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	-h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (try --help)" ;;
	esac
	shift
done
if [ "$quick" = 1 ]; then
	: "${kills:=3}" "${upgrades:=1}" "${rtts:=20}" "${plain_s:=10}"
fi
: "${kills:=20}" "${upgrades:=5}" "${rtts:=0,20}" "${plain_s:=30}"
[ "$(id -u)" = 0 ] || die "needs root (FUSE mounts, kill -9 of the daemons)"
build=$(cd "$build" 2>/dev/null && pwd) || die "no build dir $build"
mount_bin=$build/sqfs-lazy-mount
[ -x "$mount_bin" ] || die "no sqfs-lazy-mount in $build"
for t in mksquashfs nginx curl fusermount3 python3 findmnt; do
	command -v "$t" >/dev/null || die "$t missing"
done
IFS=, read -r -a rtt_list <<<"$rtts"
row_list=()
for r in ${rows//,/ }; do
	case $r in
	local) row_list+=(local) ;;
	http) for t in "${rtt_list[@]}"; do row_list+=("http-${t}ms"); done ;;
	*) die "unknown row $r (local, http)" ;;
	esac
done
[ "${#row_list[@]}" -gt 0 ] || die "no rows"

mkdir -p "$work/mnt" "$work/nginx/www"
work=$(cd "$work" && pwd)
exec 9>"$work/lock"
flock -n 9 || die "another run uses $work"
mkdir -p "$results"
qflag=() qsuffix=
if [ "$quick" = 1 ]; then qflag=(--quick) qsuffix=-quick; fi
run=$results/$(date -u +%Y%m%dT%H%M%SZ)-takeover$qsuffix
mkdir -p "$run/raw"
effective=$(sh_words bench/takeover.sh "${qflag[@]}" \
	--rows "$rows" --rtts "$rtts" --kills "$kills" --upgrades "$upgrades" \
	--settle "$settle" --readers "$readers" --plain-seconds "$plain_s" \
	--build "$build" --work "$work" --results "$(cd "$results" && pwd)")
run_facts --command "$effective" --typed "$cmdline" --build "$build" \
	--bin sqfs-lazy-mount >"$run/meta.tsv"
mnt=$work/mnt
www=$work/nginx/www
img=$www/img.sqfs
next_dir=$work/next
drv_pid= dmn_pid=
declare -A proxy_pid=() proxy_port=()

# Detach the mount and stop its daemons: SIGTERM is a clean stop (a
# killed one would be replaced); each takes its guard with it. The last
# one to close the connection fails the requests still waiting, so
# readers stuck in the mount end too. The driver (--mnt MNT in its argv)
# is not waited for here.
end_mount() {
	local pid pids pass
	if is_mounted "$mnt"; then
		fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	# a daemon that had to be killed is replaced once more: a few passes
	for pass in 1 2 3; do
		pids=$(pids_with_arg "$mnt" | grep -vx "${drv_pid:-none}" || true)
		[ -n "$pids" ] || break
		for pid in $pids; do
			kill -TERM "$pid" 2>/dev/null || true
			kill -CONT "$pid" 2>/dev/null || true
		done
		for pid in $pids; do
			stop_pid "$pid" 10
		done
	done
	if [ -n "$dmn_pid" ]; then
		wait "$dmn_pid" 2>/dev/null || true
		dmn_pid=
	fi
}

cleanup() {
	set +e
	[ -z "$drv_pid" ] || kill -TERM "$drv_pid" 2>/dev/null
	end_mount
	if [ -n "$drv_pid" ]; then
		stop_pid "$drv_pid" 10
		drv_pid=
	fi
	for r in "${!proxy_pid[@]}"; do
		kill -TERM "${proxy_pid[$r]}" 2>/dev/null
		stop_pid "${proxy_pid[$r]}" 5
	done
	nginx_stop
	rm -rf "$next_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- image
# A generated tree (takeover_report.py tree: 344 files, 24 of them 1-8
# MiB), packed once with mksquashfs -comp zstd and kept while its stamp
# holds.
stamp="tree v1 seed 33; mksquashfs $(mksquashfs -version 2>&1 | head -1) -comp zstd"
if [ "$(cat "$work/img.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$img" ]; then
	log "generating the tree and packing it"
	rm -rf "$work/tree" "$img" "$work/img.stamp" "$work/tree.facts"
	python3 "$here/takeover_report.py" tree "$work/tree" >"$work/tree.facts"
	mksquashfs "$work/tree" "$img.tmp" -comp zstd -noappend -quiet -no-progress \
		-processors "$(nproc)" >/dev/null
	mv -f "$img.tmp" "$img"
	echo "$stamp" >"$work/img.stamp"
fi
# the upgrades alternate between the build's binary and this copy of it:
# every upgrade execs another file than the one serving
rm -rf "$next_dir"
mkdir -p "$next_dir"
cp "$mount_bin" "$next_dir/sqfs-lazy-mount"

# ---------------------------------------------------------------- network
need_http=0
for row in "${row_list[@]}"; do
	case $row in http-*) need_http=1 ;; esac
done
if [ "$need_http" = 1 ]; then
	nginx_start "$work/nginx" || die "nginx did not start"
	for r in "${rtt_list[@]}"; do
		[ "$r" = 0 ] && continue
		python3 "$here/latency_proxy.py" --target "127.0.0.1:$nginx_port" \
			--delay-ms "$r" --rate-mbit 1000 --handshake \
			--port-file "$work/proxy-$r.port" --parent-pid $$ \
			9>&- >/dev/null 2>"$run/raw/proxy-$r.log" &
		proxy_pid[$r]=$!
		for _ in $(seq 50); do [ -s "$work/proxy-$r.port" ] && break; sleep 0.1; done
		[ -s "$work/proxy-$r.port" ] || die "latency proxy ($r ms) did not start"
		proxy_port[$r]=$(cat "$work/proxy-$r.port")
		rm -f "$work/proxy-$r.port"
	done
fi
source_for() {  # ROW: the image path or URL
	case $1 in
	local) echo "$img" ;;
	http-0ms) echo "$nginx_base/img.sqfs" ;;
	http-*) local r=${1#http-}; echo "http://127.0.0.1:${proxy_port[${r%ms}]}/img.sqfs" ;;
	esac
}

# ---------------------------------------------------------------- rows
# sqfs-lazy-mount -f in a background subshell (its log is the takeover
# lines' only home; the subshell keeps the shell's "Killed" notice of the
# first kill off the terminal); usable once --stats answers
mount_start() {  # LOG SOURCE [options...]
	local logf=$1 src=$2 n
	shift 2
	("$mount_bin" -f "$@" "$src" "$mnt" </dev/null >>"$logf" 2>&1; exit 0) 9>&- 2>/dev/null &
	dmn_pid=$!
	for n in $(seq 300); do
		"$mount_bin" --stats "$mnt" >/dev/null 2>&1 && return 0
		kill -0 "$dmn_pid" 2>/dev/null || break
		sleep 0.1
	done
	log "the mount did not come up ($n tries); tail of $logf:"
	tail -3 "$logf" >&2 || true
	return 1
}
mount_stop() {
	if is_mounted "$mnt"; then
		unmount_one "$mnt"
	else
		end_mount   # ended after a hang: its daemons may be stopping
	fi
	[ -z "$dmn_pid" ] || wait "$dmn_pid" 2>/dev/null || true
	dmn_pid=
}
# The readers (and takeovers) of one mount. The driver writes
# raw/ROW.MODE.done when it has written its results; a driver whose
# readers wait on requests that nobody answers (a hang) cannot exit
# before the connection ends, so then the mount is ended under it.
# Status: the driver's (0 fine, 1 a takeover failed, 3 a hang).
drive() {  # ROW MODE [options...]
	local row=$1 mode=$2 rc=0 done_file=$run/raw/$1.$2.done n=0
	shift 2
	python3 "$here/takeover_report.py" drive --mnt "$mnt" --tree "$work/tree" \
		--row "$row" --run "$run" --mode "$mode" --readers "$readers" "$@" \
		9>&- 2>>"$run/raw/$row.$mode.drive.log" &
	drv_pid=$!
	while kill -0 "$drv_pid" 2>/dev/null && [ ! -e "$done_file" ]; do
		sleep 0.2
	done
	while kill -0 "$drv_pid" 2>/dev/null && [ "$n" -lt 25 ]; do
		sleep 0.2; n=$((n + 1))
	done
	if kill -0 "$drv_pid" 2>/dev/null; then
		log "$row: readers still waiting in the mount; ending it"
		end_mount
	fi
	wait "$drv_pid" || rc=$?
	drv_pid=
	[ ! -s "$done_file" ] || rc=$(cat "$done_file")
	return "$rc"
}
check_line() {  # ROW CHECK OK DETAIL
	[ -s "$run/checks.tsv" ] || printf 'row\tcheck\tok\tdetail\n' >"$run/checks.tsv"
	printf '%s\t%s\t%s\t%s\n' "$@" >>"$run/checks.tsv"
}

t_start=$(now_ns)
for row in "${row_list[@]}"; do
	src=$(source_for "$row")
	logf=$run/raw/$row.daemon.log
	log "$row: -o takeover, $kills kills and $upgrades upgrades under $readers readers"
	if mount_start "$logf" "$src" -o takeover; then
		if grep -q 'takeover: off' "$logf"; then
			check_line "$row" "takeover on" NO "$(grep -m1 'takeover: off' "$logf")"
		else
			rc=0
			drive "$row" takeover --bin "$mount_bin" \
				--next-bin "$next_dir/sqfs-lazy-mount" --kills "$kills" \
				--upgrades "$upgrades" --settle "$settle" --daemon-log "$logf" || rc=$?
			case $rc in
			0) timeout -s KILL 30 "$mount_bin" --stats "$mnt" >"$run/raw/$row.stats" 2>&1 || true ;;
			3) log "$row: HANG (raw/$row.takeover.hang.txt)" ;;
			*) log "$row: the takeovers did not all happen (checks.tsv)" ;;
			esac
		fi
	else
		check_line "$row" "mount with -o takeover" NO "see raw/$row.daemon.log"
	fi
	mount_stop
	if [ "$plain_s" != 0 ]; then
		log "$row: plain mount, $plain_s s of reads"
		if mount_start "$run/raw/$row.plain.daemon.log" "$src" -o takeover=off; then
			drive "$row" plain --seconds "$plain_s" ||
				log "$row: the plain mount's readers did not finish well (checks.tsv)"
		else
			check_line "$row" "plain mount" NO "see raw/$row.plain.daemon.log"
		fi
		mount_stop
	fi
done

{
	printf 'rows\t%s\n' "${row_list[*]}"
	printf 'kills\t%s\n' "$kills"
	printf 'upgrades\t%s\n' "$upgrades"
	printf 'settle\t%s\n' "$settle"
	printf 'readers\t%s\n' "$readers"
	printf 'plain_seconds\t%s\n' "$plain_s"
	printf 'rate_mbit\t1000\n'
	sed 's/=/\t/; s/^/image./' "$work/tree.facts"
	printf 'image_bytes\t%s\n' "$(stat -c %s "$img")"
	printf 'image_desc\t%s\n' "$(awk -F= '$1=="tree_files"{f=$2} $1=="tree_bytes"{b=$2}
		END{printf "%d files, %.0f MiB (320 of 256 B-512 KiB, 24 of 1-8 MiB), ", f, b/1048576}' \
		"$work/tree.facts")mksquashfs -comp zstd, $(stat -c %s "$img" | awk '{printf "%.0f MiB", $1/1048576}')"
	printf 'rows_seconds\t%s\n' "$(secs_since "$t_start")"
} >>"$run/meta.tsv"
meta_end "$run/meta.tsv"
python3 "$here/takeover_report.py" report "$run"
