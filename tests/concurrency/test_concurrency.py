"""Many threads reading overlapping ranges of many files of one mount at
once, over a local file and over HTTP (nginx on 127.0.0.1); every byte is
checked against the kernel's loop mount of the same image.

In the TSan build (LSQ_SANITIZE contains "thread") the daemon runs with
TSAN_OPTIONS=halt_on_error=1 and a log_path; the test then requires that
the daemon really is TSan-instrumented and that no log holds a
"WARNING: ThreadSanitizer" report. Suppressions (tests/tsan.supp) cover
only uninstrumented third-party libraries, each with its reason.
"""

import glob
import os
import random
import subprocess
import threading
import time

import pytest

import servers
import util

THREADS = 16
BS = 64 * 1024
TSAN = "thread" in os.environ.get("LSQ_SANITIZE", "")
SUPP = os.path.join(os.path.dirname(__file__), "..", "tsan.supp")
READS_PER_THREAD = 200


def make_tree(root):
    """40 files from 1 byte to ~1.3 MB: some share fragment blocks, most
    span several 64 KiB blocks; half compressible text, half random."""
    r = random.Random(44)
    sizes = [1, 100, 4095, 4096, 4097, BS - 1, BS, BS + 1, 3 * BS + 17]
    sizes += [r.randrange(1, 1300 * 1024) for _ in range(31)]
    for i, size in enumerate(sizes):
        d = os.path.join(root, "d%d" % (i % 4))
        os.makedirs(d, exist_ok=True)
        if i % 2:
            data = r.randbytes(size)
        else:
            line = b"file %d line of text to compress well enough\n" % i
            data = (line * (size // len(line) + 1))[:size]
        with open(os.path.join(d, "f%02d" % i), "wb") as f:
            f.write(data)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    util.require_fuse()
    util.require_daemon()
    util.require_mksquashfs()
    util.require_kernel_squashfs()
    d = tmp_path_factory.mktemp("conc")
    src = str(d / "src")
    make_tree(src)
    img = str(d / "www" / "conc.sqfs")
    os.makedirs(os.path.dirname(img))
    util.run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress",
              "-comp", "zstd", "-b", str(BS), "-processors", "2"])
    kmnt = str(d / "kernel")
    k = util.KernelMount(img, kmnt)
    k.start()
    files = {}
    for dirpath, _, names in os.walk(kmnt):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                files[os.path.relpath(p, kmnt)] = f.read()
    k.stop()
    yield {"path": img, "dir": d, "files": files}


@pytest.fixture(scope="module")
def nginx(image):
    s = servers.start_nginx(image["dir"] / "nginx", image["dir"] / "www")
    yield s
    s.stop()


def tsan_env(logdir, monkeypatch):
    if not TSAN:
        return None
    r = subprocess.run(["ldd", util.daemon_path()], capture_output=True,
                       text=True)
    assert "libtsan" in r.stdout, "LSQ_SANITIZE=thread but the daemon " \
        "is not built with TSan:\n" + r.stdout
    prefix = os.path.join(str(logdir), "tsan")
    monkeypatch.setenv("TSAN_OPTIONS", "halt_on_error=1 second_deadlock_stack=1"
                       " log_path=%s suppressions=%s" % (prefix,
                                                         os.path.abspath(SUPP)))
    return prefix


