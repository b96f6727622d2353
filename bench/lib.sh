# shellcheck shell=bash
# Helpers shared by the bench scripts (sourced, not run).
# The caller sets BENCH_PROG (its name for messages) before sourcing.

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "${BENCH_PROG:-bench}: $*" >&2; exit 1; }

now_ns() { date +%s%N; }
secs_since() {  # START_NS [END_NS]: seconds, 4 decimals
	awk -v a="$1" -v b="${2:-$(now_ns)}" 'BEGIN{printf "%.4f", (b-a)/1e9}'
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# CPU time the hypervisor gave to others (steal in /proc/stat), in
# USER_HZ ticks summed over the CPUs. On a shared VM a run that lost much
# of its CPU measured the host, not the build.
steal_ticks() { awk '/^cpu /{print $9; exit}' /proc/stat; }
steal_secs_since() {  # TICKS: CPU seconds stolen since, 2 decimals
	awk -v a="$1" -v b="$(steal_ticks)" -v hz="$(getconf CLK_TCK)" \
		'BEGIN{printf "%.2f", (b-a)/hz}'
}

# Mounted at all, even when its FUSE daemon died: findmnt reads the mount
# table and never touches the mount point (a stat of a dead FUSE mount
# fails with ENOTCONN; util-linux's "mountpoint -q" may or may not notice).
is_mounted() {
	findmnt -rn --mountpoint "$1" >/dev/null 2>&1
}

# A mount whose FUSE daemon is gone: reading its root directory gives
# "Transport endpoint is not connected" (ENOTCONN). A stat of the root may
# still succeed from the kernel's attribute cache, hence the listing.
is_dead_mount() {
	is_mounted "$1" || return 1
	case $(LC_ALL=C timeout -s KILL 5 ls -A "$1" 2>&1 >/dev/null) in
	*"not connected"*) return 0 ;;
	esac
	return 1
}

# Pids whose argv holds $1 exactly: the FUSE daemons of one of our mount
# points (only these scripts create processes with that argument).
pids_with_arg() {
	local p
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = "$$" ] && continue
		{ tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null | grep -qxF -- "$1" && echo "${p#/proc/}"
	done
	return 0
}

# Wait up to $2 seconds for pid $1 (one we started) to exit, then TERM,
# then KILL it.
stop_pid() {
	local pid=$1 limit=${2:-10} n=0
	[ -n "$pid" ] || return 0
	while kill -0 "$pid" 2>/dev/null; do
		n=$((n + 1))
		if [ "$n" -gt $((limit * 10)) ]; then
			log "process $pid still running, sending TERM"
			kill -TERM "$pid" 2>/dev/null || true
			sleep 1
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	wait "$pid" 2>/dev/null || true
}

# Unmount $1, whatever is mounted there, and wait for the FUSE daemons of
# that mount point to exit. A dead FUSE mount (daemon gone, ENOTCONN) is
# detached at once with fusermount3 -uz.
unmount_one() {
	local dir=$1 fstype i pid
	for i in 1 2 3 4 5; do
		is_mounted "$dir" || break
		fstype=$(findmnt -rn -o FSTYPE --mountpoint "$dir" 2>/dev/null | tail -1 || true)
		case $fstype in
		fuse*)
			if is_dead_mount "$dir"; then
				log "warning: dead FUSE mount on $dir (daemon gone), detaching"
				fusermount3 -uz "$dir" 2>/dev/null || umount -l "$dir" 2>/dev/null || true
			else
				fusermount3 -u "$dir" 2>/dev/null || true
			fi ;;
		*) umount "$dir" 2>/dev/null || true ;;
		esac
		is_mounted "$dir" || break
		sleep 0.5
	done
	if is_mounted "$dir"; then
		log "warning: lazy unmount of $dir"
		fusermount3 -uz "$dir" 2>/dev/null || umount -l "$dir" 2>/dev/null || true
	fi
	for pid in $(pids_with_arg "$dir"); do
		stop_pid "$pid" 10
	done
}

