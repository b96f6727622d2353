"""The corruption corpus (corruptgen.py): every bad image derived from one
good small image is mounted with sqfs-lazy-mount -f.

Each one either
  - is refused: exit status 1 within seconds, exactly one stderr line that
    names the image and says what is wrong where (a field or an offset), or
  - mounts, and then a bounded walk of the whole tree (stat, readdir,
    readlink, xattrs, full reads) finishes in bounded time with only the
    errors a damaged image may give (EIO above all; never ENOTCONN, which
    means the daemon died), the daemon is alive at the end, unmounts and
    exits with status 0.
Never a sanitizer report in the daemon's log (the ASan+UBSan build runs
this file too; LeakSanitizer checks the exit).
"""

import errno
import json
import os
import re
import subprocess
import sys
import time

import pytest

import corruptgen
import util

MOUNT_WAIT = 15.0
WALK_TIMEOUT = 30.0
SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|ThreadSanitizer|"
                       r"runtime error:|MemorySanitizer")
# What a damaged image may legitimately produce at the syscall level.
ALLOWED = {"EIO", "ENOENT", "ENOTDIR", "ELOOP", "ENODATA", "E2BIG", "ERANGE",
           "EOPNOTSUPP", "ENOTSUP", "EINVAL", "EISDIR", "ENAMETOOLONG", "EACCES",
           "EOVERFLOW", "EFBIG", "ESTALE"}

# Walk a mounted tree with bounds (nodes, depth, bytes per file), in a
# child process so a hung syscall cannot hang the test. Prints JSON.
WALKER = r"""
import errno, json, os, stat, sys
root = sys.argv[1]
errs, nodes, read_bytes, capped = {}, 0, 0, 0
def err(e, what):
    k = errno.errorcode.get(e.errno, str(e.errno))
    errs.setdefault(k, []).append(what)
def visit(path, depth):
    global nodes, read_bytes, capped
    nodes += 1
    if nodes > 400:
        return
    try:
        st = os.lstat(path)
    except OSError as e:
        return err(e, "lstat " + path)
    try:
        for n in os.listxattr(path, follow_symlinks=False)[:20]:
            try:
                os.getxattr(path, n, follow_symlinks=False)
            except OSError as e:
                err(e, "getxattr " + path)
    except OSError as e:
        err(e, "listxattr " + path)
    if stat.S_ISLNK(st.st_mode):
        try:
            os.readlink(path)
        except OSError as e:
            err(e, "readlink " + path)
    elif stat.S_ISREG(st.st_mode):
        try:
            with open(path, "rb", buffering=0) as f:
                got = 0
                while got < (8 << 20):
                    b = f.read(1 << 16)
                    if not b:
                        break
                    got += len(b)
                else:
                    capped += 1
                read_bytes += got
                f.seek(4095)
                f.read(5000)
        except OSError as e:
            err(e, "read " + path)
    elif stat.S_ISDIR(st.st_mode) and depth < 12:
        try:
            names = os.listdir(path)
        except OSError as e:
            return err(e, "listdir " + path)
        for n in names[:300]:
            visit(os.path.join(path, n), depth + 1)
visit(root, 0)
print(json.dumps({"errors": errs, "nodes": nodes, "bytes": read_bytes,
                  "capped": capped}))
"""


@pytest.fixture(scope="module")
def corpus(workdir):
    util.require_fuse()
    util.require_daemon()
    util.require_mksquashfs()
    d = workdir / "corpus"
    d.mkdir(exist_ok=True)
    image, files = corruptgen.make_base(str(d))
    return dict(corruptgen.build_all(image)), str(d), image


def start(image, mnt, log):
    os.makedirs(mnt, exist_ok=True)
    cmd = util.fuse_mount_cmd() + [image, mnt]
    with open(log, "wb") as lf:
        p = subprocess.Popen(cmd, stdout=lf, stderr=lf,
                             stdin=subprocess.DEVNULL)
    util.wait_until(lambda: p.poll() is not None or util.is_mounted(mnt),
                    MOUNT_WAIT)
    return p


def read_log(log):
    with open(log, "rb") as f:
        return f.read().decode(errors="replace")


def stop(p, mnt):
    """Unmount and wait; returns the exit status (None if it had to be
    killed)."""
    if util.is_mounted(mnt):
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        if util.is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", mnt],
                           capture_output=True)
    try:
        return p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


def test_base_image_is_good(corpus, tmp_path):
    """The base mounts and walks without a single error: every failure in
    the cases below comes from the damage."""
    _, d, image = corpus
    mnt = str(tmp_path / "mnt")
    log = str(tmp_path / "log")
    p = start(image, mnt, log)
    try:
        assert util.is_mounted(mnt), read_log(log)
        r = subprocess.run([sys.executable, "-c", WALKER, mnt],
                           capture_output=True, timeout=WALK_TIMEOUT)
        res = json.loads(r.stdout)
        assert res["errors"] == {} and res["nodes"] == 10, res
    finally:
        rc = stop(p, mnt)
    assert rc == 0


@pytest.mark.parametrize("name", list(corruptgen.CASES))
def test_corrupt_image(corpus, tmp_path, name):
    cases, _, _ = corpus
    image = str(tmp_path / (name + ".sqfs"))
    with open(image, "wb") as f:
        f.write(cases[name])
    mnt = str(tmp_path / "mnt")
    log = str(tmp_path / "log")
    t0 = time.monotonic()
    p = start(image, mnt, log)
    walk = None
    try:
        if p.poll() is not None:
            took = time.monotonic() - t0
            text = read_log(log)
            lines = [ln for ln in text.splitlines() if ln.strip()]
            assert not SANITIZER.search(text), text
            assert p.returncode == 1, \
                "exit status %s (want 1): %r" % (p.returncode, text)
            assert len(lines) == 1, "want one error line, got %r" % text
            what = lines[0].replace(image, "IMAGE")
            assert "IMAGE" in what or name in lines[0], \
                "the line does not name the image: %r" % lines[0]
            # names a field/structure or an offset/value
            assert re.search(r"\d|superblock|table|inode|magic|block|"
                             r"director|compress|version|fragment|xattr|"
                             r"export|id", what, re.I), lines[0]
            assert took < 10, "refusal took %.1f s" % took
            return
        assert util.is_mounted(mnt), "neither mounted nor exited:\n" + \
            read_log(log)
        try:
            r = subprocess.run([sys.executable, "-c", WALKER, mnt],
                               capture_output=True, timeout=WALK_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail("walking the mounted damaged image hung (> %ds)"
                        % WALK_TIMEOUT)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        walk = json.loads(r.stdout)
        bad = {k: v for k, v in walk["errors"].items() if k not in ALLOWED}
        assert not bad, "unexpected errors: %r" % bad
        assert p.poll() is None, "daemon died (status %s):\n%s" % (
            p.returncode, read_log(log)[-3000:])
        assert time.monotonic() - t0 < 60
    finally:
        rc = stop(p, mnt)
        text = read_log(log)
        assert not util.is_mounted(mnt)
    assert not SANITIZER.search(text), text[-5000:]
    assert rc == 0, "daemon exit status %s after unmount:\n%s" % (
        rc, text[-3000:])
