"""-o metrics= (issue 36): the mount's counters at GET /metrics in the
Prometheus text format, over TCP and a unix socket. Checked with Debian's
promtool and a real Prometheus scraping a mount; every --stats counter is
there with its value; bad requests get an error or a closed connection;
credentials never show; a taken port fails the mount."""

import json
import os
import random
import re
import shutil
import socket
import stat
import subprocess
import threading
import time
import urllib.request

import pytest

from conftest import daemon, mksquashfs, require, try_mount
from servers import free_port
from test_cache import stats
from timing import wait_for

# gauges that move by themselves between two reads of the counters
# (the scrape's own connection is one more descriptor; --stats is read
# through a FUSE request, which is in flight while it counts)
MOVING = {"process_rss_bytes", "process_rss_peak_bytes", "buffer_pool_bytes",
          "process_threads", "process_open_fds", "fuse_in_flight"}
MOUNT_LABELS = {"mountpoint", "image"}
# the caches' counters are families with a cache label (docs/metrics.md)
CACHES = {"meta_": "metadata", "data_": "data", "frag_": "fragment",
          "block_cache_": "block", "disk_cache_": "disk", "cas_": "store"}
CACHE_KINDS = {"hits", "misses", "evictions", "bytes", "limit_bytes",
               "writes", "corrupt"}


