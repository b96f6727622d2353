"""Secure defaults of a mount: nodev and nosuid unless -o dev / -o suid,
allow_other only when asked (other users get EACCES without it). In HTTP
mode the same checks run on a URL mount. TLS verification and the
header_file rules are tested in tests/http (test_https.py,
test_faults.py::test_header_file, test_credentials.py)."""

import errno
import os
import shutil
import subprocess
import tempfile

import pytest

import util

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gzip.sqfs")


def mountinfo(mnt):
    """(per-mount options, super options) of the mount at mnt."""
    mnt = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if util._unescape(parts[4]) == mnt:
                sep = parts.index("-")
                return (set(parts[5].split(",")),
                        set(parts[sep + 3].split(",")))
    raise AssertionError("%s not in mountinfo" % mnt)


def as_nobody(*cmd):
    return subprocess.run(["runuser", "-u", "nobody", "--"] + list(cmd),
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def public_dir():
    util.require_fuse()
    util.require_daemon()
    d = tempfile.mkdtemp(prefix="lsq-secure-")
    os.chmod(d, 0o755)     # nobody must reach the mount point itself
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def mounted(public_dir, opts):
    mnt = os.path.join(public_dir, "mnt")
    m = util.FuseMount(FIXTURE, mnt, os.path.join(public_dir, "log"),
                       opts=opts)
    m.start()
    return m


def test_defaults_nodev_nosuid_private(public_dir):
    m = mounted(public_dir, [])
    try:
        per_mount, sup = mountinfo(m.mnt)
        assert {"nodev", "nosuid", "ro"} <= per_mount, per_mount
        assert "allow_other" not in sup, sup
        # a device node of the image cannot be opened
        with pytest.raises(OSError) as ei:
            os.open(os.path.join(m.mnt, "chardev"), os.O_RDONLY)
        assert ei.value.errno == errno.EACCES
        # another user cannot even look
        r = as_nobody("stat", m.mnt)
        assert r.returncode != 0 and "Permission denied" in r.stderr, r
        r = as_nobody("cat", os.path.join(m.mnt, "text"))
        assert r.returncode != 0 and "Permission denied" in r.stderr, r
    finally:
        problems = m.stop()
    assert not problems, problems


def test_dev_suid_allow_other_on_request(public_dir):
    m = mounted(public_dir, ["dev", "suid", "allow_other"])
    try:
        per_mount, sup = mountinfo(m.mnt)
        assert not {"nodev", "nosuid"} & per_mount, per_mount
        assert "allow_other" in sup, sup
        # rdev 1:7 is /dev/full: reads give zeros
        fd = os.open(os.path.join(m.mnt, "chardev"), os.O_RDONLY)
        try:
            assert os.read(fd, 8) == b"\0" * 8
        finally:
            os.close(fd)
        r = as_nobody("stat", "-c", "%a", m.mnt)
        assert r.returncode == 0, r
        r = as_nobody("cat", os.path.join(m.mnt, "text"))
        assert r.returncode == 0 and r.stdout, r
    finally:
        problems = m.stop()
    assert not problems, problems
