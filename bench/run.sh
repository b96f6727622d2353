#!/usr/bin/env bash
# sqfs-lazy benchmark (issue 4): the same SquashFS images, zstd and xz, read
# by the kernel (loop mount), squashfuse_ll, sqfs-lazy-mount on the local
# file and sqfs-lazy-mount over HTTP (nginx on 127.0.0.1), every workload
# cold and warm; one table of ratios against the kernel, and the issue's
# targets as PASS/MISS lines. See bench/README.md.
#
# usage: bench/run.sh [options]
#   --quick              small data (64 MiB of /usr, 128 MiB big.bin), 2 s
#                        fio runs, 8 MiB refetch set: a smoke check
#   --readers LIST       comma list of kernel,squashfuse_ll,lazy-local,
#                        lazy-http (default: all four)
#   --workloads LIST     comma list of rand1,rand2,mmap,seq,findsize,
#                        findtype,tar,refetch (default: all)
#   --comps LIST         images to build and read (default zstd,xz)
#   --build DIR          meson build dir holding sqfs-lazy-mount
#                        (default $SQFS_BENCH_BUILD or <repo>/build)
#   --work DIR           images, mount points, nginx
#                        (default $SQFS_BENCH_WORK or /tmp/sqfs-lazy-bench)
#   --results DIR        parent of the per-run result directory
#                        (default $SQFS_BENCH_RESULTS or <repo>/bench/results)
#   --runtime SEC        seconds per random-read fio run (default 20, quick 2)
#   --repeat N           run every row N times, report medians (default 1)
#   --verify             also sha256 big.bin on every mount (untimed)
#   --fuse-uring on|off  set the fuse module's enable_uring for the run
#                        (FUSE over io_uring, -o io_uring) and put it back
#                        after; without it the machine's setting is used
#                        (meta.tsv records it either way)
#   -h, --help           this text
# Data size: SQFS_BENCH_USR_MIB (subset of /usr, default 1024, quick 64),
# SQFS_BENCH_BIG_MIB (big.bin, default 512, quick 128). Refetch set:
# SQFS_BENCH_SET_MIB (default 64, quick 8).
# Extra mount arguments: SQUASHFUSE_LL_ARGS, SQFS_LAZY_ARGS (word-split).
# Needs root: drops the page cache and loop-mounts the images.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
BENCH_PROG=run.sh
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

ALL_READERS=kernel,squashfuse_ll,lazy-local,lazy-http
ALL_WORKLOADS=rand1,rand2,mmap,seq,findsize,findtype,tar,refetch
quick=0
readers=$ALL_READERS
workloads=$ALL_WORKLOADS
comps=zstd,xz
build=${SQFS_BENCH_BUILD:-$repo/build}
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-bench}
results=${SQFS_BENCH_RESULTS:-}
runtime=
verify=0
repeat=1
fuse_uring=
uring_switch=/sys/module/fuse/parameters/enable_uring
uring_before=

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--readers) readers=${2:?}; shift ;;
	--workloads) workloads=${2:?}; shift ;;
	--comps|--comp) comps=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--work) work=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	--runtime) runtime=${2:?}; shift ;;
	--verify) verify=1 ;;
	--repeat) repeat=${2:?}; shift ;;
	--fuse-uring) fuse_uring=${2:?}; shift ;;
	-h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (try --help)" ;;
	esac
	shift
done

results=${results:-$here/results}
case $repeat in ''|*[!0-9]*|0) die "--repeat needs a positive integer" ;; esac
if [ -z "$runtime" ]; then
	if [ "$quick" = 1 ]; then runtime=2; else runtime=20; fi