def scrape_tcp(port, path="/metrics"):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def raw_request(connect, data, timeout=10):
    """Send data on a new connection; everything the server answers."""
    s = connect()
    s.settimeout(timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


def tcp(port):
    return lambda: socket.create_connection(("127.0.0.1", port))


def unix(path):
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s
    return connect


def parse_labels(text):
    """{key: value} of 'a="x",b="y"' (values without escapes)."""
    return dict(re.findall(r'([a-z_]+)="([^"]*)"', text))


def series(text):
    """[(name, {label: value}, value)] of an exposition, in order."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        name, _, labels = name_labels.partition("{")
        out.append((name, parse_labels(labels), float(value)))
    return out


def samples(text):
    """{(metric name, label=value of the labels other than the mount's):
    (labels, value)} of an exposition."""
    out = {}
    for name, labels, value in series(text):
        extra = ",".join("%s=%s" % kv for kv in sorted(labels.items())
                         if kv[0] not in MOUNT_LABELS)
        out[(name, extra)] = (labels, value)
    return out


def prom_name(stat):
    """The exposition's name, extra label and scale of a --stats counter
    (docs/metrics.md)."""
    for prefix, cache in CACHES.items():
        if stat.startswith(prefix) and stat[len(prefix):] in CACHE_KINDS:
            return ("sqfs_lazy_cache_" + stat[len(prefix):],
                    "cache=" + cache, 1)
    for unit, scale in (("_ns", 1e9), ("_us", 1e6)):
        if stat.endswith(unit):
            return "sqfs_lazy_" + stat[:-3] + "_seconds", "", scale
    return "sqfs_lazy_" + stat, "", 1


def promtool():
    p = shutil.which("promtool")
    require(p is not None, "promtool not installed (Debian: prometheus)")
    return p


def test_every_counter_with_its_value(nginx, mounts):
    port = free_port()
    # nothing of the mount's own moves the counters once the read is done:
    # no background fetch, no profile guess on the prefetch's thread
    m = mounts(nginx.url("img.sqfs"), ["metrics=127.0.0.1:%d" % port,
                                       "background=off", "prefetch=off"])
    with open(os.path.join(m.mnt, "etc", "small.conf"), "rb") as f:
        assert f.read() == b"key = value\n" * 40
    st = stats(m.mnt)
    # the process gauges: a mount has a few threads and descriptors (the
    # FUSE device, the metrics socket, connections)
    assert st["process_threads"] > 1, st
    assert st["process_open_fds"] >= 3, st
    status, ctype, text = scrape_tcp(port)
    assert status == 200
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    got = samples(text)
    info = got[("sqfs_lazy_build_info", "version=" + got_version(text))]
    assert info[1] == 1
    # the mount is idle: every counter reads as --stats read it
    missing, differ = [], []
    for k, v in st.items():
        name, extra, scale = prom_name(k)
        cand = [key for key in ((name + "_total", extra), (name, extra))
                if key in got]
        if not cand:
            missing.append(k)
            continue
        labels, value = got[cand[0]]
        assert labels["mountpoint"] == os.path.realpath(m.mnt), labels
        assert labels["image"] == nginx.url("img.sqfs"), labels
        if k not in MOVING and abs(value * scale - v) > 0.5:
            differ.append((k, v, value))
    assert not missing, missing
    assert not differ, differ
    # the caches' budgets beside their use: the defaults for a URL
    assert got[("sqfs_lazy_cache_limit_bytes", "cache=data")][1] == 32 << 20
    assert got[("sqfs_lazy_cache_limit_bytes", "cache=block")][1] == \
        256 << 20
    # reads show
    assert got[("sqfs_lazy_http_requests_total", "")][1] > 0
    with open(os.path.join(m.mnt, "large.bin"), "rb") as f:
        f.read(1 << 20)
    # a scrape within 100 ms of the last one gets the same rendering
    time.sleep(0.15)
    after = samples(scrape_tcp(port)[2])
    assert after[("sqfs_lazy_http_bytes_total", "")][1] > \
        got[("sqfs_lazy_http_bytes_total", "")][1]


def got_version(text):
    return re.search(r'sqfs_lazy_build_info\{version="([^"]*)"', text)[1]


def histogram(text, name, **labels):
    """(cumulative bucket counts by le, sum, count) of one series."""
    buckets, total, count = {}, None, None
    for n, lab, v in series(text):
        if any(lab.get(k) != want for k, want in labels.items()):
            continue
        if n == name + "_bucket":
            buckets[lab["le"]] = v
        elif n == name + "_sum":
            total = v
        elif n == name + "_count":
            count = v
    return buckets, total, count


def test_a_walk_that_stats_every_entry_sends_no_lookup(mounts, tmp_path):
    """Listings are always READDIRPLUS, never the kernel's "auto" choice,
    which lists the rest of a directory after its first reply (32 KiB,
    about 200 entries) with plain READDIR: every entry then cost a LOOKUP
    when a walk lstat()s it (find -printf %s, ls -l, du, rsync; the
    bench's find over 45k entries sent 25,748, docs/decisions.md,
    2026-11-28). A directory of 600 entries and a few small ones: no
    LOOKUP at all, and what the walk stats is the tree's."""
    tree = tmp_path / "tree"
    for i in range(600):
        (tree / "wide").mkdir(parents=True, exist_ok=True)
        (tree / "wide" / ("entry-%04d" % i)).write_bytes(b"x" * (i % 50))
    for i in range(5):
        (tree / ("d%d" % i) / "sub").mkdir(parents=True)
        (tree / ("d%d" % i) / "sub" / "f").write_bytes(b"y" * i)
    img = str(tmp_path / "wide.sqfs")
    mksquashfs(str(tree), img)
    port = free_port()
    m = mounts(img, ["metrics=127.0.0.1:%d" % port])

    def lstat_all(top):
        out = {}
        for root, dirs, files in os.walk(top):
            for name in dirs + files:
                path = os.path.join(root, name)
                st = os.lstat(path)
                out[os.path.relpath(path, top)] = (
                    stat.S_IFMT(st.st_mode),
                    None if stat.S_ISDIR(st.st_mode) else st.st_size)
        return out

    got = lstat_all(m.mnt)
    assert len(got) == 600 + 1 + 5 * 3 and got == lstat_all(str(tree))
    text = scrape_tcp(port)[2]
    lookups = histogram(text, "sqfs_lazy_fuse_request_seconds",
                        op="lookup")[2]
    assert not lookups, lookups
    assert histogram(text, "sqfs_lazy_fuse_request_seconds",
                     op="readdirplus")[2] >= 2 + 5 * 2


def test_reading_a_directorys_small_files_sends_a_read_per_fragment_block(
        mounts, tmp_path):
    """A packer writes a directory's small files into a fragment block one
    after another: once a READ of one has decompressed the block, the
    files listed with it are pushed into their page caches, so reading
    them all (grep -r, tar) sends about one READ per fragment block, not
    one per file (the bench's grep: 6,166 READs -> 2,218,
    docs/decisions.md, 2026-11-28). Every byte is the tree's, read in
    the listing's order and in reverse. A mount that records a profile
    pushes none: the recorder must see each file read."""
    rng = random.Random(7)
    tree = tmp_path / "tree"
    (tree / "dir").mkdir(parents=True)
    want = {}
    for i in range(50):  # about 50 KB: one fragment block of 128 KiB
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 2000)))
        (tree / "dir" / ("f%02d" % i)).write_bytes(data)
        want["f%02d" % i] = data
    img = str(tmp_path / "small-files.sqfs")
    mksquashfs(str(tree), img)
    for order, name in ((sorted, "forward"),
                        (lambda k: sorted(k, reverse=True), "reverse")):
        port = free_port()
        m = mounts(img, ["metrics=127.0.0.1:%d" % port], name=name)
        d = os.path.join(m.mnt, "dir")
        assert sorted(os.listdir(d)) == sorted(want)
        first = None
        for rel in order(want):
            with open(os.path.join(d, rel), "rb") as f:
                assert f.read() == want[rel], rel
            if first is None:
                # the pushes run on the store's thread: wait for them (a
                # reader faster than it reads some files itself, which is
                # harmless but would make the count below vary)
                first = rel
                st = wait_for(lambda: pushed(m.mnt, len(want) - 1),
                              "the page store to push the other files")
                assert st["page_store_bytes"] == sum(
                    len(v) for k, v in want.items() if k != first), st
                assert st["page_store_dropped"] == 0, st
        reads = histogram(scrape_tcp(port)[2],
                          "sqfs_lazy_fuse_request_seconds", op="read")[2]
        assert 1 <= reads <= 3, (name, reads)
        assert m.stop() == []
    # a recording mount must see every file a start reads: no pushes
    m = mounts(img, ["record=" + str(tmp_path / "start.prof")],
               name="record")
    d = os.path.join(m.mnt, "dir")
    for rel in sorted(os.listdir(d)):
        with open(os.path.join(d, rel), "rb") as f:
            assert f.read() == want[rel], rel
    st = stats(m.mnt)
    assert st["page_store_files"] == 0, st
    assert m.stop() == []
    recorded = [ln.split("\t")[0] for ln in
                open(tmp_path / "start.prof").read().splitlines()
                if ln and not ln.startswith("#")]
    assert recorded == ["dir/" + k for k in sorted(want)], recorded


