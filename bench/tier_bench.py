#!/usr/bin/env python3
"""The caching-tier bench (issue 20), driven by bench/tier.sh.

N concurrent mounts of one image (separate daemons, separate cache_dirs),
each running the same workload (walk the tree with an lstat of every entry,
read every third regular file in path order), once straight from the
origin and once through an nginx slice-caching tier (tests/servers.py
NginxTier: the config of docs/deploy.md); plus one mount straight from the
origin, the unit of the ratios. Origins: nginx, and versitygw (S3) when it
is built. What the origin served is counted at the origin:

- nginx origin: its access log ($body_bytes_sent, one line a request);
- S3 straight: the mounts' own counters (http_requests, http_bytes
  of sqfs-lazy-mount --stats), which count exactly what they received;
- S3 behind the tier: the tier's log of its upstream fetches
  ($upstream_response_length of every request and slice subrequest that
  went to the origin).

The tier cannot sign requests, so the mounts through it read a presigned
URL (SigV4 query string, signed here with the test account) over http://;
straight from S3 they mount s3://BUCKET/KEY with a credentials file.

Standard library only; writes results.json, table.md and raw/ into the
run folder (tier.sh writes meta.tsv).
"""

import argparse
import concurrent.futures
import datetime
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

from servers import (Nginx, NginxTier, free_port, is_mounted,  # noqa: E402
                     unmount)

ACCESS = "AKIASQFSLAZYBENCH001"
SECRET = "bench/Sqfs+Lazy/tier7c1d"
BUCKET = "images"
VERSITYGW = "versitygw-v1.8.0"

# The tier's second log: one line per request or slice subrequest, with
# what came from the origin for it ("-" when the cache answered).
UPSTREAM_LOG = ("log_format upstream '$upstream_addr $upstream_status "
                "$upstream_response_length $upstream_cache_status';\n"
                "  log_subrequest on;\n"
                "  access_log %s/upstream.log upstream;")


class BenchTier(NginxTier):
    lock = True

    def server_conf(self):
        conf = super().server_conf()
        if not self.lock:
            conf = conf.replace("proxy_cache_lock on;",
                                "proxy_cache_lock off;")
            assert "proxy_cache_lock off;" in conf
        return conf

    def http_extra(self):
        return super().http_extra() + "\n  " + UPSTREAM_LOG % self.dir

    def upstream(self):
        """(requests, bytes) the tier fetched from its origin."""
        n = b = 0
        with open(os.path.join(self.dir, "upstream.log")) as f:
            for line in f:
                addr, _st, length, _c = line.split()
                if addr == "-":
                    continue
                # a request retried on another upstream lists several
                for part in length.split(","):
                    part = part.strip()
                    if part.isdigit():
                        n += 1
                        b += int(part)
        return n, b


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


# ---------------------------------------------------------------------------
# S3: versitygw and a presigned URL
# ---------------------------------------------------------------------------

