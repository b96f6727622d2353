"""Fixtures of the systemd suite: the daemon and helper from the build
tree, a small image made here with known contents, and nginx serving it on
127.0.0.1 (tests/servers.py, which also has the small helpers used here).

A missing tool skips a test (servers.require()); tests/run.sh counts each
skip as a failure, with its reason, unless LSQ_ALLOW_SKIPS=1
(docs/testing.md). scripts/install-deps.sh installs every tool needed.
"""

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

from servers import (is_mounted, require, require_mount_env,  # noqa: E402,F401
                     sha256_file, start_nginx, unmount, wait_for)


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
    srv = start_nginx(tmp_path_factory.mktemp("nginx"),
                      os.path.dirname(image[0]))
    yield srv
    srv.stop()


def check_tree(mnt, tree):
    """Every file of CONTENT reads back as in the source tree."""
    for name in CONTENT:
        assert sha256_file(os.path.join(mnt, name)) == \
            sha256_file(os.path.join(tree, name)), name