def pushed(mnt, files):
    """--stats once the page store pushed `files` whole files, else None."""
    st = stats(mnt)
    return st if st["page_store_files"] >= files else None


def test_histograms(nginx, mounts):
    """The latency histograms: FUSE requests by operation, HTTP requests
    by outcome, the network waits of reads, decompression by codec. Each
    is cumulative, ends in +Inf equal to its count, and counts what the
    counters count."""
    port = free_port()
    m = mounts(nginx.url("img.sqfs"), ["metrics=127.0.0.1:%d" % port,
                                       "background=off", "prefetch=off"])
    reads = 0
    with open(os.path.join(m.mnt, "large.bin"), "rb", buffering=0) as f:
        while f.read(128 << 10):
            reads += 1
    st = stats(m.mnt)
    text = scrape_tcp(port)[2]
    for name, labels in (("fuse_request_seconds", {"op": "read"}),
                         ("fuse_request_seconds", {"op": "lookup"}),
                         ("http_request_seconds", {"outcome": "ok"}),
                         ("http_response_bytes", {"outcome": "ok"}),
                         ("read_network_wait_seconds", {})):
        b, total, count = histogram(text, "sqfs_lazy_" + name, **labels)
        assert b and count, (name, labels, text[-3000:])
        values = list(b.values())
        assert values == sorted(values), (name, b)
        assert list(b)[-1] == "+Inf" and values[-1] == count, (name, b)
        assert total > 0, (name, total)
    # every read reached the daemon (the kernel may merge or split them)
    assert histogram(text, "sqfs_lazy_fuse_request_seconds",
                     op="read")[2] >= 1
    # every range request has an outcome; all went well
    outcomes = sum(v for n, lab, v in series(text)
                   if n == "sqfs_lazy_http_request_seconds_count")
    assert outcomes == st["http_requests"], (outcomes, st["http_requests"])
    assert outcomes == histogram(text, "sqfs_lazy_http_request_seconds",
                                 outcome="ok")[2], "a request went wrong"
    body = sum(v for n, lab, v in series(text)
               if n == "sqfs_lazy_http_response_bytes_sum")
    assert body == st["http_bytes"], (body, st["http_bytes"])
    # a cold read waited for the network at least once, and no more
    # often than the reads the daemon answered
    waits = histogram(text, "sqfs_lazy_read_network_wait_seconds")[2]
    assert 1 <= waits <= st["source_reads"], (waits, st["source_reads"])
    # one image, one codec: its decompressions are the counter's
    codecs = [(lab["codec"], v) for n, lab, v in series(text)
              if n == "sqfs_lazy_decompress_seconds_count"]
    assert [v for _, v in codecs] == [st["decompress_calls"]], codecs


