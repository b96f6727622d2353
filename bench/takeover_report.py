#!/usr/bin/env python3
"""The tree, the load and the report of bench/takeover.sh (issue 33: how
long readers pause when a -o takeover mount's daemon is killed or
upgraded). Standard library only.

  takeover_report.py tree OUT
      write the source tree (deterministic: seeded, fixed times) into OUT,
      which must not exist: 320 files of 256 B-512 KiB and 24 of 1-8 MiB
      (log-uniform sizes, gendata.py's chunk mix), in 8 directories

  takeover_report.py drive --mnt MNT --tree TREE --row ROW --run RUN_DIR
                           --mode takeover|plain [options]
      READERS threads read the mount in a loop, each read timed and its
      bytes checked against TREE; with --mode takeover, --kills kill -9's
      of the serving daemon and --upgrades `BIN --takeover MNT` (two
      different binaries in turn) spread among them, each --settle
      seconds after the previous new daemon serves; then a baseline of
      the same readers, no takeover, for as long as the takeovers took.
      --mode plain: the readers alone for --seconds (a mount without -o
      takeover). Appends to RUN_DIR/takeovers.tsv, phases.tsv and
      checks.tsv; every read goes to RUN_DIR/raw/ROW.MODE.reads.tsv.

  takeover_report.py report RUN_DIR
      results.md, results.json and the tables on stdout

A read is open(), posix_fadvise(DONTNEED) of the whole file (so it
reaches the daemon, not the page cache), then either the whole file (the
small ones) or 1 MiB at a random offset (pread; the large ones, 30% of
the reads), close(). The pause of one takeover is the longest read in
flight across it: of the reads that started before the takeover ended
and ended after it began, the longest. A kill begins at the kill(2) and
ends when the stats xattr of the mount root (what --stats reads) names
another daemon (that getxattr blocks while no daemon serves); an upgrade
begins when `--takeover` starts and ends when it returns (it returns once
the new daemon serves).
"""

import argparse
import json
import math
import mmap
import os
import random
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

STATS_XATTR = "user.sqfs-lazy.stats"
RANGE = 1 << 20
BIG_SHARE = 0.3
# a takeover that names no new daemon in this long, or a read in flight
# this long, is a hang: the row stops there (takeover.sh then ends the
# connection, which fails the reads still waiting)
TAKEOVER_WAIT = 20.0
STALL = 10.0

TAKEOVERS_HEAD = ("row", "n", "kind", "at_s", "took_s", "pause_s",
                  "in_flight", "from_before", "daemon_paused_s", "old_pid",
                  "new_pid", "binary", "status")
PHASES_HEAD = ("row", "phase", "seconds", "reads", "bytes", "errors",
               "wrong_reads", "wrong_bytes", "p50_s", "p99_s", "max_s")
CHECKS_HEAD = ("row", "check", "ok", "detail")


# ------------------------------------------------------------ tree

def make_tree(out, seed=33):
    from gendata import ChunkGen, fix_times, log_uniform
    if os.path.exists(out):
        sys.exit("takeover_report: %s exists" % out)
    gen = ChunkGen(seed)
    rng = random.Random(seed)
    specs = [("s", log_uniform(rng, 256, 512 << 10)) for _ in range(320)]
    specs += [("b", log_uniform(rng, 1 << 20, 8 << 20)) for _ in range(24)]
    rng.shuffle(specs)
    total = 0
    for i, (kind, size) in enumerate(specs):
        d = os.path.join(out, "d%d" % (i % 8))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "%s%03d.bin" % (kind, i)), "wb") as f:
            gen.write(f, size)
        total += size
    fix_times(out)
    print("tree_files=%d" % len(specs))
    print("tree_bytes=%d" % total)
    print("tree_seed=%d" % seed)


# ------------------------------------------------------------ drive

def pct(vals, p):
    """Nearest-rank percentile (p99 of fewer than 100 values is the max)."""
    if not vals:
        return None
    v = sorted(vals)
    return v[max(0, math.ceil(p / 100.0 * len(v)) - 1)]


