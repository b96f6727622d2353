"""Access checks as an unprivileged user, compared with the kernel.

The mount always runs with default_permissions, so the kernel applies the
image's modes; listxattr hides trusted.* from callers without privilege, as
the kernel's squashfs does."""
import os
import shutil
import subprocess
import tempfile

import pytest

import util

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gzip.sqfs")

PROBE = r"""
import os, sys
out = []
for p in sys.argv[1:]:
    for mode, name in ((os.R_OK, "r"), (os.X_OK, "x")):
        out.append("%s %s %s" % (os.path.basename(p), name, os.access(p, mode)))
    try:
        out.append("%s list %s" % (os.path.basename(p), sorted(os.listxattr(p))))
    except OSError as e:
        out.append("%s list errno %d" % (os.path.basename(p), e.errno))
    try:
        with open(p, "rb") as f:
            out.append("%s read %d" % (os.path.basename(p), len(f.read())))
    except OSError as e:
        out.append("%s read errno %d" % (os.path.basename(p), e.errno))
print("\n".join(out))
"""

NAMES = ("text", "size_1", "size_4096", "size_4095", "random")


def probe_as(user, root):
    paths = [os.path.join(root, n) for n in NAMES]
    r = subprocess.run(["runuser", "-u", user, "--", "python3", "-c", PROBE]
                       + paths, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


@pytest.fixture
def public_dir():
    util.require_root()
    d = tempfile.mkdtemp(prefix="lsq-perm-")
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("user", ["nobody", "root"])
def test_access_and_xattrs_match_kernel(public_dir, user):
    util.require_fuse()
    util.require_daemon()
    util.require_kernel_squashfs()
    kmnt = os.path.join(public_dir, "k")
    fmnt = os.path.join(public_dir, "f")
    km = util.KernelMount(FIXTURE, kmnt)
    fm = util.FuseMount(FIXTURE, fmnt, fmnt + ".log", opts=["allow_other"])
    try:
        km.start()
        fm.start()
        kernel = probe_as(user, kmnt)
        ours = probe_as(user, fmnt)
        assert ours == kernel
        # the cases this guards actually occur in the fixture
        if user == "nobody":
            assert "trusted" not in ours
            assert "size_4096 read errno 13" in ours
        else:
            assert "trusted.big" in ours
            assert "text x False" in ours
    finally:
        problems = fm.stop()
        km.stop()
        assert not problems, problems
