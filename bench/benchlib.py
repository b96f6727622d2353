#!/usr/bin/env python3
"""The code every bench report shares, and a small SquashFS reader that
tells which compressed blocks each file occupies, and the facts every run
records (what ran, on which build). The reports (compare.py,
http_report.py, pack_report.py, startup_report.py, knobs_report.py) read
run folders and print tables the same way; that code lives here once, so a
change to how a table or a run file looks is made in one place.

  benchlib.py fio-summary FIO.json [LOG_PREFIX]
      print "iops mib_s seconds bytes clat_mean_us clat_p99_us iops_first_s"
      (all jobs summed; seconds is the longest job runtime; iops_first_s is
      the first second of fio's averaged IOPS log, or "-" without logs)

  benchlib.py blocks IMAGE [--set-bytes N --every K --max-file N --under DIR]
      parse IMAGE without mounting it; print JSON: every regular file under
      DIR (default /tree) with its data blocks and fragment, and a file set
      (every K-th file in walk order, files up to --max-file bytes, until
      --set-bytes uncompressed bytes) with the compressed bytes it touches.

  benchlib.py facts [--command CMD] [--typed CMD] [--build DIR]
                    [--build-as NAME=DIR] [--bin PATH]...
      print the facts every run folder's meta.tsv begins with (date,
      machine, load, bench commit, command, and for each build the commit
      its binaries came from: see "run facts" below); a warning on stderr
      when a build's commit cannot be known

Standard library only; zstd metadata blocks go through the zstd command (the
Python zstandard module is not part of Debian's python3).
"""

import argparse
import csv
import json
import lzma
import os
import re
import shlex
import statistics
import struct
import subprocess
import sys
import time
import zlib

# ------------------------------------------------------------ run files


def read_meta(run_dir):
    """meta.tsv as two dicts: the run's facts and the image stamp
    ('image.' keys, prefix removed)."""
    meta, image = {}, {}
    with open(os.path.join(run_dir, "meta.tsv")) as f:
        for line in f:
            line = line.rstrip("\n")
            if "\t" not in line:
                continue
            k, v = line.split("\t", 1)
            if k.startswith("image."):
                image[k[6:]] = v
            else:
                meta[k] = v
    return meta, image


def read_tsv(path):
    """A tab-separated file with a header line as a list of dicts."""
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def num(v):
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def read_kv(path):
    """'name value' lines (sqfs-lazy-mount --stats) as a dict."""
    d = {}
    try:
        with open(path) as f:
            for line in f:
                kv = line.split()
                if len(kv) == 2:
                    try:
                        d[kv[0]] = int(kv[1])
                    except ValueError:
                        d[kv[0]] = kv[1]
    except OSError:
        pass
    return d


# ------------------------------------------------------------ fio


def first_second_iops(prefix):
    """Sum over jobs of the first 1 s interval of fio's averaged IOPS log."""
    total, found = 0.0, False
    d = os.path.dirname(prefix) or "."
    base = os.path.basename(prefix) + "_iops."
    for name in sorted(os.listdir(d)):
        if not (name.startswith(base) and name.endswith(".log")):
            continue
        with open(os.path.join(d, name)) as f:
            line = f.readline().split(",")
        if len(line) >= 2:
            total += float(line[1])
            found = True
    return "%.1f" % total if found else "-"


def fio_summary(path, log_prefix=None):
    with open(path) as f:
        text = f.read()
    # fio may print warnings before the JSON document
    data = json.loads(text[text.index("{"):])
    iops = bw = io_bytes = 0.0
    secs = 0.0
    clat_w = clat_n = 0.0
    p99 = 0.0
    for job in data["jobs"]:
        rd = job["read"]
        iops += rd["iops"]
        bw += rd["bw_bytes"]
        io_bytes += rd["io_bytes"]
        secs = max(secs, rd["runtime"] / 1000.0)
        n = rd.get("total_ios") or rd["clat_ns"].get("N", 0)
        clat_w += rd["clat_ns"]["mean"] * n
        clat_n += n
        pct = rd["clat_ns"].get("percentile", {})
        p99 = max(p99, pct.get("99.000000", 0))
    clat = clat_w / clat_n / 1000.0 if clat_n else 0.0
    first = first_second_iops(log_prefix) if log_prefix else "-"
    return "%.1f %.1f %.3f %d %.1f %.1f %s" % (
        iops, bw / 1048576.0, secs, io_bytes, clat, p99 / 1000.0, first)


