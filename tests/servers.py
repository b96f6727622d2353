"""Servers for the test suites, and the small helpers they all use.

Every suite that reads over HTTP (http, integration with LSQ_VIA_HTTP=1,
leak, concurrency, systemd) starts nginx from here, so there is one place
that writes its config and one access log format to parse. The fault server
is tests/http/fault_server.py (the soak bench imports it from there).

Each suite's conftest.py puts tests/ on sys.path to import this module.
"""

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest


def require(cond, reason):
    """Skip when a prerequisite is missing. tests/run.sh counts every skip
    as a failure unless LSQ_ALLOW_SKIPS=1 (docs/testing.md), so the
    verdict is the same in CI and for a person."""
    if cond:
        return
    pytest.skip(reason)


def require_mount_env():
    require(os.geteuid() == 0, "needs root")
    require(os.path.exists("/dev/fuse"), "no /dev/fuse")
    require(shutil.which("fusermount3") is not None, "fusermount3 missing")


def kernel_loop_mount(image, mnt):
    """Mount `image` on `mnt` with the kernel's squashfs over a loop device:
    the oracle a FUSE mount is compared with. Root is a prerequisite
    (require); with root, a refusal fails the test, since without the
    oracle the comparison would check nothing. The caller unmounts
    (kernel_umount)."""
    require(os.geteuid() == 0, "needs root for a loop mount")
    r = subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro",
                        str(image), str(mnt)], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        pytest.fail("the kernel's loop mount of %s failed (exit %d), so "
                    "there is nothing to compare the FUSE mount with; the "
                    "kernel needs squashfs (with this image's compressor) "
                    "and loop devices: %s"
                    % (image, r.returncode, r.stderr.strip()), pytrace=False)


def kernel_umount(mnt):
    """Undo kernel_loop_mount (lazily if the mount is busy)."""
    if is_mounted(mnt):
        r = subprocess.run(["umount", str(mnt)], capture_output=True)
        if r.returncode != 0 or is_mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4].replace("\\040", " ") == path:
                return True
    return False


def unmount(path):
    """Best effort (lazy), for teardown."""
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", path],
                       capture_output=True, timeout=30)


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def nginx_binary():
    for p in ("/usr/sbin/nginx", "/usr/bin/nginx"):
        if os.access(p, os.X_OK):
            return p
    return shutil.which("nginx")


# One line per request; entries() splits it on the quotes.
# The fields after $server_protocol were added for the caching tier
# (tests/http/test_tier.py): the body alone, and the cache's verdict ("-"
# where nginx is not a cache).
LOG_FORMAT = ("'$request_method $status $bytes_sent \"$http_range\" "
              "\"$http_if_range\" \"$http_user_agent\" \"$request_uri\" "
              "$connection $server_protocol $body_bytes_sent "
              "$upstream_cache_status'")

# In the foreground, one process and our child: stop() ends all of it.
# tcp_nopush stays at its default (off): with it, answers of about 64 KiB
# (one compressed block) wait 40 ms on loopback. keepalive_requests is
# raised from 1000 so that long runs stay on few connections.
CONFIG = """daemon off;
master_process off;
worker_processes 1;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log;
events { worker_connections 512; }
http {
  log_format ranges %(fmt)s;
  access_log %(access)s ranges;
  default_type application/octet-stream;
  client_body_temp_path %(dir)s/tmp; proxy_temp_path %(dir)s/tmp;
  fastcgi_temp_path %(dir)s/tmp; uwsgi_temp_path %(dir)s/tmp;
  scgi_temp_path %(dir)s/tmp;
  keepalive_requests 100000;
  %(http_extra)s
  server { %(listen)s %(tls)s %(server)s }
}
"""