def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def presign(host, bucket, key, expires=7200, region="us-east-1"):
    """A SigV4 presigned GET URL (only the Host header signed, so the
    tier's Range header is free to change)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    amzdate, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = "%s/%s/s3/aws4_request" % (date, region)
    path = "/%s/%s" % (bucket, urllib.parse.quote(key, safe="/~"))
    q = {"X-Amz-Algorithm": "AWS4-HMAC-SHA256",
         "X-Amz-Credential": "%s/%s" % (ACCESS, scope),
         "X-Amz-Date": amzdate, "X-Amz-Expires": str(expires),
         "X-Amz-SignedHeaders": "host"}
    cq = "&".join("%s=%s" % (urllib.parse.quote(k, safe="~"),
                             urllib.parse.quote(v, safe="~"))
                  for k, v in sorted(q.items()))
    creq = "\n".join(["GET", path, cq, "host:%s\n" % host, "host",
                      "UNSIGNED-PAYLOAD"])
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = _hmac(("AWS4" + SECRET).encode(), date)
    for part in (region, "s3", "aws4_request"):
        k = _hmac(k, part)
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    return "%s?%s&X-Amz-Signature=%s" % (path, cq, sig)


class S3:
    def __init__(self, work, binary):
        self.dir = os.path.join(work, "s3")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "data"))
        self.binary = binary
        self.port = free_port()
        self.host = "127.0.0.1:%d" % self.port
        self.proc = None

    def start(self):
        with open(os.path.join(self.dir, "versitygw.log"), "ab") as lf:
            self.proc = subprocess.Popen(
                [self.binary, "--access", ACCESS, "--secret", SECRET,
                 "--port", self.host, "--quiet", "posix",
                 os.path.join(self.dir, "data")],
                stdout=lf, stderr=lf, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("versitygw exited")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("versitygw not ready")
                time.sleep(0.05)

    def curl(self, method, path, upload=None):
        cmd = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
               "--aws-sigv4", "aws:amz:us-east-1:s3",
               "-u", "%s:%s" % (ACCESS, SECRET),
               "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", method]
        if upload:
            cmd += ["-T", upload]
        r = subprocess.run(cmd + ["http://%s%s" % (self.host, path)],
                           capture_output=True, text=True, timeout=600)
        return r.stdout

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------------------
# Mounts and the workload
# ---------------------------------------------------------------------------

class Mount:
    def __init__(self, mount_bin, url, mnt, logpath, opts):
        self.cmd = [mount_bin, "-f"] + [a for o in opts for a in ("-o", o)] \
            + [url, mnt]
        self.mnt, self.logpath = mnt, logpath
        self.bin = mount_bin
        self.proc = None

    def start(self, timeout=60):
        os.makedirs(self.mnt, exist_ok=True)
        with open(self.logpath, "ab") as lf:
            self.proc = subprocess.Popen(self.cmd, stdout=lf, stderr=lf,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not is_mounted(self.mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mount failed: " + open(
                    self.logpath, errors="replace").read()[-2000:])
            time.sleep(0.01)
        return self

    def stats(self):
        r = subprocess.run([self.bin, "--stats", self.mnt],
                           capture_output=True, text=True, timeout=30)
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                out[parts[0]] = int(parts[1])
        return out

    def stop(self):
        if self.proc is None:
            return
        subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
        unmount(self.mnt)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def workload(mnt, share):
    """Walk with lstat of every entry, then read every `share`-th regular
    file in path order. Returns (entries, files read, bytes read,
    sha256 of all read bytes)."""
    entries, files = 0, []
    for dirpath, dirnames, filenames in os.walk(mnt):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            entries += 1
            if (st.st_mode & 0o170000) == 0o100000:
                files.append(p)
    h = hashlib.sha256()
    nbytes = 0
    chosen = files[::share]
    for p in chosen:
        with open(p, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                nbytes += len(b)
                h.update(b)
    return entries, len(chosen), nbytes, h.hexdigest()


def run_row(args, name, url, opts, n, origin_count, raw):
    """n mounts of url at once; returns the row's dict."""
    mounts = []
    base = os.path.join(args.work, "mnt")
    try:
        t0 = time.monotonic()
        for i in range(n):
            cache = os.path.join(args.work, "cache", "%s-%d" % (name, i))
            shutil.rmtree(cache, ignore_errors=True)
            os.makedirs(cache)
            mounts.append(Mount(args.mount_bin, url,
                                os.path.join(base, "%s-%d" % (name, i)),
                                os.path.join(raw, "%s-%d.log" % (name, i)),
                                list(opts) + ["cache_dir=" + cache]))
        with concurrent.futures.ThreadPoolExecutor(n) as ex:
            list(ex.map(lambda m: m.start(), mounts))
            results = list(ex.map(lambda m: workload(m.mnt, args.share),
                                  mounts))
        wall = time.monotonic() - t0
        client = [m.stats() for m in mounts]
    finally:
        for m in mounts:
            m.stop()
    digests = {r[3] for r in results}
    reqs, nbytes = origin_count(client)
    return {"row": name, "mounts": n, "origin_requests": reqs,
            "origin_bytes": nbytes, "wall_s": round(wall, 2),
            "entries": results[0][0], "files_read": results[0][1],
            "bytes_read": results[0][2], "same_bytes": len(digests) == 1,
            "digest": results[0][3],
            "mount_requests": sum(c.get("http_requests", 0) for c in client),
            "mount_bytes": sum(c.get("http_bytes", 0)
                               for c in client)}


