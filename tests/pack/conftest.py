"""Fixtures for the packer suite (tests/pack).

Environment: LSQ_BUILD_DIR (meson build root; the packer is
$LSQ_BUILD_DIR/src/pack/sqfs-lazy-pack). A missing prerequisite is a
skip, which tests/run.sh fails unless LSQ_ALLOW_SKIPS=1.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import packtree  # noqa: E402


def need(cond, why):
    """Skip when a prerequisite is missing (tests/run.sh fails skips)."""
    if cond:
        return
    pytest.skip(why)


def build_dir():
    return os.environ.get("LSQ_BUILD_DIR", "")


def packer():
    p = os.path.join(build_dir(), "src", "pack", "sqfs-lazy-pack")
    need(os.access(p, os.X_OK), "packer not built at " + p)
    return p


def cat_tool():
    p = os.path.join(build_dir(), "sqfs-lazy-cat")
    need(os.access(p, os.X_OK), "sqfs-lazy-cat not built at " + p)
    return p


_shared_packer = None


def packer_for_others():
    """A copy of the packer that other users can execute: the build tree
    may sit below a private directory (mktemp -d makes 0700 ones)."""
    global _shared_packer
    if _shared_packer is None:
        d = tempfile.mkdtemp(prefix="lsq-pack-bin-")
        atexit.register(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        _shared_packer = os.path.join(d, "sqfs-lazy-pack")
        shutil.copy2(packer(), _shared_packer)
        os.chmod(_shared_packer, 0o755)
    return _shared_packer


def pack(src, out, *args, env=None, check=True, user=None):
    cmd = [packer(), "-q", *args, src, out]
    if user:
        cmd = ["runuser", "-u", user, "--", packer_for_others()] + cmd[1:]
    e = dict(os.environ)
    e.pop("SOURCE_DATE_EPOCH", None)
    if env:
        e.update(env)
    r = subprocess.run(cmd, capture_output=True, text=True, env=e,
                       timeout=300)
    if check and r.returncode != 0:
        raise AssertionError("pack failed (%d): %s\n%s" % (
            r.returncode, " ".join(cmd), r.stderr))
    return r


@pytest.fixture(scope="session")
def base():
    """A world-readable scratch directory (nobody must reach into it)."""
    d = tempfile.mkdtemp(prefix="lsq-pack-")
    os.chmod(d, 0o755)
    yield d
    for e in open("/proc/self/mounts").read().splitlines():
        mp = e.split()[1]
        if mp.startswith(d + "/"):
            subprocess.run(["umount", "-l", mp], check=False)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def tree(base):
    need(os.geteuid() == 0, "the edge-case tree needs root (devices, ids)")
    root = os.path.join(base, "tree")
    packtree.build(root)
    return root


@pytest.fixture
def mount_image(base):
    """mount_image(image) -> mount point; unmounted at teardown."""
    mounted = []

    def do(image):
        need(os.geteuid() == 0, "loop mounts need root")
        mp = tempfile.mkdtemp(dir=base, prefix="mnt-")
        r = subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro",
                            image, mp], capture_output=True, text=True)
        assert r.returncode == 0, "kernel refused the image: " + r.stderr
        mounted.append(mp)
        return mp

    yield do
    for mp in mounted:
        subprocess.run(["umount", mp], check=False)
        os.rmdir(mp)
