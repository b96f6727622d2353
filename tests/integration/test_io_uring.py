"""FUSE over io_uring (-o io_uring, on by default; src/fuse/uring.c).

With the fuse module's enable_uring switched on, the daemon's ring
threads (a queue per CPU) answer the requests instead of the /dev/fuse
loop, and the mount must still look exactly as the kernel's squashfs shows
the same image. With io_uring=off, or with the switch off, requests come
over /dev/fuse. The switch is machine-wide: each test puts it back.
On a kernel without the switch (before 6.14; tests/without_fuse_uring.sh
hides it) each test checks the fallback instead: the same mount, every
request over /dev/fuse, no ring thread.
With LSQ_VIA_HTTP=1 the same checks run over nginx.
"""

import os
import signal

import pytest

import treebuilder
import util

IMAGE = "zstd"


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
