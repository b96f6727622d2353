"""Fixtures of the HTTP suite: images, nginx (plain and TLS; tests/servers.py),
our fault server, and FUSE mounts of URLs with sqfs-lazy-mount.

Missing tools skip the tests on a developer machine and fail them when CI is
set (CI runs as root with everything installed).
"""

import errno
import os
import random
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

from fault_server import FaultServer  # noqa: E402
from servers import (is_mounted, require, require_mount_env,  # noqa: E402,F401
                     sha256_file, start_nginx, unmount)

MOUNT_TIMEOUT = 30.0


def daemon():
    b = os.environ.get("LSQ_BUILD_DIR")
    require(b is not None, "LSQ_BUILD_DIR is not set")
    p = os.path.join(b, "sqfs-lazy-mount")
    require(os.access(p, os.X_OK), "daemon not built: %s" % p)
    if p not in _HTTP_BUILDS:
        v = subprocess.run([p, "--version"], capture_output=True, text=True)
        _HTTP_BUILDS[p] = "http: libcurl" in v.stdout
    require(_HTTP_BUILDS[p], "daemon built without libcurl: %s" % p)
    return p


_HTTP_BUILDS = {}


def read_with_timeout(path, timeout=60):
    """Read a file in a child process, so a hung read cannot hang the test.
    Returns (ok, data or stderr text, seconds)."""
    t0 = time.monotonic()
    r = subprocess.run(["cat", path], capture_output=True, timeout=timeout)
    dt = time.monotonic() - t0
    if r.returncode == 0:
        return True, r.stdout, dt
    return False, r.stderr.decode(errors="replace"), dt


class Mount:
    """sqfs-lazy-mount -f URL MNT, as a child process."""

    def __init__(self, url, mnt, log, opts=(), env=None):
        self.url, self.mnt, self.logpath = url, mnt, log
        self.opts = list(opts)
        self.env = env
        self.proc = None

    def cmd(self):
        c = [daemon(), "-f"]
        for o in self.opts:
            c += ["-o", o]
        return c + [self.url, self.mnt]

    def start(self):
        os.makedirs(self.mnt, exist_ok=True)
        with open(self.logpath, "ab") as logf:
            self.proc = subprocess.Popen(self.cmd(), stdout=logf,
                                         stderr=logf, env=self.env,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(self.mnt):
            if self.proc.poll() is not None:
                raise AssertionError("daemon exited (%s) before mounting:\n%s"
                                     % (self.proc.returncode, self.log()))
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError("mount not ready in time")
            time.sleep(0.01)
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        problems = []
        if self.proc is None:
            return problems
        if self.proc.poll() is not None:
            problems.append("daemon had exited with %s" % self.proc.returncode)
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt],
                           capture_output=True)
            if is_mounted(self.mnt):
                subprocess.run(["fusermount3", "-u", "-z", self.mnt],
                               capture_output=True)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            problems.append("daemon did not exit after unmount")
            self.proc.kill()
            self.proc.wait(10)
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                    "ThreadSanitizer"):
            if bad in self.log():
                problems.append("sanitizer report:\n" + self.log()[-6000:])
                break
        self.proc = None
        return problems


def try_mount(url, mnt, log, opts=(), timeout=60, env=None):
    """Run the daemon expecting it to refuse: returns (rc, stderr, secs)."""
    os.makedirs(mnt, exist_ok=True)
    cmd = [daemon(), "-f"] + [a for o in opts for a in ("-o", o)] + [url, mnt]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout,
                           env=env)
    finally:
        unmount(mnt)
    return r.returncode, r.stderr.decode(errors="replace"), \
        time.monotonic() - t0


@pytest.fixture
def mounts(tmp_path):
    """Factory: mounts(url, opts) -> Mount, all stopped (and checked) at
    teardown."""
    made = []

    def make(url, opts=(), name="m", env=None):
        require_mount_env()
        m = Mount(url, str(tmp_path / ("mnt-%s-%d" % (name, len(made)))),
                  str(tmp_path / ("daemon-%d.log" % len(made))), opts, env)
        made.append(m)
        return m.start()

    yield make
    problems = []
    for m in made:
        problems += m.stop()
    assert not problems, problems


