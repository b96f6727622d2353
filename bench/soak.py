#!/usr/bin/env python3
"""Soak test: many readers for a long time over HTTP through injected
faults, every byte checked against the kernel's loop mount.

  soak.py --seconds N [--readers R] [--image PATH] [--out DIR] [--build B]

- The image (default: a generated ~48 MB tree packed with mksquashfs, zstd,
  128 KiB blocks) is loop-mounted by the kernel: the oracle.
- tests/http/fault_server.py serves it on 127.0.0.1 with a "mix" fault
  per request: latency 0..30 ms always, and 5xx, connection resets, short
  bodies, slow bodies and rare stalls longer than the configured timeout.
- sqfs-lazy-mount -f mounts the URL with small caches and short timeouts.
- Faults come in windows: --fault-off seconds clean, then --fault-on
  seconds of "mix", and so on (the run starts clean). The server records
  each window on its monotonic clock (the readers' clock too).
- R reader processes (default 4 per CPU) pread random ranges (half with
  O_DIRECT, so reads reach the daemon) and compare with the kernel; each
  read's start, end and outcome are kept. EIO is allowed only for a read
  that overlaps a fault-on window widened by GRACE seconds after its end;
  different bytes never are.
- Every second the daemon's VmRSS/VmHWM is sampled.

Prints a report (also written to DIR/report.json, beside DIR/meta.tsv:
the command with every option's value, the build's commit) and exits 1
if a read
returned wrong bytes or an error other than EIO, an EIO fell outside the
fault windows, fewer than CLEAN_OK of the reads in fault-off time succeeded
(or there were none), RSS grew after warm-up by more than the margin, the
daemon died, or a read took longer than the bound derived from the
configured timeouts.
"""

import argparse
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from fault_server import FaultServer  # noqa: E402
import util  # noqa: E402
import benchlib  # noqa: E402

# Daemon configuration under test (reported with the results).
TIMEOUT = 4           # seconds per HTTP request
CONNECT_TIMEOUT = 2
RETRIES = 2
# block_cache (compressed ranges, 256M by default for URLs) small too, or
# the whole image sits in RAM after the first minute and no request, so no
# fault, reaches the server again.
CACHES = {"data_cache": 8 << 20, "metadata_cache": 2 << 20,
          "block_cache": 4 << 20, "fragment_cache": 8,
          "readahead": 512 << 10}
FAULTS = {"status": 0.03, "reset": 0.02, "short": 0.02, "slow": 0.04,
          "delay": 0.004}
STALL = TIMEOUT + 2   # the "delay" fault: longer than a request may take


def request_bound():
    """Worst case of one source read: every try times out, plus the
    backoffs between them (docs/http-source.md: 0.2 s x 2^attempt, at most
    8 s)."""
    return (RETRIES + 1) * TIMEOUT + sum(min(8.0, 0.2 * 2 ** a)
                                         for a in range(RETRIES))


def grace():
    """How long after a fault-on window ends an EIO may still surface. The
    server draws the fault when a request arrives, so the attempt that
    failed last arrived inside the window; it fails within TIMEOUT (the
    whole-request limit), and any retry after it lands in clean time and
    succeeds. request_bound() (all tries and backoffs) covers that with
    room for a loaded machine."""
    return request_bound()


# At least this share of the reads that lie wholly in fault-off time must
# succeed (a correct daemon: all of them; 0.9 leaves room for nothing but
# still fails a daemon that answers EIO to everything).
CLEAN_OK = 0.9
# RSS after warm-up (see main) may grow from the first quarter
# of the remaining samples to the last by max(8 MiB, 10 %): the caches are
# bounded (10 MiB) and filled in warm-up; what moves after that is HTTP
# buffers (readahead 512 KiB per in-flight fetch, a few at a time) and
# malloc arena slack, a few MiB; a leak of a few KiB per read over
# minutes of thousands of reads per minute exceeds it.
RSS_MARGIN_KIB = 8 << 10
RSS_MARGIN_FRAC = 0.10


def check_windows(spans, windows):
    """spans: (t0, t1, outcome) per read, outcome "ok", "eio" or "bad".
    windows: [kind, start, end] of fault-on time. Returns the EIOs outside
    the widened windows and the reads wholly in fault-off time."""
    g = grace()
    bad_eio = [s for s in spans if s[2] == "eio" and
               not any(s[0] <= e + g and s[1] >= b for _, b, e in windows)]
    clean = [s for s in spans if not any(s[0] <= e and s[1] >= b
                                         for _, b, e in windows)]
    return bad_eio, clean