def nginx_counter(ng):
    def count(_client):
        e = [x for x in ng.entries() if x["uri"].endswith(".sqfs")]
        return len(e), sum(x["body"] for x in e)
    return count


def client_counter(client):
    return (sum(c.get("http_requests", 0) for c in client),
            sum(c.get("http_bytes", 0) for c in client))


def fresh_tier(args, origin_host, slice_size, lock=True):
    """A tier with an empty cache."""
    d = os.path.join(args.work, "tier")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    t = BenchTier(d, origin_host, slice_size=slice_size)
    t.lock = lock
    return t.start()


class Delay:
    """bench/latency_proxy.py in front of host:port, adding ms to every
    request (and to each new connection, as a WAN handshake)."""

    def __init__(self, work, target, ms):
        self.portfile = os.path.join(work, "delay.port")
        if os.path.exists(self.portfile):
            os.unlink(self.portfile)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "latency_proxy.py"),
             "--target", target, "--delay-ms", str(ms), "--handshake",
             "--port-file", self.portfile, "--parent-pid", str(os.getpid())],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.portfile) or \
                not open(self.portfile).read().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("latency_proxy did not start")
            time.sleep(0.05)
        self.host = "127.0.0.1:%s" % open(self.portfile).read().strip()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def tier_rows(args, rows, raw, origin, host, url_of, count, slices,
              lock_off_too):
    """For each slice size: one mount, then N mounts, each on a cold tier;
    then the N mounts again on the warm tier of the N-mount row."""
    base = dict(origin)
    for sl in slices:
        for lock in ((True, False) if lock_off_too and sl == slices[0]
                     else (True,)):
            for n in (1, args.mounts):
                tier = fresh_tier(args, host, sl, lock)
                how = "tier " + sl + ("" if lock else " no lock")
                name = "%s-%d-%s" % (base["origin"], n,
                                     how.replace(" ", "-"))
                try:
                    for warm in ((False, True) if n > 1 and lock
                                 else (False,)):
                        count.reset()
                        log("row", name + (" warm" if warm else ""))
                        r = run_row(args, name + ("-warm" if warm else ""),
                                    url_of(tier), ["retries=5"], n,
                                    count, raw)
                        r.update(base, how=how, slice=sl, lock=lock,
                                 warm=warm)
                        rows.append(r)
                finally:
                    tier.stop()
                    shutil.copy(os.path.join(tier.dir, "error.log"),
                                os.path.join(raw, name + ".error.log"))


