#!/usr/bin/env bash
# Cold program starts from remote images (issues 18 and 32), in one run:
# a suite of workloads, each from its own image served by nginx on
# 127.0.0.1, directly (0 ms) and behind bench/latency_proxy.py adding a
# round trip per request (and one per new connection) on a link capped at
# --rate-mbit. See bench/README.md ("Startup").
#
# usage: bench/startup.sh [options]
#   --workloads LIST  python,gcc,grep,find,java,node,sqlite (default: all;
#                     bench/startup_workloads.sh)
#   --rtts LIST       round trips in ms (default 0,20,50; 0 = nginx directly)
#   --repeat N        runs per row and round trip; medians reported (3)
#   --rows LIST       kernel,curl,mount,lazy,nextver,profile,order,seq
#                     (default: all but order)
#   --lazy-args ARGS  extra sqfs-lazy-mount arguments for every lazy mount,
#                     word-split, passed as they are (e.g. "-o background=off")
#   --rate-mbit R     link cap behind the proxy (default 1000)
#   --max-steal F     run a timed run again (twice at most) when the host
#                     took more than F of its CPU time (wall x CPUs) as
#                     steal (default 0.05; every try is in runs.tsv,
#                     column kept = 0 for one run again; 1: never)
#   --build DIR       meson build dir (default $SQFS_BENCH_BUILD or <repo>/build)
#   --work DIR        trees, images, mounts, nginx (default /tmp/sqfs-lazy-startup)
#   --results DIR     parent of the run's folder (default <repo>/bench/results)
#   -h, --help        this text
# Rows: kernel = loop mount of the local image (and of its next version);
# curl = download through the link, then loop mount; lazy =
# sqfs-lazy-mount URL, first mount on the host (no profile, no cache_dir);
# mount = the same mount and a listing of its root (ls -la), no program:
# what mounting costs before a program can start;
# nextver = the image's next version (5% of its files changed) at the
# URL where a mount with -o cache_dir=DIR just ran the previous version
# (not timed; page cache dropped between); profile = -o prefetch= of a
# profile recorded (-o record=, at 0 ms) by one start; order = an image
# packed by sqfs-lazy-pack --order that profile, mounted plainly; seq =
# 1 MiB reads of the tree's largest file through the lazy mount (through
# the capped link at 0 ms too). Each row's time runs from the mount
# command to the program's exit (for curl: from the download's start).
# Needs root; installs the workloads' Debian packages when missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=startup.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
# shellcheck source=bench/startup_workloads.sh
. "$here/startup_workloads.sh"

workloads=$WL_ALL rtts=0,20,50 repeat=3 rows=kernel,curl,mount,lazy,nextver,profile,seq
rate=1000 lazy_args_str= max_steal=0.05
build=${SQFS_BENCH_BUILD:-$repo/build}
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-startup}
results=${SQFS_BENCH_RESULTS:-$here/results}
while [ $# -gt 0 ]; do
	case $1 in
	--workloads) workloads=${2:?}; shift ;;
	--rtts) rtts=${2:?}; shift ;;
	--repeat) repeat=${2:?}; shift ;;
	--rows) rows=${2:?}; shift ;;
	--lazy-args) lazy_args_str=${2?}; shift ;;
	--rate-mbit) rate=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--work) work=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	--max-steal) max_steal=${2:?}; shift ;;
	-h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (try --help)" ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || die "needs root (drop_caches, loop mounts, chroot)"
build=$(cd "$build" 2>/dev/null && pwd) || die "no build dir $build"
mount_bin=$build/sqfs-lazy-mount
pack_bin=$build/src/pack/sqfs-lazy-pack
[ -x "$mount_bin" ] && [ -x "$pack_bin" ] || die "no build in $build"
IFS=, read -r -a rtt_list <<<"$rtts"
IFS=, read -r -a wl_list <<<"$workloads"
# shellcheck disable=SC2206
lazy_args=($lazy_args_str)   # word-split on purpose; not checked here
for w in "${wl_list[@]}"; do
	declare -F "wl_${w}_run" >/dev/null || die "unknown workload $w (have $WL_ALL)"
done
has_row() { case ",$rows," in *",$1,"*) return 0 ;; esac; return 1; }

