"""FUSE over io_uring (-o io_uring, on by default; src/fuse/uring.c).

With the fuse module's enable_uring switched on, the daemon's ring
threads (a queue per CPU) answer the requests instead of the /dev/fuse
loop, and the mount must still look exactly as the kernel's squashfs shows
the same image. With io_uring=off, or with the switch off, requests come
over /dev/fuse. The switch is machine-wide: each test holds its lock
(util.fuse_uring_switch) and puts it back.
On a kernel without the switch (before 6.14; tests/without_fuse_uring.sh
hides it) each test checks the fallback instead: the same mount, every
request over /dev/fuse, no ring thread.
With LSQ_VIA_HTTP=1 the same checks run over nginx.
"""

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import treebuilder
import util

IMAGE = "zstd"


def sanitized():
    """Whether the daemon runs under sanitizers (LSQ_SANITIZE, else the
    build's b_sanitize option), which make it about three times slower
    (tests/run.sh gives those builds --timeout-multiplier 3)."""
    v = os.environ.get("LSQ_SANITIZE")
    if v is None:
        try:
            with open(os.path.join(util.build_dir(), "meson-info",
                                   "intro-buildoptions.json")) as f:
                v = next((o["value"] for o in json.load(f)
                          if o["name"] == "b_sanitize"), "")
        except (OSError, TypeError, ValueError):
            v = ""
    return v not in ("", "none", [])


# How long the daemon may take to notice that the kernel refused its rings
# and exit, and a reader to see the end: what the suite gives a daemon to
# exit after its unmount, plus slack for a loaded machine, x3 under
# sanitizers.
BOUND = (util.UNMOUNT_TIMEOUT + 5) * (3 if sanitized() else 1)


@pytest.fixture
def uring_switch():
    with util.fuse_uring_switch() as set_switch:
        yield set_switch


stats = util.daemon_stats


def ring_threads(per_cpu):
    """Threads the daemon starts: per_cpu for each CPU it may run on (it
    inherits our affinity), one for every other possible CPU's queue."""
    possible = os.sysconf("SC_NPROCESSORS_CONF")
    ours = len([c for c in os.sched_getaffinity(0) if c < possible])
    return per_cpu * ours + possible - ours


def compare_with_kernel(kmnt, fmnt):
    k = util.collect_tree(kmnt)
    f = util.collect_tree(fmnt)
    for check in (util.compare_names, util.compare_stat, util.compare_links,
                  util.compare_xattrs, util.compare_readdir):
        check(k, f).check()
    huge = os.fsencode(treebuilder.Manifest.huge)  # sparse, GiBs of zeros
    files = sorted(p for p, r in k.items()
                   if r.stat.get("type") == "reg" and p != huge)
    bad = [p for p in files
           if util.read_all_compare(os.path.join(os.fsencode(kmnt), p),
                                    os.path.join(os.fsencode(fmnt), p))]
    assert not bad, "%d of %d files differ: %r" % (len(bad), len(files),
                                                   bad[:20])
    return files


def odirect_compare(kmnt, fmnt, files):
    """1 MiB O_DIRECT reads: the largest replies (a full ring payload)."""
    big = [p for p in files
           if os.stat(os.path.join(os.fsencode(kmnt), p)).st_size > 3 << 20]
    assert big, "no file over 3 MiB in the tree"
    for p in big[:3]:
        with open(os.path.join(os.fsencode(kmnt), p), "rb") as f:
            want = f.read()
        fd = os.open(os.path.join(os.fsencode(fmnt), p), os.O_RDONLY |
                     os.O_DIRECT)
        try:
            got = bytearray()
            while True:
                chunk = os.pread(fd, 1 << 20, len(got))
                if not chunk:
                    break
                got += chunk
        finally:
            os.close(fd)
        assert bytes(got) == want, "%s differs read with O_DIRECT" % p


@pytest.fixture
def image(image_cache):
    return image_cache.path(IMAGE)


