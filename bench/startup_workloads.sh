# shellcheck shell=bash
# The program starts of bench/startup.sh (sourced by it, not run). Each
# workload has its own image, built from this machine's files (Debian
# packages), and four functions:
#   wl_<name>_stamp        a line that changes when the source files do
#   wl_<name>_tree DIR     fill DIR (empty) with the image's tree
#   wl_<name>_run MNT      the program start against the mounted image;
#                          fails (non-zero) when the program did not work
#   wl_<name>_desc         one line for the report
# Trees are rootfs-like (usr/..., with bin, lib, lib64 -> usr/...) so that
# a workload can chroot into the mount.

WL_ALL=python,gcc,grep,find,java,node,sqlite

# Packages the workloads need (installed by wl_setup when missing).
WL_PACKAGES="python3.11 g++ binutils libc6-dev libstdc++-12-dev perl findutils grep util-linux coreutils squashfs-tools curl nginx"
# and those of one workload, installed only when it runs
WL_PACKAGES_java="openjdk-17-jdk-headless"

wl_setup() {  # WORKLOAD...
	local p w missing=() want=$WL_PACKAGES
	for w in "$@"; do
		p=WL_PACKAGES_$w
		want="$want ${!p:-}"
	done
	for p in $want; do
		dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "apt-get install ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		"${missing[@]}" >&2
}