# ------------------------------------------------------------ formatting


def fmt_bytes(b):
    if b is None:
        return "-"
    if b >= 10 << 20:
        return "%.0f MiB" % (b / 1048576)
    if b >= 1 << 20:
        return "%.1f MiB" % (b / 1048576)
    if b >= 10 << 10:
        return "%.0f KiB" % (b / 1024)
    return "%d B" % b


def fmt_ratio(v):
    if v is None:
        return "-"
    if v >= 100:
        return "%.0fx" % v
    if v >= 10:
        return "%.1fx" % v
    if v >= 0.1:
        return "%.2fx" % v
    return "%.2gx" % v


def render(table_rows, header_rows=1, left_cols=1):
    """Text table: the first left_cols columns left-aligned, the others
    right-aligned; a rule under the header rows."""
    ncol = max(len(r) for r in table_rows)
    rows = [list(r) + [""] * (ncol - len(r)) for r in table_rows]
    widths = [max(len(str(r[i])) for r in rows) for i in range(ncol)]
    out = ["  ".join(str(c).ljust(widths[i]) if i < left_cols else
                     str(c).rjust(widths[i]) for i, c in enumerate(r)).rstrip()
           for r in rows]
    sep = "  ".join("-" * w for w in widths)
    return out[:header_rows] + [sep] + out[header_rows:]