fi
case $runtime in ''|*[!0-9]*|0) die "--runtime takes whole seconds" ;; esac
if [ "$quick" = 1 ]; then set_mib=${SQFS_BENCH_SET_MIB:-8}; else set_mib=${SQFS_BENCH_SET_MIB:-64}; fi
readers=${readers//sqfs-lazy/lazy-local}   # the old name of the local reader
[ "$(id -u)" = 0 ] || die "needs root (drop_caches, loop mount)"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
for t in fio mksquashfs python3 mountpoint findmnt timeout flock losetup; do
	command -v "$t" >/dev/null || die "missing tool: $t"
done

[ -d "$build" ] && build=$(cd "$build" && pwd)
lazy_bin=$build/sqfs-lazy-mount
IFS=, read -r -a reader_list <<<"$readers"
IFS=, read -r -a workload_list <<<"$workloads"
IFS=, read -r -a comp_list <<<"$comps"
want_http=0
for r in "${reader_list[@]}"; do
	case $r in
	kernel) grep -qw squashfs /proc/filesystems || modprobe squashfs 2>/dev/null ||
		die "kernel has no squashfs" ;;
	squashfuse_ll) command -v squashfuse_ll >/dev/null || die "missing squashfuse_ll"
		command -v fusermount3 >/dev/null || die "missing fusermount3" ;;
	lazy-local|lazy-http) [ -x "$lazy_bin" ] || die "no executable $lazy_bin (use --build)"
		command -v fusermount3 >/dev/null || die "missing fusermount3" ;;
	*) die "unknown reader $r (known: $ALL_READERS)" ;;
	esac
	if [ "$r" = lazy-http ]; then
		want_http=1
		command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || die "missing nginx"
		command -v curl >/dev/null || die "missing curl"
		"$lazy_bin" --version 2>&1 | grep -q '^http: libcurl' ||
			die "$lazy_bin was built without HTTP support (libcurl)"
	fi
done
for w in "${workload_list[@]}"; do
	case ",$ALL_WORKLOADS," in *",$w,"*) ;; *) die "unknown workload $w (known: $ALL_WORKLOADS)" ;; esac
done
for c in "${comp_list[@]}"; do
	case $c in gzip|lzo|lz4|xz|zstd|lzma) ;; *) die "unknown compressor $c" ;; esac
done

mkdir -p "$work" "$results"
exec 9>"$work/.run.lock"
flock -n 9 || die "another benchmark (run.sh or http.sh) is using $work"
mk_args=(--work "$work" --comps "$comps")
[ "$quick" = 1 ] && mk_args+=(--quick)
mapfile -t images < <("$here/mkdata.sh" "${mk_args[@]}" | tail -n "${#comp_list[@]}")
[ "${#images[@]}" = "${#comp_list[@]}" ] || die "mkdata.sh gave no images"
declare -A img_of=()
for i in "${!comp_list[@]}"; do
	[ -f "${images[$i]}" ] || die "no image ${images[$i]}"
	img_of[${comp_list[$i]}]=${images[$i]}
done

run_id=$(date -u +%Y%m%dT%H%M%SZ)
[ "$quick" = 1 ] && run_id=$run_id-quick
out=$results/$run_id
mkdir -p "$out/raw"
meas=$out/measurements.tsv
printf 'image\treader\tworkload\tstate\tstatus\tiops\tmib_s\tseconds\tbytes\tcount\tclat_mean_us\tclat_p99_us\tiops_first_s\tdaemon_cpu_s\thttp_requests\thttp_bytes\traw\trep\tload1\n' >"$meas"

# ---------------------------------------------------------------- mounts

mnt_root=$work/mnt
hdir=$work/http-run
mkdir -p "$mnt_root"
cur_dir= cur_pid= cur_comp= img= url=

do_unmount() {
	[ -n "$cur_dir" ] || return 0
	unmount_one "$cur_dir"
	stop_pid "$cur_pid" 10
	cur_dir= cur_pid=
}

# Loop devices still backed by one of our images once nothing is mounted
# (a loop mount's device is freed by its umount; this catches a kill
# between the two).
free_loops() {
	local i dev
	for i in "${images[@]}"; do
		for dev in $(losetup -j "$i" -O NAME -n 2>/dev/null); do
			findmnt -rn -S "$dev" >/dev/null 2>&1 || losetup -d "$dev" 2>/dev/null || true
		done
	done
}