# Copy absolute paths (files, symlinks, directories) into a tree, merged-usr
# style: /lib/x, /bin/x, /sbin/x, /lib64/x land under usr/.
wl_copy() {  # DIR PATH...
	local dst=$1 p
	shift
	for p in "$@"; do
		[ -e "$p" ] || [ -L "$p" ] || continue
		p=$(sed 's#^/lib/#/usr/lib/#; s#^/bin/#/usr/bin/#; s#^/sbin/#/usr/sbin/#; s#^/lib64/#/usr/lib64/#' <<<"$p")
		echo "${p#/}"
	done | tar -C / -cf - --no-recursion -T - 2>/dev/null | tar -C "$dst" -xf -
}
wl_copy_tree() {  # DIR PATH...: whole directories
	local dst=$1 p
	shift
	for p in "$@"; do
		[ -d "$p" ] || continue
		mkdir -p "$dst/$(dirname "${p#/}")"
		cp -a "$p" "$dst/$(dirname "${p#/}")/"
	done
}
wl_rootfs() {  # DIR: the merged-usr links and a /tmp for tmpfs
	mkdir -p "$1/usr/bin" "$1/usr/lib" "$1/usr/lib64" "$1/usr/sbin" "$1/tmp"
	ln -sfn usr/bin "$1/bin"; ln -sfn usr/lib "$1/lib"
	ln -sfn usr/lib64 "$1/lib64"; ln -sfn usr/sbin "$1/sbin"
}
wl_du() { du -s --apparent-size "$@" 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
# The libraries ldd lists for FILEs that DIR lacks, each link with the file
# it names.
wl_copy_libs() {  # DIR FILE...
	local dst=$1 lib
	shift
	for lib in $(ldd "$@" 2>/dev/null | awk '/=>/ {print $3}' | sort -u); do
		[ -e "$dst$(sed 's#^/lib/#/usr/lib/#' <<<"$lib")" ] ||
			wl_copy "$dst" "$lib" "$(readlink -f "$lib")"
	done
}

# ------------------------------------------------------------ python
# Issue 18's start: Debian's python3.11 importing two dozen standard
# modules; /usr/lib/x86_64-linux-gnu as filler (what makes the image as
# large as real rootfs images are). Run from the mount directly (the host's
# loader), as the issue measured it.
wl_python_desc() { echo "python3.11 -I -c 'import json, asyncio, ... statistics' (interpreter importing modules)"; }
wl_python_stamp() {
	echo "python3.11 $(stat -c %s /usr/bin/python3.11) $(wl_du /usr/lib/python3.11 /usr/lib/x86_64-linux-gnu)"
}
wl_python_tree() {
	mkdir -p "$1/usr/bin" "$1/usr/lib"
	cp -a /usr/bin/python3.11 "$1/usr/bin/"
	cp -a /usr/lib/python3.11 /usr/lib/x86_64-linux-gnu "$1/usr/lib/"
}
wl_python_run() {
	"$1/usr/bin/python3.11" -I -c "import json, asyncio, email.mime.multipart, http.client, xml.etree.ElementTree, sqlite3, decimal, unittest, argparse, logging.handlers, urllib.request, csv, zipfile, tarfile, ssl, concurrent.futures, multiprocessing, pathlib, subprocess, typing, dataclasses, statistics, sys; assert sys.prefix == '$1/usr', sys.prefix"
}

# ------------------------------------------------------------ gcc
# A toolchain image: the files of gcc-12, g++-12, binutils, libc6-dev,
# libstdc++-12-dev and the libraries they load, all of /usr/include, and
# the loader. The start: chroot into the mount (a private mount namespace
# with a tmpfs on /tmp) and compile and link a small C++ file, then run
# it. It reads cc1plus (34 MB), as, ld and libbfd in pieces, a hundred
# headers and the libraries it links.
WL_GCC_PKGS="gcc-12 g++-12 cpp-12 gcc g++ cpp binutils binutils-x86-64-linux-gnu binutils-common libbinutils libc6 libc6-dev libc-dev-bin linux-libc-dev libstdc++6 libstdc++-12-dev libgcc-12-dev libgcc-s1 libcrypt-dev libcrypt1 libisl23 libmpc3 libmpfr6 libgmp10 libzstd1 zlib1g libjansson4 libctf0 libctf-nobfd0 libsframe0 libgprofng0 libcc1-0 libasan8 libtsan2 libubsan1 liblsan0 libhwasan0 libitm1 libatomic1 libgomp1 libquadmath0 libnsl-dev libtirpc-dev"
wl_gcc_pkgs() {
	# shellcheck disable=SC2086
	dpkg-query -W -f='${Package}\t${db:Status-Status}\t${Version}\n' $WL_GCC_PKGS 2>/dev/null |
		awk '$2 == "installed" {print $1 "=" $3}'
}
wl_gcc_desc() { echo "chroot MNT g++ -O1 hello.cc (map, vector, iostream) && run it (a few large files in pieces, many headers)"; }
wl_gcc_stamp() { echo "gcc $(wl_gcc_pkgs | md5sum | cut -c1-12) $(wl_du /usr/include)"; }
wl_gcc_tree() {
	local files
	wl_rootfs "$1"
	# shellcheck disable=SC2046
	files=$(dpkg -L $(wl_gcc_pkgs | cut -d= -f1) | sort -u | while read -r p; do
		[ -d "$p" ] && [ ! -L "$p" ] && continue
		echo "$p"
	done)
	# shellcheck disable=SC2086
	wl_copy "$1" $files
	wl_copy_tree "$1" /usr/include
	# what the programs load that no listed package brought
	local lib
	for lib in $(ldd "$1"/usr/lib/gcc/x86_64-linux-gnu/*/cc1plus "$1"/usr/bin/x86_64-linux-gnu-ld.bfd \
		"$1"/usr/bin/x86_64-linux-gnu-as "$1"/usr/bin/x86_64-linux-gnu-g++-* 2>/dev/null |
		awk '/=>/ {print $3}' | sort -u); do
		[ -e "$1$(sed 's#^/lib/#/usr/lib/#' <<<"$lib")" ] || wl_copy "$1" "$lib"
	done
	mkdir -p "$1/src"
	cat >"$1/src/hello.cc" <<'EOF'
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>
int main() {
	std::map<std::string, std::vector<int>> m;
	for (int i = 0; i < 10; i++) m[std::to_string(i % 3)].push_back(i);
	auto p = std::make_unique<int>(42);
	std::vector<int> v = m["1"];
	std::sort(v.rbegin(), v.rend());
	std::cout << "hello " << *p << " " << v.front() << std::endl;
	return 0;
}
EOF
}
wl_gcc_run() {
	local out
	out=$(unshare -m --propagation private sh -c 'mount -t tmpfs -o size=64m tmpfs "$1/tmp" &&
		chroot "$1" /usr/bin/g++ -O1 -o /tmp/hello /src/hello.cc && chroot "$1" /tmp/hello' sh "$1") &&
		[ "$out" = "hello 42 7" ]
}

# ------------------------------------------------------------ grep
# A scripting-languages image: perl with its modules, the python3
# packages, and python3.11's standard library, /usr/share/locale, i18n and
# vim's runtime as filler. The start:
# grep -r a string that is nowhere (every file read whole) over the perl
# and python module trees: about 5,000 small files.
WL_GREP_DIRS="/usr/share/perl /usr/share/perl5 /usr/lib/x86_64-linux-gnu/perl /usr/lib/x86_64-linux-gnu/perl5 /usr/lib/x86_64-linux-gnu/perl-base /usr/lib/python3 /usr/lib/python3.11 /usr/share/locale /usr/share/i18n /usr/share/vim"
WL_GREP_READ="usr/share/perl usr/share/perl5 usr/lib/x86_64-linux-gnu/perl usr/lib/python3"
wl_grep_desc() { echo "grep -r -F of an absent string over ${WL_GREP_READ// /, } (many small files, each read whole)"; }
# shellcheck disable=SC2086
wl_grep_stamp() { echo "grep $(wl_du $WL_GREP_DIRS) $(find $WL_GREP_DIRS -type f 2>/dev/null | wc -l)"; }
wl_grep_tree() {
	wl_rootfs "$1"
	wl_copy "$1" /usr/bin/perl /usr/bin/perl5.* /usr/lib/x86_64-linux-gnu/libperl.so*
	# shellcheck disable=SC2086
	wl_copy_tree "$1" $WL_GREP_DIRS
}
wl_grep_run() {
	local d dirs=() rc=0
	for d in $WL_GREP_READ; do
		[ -d "$1/$d" ] && dirs+=("$1/$d")
	done
	LC_ALL=C grep -r -l -F -e 'sqfs-lazy bench: a string in no file' "${dirs[@]}" >/dev/null || rc=$?
	[ "$rc" = 1 ]   # 1: read everything, found nothing; 2: an error
}

# ------------------------------------------------------------ find
# A documentation image: /usr/share without what the grep image has (and
# without the package lists this machine keeps there), about 45,000
# entries. The start: find MNT -printf '%s %p\n' (an lstat of every entry,
# no file data), checked against the number of entries of the tree.
WL_FIND_SKIP="locale i18n perl perl5 vim package-lists"
wl_find_dirs() {
	local d
	for d in /usr/share/*; do
		case " $WL_FIND_SKIP " in *" $(basename "$d") "*) continue ;; esac
		echo "$d"
	done
}
wl_find_desc() { echo "find MNT -printf '%s %p\\n' (an lstat of every entry of a deep tree)"; }
# shellcheck disable=SC2046
wl_find_stamp() { echo "find $(wl_du $(wl_find_dirs)) $(find $(wl_find_dirs) 2>/dev/null | wc -l)"; }
wl_find_tree() {
	mkdir -p "$1/usr/share"
	# shellcheck disable=SC2046
	cp -a $(wl_find_dirs) "$1/usr/share/"
	# the number of entries the workload must see (the root included)
	find "$1" | wc -l >"$1.entries"
}
wl_find_run() {
	local n want
	want=$(cat "$WL_TREE.entries")
	n=$(find "$1" -printf '%s %p\n' | wc -l)
	[ "$n" = "$want" ] || { echo "find: $n entries, expected $want" >&2; return 1; }
}

# ------------------------------------------------------------ java
# A JDK image: Debian's openjdk-17 (jre and jdk, headless), its
# configuration in /etc and the libraries it loads. The start: chroot into
# the mount (proc and a tmpfs on /tmp in a private mount namespace), javac
# a small program and run it. The JVM maps libjvm.so and the jimage
# lib/modules (over 100 MB) and reads them in scattered pieces, large and
# small, with a few dozen small files: a start unlike the others.
WL_JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
wl_java_desc() { echo "chroot MNT javac Hello.java && java Hello (a JVM: libjvm.so and the lib/modules jimage in scattered pieces)"; }
wl_java_stamp() {
	echo "java $(dpkg-query -W -f='${Version}' openjdk-17-jdk-headless 2>/dev/null) $(wl_du $WL_JAVA_HOME)"
}
wl_java_tree() {
	local bins
	wl_rootfs "$1"
	mkdir -p "$1/proc" "$1/etc" "$1/usr/lib/jvm" "$1/src"
	cp -a $WL_JAVA_HOME "$1/usr/lib/jvm/"
	cp -a /etc/java-17-openjdk "$1/etc/"
	wl_copy "$1" /lib64/ld-linux-x86-64.so.2 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
	mapfile -d '' bins < <(find "$1$WL_JAVA_HOME" \( -name '*.so' -o -name java -o -name javac \) -print0)
	wl_copy_libs "$1" "${bins[@]}"
	cat >"$1/src/Hello.java" <<'EOF'
import java.util.*;
import java.util.stream.*;
public class Hello {
	public static void main(String[] args) {
		Map<Integer, List<Integer>> m = IntStream.range(0, 10).boxed()
			.collect(Collectors.groupingBy(i -> i % 3));
		System.out.println("hello " + m.get(1).stream()
			.max(Comparator.naturalOrder()).get());
	}
}
EOF
}
wl_java_run() {
	local out
	out=$(unshare -m --propagation private sh -c 'mount -t proc proc "$1/proc" &&
		mount -t tmpfs -o size=64m tmpfs "$1/tmp" &&
		chroot "$1" "$2"/bin/javac -d /tmp /src/Hello.java &&
		chroot "$1" "$2"/bin/java -cp /tmp Hello' sh "$1" "$WL_JAVA_HOME") &&
		[ "$out" = "hello 7" ]
}

# ------------------------------------------------------------ node
# A Node.js image: the node binary (about 100 MB, faulted in as it runs),
# npm's module tree and the libraries node loads, with /usr/share/locale as
# filler. The start: chroot into the mount and run npm's help (about 120
# small modules, required one after the other).
WL_NODE_BIN=$(command -v node 2>/dev/null || true)
wl_node_desc() { echo "chroot MNT node npm-cli.js help (a 100 MB binary in pieces, then ~120 small modules, one after the other)"; }
wl_node_stamp() {
	echo "node $(stat -c %s "$WL_NODE_BIN" 2>/dev/null) $(wl_du /usr/lib/node_modules /usr/share/locale)"
}
wl_node_tree() {
	[ -x "$WL_NODE_BIN" ] || { echo "node: no node binary on this machine" >&2; return 1; }
	wl_rootfs "$1"
	mkdir -p "$1/proc"
	wl_copy "$1" "$WL_NODE_BIN" /lib64/ld-linux-x86-64.so.2 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
	[ "$WL_NODE_BIN" = /usr/bin/node ] || cp -a "$WL_NODE_BIN" "$1/usr/bin/node"
	wl_copy_libs "$1" "$WL_NODE_BIN"
	wl_copy_tree "$1" /usr/lib/node_modules /usr/share/locale
}
wl_node_run() {
	local out
	out=$(unshare -m --propagation private sh -c 'mount -t proc proc "$1/proc" &&
		mount -t tmpfs -o size=64m tmpfs "$1/tmp" &&
		HOME=/tmp chroot "$1" /usr/bin/node /usr/lib/node_modules/npm/bin/npm-cli.js help' sh "$1") &&
		case $out in *"npm <command>"*) ;; *) return 1 ;; esac
}

# ------------------------------------------------------------ sqlite
# A dataset image: one SQLite database of about 210 MB (2 million rows of
# 100 bytes behind an integer key). The start: 300 point lookups at
# random keys (fixed seed) with the host's sqlite3, opened read-only and
# immutable: each lookup walks the B-tree, so reads are 4 KiB pages at
# random offsets, each one waiting for the one before.
WL_SQLITE_ROWS=2000000
wl_sqlite_desc() { echo "sqlite3 MNT/data.db: 300 point lookups at random keys (4 KiB pages at random offsets, one after the other)"; }
wl_sqlite_stamp() { echo "sqlite $WL_SQLITE_ROWS 1"; }
wl_sqlite_tree() {
	mkdir -p "$1"
	python3 - "$1/data.db" "$WL_SQLITE_ROWS" <<'PY'
import random, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("pragma page_size = 4096")
db.execute("pragma journal_mode = off")
db.execute("create table t (k integer primary key, v blob)")
rnd = random.Random(1)
n = int(sys.argv[2])
db.executemany("insert into t values (?, ?)",
               ((k, rnd.randbytes(100)) for k in range(n)))
db.commit()
db.close()
PY
	# what the lookups must return (the tree of a next version, a hard-
	# linked copy, keeps data.db: bench/startup_nextver.py leaves it alone)
	sqlite3 -readonly "$1/data.db" "$(wl_sqlite_query)" | md5sum >"$1.expected"
}
wl_sqlite_query() {
	# the same 300 keys every run, spread over the whole table, one
	# statement each (an IN list would be walked in key order)
	awk -v n="$WL_SQLITE_ROWS" 'BEGIN { srand(7)
		for (i = 0; i < 300; i++) printf "select hex(substr(v, 1, 8)) from t where k = %d;\n", int(rand() * n) }'
}
wl_sqlite_run() {
	local sum
	sum=$(sqlite3 "file:$1/data.db?immutable=1" "$(wl_sqlite_query)" | md5sum) &&
		[ "$sum" = "$(cat "$WL_TREE.expected")" ]
}