def render_md(table_rows, left_cols=1):
    """The same table as markdown (first row is the header)."""
    ncol = max(len(r) for r in table_rows)
    rows = [[str(c).replace("|", "\\|") for c in r] + [""] * (ncol - len(r))
            for r in table_rows]
    out = ["| " + " | ".join(rows[0]) + " |",
           "|" + "|".join("---" if i < left_cols else "---:"
                          for i in range(ncol)) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return out


def machine_line(meta):
    mem = num(meta.get("mem_total_kib"))
    return ("machine: %s CPUs (%s), %s RAM, kernel %s; 1-min load at start "
            "%s" % (meta.get("nproc", "?"), meta.get("cpu_model", "?"),
                    "%.1f GiB" % (mem / 1048576) if mem else "?",
                    meta.get("uname_r", "?"), meta.get("loadavg_start", "?")))


def versions_line(meta, keys):
    parts = []
    for k, label in keys:
        v = meta.get(k)
        if v:
            parts.append("%s %s" % (label, v))
    return "versions: " + "; ".join(parts)


# ------------------------------------------------------------ run facts
#
# Every run folder's meta.tsv begins with the same facts, written here
# once (bench/lib.sh's run_facts calls "benchlib.py facts"): when and on
# what it ran, the load, the bench checkout, the command with every
# option's effective value, and the build it measured. The measured build
# is not the bench checkout: --build may name another tree's build, and a
# build may be older than its tree. Its commit comes from the binary's
# --version when that names one; otherwise from the build's source tree
# (meson-info.json), and only when ninja has nothing to rebuild for the
# measured binaries, i.e. they were built from the tree as it is.

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
CALLER_ENV = "SQFS_BENCH_CALLER"


def _output(cmd, timeout=20):
    """stdout (with stderr) of cmd, or None when it fails or is missing."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           text=True, errors="replace", timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


def git_state(tree):
    """(commit, [dirty tracked paths]) of a git work tree; commit is
    'none' outside git. Untracked files are not counted: a build reads
    only what meson.build names, and a new source shows as a change
    there."""
    head = _output(["git", "-C", tree, "rev-parse", "-q", "--verify",
                    "HEAD^{commit}"])
    if not head:
        return "none", []
    st = _output(["git", "-C", tree, "status", "--porcelain",
                  "--untracked-files=no"]) or ""
    return head.strip(), [ln[3:] for ln in st.splitlines() if ln.strip()]


# Where the measured binaries' sources live: a change elsewhere (tests,
# bench, docs) cannot be in them.
BUILD_INPUTS = ("src/", "include/", "subprojects/", "meson.build",
                "meson_options.txt", "meson.options")


def build_inputs(paths):
    return [p for p in paths if p.startswith(BUILD_INPUTS[:3]) or
            p in BUILD_INPUTS[3:]]


def dirty_word(paths):
    """'no', or 'yes: N files (a, b, ...)' (at most 8 names)."""
    if not paths:
        return "no"
    shown = ", ".join(paths[:8]) + (", ..." if len(paths) > 8 else "")
    return "yes: %d file%s (%s)" % (len(paths), "" if len(paths) == 1
                                    else "s", shown)


def shell_join(words):
    """The words as one shell command line, quoted where needed."""
    return " ".join(shlex.quote(str(w)) for w in words)


def env_prefix(names):
    """'NAME=value ' for each named environment variable set non-empty."""
    return "".join("%s=%s " % (n, shlex.quote(os.environ[n]))
                   for n in names if os.environ.get(n))


def argparse_command(prog, parser, args, env=()):
    """The effective command of a Python bench: prog, then every option of
    parser with the value it took (defaults filled in), then the
    positionals; env names environment variables that change the run.
    Two runs whose defaults differ so never show the same line."""
    words, pos = [prog], []
    for act in parser._actions:
        if isinstance(act, argparse._HelpAction):
            continue
        v = getattr(args, act.dest, None)
        if not act.option_strings:
            pos += v if isinstance(v, list) else [] if v is None else [v]
            continue
        opt = max(act.option_strings, key=len)
        if isinstance(act, argparse._StoreTrueAction):
            if v:
                words.append(opt)
        elif isinstance(act, argparse._StoreFalseAction):
            if not v:
                words.append(opt)
        elif v is not None:
            for x in v if isinstance(v, list) else [v]:
                words += [opt, x]
    if pos:
        words += ["--"] + pos
    return env_prefix(env) + shell_join(words)


def host_facts():
    """Date, machine, load and the bench checkout, as (key, value)."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem = next((ln.split()[1] for ln in f
                        if ln.startswith("MemTotal")), "")
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    except OSError:
        mem = load = ""
    commit, dirty = git_state(REPO)
    return [("date", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            ("uname_r", os.uname().release),
            ("nproc", str(os.cpu_count() or "")),
            ("cpu_model", cpu), ("mem_total_kib", mem),
            ("loadavg_start", load),
            ("bench_checkout", REPO), ("bench_commit", commit),
            ("bench_dirty", dirty_word(dirty))]


def version_commit(line):
    """The commit a --version line names ('git 1a2b3c4', git describe's
    '-g1a2b3c4', or '(1a2b3c4)', each maybe with '-dirty'), as (hex,
    dirty) or None."""
    m = re.search(r"(?:\bgit[ :]+g?|-g|\()([0-9a-f]{7,40})(-dirty)?\b",
                  line)
    return (m.group(1), bool(m.group(2))) if m else None


def build_facts(build, bins, prefix=""):
    """What a meson build dir holds and which commit its binaries (paths
    relative to build, the first one asked for --version) came from."""
    build = os.path.abspath(build)
    facts = [("measured_build", build), ("measured_binaries", " ".join(bins))]
    src = ""
    try:
        with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
            src = json.load(f)["directories"]["source"]
    except (OSError, ValueError, KeyError):
        pass
    facts.append(("measured_source", src or "-"))
    paths = [os.path.join(build, b) for b in bins]
    have = [p for p in paths if os.path.exists(p)]
    version = ""
    if have:
        version = (_output([have[0], "--version"], 5) or "").split("\n")[0]
    facts.append(("measured_version", version or "-"))
    facts.append(("measured_binary_mtime", max(
        (time_iso(os.path.getmtime(p)) for p in have), default="-")))
    head, dirty = git_state(src) if src else ("none", [])
    facts.append(("measured_source_commit", head))
    # Does the build hold what its tree would build now? ninja -n runs
    # nothing and writes nothing; "no work to do" means every measured
    # binary is newer than all its inputs as they are in the tree.
    if not os.path.exists(os.path.join(build, "build.ninja")):
        current = "unknown: not a meson build dir"
    elif len(have) < len(paths):
        current = "no: missing %s" % ", ".join(
            os.path.relpath(p, build) for p in paths if p not in have)
    else:
        out = _output(["ninja", "-C", build, "-n"] + list(bins), 60)
        if out is None:
            current = "unknown: ninja -n failed"
        elif "no work to do" in out:
            current = "yes"
        else:
            steps = sum(1 for ln in out.splitlines() if ln.startswith("["))
            current = "no: %d build step%s pending" % (
                steps, "" if steps == 1 else "s")
    facts.append(("measured_build_current", current))
    vc = version_commit(version)
    if vc:
        full = _output(["git", "-C", src or REPO, "rev-parse", "-q",
                        "--verify", vc[0] + "^{commit}"])
        facts += [("measured_commit", full.strip() if full else vc[0]),
                  ("measured_commit_from", "binary --version"),
                  ("measured_dirty", "yes (binary --version)" if vc[1]
                   else "no")]
    elif current == "yes" and head != "none":
        facts += [("measured_commit", head),
                  ("measured_commit_from",
                   "source tree HEAD, build up to date with it"),
                  ("measured_dirty", dirty_word(build_inputs(dirty)))]
    else:
        facts += [("measured_commit", "unknown"),
                  ("measured_commit_from", "none: no commit in --version, "
                   "build not up to date with its tree"),
                  ("measured_dirty", dirty_word(build_inputs(dirty)))]
    return [(prefix + k, v) for k, v in facts]


def time_iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def command_facts(command, typed=None):
    """The effective command, the command as typed, and the bench script
    that ran this one ($SQFS_BENCH_CALLER)."""
    facts = [("command", command)] if command else []
    if typed:
        facts.append(("command_typed", typed))
    if os.environ.get(CALLER_ENV):
        facts.append(("caller", os.environ[CALLER_ENV]))
    return facts


def run_facts(command, typed=None, builds=()):
    """host_facts + command_facts + build_facts for each (prefix, build
    dir, binaries) in builds."""
    facts = host_facts() + command_facts(command, typed)
    for prefix, build, bins in builds:
        facts += build_facts(build, bins, prefix)
    return facts


def warn_unknown(facts):
    """A line on stderr for each measured build whose commit is unknown."""
    d = dict(facts)
    for k, v in facts:
        if k.endswith("measured_commit") and v == "unknown":
            p = k[:-len("measured_commit")]
            sys.stderr.write(
                "benchlib: warning: %s is not up to date with its source "
                "tree (%s): the run cannot name the commit it measures; "
                "build it first\n" % (d.get(p + "measured_build", "?"),
                                       d.get(p + "measured_build_current")))


def format_facts(facts):
    """key<TAB>value lines; tabs and newlines in values become spaces."""
    return "".join("%s\t%s\n" % (k, " ".join(str(v).split("\t")).replace(
        "\n", " ")) for k, v in facts)


def write_meta(path, facts):
    with open(path, "w") as f:
        f.write(format_facts(facts))


def meta_end(path):
    """The last line of a run's meta.tsv: the load at its end."""
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    with open(path, "a") as f:
        f.write(format_facts([("loadavg_end", load)]))


def measured_summary(meta, prefix=""):
    """One line on the measured build, from a run's meta: its commit and
    how it is known. Runs before these keys existed recorded the build's
    source tree at run time (build_commit), or only the bench checkout
    (git_commit)."""
    g = lambda k: meta.get(prefix + k, "?")  # noqa: E731
    c = meta.get(prefix + "measured_commit")
    if c == "unknown":
        return ("unknown: %s is not up to date with its tree %s at %s (%s); "
                "%s" % (g("measured_build"), g("measured_source"),
                        g("measured_source_commit")[:12],
                        g("measured_build_current"), g("measured_version")))
    if c:
        dirty = g("measured_dirty")
        return "%s%s (%s; %s, %s)" % (
            c[:12], "" if dirty == "no" else " + uncommitted changes",
            g("measured_commit_from"), g("measured_build"),
            g("measured_version"))
    if meta.get("build_commit"):
        return ("%s (HEAD of the build's source tree %s at run time; not "
                "checked against the binary)" % (
                    meta["build_commit"][:12], meta.get("build_source", "?")))
    return "not recorded (bench checkout %s)" % meta.get(
        "git_commit", "?")[:12]


def bench_summary(meta):
    """The bench checkout's commit, new key or old."""
    c = meta.get("bench_commit") or meta.get("git_commit", "?")
    d = meta.get("bench_dirty")
    if d is None:
        n = meta.get("git_dirty_files", "0")
        d = "no" if n in ("0", "") else "yes: %s files" % n
    return c[:12] + ("" if d == "no" else " (dirty)")


# ------------------------------------------------------------ SquashFS

SB = struct.Struct("<IIIIIHHHHHHQQQQQQQQ")
MAGIC = 0x73717368
NO_FRAGMENT = 0xFFFFFFFF
BLOCK_UNCOMPRESSED = 1 << 24


class Image:
    """Just enough of SquashFS 4.0 to list files and their on-disk blocks.
    Independent of sqfs-lazy's own C reader on purpose: it is the oracle of
    the 'compressed bytes touched' figure."""

    def __init__(self, path):
        self.f = open(path, "rb")
        v = SB.unpack(self.f.read(SB.size))
        if v[0] != MAGIC:
            raise ValueError("%s: not a SquashFS image" % path)
        (_, self.inode_count, _, self.block_size, self.frag_count,
         self.comp, _, self.flags, self.id_count, _, _, self.root_ref,
         self.bytes_used, self.id_start, self.xattr_start,
         self.inode_start, self.dir_start, self.frag_start,
         self.export_start) = v
        self.inodes, self.inode_pos = self._table(self.inode_start,
                                                  self.dir_start)
        self.frags = self._fragments()
        self.dirs, self.dir_pos = self._table(self.dir_start,
                                              self._dir_end())

    def _read(self, off, n):
        self.f.seek(off)
        b = self.f.read(n)
        if len(b) != n:
            raise ValueError("short read at %d" % off)
        return b

    def decompress(self, data):
        if self.comp == 1:
            return zlib.decompress(data)
        if self.comp == 4:
            return lzma.decompress(data, format=lzma.FORMAT_XZ)
        if self.comp == 6:
            return subprocess.run(["zstd", "-dc", "-q"], input=data,
                                  stdout=subprocess.PIPE,
                                  check=True).stdout
        raise ValueError("compressor id %d not supported here" % self.comp)

    def _meta_block(self, off):
        """(decompressed bytes, on-disk length) of the metadata block at
        off."""
        (h,) = struct.unpack("<H", self._read(off, 2))
        size = h & 0x7FFF
        raw = self._read(off + 2, size)
        data = raw if h & 0x8000 else self.decompress(raw)
        return data, 2 + size

    def _table(self, start, end):
        """Decompress the metadata blocks in [start, end) into one buffer;
        pos maps a block's offset from start to its place in the buffer."""
        buf, pos, off = bytearray(), {}, start
        while off < end:
            pos[off - start] = len(buf)
            data, n = self._meta_block(off)
            buf += data
            off += n
        return bytes(buf), pos

    def _fragments(self):
        nblk = (self.frag_count + 511) // 512
        if not nblk:
            self.frag_index = []
            return []
        self.frag_index = struct.unpack(
            "<%dQ" % nblk, self._read(self.frag_start, 8 * nblk))
        out = []
        for p in self.frag_index:
            data, _ = self._meta_block(p)
            for i in range(0, len(data) - 15, 16):
                start, size, _ = struct.unpack_from("<QII", data, i)
                out.append((start, size & ~BLOCK_UNCOMPRESSED & 0xFFFFFFFF))
        return out[:self.frag_count]

    def _dir_end(self):
        # The directory table ends where the next table's first metadata
        # block begins: the fragment table's blocks, or the export/id/xattr
        # tables (whichever comes first after it).
        cands = [p for p in self.frag_index if p > self.dir_start]
        for s in (self.frag_start, self.export_start, self.id_start,
                  self.xattr_start):
            if self.dir_start < s < (1 << 63):
                cands.append(s)
        return min(cands) if cands else self.bytes_used

    def inode(self, ref):
        blk, off = ref >> 16, ref & 0xFFFF
        p = self.inode_pos[blk] + off
        t = struct.unpack_from("<H", self.inodes, p)[0]
        d = {"type": t}
        b = p + 16
        if t in (1, 8):  # directory, extended directory
            if t == 1:
                d["block"], _, d["size"], d["offset"], _ = struct.unpack_from(
                    "<IIHHI", self.inodes, b)
            else:
                _, d["size"], d["block"], _, _, d["offset"], _ = \
                    struct.unpack_from("<IIIIHHI", self.inodes, b)
        elif t in (2, 9):  # regular file, extended regular file
            if t == 2:
                start, frag, foff, size = struct.unpack_from(
                    "<IIII", self.inodes, b)
                b += 16
            else:
                start, size, _, _, frag, foff, _ = struct.unpack_from(
                    "<QQQIIII", self.inodes, b)
                b += 40
            n = size // self.block_size
            if frag == NO_FRAGMENT and size % self.block_size:
                n += 1
            sizes = struct.unpack_from("<%dI" % n, self.inodes, b)
            blocks, off = [], start
            for s in sizes:
                disk = s & ~BLOCK_UNCOMPRESSED & 0xFFFFFFFF
                if disk:  # 0 is a sparse block: nothing on disk
                    blocks.append((off, disk))
                off += disk
            d.update(size=size, blocks=blocks,
                     fragment=None if frag == NO_FRAGMENT else frag,
                     frag_offset=foff)
        return d

    def listdir(self, dino):
        """(name, inode ref, type) of a directory inode's entries."""
        p = self.dir_pos[dino["block"]] + dino["offset"]
        end = p + dino["size"] - 3
        out = []
        while p < end:
            count, start, _ = struct.unpack_from("<III", self.dirs, p)
            p += 12
            for _ in range(count + 1):
                off, _, typ, nlen = struct.unpack_from("<HhHH", self.dirs, p)
                name = self.dirs[p + 8:p + 9 + nlen].decode("utf-8",
                                                             "surrogateescape")
                p += 9 + nlen
                out.append((name, (start << 16) | off, typ))
        return out

    def walk(self, under="/"):
        """(path, file inode) of every regular file under `under`, in
        directory order (depth first)."""
        ino = self.inode(self.root_ref)
        path = ""
        for part in [x for x in under.split("/") if x]:
            hit = [e for e in self.listdir(ino) if e[0] == part]
            if not hit:
                raise KeyError(under)
            ino = self.inode(hit[0][1])
            path += "/" + part
        stack = [(path, ino)]
        while stack:
            path, dino = stack.pop()
            sub = []
            for name, ref, typ in self.listdir(dino):
                if typ in (1, 8):
                    sub.append((path + "/" + name, self.inode(ref)))
                elif typ in (2, 9):
                    yield path + "/" + name, self.inode(ref)
            stack.extend(reversed(sub))

    def touched(self, files):
        """Compressed bytes the given file inodes occupy: each distinct data
        block and each distinct fragment block counted once (a fragment
        block is fetched whole, whichever of its files is read)."""
        blocks, frags = set(), set()
        for ino in files:
            blocks.update(ino["blocks"])
            if ino["fragment"] is not None and ino["size"] % self.block_size:
                frags.add(ino["fragment"])
        data = sum(n for _, n in blocks)
        frag = sum(self.frags[i][1] for i in frags)
        return {"data_blocks": len(blocks), "data_bytes": data,
                "fragment_blocks": len(frags), "fragment_bytes": frag,
                "bytes": data + frag}


def file_set(img, under, set_bytes, every, max_file):
    """A deterministic set: every `every`-th regular file of `under` in walk
    order, skipping files over max_file bytes and empty ones, until
    set_bytes uncompressed bytes."""
    files, total, n = [], 0, 0
    for path, ino in img.walk(under):
        if ino["size"] == 0 or ino["size"] > max_file:
            continue
        n += 1
        if n % every:
            continue
        files.append((path, ino))
        total += ino["size"]
        if total >= set_bytes:
            break
    return files, total


def facts_main(argv):
    ap = argparse.ArgumentParser(prog="benchlib.py facts")
    ap.add_argument("--command", help="the effective command line")
    ap.add_argument("--typed", help="the command line as typed")
    ap.add_argument("--build", help="the measured meson build dir")
    ap.add_argument("--build-as", action="append", default=[],
                    metavar="NAME=DIR", help="another measured build; its "
                    "keys begin with NAME.")
    ap.add_argument("--bin", action="append", default=[],
                    help="a measured binary, relative to the build dir "
                    "(repeatable; default sqfs-lazy-mount)")
    a = ap.parse_args(argv)
    bins = a.bin or ["sqfs-lazy-mount"]
    builds = [("", a.build, bins)] if a.build else []
    for nd in a.build_as:
        name, _, d = nd.partition("=")
        builds.append((name + ".", d, bins))
    facts = run_facts(a.command, a.typed, builds)
    warn_unknown(facts)
    sys.stdout.write(format_facts(facts))
    return 0


def main(argv):
    if argv and argv[0] == "facts":
        return facts_main(argv[1:])
    if len(argv) >= 2 and argv[0] == "fio-summary":
        print(fio_summary(argv[1], argv[2] if len(argv) > 2 else None))
        return 0
    if len(argv) >= 2 and argv[0] == "blocks":
        opts = {"--set-bytes": 64 << 20, "--every": 3, "--max-file": 8 << 20,
                "--under": "/tree", "--list": None}
        i = 2
        while i < len(argv):
            k = argv[i]
            if k not in opts or i + 1 >= len(argv):
                sys.stderr.write("benchlib: bad option %s\n" % k)
                return 2
            opts[k] = argv[i + 1] if k in ("--under", "--list") else \
                int(argv[i + 1])
            i += 2
        img = Image(argv[1])
        files, total = file_set(img, opts["--under"], opts["--set-bytes"],
                                opts["--every"], opts["--max-file"])
        if opts["--list"]:
            with open(opts["--list"], "w") as f:
                for p, _ in files:
                    f.write(p.lstrip("/") + "\n")
        res = {"image": argv[1], "block_size": img.block_size,
               "compressor_id": img.comp, "set_files": len(files),
               "set_uncompressed_bytes": total,
               "set_touched": img.touched(ino for _, ino in files),
               "metadata_bytes": img.bytes_used - img.inode_start,
               "selection": {k[2:]: v for k, v in opts.items()
                             if k != "--list"}}
        print(json.dumps(res, indent=1, sort_keys=True))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