def test_ring_threads_answer_as_the_kernel_reads(uring_switch, image,
                                                 mounter):
    rings = uring_switch(True)
    kernel = mounter.kernel(image)
    # no io_uring option: on by default. threads=2: two ring threads per
    # CPU queue, the fewest there are
    fuse = mounter.fuse(image, opts=["threads=2"], name=IMAGE)
    # the threads register once the kernel has the INIT answer
    want = ring_threads(2) if rings else 0
    assert util.wait_until(lambda: stats(fuse.mnt)["fuse_ring_threads"] ==
                           want, 5), stats(fuse.mnt)
    # takeover (on by default) gives way to the rings the kernel offers;
    # without them it is on (this kernel resends: Linux 6.9+)
    assert stats(fuse.mnt)["takeover_ready"] == (0 if rings else 1), \
        stats(fuse.mnt)
    before = stats(fuse.mnt)
    files = compare_with_kernel(kernel.mnt, fuse.mnt)
    odirect_compare(kernel.mnt, fuse.mnt, files)
    after = stats(fuse.mnt)
    crossed = after["fuse_ring_requests"] - before["fuse_ring_requests"]
    if rings:
        # every file was read, and its first read crossed the ring
        assert crossed > len(files), after
    else:
        assert crossed == 0 and after["fuse_ring_threads"] == 0, after
    fuse.stop()
    assert fuse.exit_status in (None, 0)


def test_io_uring_off_keeps_dev_fuse(uring_switch, image, mounter):
    uring_switch(True)
    kernel = mounter.kernel(image)
    fuse = mounter.fuse(image, opts=["io_uring=off"], name=IMAGE)
    compare_with_kernel(kernel.mnt, fuse.mnt)
    st = stats(fuse.mnt)
    assert st["fuse_ring_threads"] == 0 and st["fuse_ring_requests"] == 0, st


def test_kernel_switch_off_keeps_dev_fuse(uring_switch, image, mounter):
    """Asked for, the missing kernel support is said once; by default
    (most kernels: the switch is off) the mount says nothing of it."""
    uring_switch(False)
    said = "does not offer FUSE over io_uring"
    asked = mounter.fuse(image, opts=["io_uring"], name=IMAGE)
    quiet = mounter.fuse(image, name=IMAGE + "-default")
    for fuse in (asked, quiet):
        assert len(os.listdir(fuse.mnt)) > 3
        st = stats(fuse.mnt)
        assert st["fuse_ring_threads"] == 0 and \
            st["fuse_ring_requests"] == 0, st
    assert asked.log().count(said) == 1, asked.log()
    assert said not in quiet.log(), quiet.log()


def test_sigterm_ends_a_ring_mount(uring_switch, image, mounter):
    """The loop ends on the signal while the rings still wait for
    requests: the daemon must unmount, end its ring threads and exit
    (without rings: the /dev/fuse loop ends the same way)."""
    rings = uring_switch(True)
    fuse = mounter.fuse(image, opts=["io_uring"], name=IMAGE)
    if rings:
        assert util.wait_until(
            lambda: stats(fuse.mnt)["fuse_ring_threads"] > 0, 5)
    else:
        assert stats(fuse.mnt)["fuse_ring_threads"] == 0
    assert len(os.listdir(fuse.mnt)) > 3
    pid = fuse.pid
    assert pid
    os.kill(pid, signal.SIGTERM)
    assert util.wait_until(lambda: not util.pid_alive(pid), 15), \
        "daemon %d still running after SIGTERM" % pid
    assert util.wait_until(lambda: not util.is_mounted(fuse.mnt), 5)
    fuse.stopped = True


# The daemon's line when the kernel refuses its rings under a mount
# (src/fuse/uring.c, abandon_connection).
REFUSED = ("io_uring: the kernel refused FUSE io_uring (enable_uring "
           "switched off?); aborting the connection")
# ... and when it refuses them at registration, before they carry anything.
REFUSED_AT_START = ("io_uring: the kernel refused FUSE io_uring "
                    "(enable_uring switched off?); requests come over "
                    "/dev/fuse")