mkdir -p "$work/mnt" "$work/nginx/www"
exec 9>"$work/lock"
flock -n 9 || die "another run uses $work"
wl_setup "${wl_list[@]}"
for t in mksquashfs curl nginx unshare chroot /usr/bin/python3.11; do
	command -v "$t" >/dev/null || die "$t missing"
done

run=$results/$(date -u +%Y%m%dT%H%M%SZ)-startup
mkdir -p "$run/raw"
# the command with every option's effective value, and the measured build
effective=$(sh_words bench/startup.sh --workloads "$workloads" --rtts "$rtts" \
	--repeat "$repeat" --rows "$rows" --lazy-args "$lazy_args_str" --rate-mbit "$rate" \
	--max-steal "$max_steal" --build "$build" --work "$(cd "$work" && pwd)" --results "$(cd "$results" && pwd)")
run_facts --command "$effective" --typed "$cmdline" --build "$build" \
	--bin sqfs-lazy-mount --bin src/pack/sqfs-lazy-pack >"$run/meta.tsv"
tsv=$run/raw/runs.tsv
printf 'workload\trow\trtt_ms\trep\tseconds\trequests\tbytes\tdownload_s\tstats\tsteal_s\tkept\n' >"$tsv"
mnt=$work/mnt
www=$work/nginx/www
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
# Per workload W, under $work/W: tree (the image's files), tree2 (the
# next version: a hard-linked copy with 5% of the files changed), stamps;
# served as www/W.sqfs and www/W-v2.sqfs. Rebuilt when a stamp changes.
squash() {  # TREE IMAGE
	mksquashfs "$1" "$2.tmp" -comp zstd -noappend -quiet -no-progress \
		-processors "$(nproc)" >/dev/null
	mv -f "$2.tmp" "$2"
}
prepare() {  # W
	local w=$1 d=$work/$1 stamp
	mkdir -p "$d"
	stamp=$("wl_${w}_stamp")
	if [ "$(cat "$d/tree.stamp" 2>/dev/null)" != "$stamp" ]; then
		log "$w: building the tree"
		rm -rf "$d/tree" "$d/tree2" "$d"/*.stamp "$d/changed.json"
		mkdir -p "$d/tree"
		"wl_${w}_tree" "$d/tree"
		echo "$stamp" >"$d/tree.stamp"
	fi
	if [ "$(cat "$d/img.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$www/$w.sqfs" ]; then
		log "$w: mksquashfs -comp zstd ($(du -sh --apparent-size "$d/tree" | cut -f1) of files)"
		squash "$d/tree" "$www/$w.sqfs"
		echo "$stamp" >"$d/img.stamp"
		rm -f "$d/v2.stamp"
	fi
	# a changed startup_nextver.py makes the next version again
	local v2stamp
	v2stamp="$stamp $(sha256sum "$here/startup_nextver.py" | cut -c1-16)"
	if has_row nextver && { [ "$(cat "$d/v2.stamp" 2>/dev/null)" != "$v2stamp" ] ||
		{ [ ! -e "$d/no-v2" ] &&
			{ [ ! -s "$www/$w-v2.sqfs" ] || [ ! -s "$d/changed.json" ]; }; }; }; then
		log "$w: the next version (5% of the files changed)"
		rm -rf "$d/tree2"
		cp -al "$d/tree" "$d/tree2"
		# what a workload checks its run against (tree.entries, ...)
		for f in "$d"/tree.*; do
			case $f in *.stamp) ;; *) cp "$f" "$d/tree2.${f##*/tree.}" ;; esac
		done
		rm -f "$d/no-v2"
		local ret=0
		python3 "$here/startup_nextver.py" mutate "$d/tree2" "$d/changed.list" >&2 || ret=$?
		if [ "$ret" = 0 ]; then
			squash "$d/tree2" "$www/$w-v2.sqfs"
			python3 "$here/startup_nextver.py" changed "$www/$w.sqfs" "$www/$w-v2.sqfs" >"$d/changed.json"
		elif [ "$ret" = 3 ]; then
			# a dataset (sqlite's one database file): no next version
			# of it is a program's next version; the rows skip it
			log "$w: no next-version row (no file of the kinds startup_nextver.py changes)"
			: >"$d/no-v2"
		else
			die "$w: startup_nextver.py mutate failed"
		fi
		echo "$v2stamp" >"$d/v2.stamp"
	fi
}
# the one-workload layout of before (work/tree, www/img.sqfs): 1 GB
rm -rf "$work/tree" "$work/tree.stamp" "$work/img.stamp" "$www/img.sqfs" \
	"$www/img-order.sqfs" "$work/start.prof"