# utime+stime of a process in seconds (all threads), or empty.
daemon_cpu() {
	local pid=$1 tck
	[ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || { echo; return; }
	tck=$(getconf CLK_TCK)
	# fields after the ")" of comm: state is $1, utime $12, stime $13
	sed 's/^.*) //' "/proc/$pid/stat" | awk -v t="$tck" '{printf "%.2f", ($12+$13)/t}'
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ------------------------------------------------------------ nginx
# nginx in the foreground as our child (daemon off, master_process off) on
# 127.0.0.1:<free port>, serving the directory $1 (config, logs and www/
# under it). tcp_nopush stays off: with it, answers of about 64 KiB (one
# compressed block) wait 40 ms on loopback. The access log has $bytes_sent
# (headers included) and the Range of every request. $2 (optional) goes
# into the server block as is. Sets nginx_pid, nginx_port and nginx_base
# (http://127.0.0.1:PORT).
nginx_pid= nginx_port= nginx_base=
nginx_start() {
	local hdir=$1 extra=${2:-} bin try n conf
	bin=$(command -v nginx || echo /usr/sbin/nginx)
	mkdir -p "$hdir/www" "$hdir/tmp"
	for try in 1 2 3 4 5; do
		nginx_port=$(free_port)
		conf=$hdir/nginx.conf
		cat >"$conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $hdir/nginx.pid;
error_log $hdir/error.log;
events { worker_connections 1024; }
http {
  log_format ranges '\$msec \$request_method \$status \$bytes_sent "\$http_range" "\$request_uri" \$connection "\$http_user_agent" \$request_time';
  access_log $hdir/access.log ranges;
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush off;
  keepalive_requests 1000000;
  client_body_temp_path $hdir/tmp; proxy_temp_path $hdir/tmp;
  fastcgi_temp_path $hdir/tmp; uwsgi_temp_path $hdir/tmp; scgi_temp_path $hdir/tmp;
  server { listen 127.0.0.1:$nginx_port; root $hdir/www; $extra }
}
EOF
		: >"$hdir/access.log"
		"$bin" -c "$conf" -p "$hdir/" 9>&- </dev/null >/dev/null 2>>"$hdir/error.log" &
		nginx_pid=$!
		n=0
		while [ "$n" -lt 100 ]; do
			kill -0 "$nginx_pid" 2>/dev/null || break
			if curl -s -o /dev/null "http://127.0.0.1:$nginx_port/"; then
				nginx_base=http://127.0.0.1:$nginx_port
				return 0
			fi
			sleep 0.1; n=$((n + 1))
		done
		nginx_stop
		log "nginx did not start on port $nginx_port (try $try); tail of $hdir/error.log:"
		tail -3 "$hdir/error.log" >&2 || true
	done
	return 1
}

nginx_stop() {
	[ -n "$nginx_pid" ] || return 0
	kill -QUIT "$nginx_pid" 2>/dev/null || true
	local n=0
	while kill -0 "$nginx_pid" 2>/dev/null && [ "$n" -lt 100 ]; do
		sleep 0.1; n=$((n + 1))
	done
	kill -KILL "$nginx_pid" 2>/dev/null || true
	wait "$nginx_pid" 2>/dev/null || true
	nginx_pid=
}

nginx_version() { "$(command -v nginx || echo /usr/sbin/nginx)" -v 2>&1 | sed 's/.*: //'; }

# Access-log position, and "requests bytes" of the lines after a position.
access_mark() { wc -l <"$1"; }
access_since() {  # LOG MARK
	sleep 0.2   # nginx logs a request when it ends; let the last one land
	awk -v m="$2" 'NR > m { n++; b += $4 } END { printf "%d %.0f\n", n, b }' "$1"
}

# ------------------------------------------------------------ run facts
# Every run folder's meta.tsv begins with run_facts: date, machine, load,
# the bench checkout, the command with every option's effective value,
# and the commit each measured build came from (benchlib.py facts, where
# bench/README.md's "Run records" says how that commit is known), then the
# versions of the common tools. Callers add their own keys after it.

bench_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# sh_words WORD...: the words as one command line, each quoted for a shell
# when it needs it (commas, slashes, = and the like do not).
sh_words() {
	local w out=
	for w; do
		if [[ -z $w || $w =~ [^A-Za-z0-9_@%+=:,./-] ]]; then
			w="'${w//\'/\'\\\'\'}'"
		fi
		out+="${out:+ }$w"
	done
	printf '%s\n' "$out"
}

# env_words NAME...: "NAME=value " for each named environment variable
# set and non-empty (the settings a bench reads from its environment).
env_words() {
	local n
	for n; do
		[ -n "${!n:-}" ] && printf '%s=%s ' "$n" "$(sh_words "${!n}")"
	done
	return 0
}

# run_facts [--command CMD] [--typed CMD] [--build DIR] [--build-as
# NAME=DIR] [--bin PATH]...: see benchlib.py facts.
run_facts() {
	python3 "$bench_lib_dir/benchlib.py" facts "$@" || die "benchlib.py facts failed"
	tool_versions
}

# For callers that name no command or build (the keys of run_facts alone).
meta_common() { run_facts; }

# key<TAB>value lines: the versions of the common tools.
tool_versions() {
	printf 'fio_version\t%s\n' "$(fio --version 2>/dev/null | sed 's/^fio-//')"
	printf 'mksquashfs_version\t%s\n' "$(mksquashfs -version 2>&1 | head -1 | sed 's/^mksquashfs version //; s/ (.*//')"
	if command -v squashfuse_ll >/dev/null; then
		# the binary reports its own version; the package's is often newer
		printf 'squashfuse_version\t%s (package %s)\n' \
			"$(squashfuse_ll --version 2>&1 | head -1 | sed 's/^squashfuse[_a-z]* //; s/ (c).*//' || true)" \
			"$(dpkg-query -W -f='${Version}' squashfuse 2>/dev/null || echo '?')"
	fi
	printf 'nginx_version\t%s\n' "$(nginx_version)"
	printf 'kernel_squashfs_config\t%s\n' "$( (zcat /proc/config.gz 2>/dev/null ||
		cat "/boot/config-$(uname -r)" 2>/dev/null) | grep '^CONFIG_SQUASHFS' | tr '\n' ' ')"
}

# The last line of a run's meta.tsv ($1): the load at its end.
meta_end() {
	printf 'loadavg_end\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$1"
}

# Scrape -o metrics=unix:SOCK every INTERVAL seconds (default 1; 0: as
# fast as it answers) until killed, a line in OUT per answered scrape
# (mounts come and go: a refused scrape is not counted).
metrics_scraper() {  # SOCK OUT [INTERVAL]
	: >>"$2"
	while :; do
		curl -sf --max-time 2 --unix-socket "$1" http://mount/metrics \
			-o /dev/null 2>/dev/null && date +%s >>"$2"
		sleep "${3:-1}"
	done
}