# A caller of an aborted connection: ENOTCONN, or ECONNABORTED for the
# request that was on a ring (fuse_uring_stop_fuse_req_end), or EIO.
ENDED = {errno.ENOTCONN, errno.ECONNABORTED, errno.EIO}


def read_in_child(path, seconds):
    """Reads path in a child process, so a hung read fails the test
    instead of hanging it. Returns (errno or 0, data); None if the read
    had not ended after `seconds` (the child is killed then)."""
    code = ("import os, sys\n"
            "try:\n"
            "    with open(sys.argv[1], 'rb') as f:\n"
            "        sys.stdout.buffer.write(f.read())\n"
            "except OSError as e:\n"
            "    sys.exit(100 + e.errno)\n")
    p = subprocess.Popen([sys.executable, "-c", code, path],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out, _ = p.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()  # FUSE waits are killable
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        return None
    return (p.returncode - 100 if p.returncode else 0), out


def test_switch_off_under_a_ring_mount_ends_it(uring_switch, image, mounter):
    """enable_uring switched off under a mount on rings: the kernel then
    refuses every ring command, the one carrying the next answer included,
    and nothing lets that answer go over /dev/fuse (docs/status.md). The
    daemon must not hang: it says why in one line and exits, the kernel
    aborts the connection, and the reader gets an error (or its data)
    within a bound, never a hang. On a kernel without the switch this
    cannot happen: the same steps check the fallback, every request over
    /dev/fuse and no ring thread."""
    rings = uring_switch(True)
    kernel = mounter.kernel(image)
    fuse = mounter.fuse(image, opts=["io_uring", "threads=2"], name=IMAGE)
    bound = BOUND
    want = ring_threads(2) if rings else 0
    assert util.wait_until(lambda: stats(fuse.mnt)["fuse_ring_threads"] ==
                           want, bound), stats(fuse.mnt)
    files = sorted(
        os.path.relpath(os.path.join(d, n), kernel.mnt)
        for d, _, names in os.walk(kernel.mnt) for n in names
        if 0 < os.lstat(os.path.join(d, n)).st_size < 1 << 20 and
        os.path.isfile(os.path.join(d, n)))
    assert len(files) >= 2, files
    first, second = files[0], files[-1]
    with open(os.path.join(kernel.mnt, first), "rb") as f:
        want_first = f.read()
    before = stats(fuse.mnt)["fuse_ring_requests"]
    got = read_in_child(os.path.join(fuse.mnt, first), bound)
    assert got == (0, want_first), "first read: %r" % (got,)
    crossed = stats(fuse.mnt)["fuse_ring_requests"] - before
    if not rings:
        # the fallback: same mount, same bytes, every request over
        # /dev/fuse
        assert crossed == 0 and \
            stats(fuse.mnt)["fuse_ring_threads"] == 0, stats(fuse.mnt)
        with open(os.path.join(kernel.mnt, second), "rb") as f:
            assert read_in_child(os.path.join(fuse.mnt, second),
                                 bound) == (0, f.read())
        return
    assert crossed > 0, "the first read did not cross a ring"

    uring_switch(False)
    try:
        # never opened, never read: its open reaches the daemon
        got = read_in_child(os.path.join(fuse.mnt, second), bound)
        assert got is not None, \
            "a read under the switched-off rings hung for %s s" % bound
        err, data = got
        if err == 0:
            with open(os.path.join(kernel.mnt, second), "rb") as f:
                assert data == f.read(), "wrong bytes for %s" % second
        else:
            assert err in ENDED, os.strerror(err)
        # the daemon ends the connection (at the latest at the next
        # request: the mount point's own)
        os.path.exists(os.path.join(fuse.mnt, "no-such-name"))
        try:
            fuse.proc.wait(bound)
        except subprocess.TimeoutExpired:
            pytest.fail("the daemon still runs %s s after the kernel "
                        "refused its rings:\n%s" % (bound, fuse.log()[-3000:]))
        assert fuse.proc.returncode == 1, fuse.log()[-3000:]
        assert fuse.log().count(REFUSED) == 1, fuse.log()[-3000:]
        # the connection is gone: callers fail at once
        r = subprocess.run(["stat", fuse.mnt], capture_output=True,
                           timeout=bound)
        assert r.returncode != 0 and \
            b"not connected" in r.stderr, r.stderr
    finally:
        if fuse.alive():
            # it hung: free the callers before the unmount
            util.abort_connection(fuse.mnt)
        problems = fuse.stop(check=False)
    assert not util.is_mounted(fuse.mnt), "mount left behind"
    assert problems == ["daemon had already exited with status 1"], problems


def test_switch_off_before_the_rings_register_keeps_dev_fuse(
        uring_switch, image, mounter):
    """enable_uring switched off between the daemon's look at it and its
    rings' registration (here: as soon as its ring threads exist; they
    register once INIT is answered): the kernel refuses the registrations
    before the rings carry any request, and the mount goes on over
    /dev/fuse, saying so once, as the kernel reads it. Should the rings
    have registered first (a slow machine), the switch ends the mount as
    in the test above instead: either way, never a hang. On a kernel
    without the switch: the fallback, every request over /dev/fuse."""
    rings = uring_switch(True)
    kernel = mounter.kernel(image)
    mnt = tempfile.mkdtemp(prefix="fuse-", dir=str(mounter.base))
    fuse = util.FuseMount(image, mnt, mnt + ".log",
                          opts=["io_uring", "threads=2"], name=IMAGE)
    mounter.mounts.append(fuse)  # its cleanup, pass or fail
    bound = BOUND
    failed = []

    def start():
        try:
            fuse.start()
        except BaseException as e:  # noqa: B036 -- raised below
            failed.append(e)

    starter = threading.Thread(target=start)
    starter.start()
    deadline = time.monotonic() + bound
    while (fuse.proc is None or fuse.proc.poll() is None and
           "sqfs-ring" not in util.thread_names(fuse.proc.pid)) and \
            time.monotonic() < deadline and starter.is_alive():
        time.sleep(0.0005)
    uring_switch(False)
    starter.join(bound)
    assert not starter.is_alive(), "mount not ready after %s s" % bound
    if failed:
        raise failed[0]

    files = sorted(
        os.path.relpath(os.path.join(d, n), kernel.mnt)
        for d, _, names in os.walk(kernel.mnt) for n in names
        if 0 < os.lstat(os.path.join(d, n)).st_size < 1 << 20 and
        os.path.isfile(os.path.join(d, n)))
    with open(os.path.join(kernel.mnt, files[0]), "rb") as f:
        want = f.read()
    got = read_in_child(os.path.join(fuse.mnt, files[0]), bound)
    assert got is not None, "a read hung for %s s" % bound
    if rings and REFUSED in fuse.log():
        # registered before the switch went: the mount was ended
        print("the rings registered first: the mount was ended")
        assert got[0] in ENDED, got
        fuse.proc.wait(bound)
        assert fuse.proc.returncode == 1, fuse.log()[-3000:]
        assert fuse.stop(check=False) == [
            "daemon had already exited with status 1"]
        return
    assert got == (0, want), got
    # the rings refused at registration, or (the mount ready before the
    # daemon looked at the switch, which it does after mounting) the
    # switch already off when it looked: /dev/fuse either way, said once
    offers_none = "does not offer FUSE over io_uring"
    said = [m for m in ((REFUSED_AT_START, offers_none) if rings
                        else (offers_none,)) if m in fuse.log()]
    assert len(said) == 1 and fuse.log().count(said[0]) == 1, \
        fuse.log()[-3000:]
    compare_with_kernel(kernel.mnt, fuse.mnt)
    st = stats(fuse.mnt)
    assert st["fuse_ring_requests"] == 0, st
    fuse.stop()
    assert fuse.exit_status in (None, 0)