class Source:
    """The tree's files, mapped: the oracle of every read."""

    def __init__(self, tree):
        self.files = {}
        for d, _, names in os.walk(tree):
            for n in names:
                p = os.path.join(d, n)
                rel = os.path.relpath(p, tree)
                size = os.path.getsize(p)
                if size == 0:
                    self.files[rel] = b""
                    continue
                with open(p, "rb") as f:
                    self.files[rel] = mmap.mmap(f.fileno(), 0,
                                                prot=mmap.PROT_READ)
        self.small = sorted(r for r, m in self.files.items()
                            if len(m) < RANGE)
        self.big = sorted(r for r, m in self.files.items()
                          if len(m) >= RANGE)


def diff_bytes(a, b):
    n = min(len(a), len(b))
    return sum(1 for i in range(n) if a[i] != b[i]) + abs(len(a) - len(b))


class Readers:
    def __init__(self, mnt, src, n, seed):
        self.mnt, self.src = mnt, src
        self.stop = threading.Event()
        self.lock = threading.Lock()
        # (thread, start, end, kind, rel, offset, length, status, wrong)
        self.reads = []
        self.inflight = [None] * n   # (start, file, offset) of each thread
        self.tids = [None] * n
        self.threads = [threading.Thread(target=self.run, args=(seed + k, k),
                                         daemon=True) for k in range(n)]

    def one(self, rng, k):
        src = self.src
        if src.big and (rng.random() < BIG_SHARE or not src.small):
            rel = rng.choice(src.big)
            want = src.files[rel]
            off = rng.randrange(0, len(want) - RANGE + 1)
            kind = "range"
            length = RANGE
        else:
            rel = rng.choice(src.small)
            want = src.files[rel]
            off, kind, length = 0, "whole", len(want)
        t0 = time.monotonic()
        self.inflight[k] = (t0, rel, off)
        status, wrong, got = "ok", 0, b""
        try:
            fd = os.open(os.path.join(self.mnt, rel), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                if kind == "range":
                    got = os.pread(fd, length, off)
                else:
                    parts = []
                    while True:
                        b = os.read(fd, 1 << 20)
                        if not b:
                            break
                        parts.append(b)
                    got = b"".join(parts)
            finally:
                os.close(fd)
        except OSError as e:
            status = "error:%s" % (e.strerror or e.errno)
        t1 = time.monotonic()
        self.inflight[k] = None
        if status == "ok":
            exp = want[off:off + length]
            if got != exp:
                status, wrong = "wrong", diff_bytes(got, exp)
        return t0, t1, kind, rel, off, length, status, wrong, len(got)

    def run(self, seed, k):
        rng = random.Random(seed)
        self.tids[k] = threading.get_native_id()
        while not self.stop.is_set():
            t0, t1, kind, rel, off, length, status, wrong, n = \
                self.one(rng, k)
            with self.lock:
                self.reads.append((k, t0, t1, kind, rel, off, n, status,
                                   wrong))
            if status.startswith("error"):
                time.sleep(0.01)   # no spin on a dead mount

    def start(self):
        for t in self.threads:
            t.start()

    def stalled(self, limit=STALL):
        """(thread, seconds, file, offset) of the reads in flight longer
        than limit."""
        now = time.monotonic()
        return [(k, now - s[0], s[1], s[2])
                for k, s in enumerate(list(self.inflight))
                if s and now - s[0] > limit]

    def nap(self, seconds):
        """Sleep, watching for a stalled read; the stalled ones, if any."""
        end = time.monotonic() + seconds
        while True:
            st = self.stalled()
            left = end - time.monotonic()
            if st or left <= 0:
                return st
            time.sleep(min(0.25, left))

    def finish(self, limit=60.0):
        self.stop.set()
        deadline = time.monotonic() + limit
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return [t for t in self.threads if t.is_alive()]


def read_stats(mnt):
    raw = os.getxattr(mnt, STATS_XATTR)
    d = {}
    for line in raw.decode(errors="replace").splitlines():
        kv = line.split()
        if len(kv) == 2:
            d[kv[0]] = kv[1]
    return d


class Hang(Exception):
    pass


def stats_pid(binary, mnt):
    """daemon_pid from `sqfs-lazy-mount --stats MNT`."""
    try:
        out = subprocess.run([binary, "--stats", mnt], capture_output=True,
                             text=True, timeout=TAKEOVER_WAIT,
                             check=True).stdout
    except subprocess.TimeoutExpired:
        raise Hang("--stats did not return in %.0f s" % TAKEOVER_WAIT)
    for line in out.splitlines():
        kv = line.split()
        if len(kv) == 2 and kv[0] == "daemon_pid":
            return int(kv[1])
    raise RuntimeError("no daemon_pid in --stats")


def wait_other_pid(mnt, pid):
    """Block until the mount's stats name a daemon other than pid (the
    getxattr waits while nobody serves). In a thread of its own: a
    request that is never answered leaves that thread, not the run,
    waiting."""
    box = {}
    gone = threading.Event()

    def poll():
        while not gone.is_set():
            try:
                now = int(read_stats(mnt).get("daemon_pid", "0"))
                if now and now != pid:
                    box["pid"] = now
                    return
            except OSError as e:
                box["err"] = e
            time.sleep(0.002)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    th.join(TAKEOVER_WAIT)
    gone.set()
    if "pid" in box:
        return box["pid"]
    raise Hang("no new daemon named by the mount's stats after %.0f s "
               "(the getxattr %s)" % (
                   TAKEOVER_WAIT, "is still waiting" if th.is_alive()
                   else "failed: %s" % box.get("err")))


def pid_gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def schedule(kills, upgrades):
    """kills and upgrades, the upgrades spread evenly among the kills."""
    total = kills + upgrades
    ev = ["kill"] * total
    for u in range(upgrades):
        # upgrade u is about event (u + 1) * total / (upgrades + 1)
        pos = round((u + 1) * total / (upgrades + 1)) - 1
        pos = min(max(pos, 0), total - 1)
        while ev[pos] == "upgrade":
            pos = (pos + 1) % total
        ev[pos] = "upgrade"
    return ev


def daemon_paused(log_path):
    """{takeover number: 'readers paused' seconds} from the daemon log."""
    out = {}
    try:
        with open(log_path, errors="replace") as f:
            for line in f:
                if "takeover: process" not in line or "paused" not in line:
                    continue
                try:
                    n = int(line.split("(takeover ", 1)[1].split(";")[0])
                    s = float(line.split("readers paused ", 1)[1].split()[0])
                except (IndexError, ValueError):
                    continue
                out[n] = s
    except OSError:
        pass
    return out


def append_tsv(path, head, rows):
    new = not os.path.exists(path)
    with open(path, "a") as f:
        if new:
            f.write("\t".join(head) + "\n")
        for r in rows:
            f.write("\t".join("-" if v is None else
                              ("%.4f" % v if isinstance(v, float) else str(v))
                              for v in r) + "\n")


def phase_row(row, name, reads, t0, t1):
    got = [r for r in reads if t0 <= r[1] < t1]
    durs = [r[2] - r[1] for r in got]
    return (row, name, t1 - t0, len(got), sum(r[6] for r in got),
            sum(1 for r in got if r[7].startswith("error")),
            sum(1 for r in got if r[7] == "wrong"),
            sum(r[8] for r in got), pct(durs, 50), pct(durs, 99),
            max(durs) if durs else None)


def proc_state(pid, tid):
    """wchan and (for read/pread/getxattr) the file and offset of a
    thread, as one string."""
    base = "/proc/%d/task/%d/" % (pid, tid)
    try:
        with open(base + "wchan") as f:
            wchan = f.read().strip()
        with open(base + "syscall") as f:
            sc = f.read().split()
    except OSError:
        return "?"
    out = "wchan %s" % wchan
    if sc and sc[0] in ("0", "17"):   # read, pread64
        try:
            out += ", in %s of %s" % ("pread" if sc[0] == "17" else "read",
                                      os.readlink("/proc/%d/fd/%d" % (
                                          pid, int(sc[1], 16))))
        except (OSError, ValueError, IndexError):
            pass
    elif sc and sc[0] == "191":
        out += ", in getxattr"
    return out


def hang_report(path, a, readers, why):
    """What was waiting when the row stopped: our threads and the
    daemons of the mount (every process with the mount point in its
    argv, and their children)."""
    me = os.getpid()
    lines = ["hang: %s" % why, "", "readers (thread, seconds in the read, "
             "file, offset, kernel state):"]
    for k, secs, rel, off in readers.stalled(0.5):
        lines.append("  %d %.1f s %s @%d: %s" % (
            k, secs, rel, off, proc_state(me, readers.tids[k] or 0)))
    lines += ["", "threads of this process:"]
    for t in sorted(os.listdir("/proc/%d/task" % me), key=int):
        lines.append("  %s %s" % (t, proc_state(me, int(t))))
    lines += ["", "processes of the mount:"]
    for p in sorted((d for d in os.listdir("/proc") if d.isdigit()), key=int):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/stat" % p) as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(p) == me or (a.mnt.encode() not in argv and
                            b"sqfs-lazy-guard" not in argv[0]):
            continue
        lines.append("  %s (ppid %s, state %s) %s" % (
            p, st[1], st[0], b" ".join(argv).decode(errors="replace")[:160]))
        for t in sorted(os.listdir("/proc/%s/task" % p), key=int):
            try:
                with open("/proc/%s/task/%s/comm" % (p, t)) as f:
                    comm = f.read().strip()
            except OSError:
                comm = "?"
            lines.append("    %s %s %s" % (t, comm, proc_state(int(p),
                                                              int(t))))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def drive(a):
    src = Source(a.tree)
    readers = Readers(a.mnt, src, a.readers, 1000)
    checks, events = [], []

    def check(name, ok, detail=""):
        checks.append((a.row, name, "yes" if ok else "NO", detail))

    def stall_text(st):
        return "a read in flight for %.0f s (%s @%d, and %d more)" % (
            st[0][1], st[0][2], st[0][3], len(st) - 1)

    killed = []
    failed = hang = None
    readers.start()
    t_start = time.monotonic()
    st = readers.nap(a.warmup)
    if st:
        hang = "before any takeover: " + stall_text(st)
    t_ev0 = time.monotonic()
    t_ev1 = t_end = t_ev0
    if a.mode == "takeover" and not hang:
        bins = [os.path.realpath(a.next_bin), os.path.realpath(a.bin)]
        names = {bins[0]: "copy", bins[1]: "build"}
        nup = 0
        for n, kind in enumerate(schedule(a.kills, a.upgrades), 1):
            binary, old, t0 = "-", None, None
            t_try = time.monotonic()
            try:
                old = stats_pid(a.bin, a.mnt)
                if kind == "kill":
                    t0 = time.monotonic()
                    os.kill(old, signal.SIGKILL)
                    new = wait_other_pid(a.mnt, old)
                    t1 = time.monotonic()
                else:
                    binary = bins[nup % 2]
                    nup += 1
                    t0 = time.monotonic()
                    try:
                        r = subprocess.run([binary, "--takeover", a.mnt],
                                           capture_output=True, text=True,
                                           timeout=TAKEOVER_WAIT)
                    except subprocess.TimeoutExpired:
                        raise Hang("`--takeover` did not return in %.0f s" %
                                   TAKEOVER_WAIT)
                    t1 = time.monotonic()
                    if r.returncode != 0:
                        raise RuntimeError("--takeover: status %d: %s" % (
                            r.returncode, (r.stderr or r.stdout).strip()))
                    new = int(read_stats(a.mnt).get("daemon_pid", "0"))
                    want = "%s: process %d serves it now (was %d)" % (
                        a.mnt, new, old)
                    if r.stdout.strip() != want:
                        check("upgrade %d output" % n, False,
                              r.stdout.strip())
                    exe = os.readlink("/proc/%d/exe" % new)
                    if exe != binary:
                        check("upgrade %d runs the binary that asked" % n,
                              False, "%s, not %s" % (exe, binary))
            except Hang as e:
                hang = "takeover %d (%s%s): %s" % (
                    n, kind, "" if old is None else " of %d" % old, e)
                events.append([n, kind, t_try if t0 is None else t0, None,
                               old, None, names.get(binary, "-"), "hung"])
                break
            except (OSError, RuntimeError, subprocess.SubprocessError,
                    ValueError) as e:
                failed = "takeover %d (%s): %s" % (n, kind, e)
                break
            killed.append(old)
            events.append([n, kind, t0, t1, old, new,
                           names.get(binary, "-"), "ok"])
            print("[%s] %s %d/%d: %d -> %d in %.3f s" % (
                time.strftime("%H:%M:%S"), kind, n, a.kills + a.upgrades,
                old, new, t1 - t0), file=sys.stderr, flush=True)
            st = readers.nap(a.settle)
            if st:
                hang = "after takeover %d: %s" % (n, stall_text(st))
                events[-1][7] = "hung"
                break
        t_ev1 = t_end = time.monotonic()
        check("every takeover done", not failed and not hang,
              failed or hang or "%d kills, %d upgrades" % (a.kills,
                                                           a.upgrades))
        if not failed and not hang:
            # the baseline: the same readers, no takeover, as long
            st = readers.nap(t_ev1 - t_ev0)
            t_end = time.monotonic()
            if st:
                hang = "in the baseline: " + stall_text(st)
    elif not hang:
        st = readers.nap(a.seconds)
        t_ev1 = t_end = time.monotonic()
        if st:
            hang = stall_text(st)
    check("no hang", not hang, hang or "")
    if hang:
        print("[%s] HANG %s" % (time.strftime("%H:%M:%S"), hang),
              file=sys.stderr, flush=True)
        hang_report(os.path.join(a.run, "raw", "%s.%s.hang.txt" % (
            a.row, a.mode)), a, readers, hang)
    hung = readers.finish(5.0 if hang else 60.0)
    check("no reader hung", not hung, "%d of %d threads still in a read" % (
        len(hung), a.readers) if hung else "")
    with readers.lock:
        reads = sorted(readers.reads, key=lambda r: r[1])

    # the pause of each takeover: the longest read in flight across it;
    # from_before: of those, the reads that began before the previous
    # takeover ended (a read that waited through a whole settling time)
    paused = daemon_paused(a.daemon_log) if a.daemon_log else {}
    trows = []
    prev_end = None
    for n, kind, t0, t1, old, new, binary, status in events:
        end = t1 if t1 is not None else t_end
        over = [r for r in reads if r[1] < end and r[2] > t0]
        # reads still in flight (a hang) count from their start to now
        durs = [r[2] - r[1] for r in over]
        if status == "hung":
            durs += [t_end - s[0] for s in readers.inflight if s]
        before = sum(1 for r in over
                     if prev_end is not None and r[1] < prev_end)
        trows.append((a.row, n, kind, t0 - t_ev0,
                      None if t1 is None else t1 - t0,
                      max(durs) if durs else None, len(over), before,
                      paused.get(n), old, new, binary, status))
        prev_end = end
    append_tsv(os.path.join(a.run, "takeovers.tsv"), TAKEOVERS_HEAD, trows)

    prow = [phase_row(a.row, "warmup", reads, t_start, t_ev0)]
    if a.mode == "takeover":
        prow.append(phase_row(a.row, "takeovers", reads, t_ev0, t_ev1))
        if t_end > t_ev1:
            prow.append(phase_row(a.row, "baseline", reads, t_ev1, t_end))
    else:
        prow.append(phase_row(a.row, "plain", reads, t_ev0, t_end))
    append_tsv(os.path.join(a.run, "phases.tsv"), PHASES_HEAD, prow)

    errs = [r for r in reads if r[7] != "ok"]
    check("no read error", not any(r[7].startswith("error") for r in errs),
          "; ".join(sorted({"%s %s" % (r[4], r[7]) for r in errs
                            if r[7].startswith("error")}))[:300])
    check("every byte the source's", not any(r[7] == "wrong" for r in errs),
          "%d reads, %d bytes differ" % (
              sum(1 for r in errs if r[7] == "wrong"),
              sum(r[8] for r in errs)))
    if a.mode == "takeover" and not hang:
        try:
            st = read_stats(a.mnt)
            k = sum(1 for e in events if e[1] == "kill")
            u = len(events) - k
            ok = (st.get("takeovers") == str(k + u) and
                  st.get("takeovers_crash") == str(k) and
                  st.get("takeovers_upgrade") == str(u))
            check("--stats counts them", ok, "takeovers %s, crash %s, "
                  "upgrade %s" % (st.get("takeovers"),
                                  st.get("takeovers_crash"),
                                  st.get("takeovers_upgrade")))
        except OSError as e:
            check("--stats counts them", False, str(e))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and \
                not all(pid_gone(p) for p in killed):
            time.sleep(0.05)
        left = [p for p in killed if not pid_gone(p)]
        check("every replaced daemon gone", not left,
              " ".join(map(str, left)))
        check("the daemon log has a line per takeover",
              len(paused) >= len(events),
              "%d lines, %d takeovers" % (len(paused), len(events)))

    with open(os.path.join(a.run, "raw", "%s.%s.reads.tsv" % (
            a.row, a.mode)), "w") as f:
        f.write("thread\tstart_s\tend_s\tseconds\tkind\tfile\toffset\t"
                "bytes\tstatus\twrong_bytes\n")
        for r in reads:
            f.write("%d\t%.6f\t%.6f\t%.6f\t%s\t%s\t%d\t%d\t%s\t%d\n" % (
                r[0], r[1] - t_start, r[2] - t_start, r[2] - r[1], r[3],
                r[4], r[5], r[6], r[7], r[8]))
    append_tsv(os.path.join(a.run, "checks.tsv"), CHECKS_HEAD, checks)
    rc = 3 if hang else 1 if failed else 0
    # takeover.sh waits for this file, not for the exit: a process whose
    # threads wait on a request nobody answers does not end until the
    # connection does
    with open(os.path.join(a.run, "raw", "%s.%s.done" % (a.row, a.mode)),
              "w") as f:
        f.write("%d\n" % rc)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


