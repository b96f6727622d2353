"""A mount made by an unprivileged user (#21): no root, no CAP_SYS_NICE,
no /dev/cpu_dma_latency, the kernel's mount(2) refused, so libfuse mounts
through the setuid fusermount3. With the same defaults as root, the user
sees what the same user sees on a kernel loop mount of the image, the
daemon logs at most one line about what it skipped, and the user's
fusermount3 -u ends it cleanly.

/dev/fuse is made 0666 for the test, as udev leaves it on every
distribution (this machine's is 0600). The daemon is copied to a directory
the user can reach: CI's clone lives under a private temporary directory.
"""
import json
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

import util

USER = "nobody"
FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures",
                       "zstd.sqfs")

# Everything USER can see of a tree: types, modes, ids, sizes, link
# targets, listings, and each file's sha256 or the errno of reading it.
PROBE = r"""
import hashlib, json, os, stat, sys
root = sys.argv[1]
out = {}
for dirpath, dirs, files in os.walk(root):
    dirs.sort()
    for name in sorted(dirs + files) + ([""] if dirpath == root else []):
        p = os.path.join(dirpath, name)
        st = os.lstat(p)
        rec = [st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_nlink]
        if stat.S_ISLNK(st.st_mode):
            rec.append(os.readlink(p))
        elif stat.S_ISREG(st.st_mode):
            try:
                with open(p, "rb") as f:
                    rec.append(hashlib.sha256(f.read()).hexdigest())
            except OSError as e:
                rec.append(e.errno)
        elif stat.S_ISDIR(st.st_mode):
            try:
                rec.append(sorted(os.listdir(p)))
            except OSError as e:
                rec.append(e.errno)
        out[os.path.relpath(p, root)] = rec
print(json.dumps(out, sort_keys=True))
"""


def as_user(*cmd, timeout=60):
    return subprocess.run(["runuser", "-u", USER, "--"] + list(cmd),
                          capture_output=True, text=True, timeout=timeout)


def probe(root):
    r = as_user("python3", "-c", PROBE, root, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def stage():
    """A directory USER reaches, with the daemon, the image, two mount
    points, and /dev/fuse open to everyone."""
    util.require_root()
    util.require_fuse()
    util.require_daemon()
    util.require(not util.using_override(), "LSQ_MOUNT_CMD is set")
    util.require(shutil.which("runuser") is not None, "runuser missing")
    d = tempfile.mkdtemp(prefix="lsq-user-")
    os.chmod(d, 0o755)
    fuse_mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    os.chmod("/dev/fuse", 0o666)
    uid = int(subprocess.run(["id", "-u", USER], capture_output=True,
                             text=True, check=True).stdout)
    try:
        shutil.copy(util.daemon_path(), d)
        shutil.copy(FIXTURE, d)
        os.chmod(os.path.join(d, "zstd.sqfs"), 0o644)
        for m in ("mnt", "kmnt"):
            os.mkdir(os.path.join(d, m))
        os.chown(os.path.join(d, "mnt"), uid, -1)
        yield d
    finally:
        os.chmod("/dev/fuse", fuse_mode)
        for m in ("mnt", "kmnt"):
            util.force_unmount(os.path.join(d, m))
        shutil.rmtree(d, ignore_errors=True)


def test_unprivileged_mount_matches_the_kernel(stage):
    mnt = os.path.join(stage, "mnt")
    kmnt = os.path.join(stage, "kmnt")
    util.KernelMount(os.path.join(stage, "zstd.sqfs"), kmnt).start()
    want = probe(kmnt)
    read = [r for r in want.values() if isinstance(r[-1], str) and
            len(r[-1]) == 64]
    assert len(want) > 20 and len(read) > 5, want  # the probe sees a tree
    log = open(os.path.join(stage, "log"), "w+")
    daemon = subprocess.Popen(
        ["runuser", "-u", USER, "--", os.path.join(stage, "sqfs-lazy-mount"),
         "-f", util.image_source(os.path.join(stage, "zstd.sqfs")), mnt],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        assert util.wait_until(lambda: util.is_mounted(mnt), 30), \
            open(log.name).read()
        with open("/proc/mounts") as f:
            opts = next(l.split()[3].split(",") for l in f
                        if l.split()[1] == mnt)
        assert "nodev" in opts and "nosuid" in opts, opts
        assert "allow_other" not in opts, opts
        got = probe(mnt)
        assert got == want, [k for k in set(got) | set(want)
                             if got.get(k) != want.get(k)][:20]
        # the user's own unmount ends the daemon
        r = as_user("fusermount3", "-u", mnt)
        assert r.returncode == 0, r.stderr
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert not util.is_mounted(mnt)
    lines = [l for l in open(log.name).read().splitlines()
             if not l.endswith(": unmounting")]
    assert len(lines) <= 1, lines
