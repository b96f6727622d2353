"""Leak check of a whole daemon life: mount a small image, read everything
(every file, symlink, xattr, directory), unmount, and require that the
daemon exits 0 with no memory error and no definite leak.

Plain builds run the daemon under valgrind memcheck; in the ASan build
(LSQ_SANITIZE contains "address") valgrind cannot run the binary, so
LeakSanitizer does the same job at exit. Over a local file and over HTTP
(nginx on 127.0.0.1), since the HTTP source owns the most allocations.
"""

import os
import re
import shutil
import subprocess
import time

import pytest

import servers
import util

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures",
                       "gzip.sqfs")
ASAN = "address" in os.environ.get("LSQ_SANITIZE", "")


def read_everything(root):
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames + ["."]:
            p = os.path.join(dirpath, name)
            for x in os.listxattr(p, follow_symlinks=False):
                os.getxattr(p, x, follow_symlinks=False)
            if os.path.islink(p):
                os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    while f.read(1 << 20):
                        pass
            n += 1
    return n


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    d = tmp_path_factory.mktemp("leak-nginx")
    www = d / "www"
    www.mkdir()
    shutil.copy(FIXTURE, www / "gzip.sqfs")
    s = servers.start_nginx(d / "conf", www)
    yield s
    s.stop()


@pytest.mark.parametrize("via", ["file", "http"])
def test_mount_read_unmount_no_leak(tmp_path, request, via):
    util.require_fuse()
    util.require_daemon()
    src = FIXTURE
    if via == "http":
        src = request.getfixturevalue("nginx").url(
            os.path.join(request.getfixturevalue("nginx").root, "gzip.sqfs"))
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    log = str(tmp_path / "leak.log")
    env = dict(os.environ)
    if ASAN:
        env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=99:" \
            "log_path=" + log
        cmd = [util.daemon_path(), "-f", src, mnt]
    else:
        util.require(util.have_tool("valgrind"), "valgrind not installed")
        cmd = ["valgrind", "--tool=memcheck", "--leak-check=full",
               "--errors-for-leak-kinds=definite",
               "--show-leak-kinds=definite", "--error-exitcode=99",
               "--log-file=" + log, util.daemon_path(), "-f",
               # valgrind keeps its one-thread-at-a-time lock across a
               # blocking io_uring_enter(): a ring thread waiting for a
               # request would stop every other thread for good, so on
               # a kernel where root switched FUSE rings on, /dev/fuse
               "-o", "io_uring=off", src, mnt]
    out = str(tmp_path / "daemon.out")
    with open(out, "wb") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=f, env=env,
                             stdin=subprocess.DEVNULL)
    try:
        ok = util.wait_until(lambda: util.is_mounted(mnt) or
                             p.poll() is not None, 90)
        assert ok and util.is_mounted(mnt), open(out).read()
        n = read_everything(mnt)
        assert n > 20, "only %d paths read" % n
    finally:
        if util.is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        try:
            rc = p.wait(120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
        util.force_unmount(mnt)
    reports = ""
    for q in [log] + [os.path.join(tmp_path, x) for x in os.listdir(tmp_path)
                      if x.startswith("leak.log.")]:
        if os.path.exists(q):
            with open(q, errors="replace") as f:
                reports += f.read()
    assert rc == 0, "exit status %s\n%s\n%s" % (rc, open(out).read()[-3000:],
                                                reports[-8000:])
    if ASAN:
        assert "LeakSanitizer" not in reports and \
            "AddressSanitizer" not in reports, reports[-8000:]
    else:
        # memcheck really ran, and found nothing
        m = re.search(r"ERROR SUMMARY: (\d+) errors", reports)
        assert m and m.group(1) == "0", reports[-8000:]
        assert "definitely lost: 0 bytes" in reports or \
            "All heap blocks were freed" in reports, reports[-8000:]
