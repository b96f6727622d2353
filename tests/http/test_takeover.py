"""Takeover (-o takeover, #33): when the daemon serving a mount dies, a new
daemon takes over the same FUSE connection (src/daemon/conn_guard.c,
src/fuse/takeover_io.c). Readers see a pause, never an error, and the
kernel's bytes; the mount stays; --stats counts the takeovers and names the
process serving. Where it cannot (a kernel without FUSE_NOTIFY_RESEND,
here hidden; a new daemon that cannot come up; daemons that die again at
once) the mount ends as without it: ENOTCONN, one line that says why, no
hang.

The oracle is the image's own files (the kernel's loop mount of these
images is compared in the conformance suite); readers drop each file's
pages before reading it, so every read reaches the daemon."""

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

from conftest import daemon, is_mounted, require
from test_cache import stats

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                "integration"))
import util  # noqa: E402

KILLS = 20
READERS = 8
# a daemon that dies sooner after taking over counts as a crash loop
# (conn_guard.c QUICK_DEATH_NS); kills here wait longer than that
SETTLE = 2.3
TAKEOVER_WAIT = 60


def pid_ended(pid):
    return not util.pid_alive(pid)


def serving_pid(mnt):
    return stats(mnt)["daemon_pid"]


def read_fresh(path, off=0, length=None):
    """Bytes of path from the daemon, not from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        if length is None:
            chunks = []
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks)
        return os.pread(fd, length, off)
    finally:
        os.close(fd)


class Readers:
    """READERS threads reading the files in a loop until stopped; every
    error and every wrong byte is kept."""

    def __init__(self, mnt, expected, big=None):
        self.mnt, self.expected, self.big = mnt, expected, big
        self.stop = threading.Event()
        self.errors, self.reads = [], 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(k,),
                                         daemon=True)
                        for k in range(READERS)]

    def run(self, k):
        rng = random.Random(k)
        names = sorted(self.expected)
        while not self.stop.is_set():
            rel = rng.choice(names)
            try:
                if self.big and rng.random() < 0.3:
                    rel, data = self.big
                    off = rng.randrange(0, len(data) - (1 << 20))
                    got = read_fresh(os.path.join(self.mnt, rel), off,
                                     1 << 20)
                    ok = got == data[off:off + (1 << 20)]
                else:
                    got = read_fresh(os.path.join(self.mnt, rel))
                    ok = got == self.expected[rel]
            except OSError as e:
                with self.lock:
                    self.errors.append((rel, repr(e)))
                continue
            with self.lock:
                self.reads += 1
                if not ok:
                    self.errors.append((rel, "bytes differ"))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        deadline = time.monotonic() + 120
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        assert not [t for t in self.threads if t.is_alive()], \
            "a reader hung"


def kill_serving(m, expect_takeover=True):
    """SIGKILL the daemon serving m now; with a takeover, wait until
    another serves. Returns the killed pid."""
    pid = serving_pid(m.mnt)
    os.kill(pid, signal.SIGKILL)
    if expect_takeover:
        wait_replaced(m, pid)
    return pid


def wait_replaced(m, pid, unless=None):
    """Wait until a daemon other than pid serves m (or the log says
    `unless`)."""
    deadline = time.monotonic() + TAKEOVER_WAIT
    while unless is None or unless not in m.log():
        try:
            if serving_pid(m.mnt) != pid:
                return
        except AssertionError:
            pass
        assert time.monotonic() < deadline, m.log()[-3000:]
        time.sleep(0.02)


def stop_taken_over(m):
    """Unmount a mount whose daemon is no longer m.proc, and check the
    daemon serving it ends."""
    pid = serving_pid(m.mnt)
    r = subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 30
    while not pid_ended(pid):
        assert time.monotonic() < deadline, \
            "daemon %d still running after the unmount" % pid
        time.sleep(0.05)
    assert not is_mounted(m.mnt)
    m.proc.wait(30)   # the first daemon, killed
    m.proc = None
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                "ThreadSanitizer"):
        assert bad not in m.log(), m.log()[-6000:]


def kills_under_load(m, expected, big=None, check=None, kills=KILLS):
    """kills kills under READERS readers; check(stats) before the end."""
    pids = []
    with Readers(m.mnt, expected, big) as readers:
        time.sleep(1)
        for _ in range(kills):
            pids.append(kill_serving(m))
            time.sleep(SETTLE)
        reads = readers.reads
    assert not readers.errors, readers.errors[:10]
    assert reads > 4 * kills, reads
    assert is_mounted(m.mnt)
    st = stats(m.mnt)
    assert st["takeovers"] == kills and st["takeovers_crash"] == kills, st
    assert st["daemon_pid"] not in pids, st
    assert all(pid_ended(p) for p in pids), pids
    lines = [ln for ln in m.log().splitlines()
             if "takeover: process" in ln]
    assert len(lines) == kills, m.log()[-3000:]
    assert "takeover %d;" % kills in lines[-1], lines[-1]
    if check:
        check(st)
    stop_taken_over(m)


def test_kills_local_image(mounts, small_image):
    """20 kills of the daemon of a local image under 8 readers."""
    m = mounts(small_image["path"], ["takeover"])
    kills_under_load(m, small_image["files"])


def test_kills_http_with_cache_dir(mounts, nginx, big_image, tmp_path):
    """The same over HTTP, with cache_dir (the dead daemon's lock on it
    passes to the new one) and large reads in flight at each kill."""
    tree = big_image["tree"]
    expected = {}
    for d, _, names in os.walk(os.path.join(tree, "etc", "conf.d")):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                expected[os.path.relpath(p, tree)] = f.read()
    with open(os.path.join(tree, "large.bin"), "rb") as f:
        large = f.read()
    m = mounts(nginx.url("img.sqfs"),
               ["takeover", "cache_dir=" + str(tmp_path / "cache")])
    kills_under_load(m, expected, big=("large.bin", large))


def test_kills_verified_image(mounts, small_image, tmp_path):
    """The same with verify=: each new daemon checks the signed manifest
    again and every block it serves against it."""
    require(shutil.which("openssl") is not None, "openssl missing")
    from test_verify import _genkey, _tool
    img = str(tmp_path / "signed.sqfs")
    shutil.copyfile(small_image["path"], img)
    pub = _genkey(str(tmp_path / "key.pem"))
    subprocess.run([_tool("sqfs-lazy-sign"), "--key",
                    str(tmp_path / "key.pem"), img], check=True,
                   capture_output=True, timeout=120)
    m = mounts(img, ["takeover", "verify=" + pub])

    def verified(st):
        assert st["verify_units"] > 0, st
        assert st["verify_mismatches"] == 0 and st["verify_refused"] == 0, st

    kills_under_load(m, small_image["files"], check=verified)


def test_on_by_default(mounts, small_image):
    """Without any option a killed daemon is taken over (takeover=auto:
    this machine's kernel offers no io_uring rings unless a test switches
    them on): the mount stays, the next read gets the image's bytes."""
    m = mounts(small_image["path"])
    name = sorted(small_image["files"])[0]
    assert read_fresh(os.path.join(m.mnt, name)) == small_image["files"][name]
    assert stats(m.mnt)["takeover_ready"] == 1
    kill_serving(m)
    assert read_fresh(os.path.join(m.mnt, name)) == small_image["files"][name]
    st = stats(m.mnt)
    assert st["takeovers"] == 1 and st["takeovers_crash"] == 1, st
    stop_taken_over(m)