publish() {  # SRC NAME: serve www/SRC as www/NAME (atomically)
	# already served (mv refuses a link onto its own file)
	if [ "$www/$1" -ef "$www/$2" ]; then rm -f "$www/.$2.tmp"; return; fi
	ln -f "$www/$1" "$www/.$2.tmp"
	mv -f "$www/.$2.tmp" "$www/$2"
}

# ---------------------------------------------------------------- network
nginx_start "$work/nginx" || die "nginx did not start"
# 0 ms: nginx directly, as issue 18 measured it; "link": through a proxy
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
		9>&- >/dev/null 2>"$run/raw/proxy-$r.log" &
	proxy_pid[$r]=$!
	for _ in $(seq 50); do [ -s "$work/proxy-$r.port" ] && break; sleep 0.1; done
	[ -s "$work/proxy-$r.port" ] || die "latency proxy ($r ms) did not start"
	proxy_port[$r]=$(cat "$work/proxy-$r.port")
	rm -f "$work/proxy-$r.port"
done

# ---------------------------------------------------------------- rows
wl= listing_only=0
workload() {  # MNT
	if [ "$listing_only" = 1 ]; then
		ls -la "$1" >/dev/null
		return
	fi
	"wl_${wl}_run" "$1"
}

# A timed run starts its clock with clock_start (sets the caller's t0;
# bash's locals are dynamically scoped); record ends it. A run that lost
# more than max_steal of its CPU time to steal (and more than 0.05 s:
# steal is counted in 10 ms ticks) is recorded with kept = 0 and run
# again (again), twice at most. On this project's shared 2-CPU VM, cells
# of one build varied by a third between sittings; a find run that took
# 6.3 s instead of 2.5 s had lost 3.6 CPU seconds to steal (2026-11-28);
# in a quiet sitting every row, kernel and lazy, lost under 0.15 s.
steal0= tries=0 retry=0
clock_start() {
	steal0=$(steal_ticks)
	t0=$(now_ns)
}
again() {  # after a run: 0 (run it again) when record asked for it
	if [ "$retry" = 1 ]; then
		retry=0 tries=$((tries + 1))
		return 0
	fi
	tries=0
	return 1
}

record() {  # ROW RTT REP SECONDS [MARK [DOWNLOAD_S]]: one line of runs.tsv
	local req=- bytes=- st=- steal=- kept=1
	if [ -n "${5:-}" ]; then
		read -r req bytes < <(access_since "$work/nginx/access.log" "$5")
	fi
	[ -s "$run/raw/stats" ] && st=$(awk '{printf "%s%s=%s", (NR > 1 ? "," : ""), $1, $2}' "$run/raw/stats")
	[ -z "$steal0" ] || steal=$(steal_secs_since "$steal0")
	if [ "$4" != FAIL ] && [ "$steal" != - ] && [ "$tries" -lt 2 ] &&
		awk -v s="$steal" -v t="$4" -v n="$(nproc)" -v m="$max_steal" \
			'BEGIN{exit !(s > 0.05 && s > m * t * n)}'; then
		kept=0 retry=1
	fi
	steal0=
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$wl" "$1" "$2" "$3" "$4" \
		"$req" "$bytes" "${6:--}" "$st" "$steal" "$kept" >>"$tsv"
	: >"$run/raw/stats"
	log "$wl $1 ${2}ms #$3: $4 s, $req requests, $bytes bytes, steal $steal s$([ $kept = 1 ] || echo ': run again')"
}

lazy_start() {  # REP ROW RTT IMAGE [mount options]
	local rep=$1 row=$2 r=$3 name=$4 t0 mark
	shift 4
	drop_caches
	mark=$(access_mark "$work/nginx/access.log")
	clock_start
	if "$mount_bin" "$@" "${lazy_args[@]}" "$(url_for "$r" "$name")" "$mnt" 2>>"$run/raw/daemon.log" &&
		workload "$mnt" 2>>"$run/raw/workload.log"; then
		local secs
		secs=$(secs_since "$t0")
		timeout 10 "$mount_bin" --stats "$mnt" >"$run/raw/stats" 2>/dev/null || true
		unmount_one "$mnt"
		record "$row" "$r" "$rep" "$secs" "$mark"
	else
		unmount_one "$mnt"
		record "$row" "$r" "$rep" FAIL "$mark"
	fi
}