# ------------------------------------------------------------ report

def read_tsv(path):
    from benchlib import read_tsv as rt
    return rt(path) if os.path.exists(path) else []


def ms(v):
    return "-" if v is None else "%.0f ms" % (v * 1000) if v >= 0.0995 \
        else "%.1f ms" % (v * 1000)


def fnum(v):
    return None if v in (None, "", "-") else float(v)


def row_rtt(row):
    return 0.0 if row == "local" else float(row.split("-")[1][:-2]) / 1000


def row_label(row):
    return "local image" if row == "local" else "HTTP, %s round trip" % (
        row.split("-")[1].replace("ms", " ms"))


def report(run):
    from benchlib import (bench_summary, machine_line, measured_summary,
                          read_meta, render, render_md)
    meta = read_meta(run)[0]
    tk = read_tsv(os.path.join(run, "takeovers.tsv"))
    ph = read_tsv(os.path.join(run, "phases.tsv"))
    ck = read_tsv(os.path.join(run, "checks.tsv"))
    rows = []
    for r in tk + ph + ck:
        if r["row"] not in rows:
            rows.append(r["row"])

    res, targets = {}, []
    pause_t = [["row", "takeovers", "pause p50", "p99", "max",
                "daemon's own p50 / max", "to serve p50 / max",
                "reads in flight"]]
    for row in rows:
        mine = [r for r in tk if r["row"] == row]
        res[row] = {}
        shown = False
        for kind, label in (("kill", "kill -9"), ("upgrade", "upgrade"),
                            (None, "all")):
            sel = [r for r in mine if kind is None or r["kind"] == kind]
            if not sel:
                continue
            p = [fnum(r["pause_s"]) for r in sel
                 if fnum(r["pause_s"]) is not None]
            own = [fnum(r["daemon_paused_s"]) for r in sel
                   if fnum(r["daemon_paused_s"]) is not None]
            took = [fnum(r["took_s"]) for r in sel
                    if fnum(r["took_s"]) is not None]
            inf = [int(r["in_flight"]) for r in sel]
            c = {"n": len(sel), "p50": pct(p, 50), "p99": pct(p, 99),
                 "max": max(p) if p else None,
                 "own_p50": pct(own, 50), "own_max": max(own) if own
                 else None, "took_p50": pct(took, 50),
                 "took_max": max(took) if took else None,
                 "in_flight_min": min(inf), "in_flight_max": max(inf),
                 "from_before": sum(int(r["from_before"]) for r in sel),
                 "hung": [int(r["n"]) for r in sel
                          if r["status"] == "hung"]}
            res[row][kind or "all"] = c
            if kind is None and len({r["kind"] for r in mine}) < 2:
                continue
            pause_t.append([
                "" if shown else row_label(row),
                "%s x%d" % (label, c["n"]), ms(c["p50"]), ms(c["p99"]),
                ("HANG at takeover %s (>= %s)" % (
                    ",".join(map(str, c["hung"])), ms(c["max"]))
                 if c["hung"] else ms(c["max"])),
                "%s / %s" % (ms(c["own_p50"]), ms(c["own_max"])),
                "%s / %s" % (ms(c["took_p50"]), ms(c["took_max"])),
                "%d-%d%s" % (c["in_flight_min"], c["in_flight_max"],
                             ", %d from before the previous takeover" %
                             c["from_before"] if c["from_before"] else "")])
            shown = True
        rtt = row_rtt(row)
        limit = 1.0 + 2 * rtt
        what = "%s: longest read across a takeover <= %s" % (
            row_label(row), "1 s" if row == "local"
            else "1 s + 2 x %.0f ms" % (rtt * 1000))
        hangs = [c["detail"] for c in ck if c["row"] == row and
                 c["check"] == "no hang" and c["ok"] != "yes"]
        if mine:
            c = res[row]["all"]
            mx = c["max"]
            ok = mx is not None and mx <= limit and not hangs
            targets.append((
                "PASS" if ok else "MISS", what,
                "max %s over %d takeovers, limit %s%s" % (
                    ms(mx), c["n"], ms(limit),
                    "; HANG: %s" % "; ".join(hangs) if hangs else "")))
        else:
            targets.append(("MISS", what, "no takeover measured (checks)"))
    reads_t = [["row", "phase", "seconds", "reads", "MB/s", "p50", "p99",
                "max", "errors", "wrong reads (bytes)"]]
    labels = {"takeovers": "during the takeovers",
              "baseline": "baseline: no takeover, same mount, as long",
              "plain": "plain mount (takeover=off)",
              "warmup": "warm-up"}
    for row in rows:
        first = True
        for r in ph:
            if r["row"] != row or r["phase"] == "warmup":
                continue
            secs = float(r["seconds"])
            reads_t.append([
                row_label(row) if first else "", labels.get(r["phase"],
                                                            r["phase"]),
                "%.0f" % secs, r["reads"],
                "%.0f" % (float(r["bytes"]) / 1e6 / secs) if secs else "-",
                ms(fnum(r["p50_s"])), ms(fnum(r["p99_s"])),
                ms(fnum(r["max_s"])), r["errors"],
                "%s (%s)" % (r["wrong_reads"], r["wrong_bytes"])])
            res[row].setdefault("phases", {})[r["phase"]] = {
                k: r[k] for k in PHASES_HEAD[2:]}
            first = False
    for row in rows:
        errs = sum(int(r["errors"]) for r in ph if r["row"] == row)
        wrong = sum(int(r["wrong_bytes"]) for r in ph if r["row"] == row)
        wr = sum(int(r["wrong_reads"]) for r in ph if r["row"] == row)
        n = sum(int(r["reads"]) for r in ph if r["row"] == row)
        targets.append(("PASS" if errs == 0 and wr == 0 else "MISS",
                        "%s: no read error, every byte the source's" %
                        row_label(row),
                        "%d reads, %d errors, %d wrong reads (%d bytes)" % (
                            n, errs, wr, wrong)))
        pp = res[row].get("phases", {})
        if "baseline" in pp and "plain" in pp:
            b, p = fnum(pp["baseline"]["p99_s"]), fnum(pp["plain"]["p99_s"])
            targets.append(("n/a", "%s: read p99, -o takeover mount after "
                            "its takeovers vs plain mount (report only)" %
                            row_label(row),
                            "%s vs %s" % (ms(b), ms(p))))
    bad = [c for c in ck if c["ok"] != "yes"]
    tl = "\n".join("%-4s %s: %s" % t for t in targets)
    top = ("takeover.sh run %s: %s readers; kills %s, upgrades %s, %s s "
           "settling after each; load %s -> %s\n%s\nmeasured build: %s\n"
           "bench checkout: %s\nimage: %s\ncommand: %s" % (
               os.path.basename(run), meta.get("readers", "?"),
               meta.get("kills", "?"), meta.get("upgrades", "?"),
               meta.get("settle", "?"), meta.get("loadavg_start", "?"),
               meta.get("loadavg_end", "?"), machine_line(meta),
               measured_summary(meta), bench_summary(meta),
               meta.get("image_desc", "?"), meta.get("command", "?")))
    expl = ("pause: the longest read in flight across a takeover (it "
            "started before the new daemon served and ended after the "
            "kill or the `--takeover` began); p99 is nearest-rank (of "
            "fewer than 100 takeovers, the max). daemon's own: its log's "
            "`readers paused` (from the guard noticing the death to the "
            "new daemon serving). to serve: kill -> stats name the new "
            "daemon; upgrade: the `--takeover` command's run.")
    out = [top, "", expl, ""] + render(pause_t) + [""] + render(reads_t) + \
        ["", tl]
    if bad:
        out += ["", "checks failed:"] + ["  %s: %s: %s" % (
            c["row"], c["check"], c["detail"]) for c in bad]
    print("\n".join(out))
    md = ["# takeover.sh %s" % os.path.basename(run), "",
          top.replace("\n", "\n\n"), "", "## Pause per takeover", "",
          expl, ""] + render_md(pause_t) + [
        "", "## Reads", ""] + render_md(reads_t) + [
        "", "## Targets", "", "```", tl, "```", "", "## Checks", ""] + \
        render_md([["row", "check", "ok", "detail"]] +
                  [[c["row"], c["check"], c["ok"], c["detail"]]
                   for c in ck]) + [""]
    with open(os.path.join(run, "results.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(run, "results.json"), "w") as f:
        json.dump({"format": "sqfs-lazy-takeover/1", "meta": meta,
                   "results": res, "targets": targets, "checks": ck},
                  f, indent=1)
    return 0


def main(argv):
    if len(argv) == 2 and argv[0] == "tree":
        make_tree(argv[1])
        return 0
    if len(argv) == 2 and argv[0] == "report":
        return report(argv[1])
    if argv and argv[0] == "drive":
        ap = argparse.ArgumentParser(prog="takeover_report.py drive")
        ap.add_argument("--mnt", required=True)
        ap.add_argument("--tree", required=True)
        ap.add_argument("--row", required=True)
        ap.add_argument("--run", required=True)
        ap.add_argument("--mode", choices=("takeover", "plain"),
                        required=True)
        ap.add_argument("--bin", help="sqfs-lazy-mount of the build")
        ap.add_argument("--next-bin", help="its copy, for the upgrades")
        ap.add_argument("--kills", type=int, default=20)
        ap.add_argument("--upgrades", type=int, default=5)
        ap.add_argument("--settle", type=float, default=2.3)
        ap.add_argument("--warmup", type=float, default=2.0)
        ap.add_argument("--seconds", type=float, default=30.0)
        ap.add_argument("--readers", type=int, default=8)
        ap.add_argument("--daemon-log")
        a = ap.parse_args(argv[1:])
        if a.mode == "takeover" and not (a.bin and a.next_bin):
            ap.error("--mode takeover needs --bin and --next-bin")
        return drive(a)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
