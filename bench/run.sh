#!/usr/bin/env bash
# sqfs-lazy benchmark: the same SquashFS image read by the kernel (loop
# mount), by squashfuse_ll and by sqfs-lazy-mount. See bench/README.md.
#
# usage: bench/run.sh [options]
#   --quick              small dataset, 3 s fio runs: a smoke check
#   --readers LIST       comma list of kernel,squashfuse_ll,sqfs-lazy
#                        (default: all three; sqfs-lazy is skipped with a
#                        warning when the binary is missing and --readers
#                        was not given)
#   --workloads LIST     comma list of rand1,rand2,seq,tar (default: all)
#   --build DIR          meson build dir holding sqfs-lazy-mount
#                        (default $SQFS_BENCH_BUILD or <repo>/build)
#   --work DIR           dataset, image and mount points
#                        (default $SQFS_BENCH_WORK or /tmp/sqfs-lazy-bench)
#   --results DIR        parent of the per-run result directory
#                        (default $SQFS_BENCH_RESULTS or <work>/results)
#   --comp NAME          mksquashfs compressor (default zstd)
#   --runtime SEC        seconds per random-read fio run (default 20, quick 3)
#   --repeat N           run every row N times, report medians (default 1)
#   --verify             also sha256 big.bin on every mount (untimed)
#   -h, --help           this text
# Extra mount arguments: SQUASHFUSE_LL_ARGS, SQFS_LAZY_ARGS (word-split).
# Needs root: drops the page cache and loop-mounts the image.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"

quick=0
readers=
workloads=rand1,rand2,seq,tar
build=${SQFS_BENCH_BUILD:-$repo/build}
work=${SQFS_BENCH_WORK:-/tmp/sqfs-lazy-bench}
results=${SQFS_BENCH_RESULTS:-}
comp=zstd
runtime=
verify=0
repeat=1

die() { echo "run.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--readers) readers=${2:?}; shift ;;
	--workloads) workloads=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--work) work=${2:?}; shift ;;
	--results) results=${2:?}; shift ;;
	--comp) comp=${2:?}; shift ;;
	--runtime) runtime=${2:?}; shift ;;
	--verify) verify=1 ;;
	--repeat) repeat=${2:?}; shift ;;
	-h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (try --help)" ;;
	esac
	shift
done

results=${results:-$work/results}
case $repeat in ''|*[!0-9]*|0) die "--repeat needs a positive integer" ;; esac
if [ -z "$runtime" ]; then
	if [ "$quick" = 1 ]; then runtime=3; else runtime=20; fi
fi
[ "$(id -u)" = 0 ] || die "needs root (drop_caches, loop mount)"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
for t in fio mksquashfs python3 mountpoint timeout; do
	command -v "$t" >/dev/null || die "missing tool: $t"
done

lazy_bin=$build/sqfs-lazy-mount
if [ -z "$readers" ]; then
	readers=kernel,squashfuse_ll
	if [ -x "$lazy_bin" ]; then
		readers=$readers,sqfs-lazy
	else
		log "warning: $lazy_bin not found, skipping the sqfs-lazy reader"
	fi
fi
IFS=, read -r -a reader_list <<<"$readers"
IFS=, read -r -a workload_list <<<"$workloads"
for r in "${reader_list[@]}"; do
	case $r in
	kernel) grep -qw squashfs /proc/filesystems || die "kernel has no squashfs" ;;
	squashfuse_ll) command -v squashfuse_ll >/dev/null || die "missing squashfuse_ll"
		command -v fusermount3 >/dev/null || die "missing fusermount3" ;;
	sqfs-lazy) [ -x "$lazy_bin" ] || die "no executable $lazy_bin (use --build)"
		command -v fusermount3 >/dev/null || die "missing fusermount3" ;;
	*) die "unknown reader $r" ;;
	esac
done
for w in "${workload_list[@]}"; do
	case $w in rand1|rand2|seq|tar) ;; *) die "unknown workload $w" ;; esac
done

mkdir -p "$work" "$results"
exec 9>"$work/.run.lock"
flock -n 9 || die "another run.sh is using $work"
mk_args=(--work "$work" --comp "$comp")
[ "$quick" = 1 ] && mk_args+=(--quick)
img=$("$here/mkdata.sh" "${mk_args[@]}" | tail -1)
[ -f "$img" ] || die "no image"
stamp=${img%.sqfs}.stamp