def test_off_when_asked(mounts, small_image):
    """takeover=off: a killed daemon ends the mount as before takeover
    existed (ENOTCONN), and nothing is said of takeover."""
    m = mounts(small_image["path"], ["takeover=off"])
    name = sorted(small_image["files"])[0]
    assert read_fresh(os.path.join(m.mnt, name)) == small_image["files"][name]
    assert stats(m.mnt)["takeover_ready"] == 0
    os.kill(m.proc.pid, signal.SIGKILL)
    m.proc.wait(30)
    r = subprocess.run(["stat", os.path.join(m.mnt, name)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "not connected" in r.stderr, r.stderr
    subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True)
    m.proc = None
    assert "takeover" not in m.log(), m.log()


def test_kills_where_fuse_uring_is_offered(mounts, small_image):
    """Where the kernel offers FUSE io_uring rings (enable_uring switched
    on), -o takeover keeps the mount on /dev/fuse and its daemon's kills
    are taken over as anywhere else: over rings they could not be
    (docs/takeover.md, "Not over io_uring rings"). A kernel without the
    switch (tests/without_fuse_uring.sh hides it) checks the same."""
    with util.fuse_uring_switch() as set_switch:
        set_switch(True)
        m = mounts(small_image["path"], ["takeover"])
        st = stats(m.mnt)
        assert st["takeover_ready"] == 1 and st["fuse_ring_threads"] == 0, st
        kills_under_load(m, small_image["files"], kills=5)


def test_ring_mount_ends_cleanly_when_its_daemon_dies(mounts, small_image):
    """A default mount that took the rings the kernel offers has no
    takeover: a kill ends it as before takeover existed, with ENOTCONN and
    a mount point that a lazy unmount clears.
    Without rings (the switch hidden) the default has takeover, and the
    kill is taken over."""
    name = sorted(small_image["files"])[0]
    with util.fuse_uring_switch() as set_switch:
        rings = set_switch(True)
        m = mounts(small_image["path"])
        path = os.path.join(m.mnt, name)
        assert read_fresh(path) == small_image["files"][name]
        if rings:
            assert util.wait_until(
                lambda: stats(m.mnt)["fuse_ring_threads"] > 0, 5)
        assert stats(m.mnt)["takeover_ready"] == (0 if rings else 1)
        if not rings:
            kill_serving(m)
            assert read_fresh(path) == small_image["files"][name]
            stop_taken_over(m)
            return
        os.kill(m.proc.pid, signal.SIGKILL)
        m.proc.wait(30)
        r = subprocess.run(["stat", path], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode != 0 and "not connected" in r.stderr, r.stderr
        r = subprocess.run(["umount", "-l", m.mnt], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert not is_mounted(m.mnt)
        m.proc = None


def test_kernel_without_resend(mounts, small_image):
    """A kernel before 6.9 (FUSE_HAS_RESEND hidden): one line at mount
    says takeover is off, and a kill ends the mount as without it."""
    env = dict(os.environ, LSQ_TEST_KERNEL_NO_RESEND="1")
    m = mounts(small_image["path"], ["takeover"], env=env)
    name = sorted(small_image["files"])[0]
    assert read_fresh(os.path.join(m.mnt, name)) == small_image["files"][name]
    lines = [ln for ln in m.log().splitlines() if "takeover" in ln]
    assert len(lines) == 1 and "takeover: off (this kernel cannot resend" \
        in lines[0], m.log()
    os.kill(m.proc.pid, signal.SIGKILL)
    m.proc.wait(30)
    r = subprocess.run(["stat", os.path.join(m.mnt, name)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "not connected" in r.stderr, r.stderr
    subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True)
    m.proc = None


def test_default_quiet_without_resend(mounts, small_image):
    """The default on a kernel before 6.9: no takeover (takeover_ready 0),
    and not a line about it: only -o takeover asks for one."""
    env = dict(os.environ, LSQ_TEST_KERNEL_NO_RESEND="1")
    m = mounts(small_image["path"], env=env)
    name = sorted(small_image["files"])[0]
    assert read_fresh(os.path.join(m.mnt, name)) == small_image["files"][name]
    assert stats(m.mnt)["takeover_ready"] == 0
    assert "takeover" not in m.log(), m.log()


def test_new_daemon_cannot_come_up(mounts, small_image, tmp_path):
    """The image is gone when the daemon dies: three new daemons fail to
    open it, then the connection is aborted with one line; readers get
    ENOTCONN, nothing hangs."""
    img = str(tmp_path / "gone.sqfs")
    shutil.copy(small_image["path"], img)
    m = mounts(img, ["takeover"])
    name = sorted(small_image["files"])[0]
    assert read_fresh(os.path.join(m.mnt, name)) == small_image["files"][name]
    os.unlink(img)
    t0 = time.monotonic()
    kill_serving(m, expect_takeover=False)
    m.proc.wait(30)
    deadline = time.monotonic() + 60
    while "aborting the connection" not in m.log():
        assert time.monotonic() < deadline, m.log()
        time.sleep(0.05)
    r = subprocess.run(["stat", os.path.join(m.mnt, name)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "not connected" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 30
    log = m.log()
    assert log.count("did not come up") == 3, log
    assert log.count("no new daemon came up in 3 attempts") == 1, log
    subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True)
    m.proc = None


def test_daemons_that_die_at_once(mounts, small_image):
    """Daemons that die within two seconds of taking over, five in a row,
    end the takeovers: the connection is aborted with one line."""
    m = mounts(small_image["path"], ["takeover"])
    name = sorted(small_image["files"])[0]
    kills = 0
    # a daemon that lived past two seconds (the first; any on a slow
    # build) starts the count again
    while "died within 2 s of taking over" not in m.log():
        assert kills < 10, m.log()
        pid = serving_pid(m.mnt)
        os.kill(pid, signal.SIGKILL)
        kills += 1
        wait_replaced(m, pid, unless="died within 2 s")
    assert kills >= 5, (kills, m.log())
    r = subprocess.run(["stat", os.path.join(m.mnt, name)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "not connected" in r.stderr, r.stderr
    subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True)
    m.proc.wait(30)
    m.proc = None


# ---------------------------------------------------------------------------
# Live upgrade: sqfs-lazy-mount --takeover MOUNTPOINT from another binary
# ---------------------------------------------------------------------------

def takeover_cmd(binary, mnt):
    return subprocess.run([binary, "--takeover", mnt], capture_output=True,
                          text=True, timeout=120)


def test_live_upgrade_under_load(mounts, small_image, tmp_path):
    """Under 8 readers, --takeover from a copy of the binary replaces the
    daemon without unmounting, then back again: the process serving runs
    the binary that asked, the old one is gone, no reader sees an error."""
    copy = str(tmp_path / "sqfs-lazy-mount-next")
    shutil.copy(daemon(), copy)
    m = mounts(small_image["path"], ["takeover"])
    old = []
    with Readers(m.mnt, small_image["files"]) as readers:
        time.sleep(1)
        for n, binary in enumerate((copy, daemon(), copy), 1):
            before = serving_pid(m.mnt)
            r = takeover_cmd(binary, m.mnt)
            assert r.returncode == 0, (r.stdout, r.stderr, m.log()[-3000:])
            pid = serving_pid(m.mnt)
            assert r.stdout.strip() == "%s: process %d serves it now (was %d)" \
                % (m.mnt, pid, before), r.stdout
            assert os.readlink("/proc/%d/exe" % pid) == \
                os.path.realpath(binary)
            st = stats(m.mnt)
            assert st["takeovers_upgrade"] == n and \
                st["takeovers_crash"] == 0, st
            old.append(before)
            time.sleep(1)
    assert not readers.errors, readers.errors[:10]
    assert readers.reads > 20, readers.reads
    deadline = time.monotonic() + 30
    while not all(pid_ended(p) for p in old):
        assert time.monotonic() < deadline, old
        time.sleep(0.05)
    lines = [ln for ln in m.log().splitlines() if "(upgrade)" in ln]
    assert len(lines) == 3, m.log()[-3000:]
    stop_taken_over(m)


def test_takeover_refused_when_off(mounts, small_image):
    """--takeover on a mount with takeover=off does nothing and says
    why: the daemon keeps serving."""
    m = mounts(small_image["path"], ["takeover=off"])
    pid = serving_pid(m.mnt)
    r = takeover_cmd(daemon(), m.mnt)
    assert r.returncode == 1, r
    assert "cannot hand it over" in r.stderr and \
        len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert serving_pid(m.mnt) == pid == m.proc.pid
    name = sorted(small_image["files"])[0]
    assert read_fresh(os.path.join(m.mnt, name)) == small_image["files"][name]


def test_record_survives_upgrade(mounts, small_image, tmp_path):
    """A record= profile in progress is written by the daemon that hands
    over, and the new daemon does not overwrite it."""
    prof = str(tmp_path / "start.prof")
    m = mounts(small_image["path"], ["takeover", "record=" + prof])
    names = sorted(n for n, d in small_image["files"].items() if d)[:3]
    for name in names:
        assert read_fresh(os.path.join(m.mnt, name)) == \
            small_image["files"][name]
    r = takeover_cmd(daemon(), m.mnt)
    assert r.returncode == 0, (r.stderr, m.log()[-3000:])
    with open(prof) as f:
        listed = [ln.split("\t")[0] for ln in f.read().splitlines()
                  if ln and not ln.startswith("#")]
    assert listed[:len(names)] == names, listed
    stop_taken_over(m)
    with open(prof) as f:
        assert [ln.split("\t")[0] for ln in f.read().splitlines()
                if ln and not ln.startswith("#")] == listed