cleanup() {
	local rc=$? d
	trap - EXIT INT TERM
	do_unmount
	for d in "$mnt_root"/*; do
		[ -d "$d" ] && is_mounted "$d" && unmount_one "$d"
	done
	free_loops
	nginx_stop
	[ -n "$uring_before" ] && echo "$uring_before" >"$uring_switch"
	exit "$rc"
}
trap cleanup EXIT
case $fuse_uring in
'') ;;
on|off)
	[ -w "$uring_switch" ] || die "--fuse-uring: no $uring_switch (kernel without FUSE over io_uring?)"
	# Machine-wide: every writer of the switch (tests/integration/util.py
	# fuse_uring_switch(), tests/without_fuse_uring.sh) holds an exclusive
	# flock on this file until it has put the old value back. Ours goes
	# when the run exits, after cleanup() has put it back.
	uring_lock=/run/lock/sqfs-lazy-fuse-uring.lock
	exec 8>>"$uring_lock"
	flock -x -w 3600 8 || die "--fuse-uring: $uring_lock still held after 3600 s (another run or test changes $uring_switch; see /proc/locks)"
	uring_before=$(cat "$uring_switch")
	if [ "$fuse_uring" = on ]; then echo Y >"$uring_switch"; else echo N >"$uring_switch"; fi
	;;
*) die "--fuse-uring needs on or off" ;;
esac
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

mount_seconds=
# Mount the current image for reader $1 on $mnt_root/$1; FUSE daemons run in
# the foreground (-f) as our children, so we know their pid (CPU time) and
# keep their stderr. Usable once "mountpoint -q" succeeds.
do_mount() {
	local r=$1 dir=$mnt_root/$1 dlog=$out/raw/$cur_comp.$1.daemon.log t0 n=0
	mkdir -p "$dir"
	is_mounted "$dir" && unmount_one "$dir"
	t0=$(now_ns)
	cur_dir=$dir cur_pid=
	case $r in
	kernel)
		mount -t squashfs -o loop,ro "$img" "$dir" 2>>"$dlog" || return 1 ;;
	squashfuse_ll)
		# shellcheck disable=SC2086 # word splitting intended
		squashfuse_ll -f ${SQUASHFUSE_LL_ARGS:-} "$img" "$dir" >>"$dlog" 2>&1 9>&- </dev/null &
		cur_pid=$! ;;
	lazy-local)
		# shellcheck disable=SC2086
		"$lazy_bin" -f ${SQFS_LAZY_ARGS:-} "$img" "$dir" >>"$dlog" 2>&1 9>&- </dev/null &
		cur_pid=$! ;;
	lazy-http)
		# shellcheck disable=SC2086
		"$lazy_bin" -f ${SQFS_LAZY_ARGS:-} "$url" "$dir" >>"$dlog" 2>&1 9>&- </dev/null &
		cur_pid=$! ;;
	esac
	until mountpoint -q "$dir"; do
		if [ -n "$cur_pid" ] && ! kill -0 "$cur_pid" 2>/dev/null; then
			log "$r daemon exited before the mount appeared; tail of $dlog:"
			tail -5 "$dlog" >&2 || true
			wait "$cur_pid" 2>/dev/null || true
			cur_pid=
			return 1
		fi
		n=$((n + 1))
		if [ "$n" -gt 3000 ]; then
			log "$r: mount did not appear within 30 s"
			return 1
		fi
		sleep 0.01
	done
	mount_seconds=$(secs_since "$t0")
}

# ------------------------------------------------------------ measurements

# record READER WORKLOAD STATE STATUS IOPS MIBS SECONDS BYTES COUNT CLAT P99
#        FIRST CPU HTTP_REQUESTS HTTP_BYTES RAW
# The image, repetition and 1-minute load average are added.
rep=1
record() {
	local IFS=$'\t'
	echo "$cur_comp"$'\t'"$*"$'\t'"$rep"$'\t'"$(cut -d' ' -f1 /proc/loadavg)" >>"$meas"
}
record_fail() {  # reader workload state [raw]
	record "$1" "$2" "$3" FAIL "" "" "" "" "" "" "" "" "" "" "" "${4:-}"
}

http_mark=0
http_begin() { [ "$1" = lazy-http ] && http_mark=$(access_mark "$hdir/access.log") || true; }
h_req= h_bytes=
http_end() {  # reader: sets h_req and h_bytes (empty for local readers)
	h_req= h_bytes=
	if [ "$1" = lazy-http ]; then
		read -r h_req h_bytes < <(access_since "$hdir/access.log" "$http_mark")
	fi
}
cpu_delta() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}' || true; }

fio_row() {  # reader workload state jobfile numjobs ioengine
	local r=$1 w=$2 s=$3 job=$4 nj=$5 eng=$6 raw c0 c1 cpu vals
	raw=$out/raw/$cur_comp.$r.$w.$s.$rep.json
	c0=$(daemon_cpu "$cur_pid")
	http_begin "$r"
	if ! FIO_FILE=$cur_dir/big.bin FIO_NUMJOBS=$nj FIO_RUNTIME=$runtime FIO_IOENGINE=$eng \
		FIO_LOG=${raw%.json} timeout --foreground 900 fio --readonly \
		--output-format=json --output="$raw" "$here/fio/$job" >/dev/null 2>"$raw.err" 9>&-; then
		log "$cur_comp $r $w $s: fio failed: $(head -3 "$raw.err" | tr '\n' ' ')"
		record_fail "$r" "$w" "$s" "${raw#"$out"/}"
		return 1
	fi
	http_end "$r"
	c1=$(daemon_cpu "$cur_pid")
	cpu=$(cpu_delta "$c0" "$c1")
	vals=$(python3 "$here/benchlib.py" fio-summary "$raw" "${raw%.json}") || {
		record_fail "$r" "$w" "$s" "${raw#"$out"/}"
		return 1
	}
	# vals: iops mib_s seconds bytes clat_mean_us clat_p99_us iops_first_s
	local a
	read -r -a a <<<"$vals"
	record "$r" "$w" "$s" ok "${a[0]}" "${a[1]}" "${a[2]}" "${a[3]}" "" "${a[4]}" "${a[5]}" "${a[6]}" \
		"$cpu" "$h_req" "$h_bytes" "${raw#"$out"/}"
	log "$(printf '%-4s %-13s %-8s %-4s' "$cur_comp" "$r" "$w" "$s") $(printf '%10.0f IOPS %9.1f MiB/s %7.2f s' "${a[0]}" "${a[1]}" "${a[2]}")${cpu:+  daemon cpu ${cpu}s}"
}

# A command over the tree, timed; its stdout is summarised by $2 (an awk
# program printing "COUNT BYTES").
cmd_row() {  # reader workload state
	local r=$1 w=$2 s=$3 raw t0 secs c0 c1 cpu sum
	raw=$out/raw/$cur_comp.$r.$w.$s.$rep.txt
	c0=$(daemon_cpu "$cur_pid")
	http_begin "$r"
	t0=$(now_ns)
	case $w in
	findsize)  # lstat of every entry
		sum=$(cd "$cur_dir/tree" && timeout --foreground 900 find . -printf '%s\n' 2>"$raw.err" |
			awk '{n++; b += $1} END {printf "%d %.0f", n, b}') ;;
	findtype)  # readdir only (d_type), no stat
		sum=$(cd "$cur_dir/tree" && timeout --foreground 900 find . -type f 2>"$raw.err" |
			awk '{n++} END {printf "%d 0", n}') ;;
	tar)  # every directory, inode, symlink and data byte; to a pipe, since
		# GNU tar skips reading file data when it writes to /dev/null
		sum=$(cd "$cur_dir/tree" && timeout --foreground 900 tar -cf - . 2>"$raw.err" |
			wc -c | awk '{printf "1 %.0f", $1}') ;;
	esac
	secs=$(secs_since "$t0")
	http_end "$r"
	c1=$(daemon_cpu "$cur_pid")
	cpu=$(cpu_delta "$c0" "$c1")
	if [ -s "$raw.err" ] || [ -z "$sum" ]; then
		log "$cur_comp $r $w $s: failed: $(head -3 "$raw.err" | tr '\n' ' ')"
		record_fail "$r" "$w" "$s" "${raw#"$out"/}.err"
		return 1
	fi
	echo "count_bytes=$sum seconds=$secs" >"$raw"
	local n=${sum% *} b=${sum#* }
	record "$r" "$w" "$s" ok "" "" "$secs" "$b" "$n" "" "" "" "$cpu" "$h_req" "$h_bytes" "${raw#"$out"/}"
	log "$(printf '%-4s %-13s %-8s %-4s' "$cur_comp" "$r" "$w" "$s") $(printf '%7.3f s' "$secs"), $n entries, $b bytes${cpu:+  daemon cpu ${cpu}s}"
}

one_row() {  # reader workload state
	case $2 in
	rand1) fio_row "$1" "$2" "$3" rand_read_4k.fio 1 psync ;;
	rand2) fio_row "$1" "$2" "$3" rand_read_4k.fio 2 psync ;;
	mmap) fio_row "$1" "$2" "$3" rand_read_4k.fio 1 mmap ;;
	seq) fio_row "$1" "$2" "$3" seq_read_1m.fio 1 psync ;;
	findsize|findtype|tar) cmd_row "$1" "$2" "$3" ;;
	esac
}

stats_of() {  # file: sqfs-lazy-mount --stats of the current mount
	timeout 10 "$lazy_bin" --stats "$cur_dir" >"$1" 2>&1 || true
}

# Over HTTP, a repeated read fetches each touched block once: read a file
# set, drop the page cache, read it again on the same mount. The fetched
# bytes (--stats http_bytes, and nginx's $bytes_sent) are compared by
# compare.py with the compressed bytes of the blocks the set occupies,
# computed from the image by benchlib.py (data blocks and whole fragment
# blocks, each once).
refetch_row() {
	local r=lazy-http base=$out/raw/$cur_comp.refetch list m0 m1 m2 t0 secs got pass
	list=$base.list
	python3 "$here/benchlib.py" blocks "$img" --set-bytes $((set_mib << 20)) \
		--list "$list" >"$base.set.json" || { record_fail "$r" refetch pass1; return 1; }
	do_unmount
	drop_caches
	if ! do_mount "$r"; then
		record_fail "$r" refetch pass1
		return 1
	fi
	stats_of "$base.stats0.txt"
	m0=$(access_mark "$hdir/access.log")
	for pass in pass1 pass2; do
		[ "$pass" = pass2 ] && drop_caches
		m1=$(access_mark "$hdir/access.log")
		t0=$(now_ns)
		got=$(cd "$cur_dir" && timeout --foreground 900 xargs -d '\n' -a "$list" cat 2>"$base.$pass.err" | wc -c) || got=
		secs=$(secs_since "$t0")
		read -r h_req h_bytes < <(access_since "$hdir/access.log" "$m1")
		stats_of "$base.stats-$pass.txt"
		if [ -s "$base.$pass.err" ] || [ -z "$got" ]; then
			log "$cur_comp refetch $pass: failed: $(head -3 "$base.$pass.err" | tr '\n' ' ')"
			record_fail "$r" refetch "$pass" "${base#"$out"/}.$pass.err"
			continue
		fi
		record "$r" refetch "$pass" ok "" "" "$secs" "$got" "$(wc -l <"$list")" "" "" "" "" "$h_req" "$h_bytes" "${base#"$out"/}.set.json"
		log "$(printf '%-4s %-13s %-8s %-4s' "$cur_comp" "$r" refetch "$pass") $(printf '%7.3f s' "$secs"), $got bytes read; nginx: $h_req requests, $h_bytes bytes"
	done
	m2=$(wc -l <"$hdir/access.log")
	sed -n "$((m0 + 1)),${m2}p" "$hdir/access.log" >"$base.access.log"
	do_unmount
}

verify_mount() {
	local r=$1 sum
	sum=$(sha256sum "$cur_dir/big.bin" | cut -d' ' -f1) || sum=ERROR
	echo "$cur_comp $r $sum" >>"$out/raw/verify.txt"
}

# ------------------------------------------------------------- metadata

# The command with every option's effective value (defaults filled in) and
# the environment the run reads: two runs that differ show different lines.
eff=(bench/run.sh --readers "$readers" --workloads "$workloads"
	--comps "$comps" --build "$build" --work "$(cd "$work" && pwd)"
	--results "$(cd "$results" && pwd)" --runtime "$runtime" --repeat "$repeat")
[ -z "$fuse_uring" ] || eff+=(--fuse-uring "$fuse_uring")
[ "$quick" = 0 ] || eff+=(--quick)
[ "$verify" = 0 ] || eff+=(--verify)
effective=$(env_words SQFS_LAZY_ARGS SQUASHFUSE_LL_ARGS SQFS_BENCH_USR_MIB \
	SQFS_BENCH_BIG_MIB SQFS_BENCH_SET_MIB)$(sh_words "${eff[@]}")
{
	printf 'format\tsqfs-lazy-bench/2\n'
	run_facts --command "$effective" --typed "$cmdline" --build "$build" \
		--bin sqfs-lazy-mount
	printf 'cwd\t%s\n' "$PWD"
	printf 'readers\t%s\n' "$readers"
	printf 'workloads\t%s\n' "$workloads"
	printf 'comps\t%s\n' "$comps"
	printf 'quick\t%s\n' "$quick"
	printf 'repeat\t%s\n' "$repeat"
	printf 'fio_runtime_s\t%s\n' "$runtime"
	printf 'refetch_set_mib\t%s\n' "$set_mib"
	printf 'squashfuse_ll_args\t%s\n' "${SQUASHFUSE_LL_ARGS:-}"
	printf 'sqfs_lazy_args\t%s\n' "${SQFS_LAZY_ARGS:-}"
	printf 'fuse_enable_uring\t%s\n' "$(cat "$uring_switch" 2>/dev/null || echo absent)"
	printf 'sqfs_lazy_bin\t%s\n' "$lazy_bin"
	for c in "${comp_list[@]}"; do
		printf 'image.%s.path\t%s\n' "$c" "${img_of[$c]}"
		sed "s/=/\t/; s/^/image.$c./" "${img_of[$c]%.sqfs}.stamp"
	done
} >"$out/meta.tsv"

# ------------------------------------------------------------------ run

if [ "$want_http" = 1 ]; then
	rm -rf "$hdir/www"
	nginx_start "$hdir" || die "could not start nginx"
	for c in "${comp_list[@]}"; do
		ln -sfn "${img_of[$c]}" "$hdir/www/image-$c.sqfs"
	done
	log "nginx $(nginx_version) on 127.0.0.1:$nginx_port serves the images"
	printf 'nginx_url\t%s\n' "$nginx_base" >>"$out/meta.tsv"
fi

log "images: ${images[*]}; results in $out"
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN{exit !(l > 0.5)}'; then
	log "warning: load average is $load before the start; figures will be noisy"
fi
log "readers: $readers; workloads: $workloads; fio random runtime ${runtime}s"
t_start=$(date +%s)
for cur_comp in "${comp_list[@]}"; do
	img=${img_of[$cur_comp]}
	url=$nginx_base/image-$cur_comp.sqfs
	for rep in $(seq 1 "$repeat"); do
		if [ "$repeat" -gt 1 ]; then log "$cur_comp: repetition $rep of $repeat"; fi
		for w in "${workload_list[@]}"; do
			[ "$w" = refetch ] && continue
			for r in "${reader_list[@]}"; do
				# cold: nothing cached anywhere, a fresh mount (new daemon,
				# or a new kernel superblock), then the page cache dropped
				# again so what the mount itself read is gone too
				do_unmount
				drop_caches
				if ! do_mount "$r"; then
					log "$cur_comp $r: mount failed, skipping $w"
					record_fail "$r" "$w" cold
					record_fail "$r" "$w" warm
					do_unmount
					continue
				fi
				record "$r" mount cold ok "" "" "$mount_seconds" "" "" "" "" "" "" "" "" ""
				drop_caches
				one_row "$r" "$w" cold || true
				# warm: the same again on the same mount, right away
				one_row "$r" "$w" warm || true
				case $r in lazy-*) stats_of "$out/raw/$cur_comp.$r.$w.$rep.stats.txt" ;; esac
				if [ "$verify" = 1 ] && [ "$rep" = 1 ] && [ "$w" = "${workload_list[0]}" ]; then
					verify_mount "$r"
				fi
				do_unmount
			done
		done
		case ",$workloads,:,$readers," in
		*,refetch,*:*,lazy-http,*) refetch_row || true ;;
		esac
	done
done
do_unmount
find "$out/raw" -name '*.err' -size 0 -delete
[ "$want_http" = 1 ] && cp "$hdir/access.log" "$out/raw/access.log"
t_end=$(date +%s)
printf 'bench_seconds\t%s\n' "$((t_end - t_start))" >>"$out/meta.tsv"
meta_end "$out/meta.tsv"
log "measurements took $((t_end - t_start)) s"

python3 "$here/compare.py" report "$out" | tee "$out/table.txt"
ln -sfn "$run_id" "$results/latest"
log "results: $out/results.md, $out/results.json (table: $out/table.txt)"
