"""Fixtures of the systemd suite: the daemon and helper from the build
tree, a small image made here with known contents, and nginx serving it on
127.0.0.1 (tests/integration/httpserve.py).

Missing tools skip the tests on a developer machine and fail them when CI is
set (CI runs as root with everything scripts/install-deps.sh installs).
"""

import hashlib
import os
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import httpserve  # noqa: E402


def require(cond, reason):
    if cond:
        return
    if os.environ.get("CI"):
        pytest.fail("prerequisite missing (CI is set): " + reason,
                    pytrace=False)
    pytest.skip(reason)


def build_dir():
    b = os.environ.get("LSQ_BUILD_DIR")
    require(b is not None, "LSQ_BUILD_DIR is not set")
    return b


def source_dir():
    return os.environ.get("LSQ_SOURCE_DIR",
                          os.path.abspath(os.path.join(HERE, "..", "..")))


def daemon():
    p = os.path.join(build_dir(), "sqfs-lazy-mount")
    require(os.access(p, os.X_OK), "daemon not built: %s" % p)
    return p


def require_mount_env():
    require(os.geteuid() == 0, "needs root")
    require(os.path.exists("/dev/fuse"), "no /dev/fuse")
    require(shutil.which("fusermount3") is not None, "fusermount3 missing")


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4].replace("\\040", " ") == path:
                return True
    return False


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def unmount(path):
    """Best effort, for teardown."""
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", path],
                       capture_output=True, timeout=30)


# Files of the test image: name -> bytes. One spans several 128K blocks.
CONTENT = {
    "hello.txt": b"hello from sqfs-lazy\n",
    "sub/data.bin": bytes((i * 7 + (i >> 9)) & 0xff for i in range(300000)),
}


@pytest.fixture(scope="session")
def image(tmp_path_factory):
    """(image path, source tree) made with mksquashfs."""
    require(shutil.which("mksquashfs") is not None, "mksquashfs missing")
    d = tmp_path_factory.mktemp("img")
    tree = d / "tree"
    for name, data in CONTENT.items():
        p = tree / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    img = d / "test.sqfs"
    subprocess.run(["mksquashfs", str(tree), str(img), "-noappend",
                    "-quiet", "-no-progress"], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    os.chmod(d, 0o755)  # nginx workers and the container read it
    return str(img), str(tree)


@pytest.fixture(scope="session")
def nginx(tmp_path_factory, image):
    """nginx on 127.0.0.1 serving the image's directory."""
    require(httpserve.nginx_binary() is not None, "nginx missing")
    conf = tmp_path_factory.mktemp("nginx")
    srv = httpserve.Nginx(conf, os.path.dirname(image[0])).start()
    yield srv
    srv.stop()


def check_tree(mnt, tree):
    """Every file of CONTENT reads back as in the source tree."""
    for name in CONTENT:
        assert sha256(os.path.join(mnt, name)) == \
            sha256(os.path.join(tree, name)), name