class Count:
    """What the origin served since the last reset."""

    def __init__(self, fn, reset=None):
        self.fn, self.reset_fn = fn, reset

    def reset(self):
        if self.reset_fn:
            self.reset_fn()

    def __call__(self, client):
        return self.fn(client)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--run", required=True, help="results folder of the run")
    ap.add_argument("--mounts", type=int, default=10)
    ap.add_argument("--share", type=int, default=3)
    ap.add_argument("--usr-mib", type=int, default=128)
    ap.add_argument("--slices", default="1m",
                    help="the tier's slice sizes, comma-separated")
    ap.add_argument("--origins", default="nginx,s3")
    ap.add_argument("--delays", default="0",
                    help="ms added in front of the nginx origin (for the "
                    "mounts straight from it and for the tier alike)")
    ap.add_argument("--versitygw", default=os.path.join(
        os.environ.get("LSQ_TEST_CACHE", "/var/cache/sqfs-lazy-tests"),
        "bin", VERSITYGW, "versitygw"))
    args = ap.parse_args()
    args.slices = args.slices.split(",")
    args.mount_bin = os.path.join(args.build, "sqfs-lazy-mount")
    raw = os.path.join(args.run, "raw")
    os.makedirs(raw, exist_ok=True)
    os.makedirs(os.path.join(args.work, "mnt"), exist_ok=True)

    # the image: a deterministic subset of /usr, zstd, 128 KiB blocks
    data = os.path.join(args.work, "data-u%d" % args.usr_mib)
    img = os.path.join(data, "image.sqfs")
    if not os.path.exists(img):
        tree = os.path.join(data, "tree")
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
        log("building the image (%d MiB of /usr)" % args.usr_mib)
        sh(sys.executable, os.path.join(HERE, "usr_subset.py"), "--src",
           "/usr", "--out", tree, "--bytes", str(args.usr_mib << 20),
           stdout=subprocess.DEVNULL)
        sh("mksquashfs", tree, img + ".tmp", "-comp", "zstd", "-b", "128K",
           "-noappend", "-processors", "2", "-no-xattrs", "-all-root",
           "-all-time", "1700000000", "-mkfs-time", "1700000000",
           "-no-progress", "-quiet", stdout=subprocess.DEVNULL)
        os.rename(img + ".tmp", img)
    size = os.path.getsize(img)
    origins = args.origins.split(",")
    rows = []
    www = os.path.join(args.work, "www")
    os.makedirs(www, exist_ok=True)
    link = os.path.join(www, "image.sqfs")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(img, link)
    opts = ["retries=5"]

    if "nginx" in origins:
        od = os.path.join(args.work, "origin")
        shutil.rmtree(od, ignore_errors=True)
        os.makedirs(od)
        origin = Nginx(od, www).start()
        count = Count(nginx_counter(origin), origin.clear_log)
        try:
            for ms in [int(x) for x in args.delays.split(",")]:
                delay = Delay(args.work, "127.0.0.1:%d" % origin.port, ms) \
                    if ms else None
                host = delay.host if delay else "127.0.0.1:%d" % origin.port
                base = {"origin": "nginx" + ("+%dms" % ms if ms else ""),
                        "delay_ms": ms}
                try:
                    for n in (1, args.mounts):
                        name = "%s-%d-direct" % (base["origin"], n)
                        count.reset()
                        log("row", name)
                        r = run_row(args, name,
                                    "http://%s/image.sqfs" % host, opts, n,
                                    count, raw)
                        r.update(base, how="direct", slice="-", lock=False,
                                 warm=False)
                        rows.append(r)
                    tier_rows(args, rows, raw, base, host,
                              lambda t: t.url("image.sqfs"), count,
                              args.slices, lock_off_too=(ms == 0))
                finally:
                    if delay:
                        delay.stop()
        finally:
            origin.stop()
            shutil.copy(origin.access, os.path.join(raw, "origin.access.log"))

    if "s3" in origins:
        if not os.access(args.versitygw, os.X_OK):
            log("no versitygw at %s (bash scripts/install-versitygw.sh): "
                "S3 rows left out" % args.versitygw)
        else:
            s3 = S3(args.work, args.versitygw).start()
            try:
                assert s3.curl("PUT", "/" + BUCKET) == "200"
                assert s3.curl("PUT", "/%s/image.sqfs" % BUCKET, img) == "200"
                creds = os.path.join(args.work, "credentials")
                with open(creds, "w") as f:
                    f.write("[default]\naws_access_key_id = %s\n"
                            "aws_secret_access_key = %s\n" % (ACCESS, SECRET))
                os.chmod(creds, 0o600)
                s3url = "s3://%s/image.sqfs" % BUCKET
                s3opts = opts + ["endpoint=http://" + s3.host,
                                 "credentials_file=" + creds]
                base = {"origin": "s3", "delay_ms": 0}
                for n in (1, args.mounts):
                    name = "s3-%d-direct" % n
                    log("row", name)
                    r = run_row(args, name, s3url, s3opts, n,
                                client_counter, raw)
                    r.update(base, how="direct", slice="-", lock=False,
                             warm=False)
                    rows.append(r)
                holder = {}

                def url_of(tier):
                    # one presigned URL per tier: its query string is part
                    # of the cache key, a new signature would miss it all
                    if holder.get("tier") is not tier:
                        holder["tier"] = tier
                        holder["url"] = "http://127.0.0.1:%d%s" % (
                            tier.port,
                            presign(s3.host, BUCKET, "image.sqfs"))
                    return holder["url"]
                count = Count(lambda _c: holder["tier"].upstream(),
                              lambda: holder.get("tier") and
                              open(os.path.join(holder["tier"].dir,
                                                "upstream.log"), "w").close())
                tier_rows(args, rows, raw, base, s3.host, url_of, count,
                          args.slices, lock_off_too=False)
            finally:
                s3.stop()

    report(args, size, rows)