def hammer(mnt, files, seed):
    """THREADS threads; each does pread()s of random overlapping ranges
    (block edges, whole blocks, small reads) of random files, mostly the
    same few 'hot' files so the threads collide in the caches."""
    names = sorted(files)
    hot = names[:6]
    errors = []
    counts = [0] * THREADS

    def worker(i):
        r = random.Random(seed * 1000 + i)
        fds = {}
        try:
            for _ in range(READS_PER_THREAD):
                name = r.choice(hot) if r.random() < 0.6 else r.choice(names)
                want = files[name]
                size = len(want)
                k = r.randrange(4)
                if k == 0:
                    off = r.randrange(0, size // BS + 1) * BS
                    ln = BS
                elif k == 1:
                    off = max(0, r.randrange(0, size // BS + 1) * BS - 7)
                    ln = 17 + r.randrange(3 * BS)
                else:
                    off = r.randrange(0, size + 1)
                    ln = r.choice((1, 4096, 100000, 333))
                fd = fds.get(name)
                if fd is None:
                    # O_DIRECT for half the threads: every read reaches
                    # the daemon instead of the kernel's page cache
                    flags = os.O_RDONLY | (os.O_DIRECT if i % 2 else 0)
                    fd = fds[name] = os.open(os.path.join(mnt, name), flags)
                try:
                    got = os.pread(fd, ln, off)
                except OSError as e:
                    errors.append("%s pread(%d, %d): %s" % (name, off, ln, e))
                    continue
                if got != want[off:off + ln]:
                    errors.append("%s pread(%d, %d): wrong bytes" % (
                        name, off, ln))
                counts[i] += 1
        finally:
            for fd in fds.values():
                os.close(fd)

    threads = [threading.Thread(target=worker, args=(i,))
               for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "readers hung"
    return errors, sum(counts)


def tsan_reports(prefix):
    if prefix is None:
        return []
    out = []
    for p in glob.glob(prefix + "*"):
        with open(p, errors="replace") as f:
            text = f.read()
        if "WARNING: ThreadSanitizer" in text or "ERROR: ThreadSanitizer" in text:
            out.append("%s:\n%s" % (p, text[:6000]))
    return out


def mount_holders(mnt):
    """Pids (first 10) whose mount namespace still lists mnt: a copy in
    another namespace keeps the FUSE connection alive after our unmount."""
    out = []
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/mountinfo" % d) as f:
                if " %s " % mnt in f.read():
                    out.append(int(d))
        except (OSError, ValueError):
            continue
    return out[:10]


def unmount_and_wait(m, seconds=15):
    """Unmount and wait for the daemon to exit; if it does not, return a
    description of where its threads wait (kernel stacks) and whether the
    kernel still has the FUSE connection, before util's stop() kills it."""
    subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True)
    if util.wait_until(lambda: m.proc.poll() is not None, seconds):
        return None
    out = ["daemon %d still running %d s after unmount" % (m.pid, seconds),
           "mounted here: %s" % util.is_mounted(m.mnt),
           "still in the mount table of pids: %s" % mount_holders(m.mnt)]
    for tid in sorted(os.listdir("/proc/%d/task" % m.pid)):
        try:
            with open("/proc/%d/task/%s/stack" % (m.pid, tid)) as f:
                top = [ln.split()[-1] for ln in f.read().splitlines()[:4]]
        except OSError:
            top = ["?"]
        out.append("  thread %s: %s" % (tid, " < ".join(top)))
    return "\n".join(out)


@pytest.fixture
def transport(request):
    """(name, rings): requests over /dev/fuse, or over FUSE io_uring rings
    (src/fuse/uring.c: threads bound to CPUs, replies through a custom
    writev). rings: whether the kernel offers them, False for io_uring on
    a kernel without FUSE over io_uring (before 6.14, or hidden by
    tests/without_fuse_uring.sh), where the io_uring cases check the
    fallback: the same mount served over /dev/fuse."""
    with util.fuse_uring_switch() as set_switch:
        rings = set_switch(request.param == "io_uring")
        yield request.param, rings


# What the daemon says when io_uring is asked for and the kernel has none
# (src/fuse/uring.c, lsq_uring_start).
NO_RINGS = "does not offer FUSE over io_uring"


def end_mount(m):
    """Unmounts m and waits for its daemon, as a passing test does, and
    whatever state a failing one left it in. Returns a description of a
    daemon that would not exit (then killed), or None."""
    hang = None
    if m.proc is not None:
        hang = unmount_and_wait(m)
        if hang:
            m.stop(check=False)     # kills it
        else:
            m.stopped = True
            m.exit_status = m.proc.returncode
    util.force_unmount(m.mnt)
    return hang


@pytest.mark.parametrize("transport", ["dev_fuse", "io_uring"],
                         indirect=True)
@pytest.mark.parametrize("via", ["file", "http", "http-prefetch",
                                 "http-background"])
def test_parallel_overlapping_reads(image, request, tmp_path, monkeypatch,
                                    via, transport):
    transport, rings = transport
    prefix = tsan_env(tmp_path, monkeypatch)
    src = image["path"]
    # small caches: threads evict each other's blocks and miss together
    opts = ["threads=%d" % THREADS, "data_cache=512K", "metadata_cache=64K",
            "fragment_cache=2"]
    if transport == "io_uring":
        opts.append("io_uring")
    if via.startswith("http"):
        src = request.getfixturevalue("nginx").url(src)
    if via == "http-prefetch":
        # the prefetch (src/image/prefetch.c) races the readers for every
        # block: its reservations and their fetches share single flights
        prof = tmp_path / "profile.txt"
        prof.write_text("".join(name + "\n"
                                for name in reversed(list(image["files"]))))
        opts.append("prefetch=%s" % prof)
        # and the recorder (src/profile/recorder.c) takes every read
        opts.append("record=%s" % (tmp_path / "recorded.txt"))
    if via == "http-background":
        # background fetch (src/image/background.c) races the readers:
        # its spans skip what they hold, readers never wait for a span,
        # and the units it keeps go to cache_dir (whose learned profile
        # the mount also writes)
        opts += ["background=1", "cache_dir=%s" % (tmp_path / "cache")]
    mnt = str(tmp_path / "mnt")
    m = util.FuseMount(src, mnt, str(tmp_path / "daemon.log"), opts=opts)
    t0 = time.monotonic()
    try:
        m.start()
        if prefix:
            with open("/proc/%d/environ" % m.pid, "rb") as f:
                assert b"TSAN_OPTIONS=halt_on_error=1" in f.read()
        if rings:
            assert util.wait_until(lambda: util.daemon_stats(mnt)[
                "fuse_ring_threads"] > 0, 10), util.daemon_stats(mnt)
        errors, n = hammer(mnt, image["files"], 1 if via == "file" else 2)
        st = util.daemon_stats(mnt)
        if rings:
            assert st["fuse_ring_requests"] > 100, st
        else:
            # /dev/fuse served it all: asked for, the rings the kernel
            # lacks are said once; no ring thread ever ran
            assert st["fuse_ring_threads"] == 0, st
            assert st["fuse_ring_requests"] == 0, st
            assert "sqfs-ring" not in util.thread_names(m.pid)
            assert m.log().count(NO_RINGS) == (
                1 if transport == "io_uring" else 0), m.log()[-3000:]
        if via == "http-prefetch":
            assert st["prefetch_files"] == len(image["files"]), st
            assert st["prefetch_requests"] > 0, st
        if via == "http-background":
            # the background yields to readers on the network and runs at
            # SCHED_IDLE: sixteen busy readers on two cores (under TSan)
            # can keep it from starting until they stop; once they have,
            # it must fetch what they left (they touch part of the image)
            assert util.wait_until(lambda: util.daemon_stats(mnt)[
                "background_requests"] > 0, 30), util.daemon_stats(mnt)
        # a second round with a cold kernel page cache: drop it for us
        for name in list(image["files"])[:8]:
            fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        e2, n2 = hammer(mnt, image["files"], 3)
        errors += e2
        n += n2
    finally:
        hang = end_mount(m)
    took = time.monotonic() - t0
    assert not util.is_mounted(mnt), "mount left behind"
    assert not hang, hang
    reports = tsan_reports(prefix)
    assert not reports, "\n\n".join(reports)
    assert not errors, "%d bad reads of %d, first: %s" % (
        len(errors), n, errors[:10])
    assert m.exit_status == 0, m.log()[-3000:]
    assert "Sanitizer" not in m.log(), m.log()[-3000:]
    assert n == 2 * THREADS * READS_PER_THREAD
    if via == "http-prefetch":
        recorded = [ln.split("\t")[0] for ln in
                    (tmp_path / "recorded.txt").read_text().splitlines()
                    if not ln.startswith("#")]
        assert sorted(recorded) == sorted(set(recorded))
        assert set(recorded) <= set(image["files"])
        # the six hot files are read hundreds of times each
        hot = set(sorted(image["files"])[:6])
        assert len(hot & set(recorded)) >= 5, recorded
    print("%s: %d reads by %d threads in %.1f s" % (via, n, THREADS, took))