# ---------------------------------------------------------------------------
# Trees and images
# ---------------------------------------------------------------------------

def _randbytes(rng, n):
    return rng.getrandbits(8 * n).to_bytes(n, "little") if n else b""


def build_small_tree(root):
    """Files for the fault tests: each test reads files no other test read.
    Returns {relative path: bytes}."""
    rng = random.Random(1234)
    files = {}
    os.makedirs(os.path.join(root, "d"), exist_ok=True)
    for i in range(24):
        n = 200_000 + 37_000 * i
        # half random, half text: blocks of both kinds
        data = _randbytes(rng, n // 2) + (b"line %d\n" % i) * (n // 16)
        files["f%02d.bin" % i] = data
    files["d/small.txt"] = b"hello over http\n"
    files["d/empty"] = b""
    for rel, data in files.items():
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    os.symlink("small.txt", os.path.join(root, "d", "link"))
    return files


def mksquashfs(tree, out, *extra):
    require(shutil.which("mksquashfs") is not None, "mksquashfs missing")
    subprocess.run(["mksquashfs", tree, out, "-noappend", "-quiet",
                    "-no-progress", "-all-root", *extra], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)


@pytest.fixture(scope="session")
def small_image(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    tree = str(d / "tree")
    os.makedirs(tree)
    files = build_small_tree(tree)
    img = str(d / "small.sqfs")
    mksquashfs(tree, img, "-b", "65536")
    with open(img, "rb") as f:
        data = f.read()
    return {"path": img, "data": data, "files": files, "tree": tree}


@pytest.fixture(scope="session")
def big_image(tmp_path_factory):
    """About 200 MiB: one large incompressible file and a small tree."""
    d = tmp_path_factory.mktemp("big")
    tree = d / "tree"
    os.makedirs(tree / "etc" / "conf.d")
    rng = random.Random(99)
    with open(tree / "large.bin", "wb") as f:
        for _ in range(200):
            f.write(os.urandom(1 << 20))
    with open(tree / "etc" / "small.conf", "wb") as f:
        f.write(b"key = value\n" * 40)
    for i in range(200):
        with open(tree / "etc" / "conf.d" / ("c%03d" % i), "wb") as f:
            f.write(_randbytes(rng, rng.randrange(0, 6000)))
    os.symlink("../large.bin", tree / "etc" / "link")
    try:
        os.setxattr(tree / "etc" / "small.conf", "user.note", b"remote")
    except OSError:
        pass
    www = d / "www"
    os.makedirs(www)
    img = str(www / "img.sqfs")
    mksquashfs(str(tree), img, "-comp", "zstd", "-processors", "2")
    return {"path": img, "www": str(www), "tree": str(tree)}


# ---------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def nginx(big_image, tmp_path_factory):
    n = start_nginx(tmp_path_factory.mktemp("nginx"), big_image["www"])
    yield n
    n.stop()


@pytest.fixture(scope="session")
def tls_nginx(small_image, tmp_path_factory):
    require(shutil.which("openssl") is not None, "openssl missing")
    d = str(tmp_path_factory.mktemp("tls"))
    www = os.path.join(d, "www")
    os.makedirs(www)
    shutil.copy(small_image["path"], os.path.join(www, "small.sqfs"))
    key, crt = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-keyout", key, "-out", crt, "-days", "2",
                    "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    n = start_nginx(d, www, tls=(crt, key))
    yield n
    n.stop()


@pytest.fixture
def fault_server(small_image):
    s = FaultServer().start()
    s.add("/small.sqfs", small_image["data"])
    yield s
    s.stop()


def check_eio(ok, text):
    assert not ok, "read succeeded where it should fail"
    assert "Input/output error" in text, text


_ = errno  # re-exported for tests