def report(args, size, rows):
    # ratios: to one mount straight from the same origin (and delay), and
    # for tier rows to one mount through a cold tier of the same kind
    def key(r, **kw):
        d = dict(origin=r["origin"], how=r["how"], mounts=r["mounts"],
                 warm=r["warm"])
        d.update(kw)
        return tuple(sorted(d.items()))
    index = {key(r): r for r in rows}
    for r in rows:
        u = index.get(key(r, how="direct", mounts=1, warm=False))
        if u and u["origin_bytes"]:
            r["bytes_vs_one"] = round(r["origin_bytes"] / u["origin_bytes"],
                                      3)
            r["requests_vs_one"] = round(r["origin_requests"] /
                                         max(1, u["origin_requests"]), 3)
            r["wall_vs_one"] = round(r["wall_s"] / max(0.01, u["wall_s"]), 2)
        t = index.get(key(r, mounts=1, warm=False))
        if r["how"] != "direct" and t and t["origin_bytes"]:
            r["bytes_vs_one_tier"] = round(r["origin_bytes"] /
                                           t["origin_bytes"], 3)
    res = {"image_bytes": size, "mounts": args.mounts, "share": args.share,
           "slices": args.slices, "delays_ms": args.delays, "rows": rows}
    with open(os.path.join(args.run, "results.json"), "w") as f:
        json.dump(res, f, indent=1)

    def x(r, k):
        return "%.2fx" % r[k] if k in r else "-"
    lines = ["| origin | path | mounts | origin requests | origin MiB | "
             "bytes x one mount straight | requests x one mount straight | "
             "bytes x one mount through the tier | wall s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %s | %d | %d | %.1f | %s | %s | %s | %.1f |"
                     % (r["origin"], r["how"] + (", warm" if r["warm"]
                                                  else ""),
                        r["mounts"], r["origin_requests"],
                        r["origin_bytes"] / 2**20, x(r, "bytes_vs_one"),
                        x(r, "requests_vs_one"), x(r, "bytes_vs_one_tier"),
                        r["wall_s"]))
    w = rows[0] if rows else None
    digests = {r["digest"] for r in rows}
    same = len(digests) == 1 and all(r["same_bytes"] for r in rows)
    head = ["Image: %d bytes (%.1f MiB), zstd, 128 KiB blocks, a %d MiB "
            "subset of /usr. Workload of every mount: walk + lstat of %s "
            "entries, read every %d. regular file in path order (%s files, "
            "%.1f MiB). Tier: nginx proxy_cache + slice, proxy_cache_lock "
            "on unless said; a cold row starts with an empty cache, a warm "
            "row runs the same mounts again on the tier its cold row "
            "filled. Every mount of every row read the same bytes: %s. "
            "wall s: from the first mount command to the last mount's end "
            "of the workload." % (
                size, size / 2**20, args.usr_mib,
                w["entries"] if w else "?", args.share,
                w["files_read"] if w else "?",
                (w["bytes_read"] / 2**20) if w else 0,
                "yes" if same else "NO"), ""]
    targets = []
    for r in rows:
        if r["how"].startswith("tier") and r["mounts"] > 1 and \
                not r["warm"] and r["lock"] and "bytes_vs_one" in r:
            targets.append(
                "%s %s, %d mounts: origin bytes %.2fx one mount straight "
                "(target <= 1.2x): %s; %s one mount through the tier" % (
                    r["origin"], r["how"], r["mounts"], r["bytes_vs_one"],
                    "PASS" if r["bytes_vs_one"] <= 1.2 else "MISS",
                    x(r, "bytes_vs_one_tier")))
    text = "\n".join(head + lines + [""] + targets) + "\n"
    with open(os.path.join(args.run, "table.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