kernel_start() {  # REP ROW IMAGE
	local t0 secs=FAIL
	drop_caches
	clock_start
	if mount -t squashfs -o loop,ro "$www/$3" "$mnt" && workload "$mnt" 2>>"$run/raw/workload.log"; then
		secs=$(secs_since "$t0")
	fi
	unmount_one "$mnt"
	record "$2" 0 "$1" "$secs"
}

curl_start() {  # REP RTT IMAGE: download through the link, then mount
	local t0 t1=- secs=FAIL mark
	drop_caches
	rm -f "$work/download.sqfs"
	mark=$(access_mark "$work/nginx/access.log")
	clock_start
	if curl -sf -o "$work/download.sqfs" "$(url_for "$2" "$3")"; then
		t1=$(secs_since "$t0")
		if mount -t squashfs -o loop,ro "$work/download.sqfs" "$mnt" &&
			workload "$mnt" 2>>"$run/raw/workload.log"; then
			secs=$(secs_since "$t0")
		fi
	fi
	unmount_one "$mnt"
	record curl "$2" "$1" "$secs" "$mark" "$t1"
}

# The previous version runs on this host with cache_dir (at the same URL,
# not timed), then the next one is published there and timed.
nextver_start() {  # REP RTT
	local cache=$work/cache_dir d=$work/$wl
	rm -rf "$cache"; mkdir -p "$cache"
	publish "$wl.sqfs" "$wl-next.sqfs"
	drop_caches
	WL_TREE=$d/tree
	# the same URL as the timed mount: a learned profile
	# (cache_dir/profiles) is kept per URL
	if "$mount_bin" -o "cache_dir=$cache" "${lazy_args[@]}" "$(url_for "$2" "$wl-next.sqfs")" "$mnt" \
		2>>"$run/raw/daemon.log" && workload "$mnt" 2>>"$run/raw/workload.log"; then
		unmount_one "$mnt"
		publish "$wl-v2.sqfs" "$wl-next.sqfs"
		WL_TREE=$d/tree2
		lazy_start "$1" nextver "$2" "$wl-next.sqfs" -o "cache_dir=$cache"
	else
		unmount_one "$mnt"
		log "$wl: the previous version's mount failed"
		record nextver "$2" "$1" FAIL
	fi
	WL_TREE=$d/tree
}

profile_start() {  # REP RTT PROFILE
	if [ -s "$3" ]; then
		lazy_start "$1" profile "$2" "$wl.sqfs" -o "prefetch=$3"
	else
		record profile "$2" "$1" FAIL
	fi
}

# 1 MiB reads of FILE through the lazy mount, through the capped link at
# every round trip (0 ms: the cap alone), so the ratio is the latency's
# cost; timed from the first read.
seq_start() {  # REP RTT FILE SIZE
	local t0 secs=FAIL mark
	drop_caches
	mark=$(access_mark "$work/nginx/access.log")
	if "$mount_bin" "${lazy_args[@]}" "$(url_for "$([ "$2" = 0 ] && echo link || echo "$2")" "$wl.sqfs")" \
		"$mnt" 2>>"$run/raw/daemon.log"; then
		clock_start
		if dd if="$mnt/$3" of=/dev/null bs=1M 2>>"$run/raw/workload.log"; then
			secs=$(secs_since "$t0")
		fi
		timeout 10 "$mount_bin" --stats "$mnt" >"$run/raw/stats" 2>/dev/null || true
	fi
	unmount_one "$mnt"
	record "seq:$4" "$2" "$1" "$secs" "$mark"
}

repeat_runs() {  # FUNC ARGS...: FUNC REP ARGS... for each rep, each run
	local rep  # again while record asks for it
	for rep in $(seq "$repeat"); do
		"$1" "$rep" "${@:2}"
		while again; do
			"$1" "$rep" "${@:2}"
		done
	done
}