def test_scrape_storm_during_reads(nginx, big_image, mounts):
    """Three clients scraping as fast as they can while the whole tree is
    read: every read returns the source's bytes, every scrape is answered
    (200), and the counters they see only grow."""
    port = free_port()
    m = mounts(nginx.url("img.sqfs"), ["metrics=127.0.0.1:%d" % port,
                                       "background=off"])
    stop = threading.Event()
    answered, bad, seen = [0], [], []

    def storm():
        last = 0
        while not stop.is_set():
            try:
                status, _, text = scrape_tcp(port)
            except OSError as e:
                bad.append(repr(e))
                continue
            if status != 200:
                bad.append(status)
                continue
            n = samples(text)[("sqfs_lazy_http_requests_total", "")][1]
            if n < last:
                seen.append((last, n))
            last = n
            answered[0] += 1

    threads = [threading.Thread(target=storm, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for root, _, files in os.walk(big_image["tree"]):
            for name in files:
                src = os.path.join(root, name)
                rel = os.path.relpath(src, big_image["tree"])
                with open(src, "rb") as a, \
                        open(os.path.join(m.mnt, rel), "rb") as b:
                    assert a.read() == b.read(), rel
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not bad, bad[:5]
    assert not seen, seen[:5]
    assert answered[0] >= 10, answered
    # scrapes within 100 ms of the last rendering get it again: a storm
    # costs the daemon a rendering per 100 ms, not one a scrape
    def renders():
        time.sleep(0.15)
        return samples(scrape_tcp(port)[2])[
            ("sqfs_lazy_metrics_renders_total", "")][1]
    before = renders()
    t0 = time.monotonic()
    for _ in range(50):
        scrape_tcp(port)
    spent = time.monotonic() - t0
    made = renders() - before
    assert 1 <= made <= 2 + spent / 0.1, (made, spent)


def test_promtool_and_unix_socket(nginx, mounts, tmp_path):
    sock = str(tmp_path / "metrics.sock")
    m = mounts(nginx.url("img.sqfs"), ["metrics=unix:" + sock])
    os.listdir(m.mnt)
    body = raw_request(unix(sock), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, text = body.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK"), head
    r = subprocess.run([promtool(), "check", "metrics"], input=text,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert b"sqfs_lazy_http_requests_total{" in text
    assert m.stop() == []
    assert not os.path.exists(sock), "socket left after unmount"


def test_bad_requests_and_slow_clients(nginx, mounts):
    port = free_port()
    m = mounts(nginx.url("img.sqfs"), ["metrics=127.0.0.1:%d" % port])
    c = tcp(port)
    assert raw_request(c, b"GET / HTTP/1.1\r\n\r\n").startswith(
        b"HTTP/1.1 404")
    assert raw_request(c, b"POST /metrics HTTP/1.1\r\n\r\n").startswith(
        b"HTTP/1.1 405")
    assert raw_request(c, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert raw_request(c, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000
                       + b"\r\n\r\n").startswith(b"HTTP/1.1 431")
    # a client that sends half a request and waits is closed on, without
    # an answer, within the request timeout (2 s)
    t0 = time.monotonic()
    assert raw_request(c, b"GET /metr") == b""
    assert time.monotonic() - t0 < 8
    # meanwhile and after, reads and scrapes go on
    slow = c()
    slow.sendall(b"GET /metrics HTTP/1.1\r\n")
    with open(os.path.join(m.mnt, "etc", "small.conf"), "rb") as f:
        assert f.read() == b"key = value\n" * 40
    slow.close()
    assert scrape_tcp(port)[0] == 200


def test_no_credentials_shown(nginx, mounts):
    port = free_port()
    url = nginx.url("img.sqfs").replace("http://",
                                        "http://user:s3cr3tpw@", 1) \
        + "?X-Amz-Signature=t0ps3cr3t"
    m = mounts(url, ["metrics=127.0.0.1:%d" % port])
    os.listdir(m.mnt)
    text = scrape_tcp(port)[2]
    assert "s3cr3tpw" not in text and "t0ps3cr3t" not in text
    assert 'image="http://***@' in text


def test_port_taken_fails_the_mount(nginx, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        rc, err, _ = try_mount(nginx.url("img.sqfs"), str(tmp_path / "mnt"),
                               str(tmp_path / "log"),
                               ["metrics=127.0.0.1:%d" % port])
    assert rc != 0
    assert "metrics=127.0.0.1:%d" % port in err, err
    assert "in use" in err, err


def test_prometheus_scrapes_a_mount(nginx, mounts, tmp_path):
    """Debian's Prometheus scrapes the mount every 200 ms: its target is
    up, and a query sees sqfs_lazy_http_requests_total grow after a read."""
    prom = shutil.which("prometheus")
    require(prom is not None, "prometheus not installed (Debian: prometheus)")
    port, web = free_port(), free_port()
    m = mounts(nginx.url("img.sqfs"), ["metrics=127.0.0.1:%d" % port])
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 200ms\n"
                   "scrape_configs:\n  - job_name: sqfs\n"
                   "    static_configs:\n"
                   "      - targets: ['127.0.0.1:%d']\n" % port)
    log = open(tmp_path / "prometheus.log", "wb")
    p = subprocess.Popen([prom, "--config.file=%s" % cfg,
                          "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                          "--web.listen-address=127.0.0.1:%d" % web],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    api = "http://127.0.0.1:%d/api/v1/" % web

    def get(path):
        with urllib.request.urlopen(api + path, timeout=10) as r:
            return json.load(r)["data"]

    def value():
        res = get("query?query=sqfs_lazy_http_requests_total")["result"]
        return float(res[0]["value"][1]) if res else None

    def wait_for(pred, what, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                v = pred()
                if v:
                    return v
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus: %s; log:\n%s" % (
            what, (tmp_path / "prometheus.log").read_text()[-3000:]))

    try:
        wait_for(lambda: any(t["health"] == "up" for t in
                             get("targets")["activeTargets"]),
                 "target not up")
        before = wait_for(value, "no sample")
        with open(os.path.join(m.mnt, "large.bin"), "rb") as f:
            f.read(4 << 20)
        wait_for(lambda: (value() or 0) > before, "counter did not grow")
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
        log.close()


def test_alert_rules_check():
    src = os.environ.get("LSQ_SOURCE_DIR",
                         os.path.join(os.path.dirname(__file__), "..", ".."))
    rules = os.path.join(src, "docs", "metrics-alerts.yml")
    r = subprocess.run([promtool(), "check", "rules", rules],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "4 rules found" in r.stdout, r.stdout


def test_status_for_a_person(nginx, mounts):
    """--status: the image (no credentials), since when, what was fetched
    from where, hit ratios, the round trip, and the last problem logged
    (here the warning that -o rw is ignored, which names the option)."""
    url = nginx.url("img.sqfs").replace("http://", "http://u:pw5ecret@", 1)
    m = mounts(url, ["rw", "background=off", "prefetch=off"])
    with open(os.path.join(m.mnt, "large.bin"), "rb") as f:
        f.read(1 << 20)
    st = stats(m.mnt)
    r = subprocess.run([daemon(), "--status", m.mnt], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "pw5ecret" not in out
    lines = out.splitlines()
    assert lines[0] == "%s: http://***@%s" % (
        m.mnt, nginx.url("img.sqfs")[len("http://"):]), out
    assert "mounted " in lines[1] and "s ago), pid %d" % m.proc.pid \
        in lines[1], out
    assert "fetched " in out and " in %d requests" % st["http_requests"] \
        in out, (out, st)
    assert "round trip " in out and "caches: data " in out, out
    assert re.search(r"reads waited for the network [1-9][0-9]* times: "
                     r"half within [0-9.]+ m?s, 99% within [0-9.]+ m?s",
                     out), out
    assert "mirror in use" not in out, out
    assert "prefetch:" not in out and "background:" not in out, out
    assert re.search(r"problems: [1-9][0-9]* in the last minute; the "
                     r"last, at ", out), out
    assert out.rstrip().endswith("ignoring -o rw: the mount is always "
                                 "read-only"), out
    # not a mount: one error line, exit 1
    r = subprocess.run([daemon(), "--status", "/"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "not the root of a sqfs-lazy mount" in \
        r.stderr, r