run_id=$(date -u +%Y%m%dT%H%M%SZ)
[ "$quick" = 1 ] && run_id=$run_id-quick
out=$results/$run_id
mkdir -p "$out/raw"
meas=$out/measurements.tsv
printf 'reader\tworkload\tstate\tstatus\tiops\tmib_s\tseconds\tbytes\tclat_mean_us\tclat_p99_us\tiops_first_s\tdaemon_cpu_s\traw\trep\tload1\n' >"$meas"

# ---------------------------------------------------------------- mounts

mnt_root=$work/mnt
mkdir -p "$mnt_root"
cur_reader=
cur_dir=
cur_pid=

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# Unmount whatever is mounted on $1 (ours: everything under $mnt_root is).
force_unmount() {
	local dir=$1 fstype i
	for i in 1 2 3 4 5; do
		mountpoint -q "$dir" || return 0
		fstype=$(findmnt -n -o FSTYPE --mountpoint "$dir" 2>/dev/null || true)
		case $fstype in
		fuse*) fusermount3 -u "$dir" 2>/dev/null || true ;;
		*) umount "$dir" 2>/dev/null || true ;;
		esac
		mountpoint -q "$dir" || return 0
		sleep 0.5
	done
	case $fstype in
	fuse*) fusermount3 -uz "$dir" 2>/dev/null || true ;;
	*) umount -l "$dir" 2>/dev/null || true ;;
	esac
	! mountpoint -q "$dir"
}

# Wait up to $2 seconds for pid $1 to exit, then TERM, then KILL it.
reap() {
	local pid=$1 limit=$2 n=0
	[ -n "$pid" ] || return 0
	while kill -0 "$pid" 2>/dev/null; do
		n=$((n + 1))
		if [ "$n" -gt $((limit * 10)) ]; then
			log "daemon $pid still running after unmount, sending TERM"
			kill -TERM "$pid" 2>/dev/null || true
			sleep 1
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	wait "$pid" 2>/dev/null || true
}