run_workload() {  # W
	wl=$1
	local img=$wl.sqfs d=$work/$1 r
	WL_TREE=$d/tree
	if has_row kernel; then
		repeat_runs kernel_start kernel "$img"
		if has_row nextver && [ ! -e "$d/no-v2" ]; then
			WL_TREE=$d/tree2
			repeat_runs kernel_start kernel_next "$wl-v2.sqfs"
			WL_TREE=$d/tree
		fi
	fi
	if has_row curl; then
		for r in "${rtt_list[@]}"; do
			repeat_runs curl_start "$r" "$img"
		done
		rm -f "$work/download.sqfs"
	fi
	if has_row mount; then
		listing_only=1
		for r in "${rtt_list[@]}"; do
			repeat_runs lazy_start mount "$r" "$img"
		done
		listing_only=0
	fi
	if has_row lazy; then
		for r in "${rtt_list[@]}"; do
			repeat_runs lazy_start lazy "$r" "$img"
		done
	fi
	if has_row nextver && [ ! -e "$d/no-v2" ]; then
		for r in "${rtt_list[@]}"; do
			repeat_runs nextver_start "$r"
		done
		rm -rf "$work/cache_dir" "$www/$wl-next.sqfs"
	fi
	local profile=$d/start.prof
	if has_row profile || has_row order; then
		rm -f "$profile"
		drop_caches
		if "$mount_bin" -o "record=$profile" "${lazy_args[@]}" "$nginx_base/$img" "$mnt" \
			2>>"$run/raw/daemon.log" && workload "$mnt" 2>>"$run/raw/workload.log"; then
			unmount_one "$mnt"   # waits for the daemon, which writes the profile
			cp "$profile" "$run/raw/$wl.prof"
			log "$wl: profile of $(grep -vc '^#' "$profile") files"
		else
			unmount_one "$mnt"
			log "$wl: recording the profile failed"
		fi
	fi
	if has_row profile; then
		for r in "${rtt_list[@]}"; do
			repeat_runs profile_start "$r" "$profile"
		done
	fi
	if has_row order && [ -s "$profile" ]; then
		log "$wl: sqfs-lazy-pack --order (zstd, 128K blocks)"
		"$pack_bin" -q -c zstd --force --order "$profile" "$d/tree" "$www/$wl-order.sqfs"
		for r in "${rtt_list[@]}"; do
			repeat_runs lazy_start order "$r" "$wl-order.sqfs"
		done
		rm -f "$www/$wl-order.sqfs"
	fi
	if has_row seq; then
		# the tree's largest file
		local big size
		big=$(cd "$d/tree" && find . -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
		big=${big#./}
		size=$(stat -c %s "$d/tree/$big")
		echo "$big" >"$d/seq_file"
		# a file of a few MB takes a few round trips whatever the
		# throughput: no figure of the link's use
		[ "$size" -ge $((32 << 20)) ] || { log "$wl: no seq row, the largest file ($big) has $size bytes"; return 0; }
		for r in "${rtt_list[@]}"; do
			repeat_runs seq_start "$r" "$big" "$size"
		done
	fi
}

t_start=$(now_ns)
for w in "${wl_list[@]}"; do
	prepare "$w"
done
t_prepared=$(now_ns)
for w in "${wl_list[@]}"; do
	run_workload "$w"
done

{
	printf 'lazy_args\t%s\n' "$lazy_args_str"
	printf 'rate_mbit\t%s\n' "$rate"
	printf 'max_steal\t%s\n' "$max_steal"
	printf 'workloads\t%s\n' "$workloads"
	printf 'prepare_seconds\t%s\n' "$(secs_since "$t_start" "$t_prepared")"
	printf 'suite_seconds\t%s\n' "$(secs_since "$t_prepared")"
	for w in "${wl_list[@]}"; do
		printf 'wl.%s.desc\t%s\n' "$w" "$("wl_${w}_desc")"
		printf 'wl.%s.image_bytes\t%s\n' "$w" "$(stat -c %s "$www/$w.sqfs")"
		printf 'wl.%s.tree_files\t%s\n' "$w" "$(find "$work/$w/tree" -type f | wc -l)"
		[ ! -s "$work/$w/seq_file" ] || printf 'wl.%s.seq_file\t%s\n' "$w" "$(cat "$work/$w/seq_file")"
		if [ -s "$work/$w/changed.json" ]; then
			printf 'wl.%s.changed_files\t%s\n' "$w" "$(wc -l <"$work/$w/changed.list")"
			python3 -c 'import json, sys
for k, v in json.load(open(sys.argv[1])).items():
    print("wl.%s.%s\t%s" % (sys.argv[2], k, v))' "$work/$w/changed.json" "$w"
		fi
	done
} >>"$run/meta.tsv"
meta_end "$run/meta.tsv"
python3 "$here/startup_report.py" "$run"
