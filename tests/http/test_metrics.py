"""-o metrics= (issue 36): the mount's counters at GET /metrics in the
Prometheus text format, over TCP and a unix socket. Checked with Debian's
promtool and a real Prometheus scraping a mount; every --stats counter is
there with its value; bad requests get an error or a closed connection;
credentials never show; a taken port fails the mount."""

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import daemon, require, try_mount
from servers import free_port
from test_cache import stats

# gauges that move by themselves between two reads of the counters
# (the scrape's own connection is one more descriptor)
MOVING = {"process_rss_bytes", "process_rss_peak_bytes", "buffer_pool_bytes",
          "process_threads", "process_open_fds"}


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


def samples(text):
    """{metric name: (labels, value)} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        name, _, labels = name_labels.partition("{")
        out[name] = ("{" + labels if labels else "", float(value))
    return out


def prom_name(stat):
    """The exposition's name of a --stats counter (metrics.c)."""
    for unit, scale in (("_ns", 1e9), ("_us", 1e6)):
        if stat.endswith(unit):
            return "sqfs_lazy_" + stat[:-3] + "_seconds", scale
    return "sqfs_lazy_" + stat, 1


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
    assert got["sqfs_lazy_build_info"][1] == 1
    assert 'version="' in got["sqfs_lazy_build_info"][0]
    # the mount is idle: every counter reads as --stats read it
    missing, differ = [], []
    for k, v in st.items():
        name, scale = prom_name(k)
        cand = [n for n in (name + "_total", name) if n in got]
        if not cand:
            missing.append(k)
            continue
        labels, value = got[cand[0]]
        assert 'mountpoint="%s"' % os.path.realpath(m.mnt) in labels, labels
        assert 'image="%s"' % nginx.url("img.sqfs") in labels, labels
        if k not in MOVING and abs(value * scale - v) > 0.5:
            differ.append((k, v, value))
    assert not missing, missing
    assert not differ, differ
    # reads show
    assert got["sqfs_lazy_http_requests_total"][1] > 0
    with open(os.path.join(m.mnt, "large.bin"), "rb") as f:
        f.read(1 << 20)
    after = samples(scrape_tcp(port)[2])
    assert after["sqfs_lazy_http_bytes_total"][1] > \
        got["sqfs_lazy_http_bytes_total"][1]


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
    assert "3 rules found" in r.stdout, r.stdout


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
