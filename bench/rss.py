#!/usr/bin/env python3
"""Peak RSS of a mount that reads everything over HTTP (issue 21).

Serves a SquashFS image from nginx on 127.0.0.1, mounts it with 16
threads and the disk cache on, reads every regular file with 4 readers,
and holds the daemon's peak RSS (sampled every 0.2 s) against what its
options allow: the configured caches, the HTTP readahead (8 x readahead),
the latency windows (16 x 2 x readahead, counted only if any was fetched),
fragment blocks and the 4 MiB of block-list checkpoints. The rest is the
constant docs/caching.md promises (32 MiB at 16 threads).

    sudo python3 bench/rss.py [--build DIR] [--image IMG] [--repeat N]
                              [-o OPTS] [--out DIR]

The image defaults to the newest zstd image bench/mkdata.sh made under
$SQFS_BENCH_WORK (default /tmp/sqfs-lazy-bench). Prints one line per run
and writes meta.tsv (the run's facts), results.json and table.md into
--out (default bench/results/<UTC stamp>-rss).
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from servers import start_nginx  # noqa: E402
import benchlib  # noqa: E402

MiB = 1 << 20
DEFAULT_OPTS = "block_cache=64M"


def size_opt(opts, name, default):
    for kv in opts.split(","):
        if kv.startswith(name + "="):
            v = kv.split("=", 1)[1]
            mult = {"K": 1 << 10, "M": MiB, "G": 1 << 30}.get(v[-1:].upper())
            return int(v[:-1]) * mult if mult else int(v)
    return default


def allowed_bytes(opts, st, block_size):
    """What the options let the daemon hold, from docs/architecture.md's
    table of caches (defaults as there)."""
    ra = size_opt(opts, "readahead", MiB)
    frag = int(size_opt(opts, "fragment_cache", 32))
    parts = {
        "block_cache": size_opt(opts, "block_cache", 256 * MiB),
        "data_cache": size_opt(opts, "data_cache", 32 * MiB),
        "metadata_cache": size_opt(opts, "metadata_cache", 16 * MiB),
        "fragment_cache": frag * block_size,
        "checkpoints": 4 * MiB,
        "metadata_pinned": st.get("metadata_pinned_bytes", 0),
        "http_readahead": max(8 * ra, 4 * MiB) if ra else 0,
        "http_windows": 16 * 2 * ra if st.get("http_windows") else 0,
    }
    return parts


def read_stats(mnt):
    r = subprocess.run(["getfattr", "--only-values", "-n",
                        "user.sqfs-lazy.stats", mnt], capture_output=True,
                       text=True)
    if r.returncode:
        raise SystemExit("getfattr %s: %s" % (mnt, r.stderr.strip()))
    raw = r.stdout
    out = {}
    for line in raw.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def one_run(build, url, opts, block_size):
    mnt = tempfile.mkdtemp(prefix="rss-mnt-")
    cache = tempfile.mkdtemp(prefix="rss-cache-")
    o = "threads=16,cache_dir=%s" % cache + ("," + opts if opts else "")
    cmd = [os.path.join(build, "sqfs-lazy-mount"), "-f", "-o", o, url, mnt]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not os.path.ismount(mnt):
            if p.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("mount failed: %s" % p.stderr.read())
            time.sleep(0.05)
        files = [os.path.join(r, f) for r, _, fs in os.walk(mnt) for f in fs]
        files = [f for f in files if os.path.isfile(f)
                 and not os.path.islink(f)]
        peak = [0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                with open("/proc/%d/status" % p.pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            peak[0] = max(peak[0], int(line.split()[1]))
                time.sleep(0.2)

        errors = []

        def reader(lst):
            for path in lst:
                try:
                    with open(path, "rb") as f:
                        while f.read(MiB):
                            pass
                except OSError as e:
                    errors.append("%s: %s" % (path, e))

        sampler = threading.Thread(target=sample)
        sampler.start()
        t0 = time.monotonic()
        readers = [threading.Thread(target=reader, args=(files[i::4],))
                   for i in range(4)]
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        secs = time.monotonic() - t0
        done.set()
        sampler.join()
        if p.poll() is not None:
            raise SystemExit("the daemon exited with %s: %s" % (
                p.returncode, p.stderr.read().decode(errors="replace")))
        st = read_stats(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
        shutil.rmtree(cache, ignore_errors=True)
        os.rmdir(mnt)
    parts = allowed_bytes(opts, st, block_size)
    allowed = sum(parts.values())
    peak_b = peak[0] * 1024
    return {"files": len(files), "seconds": round(secs, 1),
            "errors": errors[:5], "peak_rss": peak_b, "allowed": allowed,
            "over": peak_b - allowed, "parts": parts,
            "stats": {k: v for k, v in st.items() if k.endswith("_bytes")
                      or k == "http_windows"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--image")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-o", dest="opts", default=DEFAULT_OPTS)
    ap.add_argument("--out")
    a = ap.parse_args()
    work = os.environ.get("SQFS_BENCH_WORK", "/tmp/sqfs-lazy-bench")
    image = a.image or max(glob.glob(work + "/data-*/image-zstd.sqfs"),
                           key=os.path.getmtime, default=None)
    if not image:
        raise SystemExit("no image: run bench/mkdata.sh or pass --image")
    with open(image, "rb") as f:
        f.seek(12)
        block_size = int.from_bytes(f.read(4), "little")
    a.build = os.path.abspath(a.build)
    a.image = image
    a.out = out = os.path.abspath(a.out or os.path.join(
        HERE, "results", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) +
        "-rss"))
    os.makedirs(out, exist_ok=True)
    # the run's facts: the command with every option's value, the commit
    # of the build it measures
    facts = benchlib.run_facts(
        benchlib.argparse_command("bench/rss.py", ap, a), benchlib.shell_join(
            sys.argv), [("", a.build, ["sqfs-lazy-mount"])])
    benchlib.warn_unknown(facts)
    benchlib.write_meta(os.path.join(out, "meta.tsv"), facts)
    commit = dict(facts)["measured_commit"]
    web = tempfile.mkdtemp(prefix="rss-www-")
    os.link(image, os.path.join(web, "img.sqfs")) if os.stat(
        image).st_dev == os.stat(web).st_dev else shutil.copy(
        image, os.path.join(web, "img.sqfs"))
    nginx = start_nginx(tempfile.mkdtemp(prefix="rss-nginx-"), web)
    runs = []
    try:
        for i in range(a.repeat):
            r = one_run(a.build, nginx.url("img.sqfs"), a.opts, block_size)
            runs.append(r)
            print("run %d: %d files in %.1f s, peak RSS %.1f MiB, allowed "
                  "%.1f MiB, over by %.1f MiB%s" % (
                      i + 1, r["files"], r["seconds"], r["peak_rss"] / MiB,
                      r["allowed"] / MiB, r["over"] / MiB,
                      ", errors: %s" % r["errors"] if r["errors"] else ""),
                  flush=True)
    finally:
        nginx.stop()
        shutil.rmtree(web, ignore_errors=True)
    res = {"measured_commit": commit, "image": image, "options": a.opts,
           "cpus": os.cpu_count(), "runs": runs}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    benchlib.meta_end(os.path.join(out, "meta.tsv"))
    worst = max(r["over"] for r in runs)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("measured build %s, %s, -o threads=16,cache_dir=...,%s, "
                "4 readers\n\n" % (commit[:12], os.path.basename(image),
                                    a.opts))
        f.write("| run | seconds | peak RSS MiB | allowed MiB | over MiB |\n"
                "|---|---|---|---|---|\n")
        for i, r in enumerate(runs):
            f.write("| %d | %.1f | %.1f | %.1f | %.1f |\n" % (
                i + 1, r["seconds"], r["peak_rss"] / MiB,
                r["allowed"] / MiB, r["over"] / MiB))
        f.write("\nworst: %.1f MiB over the configured bounds (target: "
                "32 MiB at 16 threads)\n" % (worst / MiB))
    print("worst: %.1f MiB over the configured bounds (target 32); %s" % (
        worst / MiB, out))
    return 0 if worst <= 32 * MiB and not any(r["errors"] for r in runs) \
        else 1


if __name__ == "__main__":
    sys.exit(main())