class Nginx:
    """nginx serving `root` on 127.0.0.1 (HTTPS and HTTP/2 with
    tls=(cert, key)); `workdir` holds its config, logs and pid file."""

    def __init__(self, workdir, root, tls=None, server_extra=""):
        self.dir = str(workdir)
        self.root = str(root) if root is not None else None
        self.server_extra = server_extra
        self.tls = tls
        self.cert = tls[0] if tls else None
        self.port = None
        self.access = os.path.join(self.dir, "access.log")
        self.proc = None
        self._pub_lock = threading.Lock()
        self._published = {}

    def start(self, attempts=5):
        nginx = nginx_binary()
        if not nginx:
            raise RuntimeError("nginx not installed")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        conf = os.path.join(self.dir, "nginx.conf")
        last = ""
        # Another process can take the free port before nginx binds it:
        # retry with a fresh one.
        for _ in range(attempts):
            self.port = free_port()
            listen = "listen 127.0.0.1:%d%s;" % (
                self.port, " ssl http2" if self.tls else "")
            tls = ("ssl_certificate %s; ssl_certificate_key %s;" % self.tls
                   if self.tls else "")
            with open(conf, "w") as f:
                f.write(CONFIG % {"dir": self.dir, "access": self.access,
                                  "fmt": LOG_FORMAT, "listen": listen,
                                  "tls": tls,
                                  "http_extra": self.http_extra(),
                                  "server": self.server_conf()})
            # stderr to a file: a pipe nobody reads could fill and stall it
            with open(os.path.join(self.dir, "stderr.log"), "wb") as err:
                self.proc = subprocess.Popen(
                    [nginx, "-c", conf, "-p", self.dir + "/"],
                    stdout=subprocess.DEVNULL, stderr=err,
                    stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.alive():
                try:
                    socket.create_connection(("127.0.0.1", self.port),
                                             0.2).close()
                    return self
                except OSError:
                    time.sleep(0.05)
            self.stop()
            with open(os.path.join(self.dir, "stderr.log"), "rb") as f:
                last = f.read().decode(errors="replace")
        raise RuntimeError("nginx did not start: %s" % last)

    def http_extra(self):
        """Directives of the http block (a subclass's)."""
        return ""

    def server_conf(self):
        """The server block after listen and TLS: serve the root (plus
        `server_extra`, e.g. "etag off;")."""
        return "root %s; %s" % (self.root, self.server_extra)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def url(self, name):
        """URL of `name` in the served directory, or of an absolute path:
        one outside that directory (existing or not: a missing one gives
        404) is published there as a symlink pub/<n>-<file name>."""
        name = str(name)
        if os.path.isabs(name):
            path = os.path.abspath(name)
            if os.path.dirname(path) == os.path.abspath(self.root):
                name = os.path.basename(path)
            else:
                with self._pub_lock:
                    name = self._published.get(path)
                    if name is None:
                        os.makedirs(os.path.join(self.root, "pub"),
                                    exist_ok=True)
                        name = "pub/%d-%s" % (len(self._published),
                                              os.path.basename(path))
                        os.symlink(path, os.path.join(self.root, name))
                        self._published[path] = name
        return "%s://127.0.0.1:%d/%s" % ("https" if self.tls else "http",
                                         self.port, urllib.parse.quote(name))

    def entries(self):
        """Access log entries: dicts with method, status, bytes (headers
        included), range, if_range, ua, uri, conn, proto, body (bytes of
        the body alone) and cache (HIT, MISS, ... on a caching tier, "-"
        elsewhere)."""
        out = []
        try:
            with open(self.access) as f:
                lines = f.readlines()
        except OSError:
            return out
        for line in lines:
            parts = line.split('"')
            if len(parts) < 9:      # a line still being written
                continue
            head, tail = parts[0].split(), parts[8].split()
            out.append({"method": head[0], "status": int(head[1]),
                        "bytes": int(head[2]), "range": parts[1],
                        "if_range": parts[3], "ua": parts[5],
                        "uri": parts[7], "conn": int(tail[0]),
                        "proto": tail[1], "body": int(tail[2]),
                        "cache": tail[3]})
        return out

    def clear_log(self):
        open(self.access, "w").close()
        self.proc.send_signal(signal.SIGUSR1)  # reopen the log
        time.sleep(0.1)

    def summary(self):
        """Per served file, in order of first request: [requests, bytes
        sent, {status: count}]."""
        per = {}
        for e in self.entries():
            name = urllib.parse.unquote(e["uri"].lstrip("/"))
            r = per.setdefault(name, [0, 0, {}])
            r[0] += 1
            r[1] += e["bytes"]
            r[2][e["status"]] = r[2].get(e["status"], 0) + 1
        return per


# A caching reverse proxy in front of an origin, shaped as CDNs cache large
# objects: in slices of SLICE bytes, each slice a cache entry of its own,
# fetched from the origin with Range: bytes=<slice> whatever the client
# asked (docs/deploy.md explains every line). proxy_cache_lock lets one
# request fill a slice while the others wait for it, so mounts that start
# together do not each fetch it from the origin. nginx forwards no
# If-Range, If-Match or other conditional header of the client to the
# origin when it caches; the origin sees only the slice ranges.
TIER_HTTP = """proxy_cache_path %(dir)s/cache levels=1:2 keys_zone=tier:8m
    max_size=%(max_size)s inactive=%(valid)s use_temp_path=off;
  upstream origin { server %(origin)s; keepalive 16; }"""

TIER_SERVER = """location / {
    slice %(slice)s;
    proxy_cache tier;
    proxy_cache_key $uri$is_args$args$slice_range;
    proxy_set_header Range $slice_range;
    proxy_cache_valid 200 206 %(valid)s;
    proxy_cache_lock on;
    proxy_cache_lock_timeout 60s;
    proxy_cache_lock_age 60s;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host %(origin)s;
    proxy_pass http://origin;
  }"""


class NginxTier(Nginx):
    """nginx as a slice-caching reverse proxy of `origin` ("HOST:PORT" of
    an HTTP server), its cache under `workdir`/cache."""

    def __init__(self, workdir, origin, slice_size="1m", valid="1h",
                 max_size="4g"):
        super().__init__(workdir, None)
        self.origin = origin
        self.slice = slice_size
        self.valid = valid
        self.max_size = max_size

    def _vars(self):
        return {"dir": self.dir, "origin": self.origin, "slice": self.slice,
                "valid": self.valid, "max_size": self.max_size}

    def http_extra(self):
        return TIER_HTTP % self._vars()

    def server_conf(self):
        return TIER_SERVER % self._vars()

    def url(self, name):
        return "http://127.0.0.1:%d/%s" % (self.port, name.lstrip("/"))

    def purge(self):
        """Empty the cache (nginx stopped)."""
        shutil.rmtree(os.path.join(self.dir, "cache"), ignore_errors=True)


def start_tier(workdir, origin, **kw):
    """A running NginxTier (a missing or broken nginx as in start_nginx)."""
    require(nginx_binary() is not None, "nginx not installed")
    n = NginxTier(workdir, origin, **kw)
    try:
        return n.start()
    except RuntimeError as e:
        why = str(e)
    pytest.fail(why, pytrace=False)


def start_nginx(workdir, root, tls=None, server_extra=""):
    """A running Nginx. A missing nginx is a missing prerequisite (require:
    a skip, which tests/run.sh fails); an installed nginx that does not start
    fails the test, as any broken server would."""
    require(nginx_binary() is not None, "nginx not installed")
    n = Nginx(workdir, root, tls, server_extra)
    try:
        return n.start()
    except RuntimeError as e:
        why = str(e)
    pytest.fail(why, pytrace=False)


# The image's last bytes, asked for beside the probe (LSQ_HTTP_TAIL_SIZE)
TAIL = 512 * 1024
TAIL_RANGE = "bytes=-%d" % TAIL
OPENER_RANGE = re.compile(r"bytes=(\d+)-\1$|%s$" % TAIL_RANGE)


def without_openers(entries):
    """Access log entries less the requests a mount sends beside its probe
    to open the connections readahead uses (docs/http-source.md,
    http_warmup.c): 1-byte ranges, and on the first connection the
    image's last TAIL bytes (its metadata tables, kept when the probe's
    answer says they are the same image's). They carry no If-Range."""
    return [e for e in entries if not OPENER_RANGE.match(e.get("range") or "")]