do_unmount() {
	[ -n "$cur_dir" ] || return 0
	force_unmount "$cur_dir" || log "warning: could not unmount $cur_dir"
	reap "$cur_pid" 10
	cur_reader= cur_dir= cur_pid=
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	do_unmount
	local d
	for d in "$mnt_root"/*; do
		[ -d "$d" ] && mountpoint -q "$d" && { force_unmount "$d" || log "warning: $d still mounted"; }
	done
	exit "$rc"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM

mount_seconds=
# Mount the image for reader $1; sets cur_* and mount_seconds.
do_mount() {
	local r=$1 dir=$mnt_root/$1 dlog=$out/raw/$1.daemon.log t0 t1 n=0
	mkdir -p "$dir"
	force_unmount "$dir" || return 1
	t0=$(date +%s%N)
	cur_reader=$r cur_dir=$dir cur_pid=
	case $r in
	kernel)
		mount -t squashfs -o loop,ro "$img" "$dir" || return 1 ;;
	squashfuse_ll)
		# shellcheck disable=SC2086 # word splitting intended
		squashfuse_ll -f ${SQUASHFUSE_LL_ARGS:-} "$img" "$dir" >>"$dlog" 2>&1 9>&- &
		cur_pid=$! ;;
	sqfs-lazy)
		# shellcheck disable=SC2086
		"$lazy_bin" -f ${SQFS_LAZY_ARGS:-} "$img" "$dir" >>"$dlog" 2>&1 9>&- &
		cur_pid=$! ;;
	esac
	until mountpoint -q "$dir"; do
		if [ -n "$cur_pid" ] && ! kill -0 "$cur_pid" 2>/dev/null; then
			log "$r daemon exited before the mount appeared; tail of $dlog:"
			tail -5 "$dlog" >&2 || true
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
	t1=$(date +%s%N)
	mount_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", (b-a)/1e9}')
}

daemon_cpu() {  # utime+stime of the FUSE daemon in seconds, or empty
	local pid=$1 tck
	[ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || { echo; return; }
	tck=$(getconf CLK_TCK)
	# fields after the ")" of comm: state is $1, utime $12, stime $13
	sed 's/^.*) //' "/proc/$pid/stat" | awk -v t="$tck" '{printf "%.2f", ($12+$13)/t}'
}

# ------------------------------------------------------------ measurements

# record READER WORKLOAD STATE STATUS IOPS MIBS SECONDS BYTES CLAT P99 FIRST CPU RAW
# The repetition and the 1-minute load average are appended (other work on
# the machine shows in the latter).
rep=1
record() {
	local IFS=$'\t'
	echo "$*"$'\t'"$rep"$'\t'"$(cut -d' ' -f1 /proc/loadavg)" >>"$meas"
}
record_fail() {  # reader workload state [raw]
	record "$1" "$2" "$3" FAIL "" "" "" "" "" "" "" "" "${4:-}"
}

fio_row() {  # reader workload state jobfile numjobs
	local r=$1 w=$2 s=$3 job=$4 nj=$5 raw c0 c1 cpu vals
	raw=$out/raw/$r.$w.$s.$rep.json
	c0=$(daemon_cpu "$cur_pid")
	if ! FIO_FILE=$cur_dir/big.bin FIO_NUMJOBS=$nj FIO_RUNTIME=$runtime \
		FIO_LOG=${raw%.json} timeout --foreground 900 fio --readonly \
		--output-format=json --output="$raw" "$here/fio/$job" >/dev/null 2>"$raw.err"; then
		log "$r $w $s: fio failed: $(head -3 "$raw.err" | tr '\n' ' ')"
		record_fail "$r" "$w" "$s" "${raw#"$out"/}"
		return 1
	fi
	c1=$(daemon_cpu "$cur_pid")
	cpu=
	[ -n "$c0" ] && [ -n "$c1" ] && cpu=$(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.2f", b-a}')
	vals=$(python3 "$here/compare.py" fio-summary "$raw" "${raw%.json}") || {
		record_fail "$r" "$w" "$s" "${raw#"$out"/}"
		return 1
	}
	# vals: iops mib_s seconds bytes clat_mean_us clat_p99_us iops_first_s
	# shellcheck disable=SC2086
	record "$r" "$w" "$s" ok $vals "$cpu" "${raw#"$out"/}"
	log "$(printf '%-14s %-6s %-4s' "$r" "$w" "$s") $(echo "$vals" | awk '{printf "%10.0f IOPS %9.1f MiB/s %7.2f s", $1, $2, $3}')${cpu:+  daemon cpu ${cpu}s}"
}

tar_row() {  # reader state
	local r=$1 s=$2 raw t0 t1 bytes secs c0 c1 cpu
	raw=$out/raw/$r.tar.$s.$rep.txt
	c0=$(daemon_cpu "$cur_pid")
	t0=$(date +%s%N)
	if ! bytes=$(cd "$cur_dir/tree" && timeout --foreground 900 tar -cf - . 2>"$raw.err" | wc -c) ||
		[ -s "$raw.err" ]; then
		log "$r tar $s: failed: $(head -3 "$raw.err" | tr '\n' ' ')"
		record_fail "$r" tar "$s" "${raw#"$out"/}"
		return 1
	fi
	t1=$(date +%s%N)
	c1=$(daemon_cpu "$cur_pid")
	cpu=
	[ -n "$c0" ] && [ -n "$c1" ] && cpu=$(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.2f", b-a}')
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)/1e9}')
	echo "tar_bytes=$bytes seconds=$secs" >"$raw"
	record "$r" tar "$s" ok "" "$(awk -v b="$bytes" -v s="$secs" 'BEGIN{printf "%.1f", b/1048576/s}')" \
		"$secs" "$bytes" "" "" "" "$cpu" "${raw#"$out"/}"
	log "$(printf '%-14s %-6s %-4s' "$r" tar "$s") $(printf '%7.2f s, %d bytes' "$secs" "$bytes")${cpu:+  daemon cpu ${cpu}s}"
}

one_row() {  # reader workload state
	case $2 in
	rand1) fio_row "$1" "$2" "$3" rand_read_4k.fio 1 ;;
	rand2) fio_row "$1" "$2" "$3" rand_read_4k.fio 2 ;;
	seq) fio_row "$1" "$2" "$3" seq_read_1m.fio 1 ;;
	tar) tar_row "$1" "$3" ;;
	esac
}

verify_mount() {
	local r=$1 sum
	sum=$(sha256sum "$cur_dir/big.bin" | cut -d' ' -f1) || sum=ERROR
	echo "$r $sum" >>"$out/raw/verify.txt"
}

# ------------------------------------------------------------- metadata

{
	printf 'command\t%s\n' "$cmdline"
	printf 'cwd\t%s\n' "$PWD"
	printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf 'uname_r\t%s\n' "$(uname -r)"
	printf 'nproc\t%s\n' "$(nproc)"
	printf 'cpu_model\t%s\n' "$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
	printf 'mem_total_kib\t%s\n' "$(awk '/^MemTotal/{print $2}' /proc/meminfo)"
	printf 'git_commit\t%s\n' "$(git -C "$repo" rev-parse -q --verify HEAD 2>/dev/null || echo none)"
	printf 'git_dirty_files\t%s\n' "$(git -C "$repo" status --porcelain 2>/dev/null | wc -l)"
	printf 'loadavg_start\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf 'readers\t%s\n' "$readers"
	printf 'workloads\t%s\n' "$workloads"
	printf 'quick\t%s\n' "$quick"
	printf 'repeat\t%s\n' "$repeat"
	printf 'fio_runtime_s\t%s\n' "$runtime"
	printf 'fio_version\t%s\n' "$(fio --version)"
	printf 'squashfuse_version\t%s\n' "$(squashfuse_ll --version 2>&1 | head -1 || true)"
	printf 'squashfuse_ll_args\t%s\n' "${SQUASHFUSE_LL_ARGS:-}"
	printf 'sqfs_lazy_args\t%s\n' "${SQFS_LAZY_ARGS:-}"
	printf 'sqfs_lazy_bin\t%s\n' "$lazy_bin"
	if [ -x "$lazy_bin" ]; then
		printf 'sqfs_lazy_version\t%s\n' "$(timeout 5 "$lazy_bin" --version 2>&1 | head -1 || true)"
	fi
	printf 'kernel_squashfs_config\t%s\n' "$( (zcat /proc/config.gz 2>/dev/null ||
		cat "/boot/config-$(uname -r)" 2>/dev/null) | grep '^CONFIG_SQUASHFS' | tr '\n' ' ')"
	printf 'image\t%s\n' "$img"
	sed 's/=/\t/; s/^/image./' "$stamp"
} >"$out/meta.tsv"

# ------------------------------------------------------------------ run

log "image $img; results in $out"
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN{exit !(l > 0.5)}'; then
	log "warning: load average is $load before the start; figures will be noisy"
fi
log "readers: $readers; workloads: $workloads; fio random runtime ${runtime}s"
t_start=$(date +%s)
for rep in $(seq 1 "$repeat"); do
	if [ "$repeat" -gt 1 ]; then log "repetition $rep of $repeat"; fi
	for w in "${workload_list[@]}"; do
		for r in "${reader_list[@]}"; do
			do_unmount
			drop_caches
			if ! do_mount "$r"; then
				log "$r: mount failed, skipping $w"
				record_fail "$r" "$w" cold
				record_fail "$r" "$w" warm
				do_unmount
				continue
			fi
			record "$r" mount cold ok "" "" "$mount_seconds" "" "" "" "" "" ""
			drop_caches
			one_row "$r" "$w" cold || true
			one_row "$r" "$w" warm || true
			if [ "$r" = sqfs-lazy ]; then  # the daemon's own counters
				timeout 10 "$lazy_bin" --stats "$cur_dir" \
					>"$out/raw/$r.$w.$rep.stats.txt" 2>&1 || true
			fi
			if [ "$verify" = 1 ] && [ "$rep" = 1 ] &&
				[ "$w" = "${workload_list[0]}" ]; then
				verify_mount "$r"
			fi
			do_unmount
		done
	done
done
find "$out/raw" -name '*.err' -size 0 -delete
t_end=$(date +%s)
printf 'bench_seconds\t%s\n' "$((t_end - t_start))" >>"$out/meta.tsv"
log "measurements took $((t_end - t_start)) s"

python3 "$here/compare.py" report "$out" | tee "$out/table.txt"
ln -sfn "$run_id" "$results/latest"
log "results: $out/results.json (table: $out/table.txt)"