def rss_growth(samples, warmup):
    """samples: (t, VmRSS KiB) from the start of the run. Max RSS of the
    last quarter after warm-up minus that of the first quarter."""
    if not samples:
        return None, None
    t0 = samples[0][0]
    after = [r for t, r in samples if t - t0 >= warmup]
    q = max(1, len(after) // 4)
    if len(after) < 4:
        return None, None
    first, last = max(after[:q]), max(after[-q:])
    return last - first, max(RSS_MARGIN_KIB, int(RSS_MARGIN_FRAC * first))


def read_bound():
    """A FUSE read can need a metadata block, a data block and a fragment
    one after the other, each a source read that may hit the worst case;
    the daemon's own queueing adds little next to that."""
    return 3 * request_bound() + 2.0


def make_tree(root, total=48 << 20):
    r = random.Random(2026)
    os.makedirs(root)
    n = 0
    size_left = total
    while size_left > 0:
        d = os.path.join(root, "d%02d" % (n % 12))
        os.makedirs(d, exist_ok=True)
        size = min(size_left, r.choice((100, 3000, 70000, 300000,
                                         1 << 20, 3 << 20)))
        if n % 3 == 0:
            data = r.randbytes(size)
        else:
            line = b"soak file %d: some compressible text\n" % n
            data = (line * (size // len(line) + 1))[:size]
        with open(os.path.join(d, "f%04d" % n), "wb") as f:
            f.write(data)
        size_left -= size
        n += 1


def reader(idx, kroot, froot, names, deadline, q):
    """One reader process: random preads, compared with the kernel."""
    r = random.Random(idx)
    st = {"reads": 0, "bytes": 0, "eio": 0, "wrong": 0, "other": 0,
          "max_s": 0.0, "max_what": "", "examples": [], "spans": []}
    direct = idx % 2 == 1
    sizes = {n: os.path.getsize(os.path.join(kroot, n)) for n in names}
    while time.monotonic() < deadline:
        name = r.choice(names)
        size = sizes[name]
        k = r.randrange(3)
        if k == 0:
            off, ln = r.randrange(size + 1), r.choice((1, 4096, 65536))
        elif k == 1:
            off, ln = (r.randrange(size // 131072 + 1) * 131072
                       - r.randrange(2)), 131072 + 7
        else:
            off, ln = 0, min(size, 1 << 20)
        off = max(0, off)
        with open(os.path.join(kroot, name), "rb") as f:
            f.seek(off)
            want = f.read(ln)
        fd = os.open(os.path.join(froot, name),
                     os.O_RDONLY | (os.O_DIRECT if direct else 0))
        t0 = time.monotonic()
        try:
            got = os.pread(fd, ln, off)
            err = None
        except OSError as e:
            got, err = None, e
        finally:
            dt = time.monotonic() - t0
            os.close(fd)
        what = "%s pread(%d, %d)" % (name, off, ln)
        if dt > st["max_s"]:
            st["max_s"], st["max_what"] = dt, what
        st["reads"] += 1
        outcome = "bad"
        if err is not None:
            if err.errno == 5:
                st["eio"] += 1
                outcome = "eio"
            else:
                st["other"] += 1
                st["examples"].append("%s: %s" % (what, err))
        elif got != want:
            st["wrong"] += 1
            st["examples"].append("%s: wrong bytes" % what)
        else:
            st["bytes"] += len(got)
            outcome = "ok"
        st["spans"].append((t0, t0 + dt, outcome))
        # the kernel page cache would serve buffered re-reads: drop it
        if not direct and st["reads"] % 16 == 0:
            fd = os.open(os.path.join(froot, name), os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
    st["examples"] = st["examples"][:10]
    q.put(st)


def proc_status(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def crash_report(lines):
    """The head of a sanitizer's report (what and where: its first stack),
    which the log's tail, the shadow legend, does not show."""
    for i, line in enumerate(lines):
        if "Sanitizer" in line and ("ERROR" in line or
                                    "runtime error" in line):
            return lines[i:i + 40]
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--readers", type=int,
                    default=4 * (os.cpu_count() or 1))
    ap.add_argument("--image")
    ap.add_argument("--out")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--tree-mb", type=int, default=48)
    ap.add_argument("--fault-off", type=float, default=40,
                    help="seconds of clean time per cycle (first)")
    # a short run reports RSS without judging it: request threads start
    # on demand and each keeps up to 2 MiB of buffers, so a minute is not
    # enough to reach the plateau (28 MiB of growth in a 53 s smoke)
    ap.add_argument("--no-rss-check", action="store_true")
    ap.add_argument("--fault-on", type=float, default=20,
                    help="seconds of mix faults per cycle")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.out:
        # the run's facts: the command with every option's value, the
        # commit of the build it measures
        args.out = os.path.abspath(args.out)
        os.makedirs(args.out, exist_ok=True)
        facts = benchlib.run_facts(
            benchlib.argparse_command("bench/soak.py", ap, args),
            benchlib.shell_join(sys.argv),
            [("", args.build, ["sqfs-lazy-mount"])])
        benchlib.warn_unknown(facts)
        benchlib.write_meta(os.path.join(args.out, "meta.tsv"), facts + [
            ("daemon_options", ",".join(
                ["timeout=%d" % TIMEOUT, "connect_timeout=%d" %
                 CONNECT_TIMEOUT, "retries=%d" % RETRIES] +
                ["%s=%d" % kv for kv in CACHES.items()]))])

    daemon = os.path.join(args.build, "sqfs-lazy-mount")
    work = tempfile.mkdtemp(prefix="lsq-soak-")
    image = args.image
    if not image:
        make_tree(os.path.join(work, "src"), args.tree_mb << 20)
        image = os.path.join(work, "soak.sqfs")
        util.run(["mksquashfs", os.path.join(work, "src"), image,
                  "-noappend", "-quiet", "-no-progress", "-comp", "zstd",
                  "-processors", "2"], timeout=600)
    kroot = os.path.join(work, "kernel")
    froot = os.path.join(work, "fuse")
    k = util.KernelMount(image, kroot)
    k.start()
    names = []
    for dp, _, fs in os.walk(kroot):
        names += [os.path.relpath(os.path.join(dp, n), kroot) for n in fs]
    names.sort()

    with open(image, "rb") as f:
        data = f.read()
    srv = FaultServer().start()
    srv.add("/soak.sqfs", data)
    opts = ["timeout=%d" % TIMEOUT, "connect_timeout=%d" % CONNECT_TIMEOUT,
            "retries=%d" % RETRIES] + ["%s=%d" % kv for kv in CACHES.items()]
    os.makedirs(froot)
    log = os.path.join(work, "daemon.log")
    cmd = [daemon, "-f"] + [a for o in opts for a in ("-o", o)] + \
        [srv.url("/soak.sqfs"), froot]
    with open(log, "wb") as lf:
        p = subprocess.Popen(cmd, stdout=lf, stderr=lf,
                             stdin=subprocess.DEVNULL)
    ok = util.wait_until(lambda: util.is_mounted(froot) or
                         p.poll() is not None, 60)
    if not ok or not util.is_mounted(froot):
        print("mount failed:", open(log).read(), file=sys.stderr)
        srv.stop()
        k.stop()
        return 1
    def faults_on():
        srv.set_fault("mix", seed=7, latency=0.03, p=FAULTS,
                      seconds=STALL, chunk=16384, pause=0.02)

    t_start = time.monotonic()
    deadline = t_start + args.seconds
    q = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=reader,
                                     args=(i, kroot, froot, names, deadline,
                                           q))
             for i in range(args.readers)]
    for pr in procs:
        pr.start()
    peak_rss = 0
    samples = []
    results = []    # drained while waiting: a child with a big result
    #                 queued does not exit before it is read
    cycle = args.fault_off + args.fault_on
    while any(pr.is_alive() for pr in procs):
        now = time.monotonic()
        on = (now - t_start) % cycle >= args.fault_off and now < deadline
        if on and srv.fault is None:
            faults_on()
        elif not on and srv.fault is not None:
            srv.clear_fault()
        s = proc_status(p.pid)
        if s:
            peak_rss = max(peak_rss, s.get("VmRSS", 0))
            samples.append((now, s.get("VmRSS", 0)))
        if time.monotonic() > deadline + read_bound() + 30:
            break
        try:
            results.append(q.get(timeout=min(1.0, cycle / 20)))
        except Exception:
            pass
    for _ in range(len(procs) - len(results)):
        try:
            results.append(q.get(timeout=read_bound() + 30))
        except Exception:
            results.append(None)
    hung = [i for i, pr in enumerate(procs) if pr.is_alive()]
    for pr in procs:
        if pr.is_alive():
            pr.kill()
        pr.join()
    elapsed = time.monotonic() - t_start
    final = proc_status(p.pid)
    alive = p.poll() is None
    stats_out = ""
    try:
        stats_out = subprocess.run([daemon, "--stats", froot],
                                   capture_output=True, text=True,
                                   timeout=10).stdout
    except subprocess.TimeoutExpired:
        pass
    srv.clear_fault()
    subprocess.run(["fusermount3", "-u", froot], capture_output=True)
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "killed (did not exit after unmount)"
    k.stop()
    srv.stop()

    windows = [(k, b, e if e is not None else time.monotonic())
               for k, b, e in srv.windows]
    spans = sum((r["spans"] for r in results if r), [])
    bad_eio, clean = check_windows(spans, windows)
    clean_ok = sum(1 for s in clean if s[2] == "ok")
    clean_share = clean_ok / len(clean) if clean else 0.0
    # warm-up: 20 % of the run, at least one clean + fault cycle (RSS
    # steps up ~10 MiB when the first faults hit: retry paths, buffers)
    warmup = max(0.2 * args.seconds, cycle)
    growth, margin = rss_growth(samples, warmup)
    tot = {key: sum(r[key] for r in results if r)
           for key in ("reads", "bytes", "eio", "wrong", "other")}
    slowest = max((r for r in results if r), key=lambda r: r["max_s"],
                  default={"max_s": 0, "max_what": ""})
    with open(log, errors="replace") as f:
        log_lines = f.read().splitlines()
    report = {
        "seconds": round(elapsed, 1), "readers": args.readers,
        "image_bytes": len(data), "files": len(names),
        "config": dict(CACHES, timeout=TIMEOUT, retries=RETRIES,
                       connect_timeout=CONNECT_TIMEOUT),
        "fault_probabilities": FAULTS, "stall_seconds": STALL,
        "requests_by_fault": srv.mix_counts,
        "http_requests": len(srv.log),
        "reads": tot["reads"], "bytes_checked": tot["bytes"],
        "eio": tot["eio"], "wrong_bytes": tot["wrong"],
        "fault_windows": [[round(b - t_start, 1), round(e - t_start, 1)]
                          for _, b, e in windows],
        "fault_on_s": args.fault_on, "fault_off_s": args.fault_off,
        "grace_s": grace(),
        "eio_outside_windows": len(bad_eio),
        "eio_outside_examples": [[round(a - t_start, 2), round(b - t_start, 2)]
                                 for a, b, _ in bad_eio[:10]],
        "reads_in_fault_off": len(clean),
        "reads_in_fault_off_ok": clean_ok,
        "fault_off_ok_share": round(clean_share, 4),
        "rss_growth_after_warmup_kib": growth,
        "rss_margin_kib": margin, "rss_warmup_s": warmup,
        "rss_samples": len(samples),
        "rss_kib_by_s": [[round(t - t_start), r] for t, r in
                         samples[::max(1, len(samples) // 40)]],
        "other_errors": tot["other"],
        "examples": sum((r["examples"] for r in results if r), [])[:10],
        "slowest_read_s": round(slowest["max_s"], 2),
        "slowest_read": slowest["max_what"],
        "read_bound_s": read_bound(), "request_bound_s": request_bound(),
        "readers_hung": hung, "readers_lost": results.count(None),
        "daemon_alive_at_end": alive, "daemon_exit": rc,
        "daemon_peak_rss_kib": final.get("VmHWM", peak_rss),
        "daemon_rss_end_kib": final.get("VmRSS", 0),
        "daemon_threads": final.get("Threads", 0),
        "configured_cache_kib": (CACHES["data_cache"] +
                                 CACHES["metadata_cache"] +
                                 CACHES["block_cache"]) // 1024,
        "daemon_log_lines": len(log_lines),
        "daemon_log_tail": log_lines[-5:],
        "daemon_crash_report": crash_report(log_lines),
        "daemon_stats": stats_out,
    }
    for r in results:
        if r:
            del r["spans"]
    failed = (tot["wrong"] or tot["other"] or hung or bad_eio or
              clean_share < CLEAN_OK or
              growth is None or
              (growth > margin and not args.no_rss_check) or
              results.count(None) or not alive or rc != 0 or
              slowest["max_s"] > read_bound())
    report["verdict"] = "FAIL" if failed else "PASS"
    text = json.dumps(report, indent=1, default=str)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "report.json"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(args.out, "daemon.log.tail"), "w") as f:
            f.write("\n".join(log_lines[-200:]) + "\n")
        benchlib.meta_end(os.path.join(args.out, "meta.tsv"))
    subprocess.run(["rm", "-rf", work])
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    sys.exit(main())
