"""FUSE over io_uring: a ring thread answers quick requests as SCHED_IDLE
(so that its reply hands the CPU straight back to the caller) and goes
back to SCHED_OTHER before work that takes long, here a fetch the fault
server holds back (src/fuse/uring.c, "Same-CPU handoff";
src/common/long_work.h). On a kernel without FUSE over io_uring (no
enable_uring switch: before 6.14, or hidden by tests/without_fuse_uring.sh)
the same mount, asked for io_uring, must serve the held-back read over
/dev/fuse with no ring thread and say so once."""

import os
import sys
import threading
import time

import pytest

from conftest import read_with_timeout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                "integration"))
from util import SCHED_IDLE, SCHED_OTHER, thread_policies  # noqa: E402

ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"


@pytest.fixture
def uring_on():
    """True once the switch is on; False on a kernel without it."""
    if not os.path.exists(ENABLE_URING):
        yield False
        return
    with open(ENABLE_URING) as f:
        old = f.read().strip()
    with open(ENABLE_URING, "w") as f:
        f.write("1")
    try:
        yield True
    finally:
        with open(ENABLE_URING, "w") as f:
            f.write(old)


def ring_policies(pid):
    """{tid: scheduling policy} of the daemon's sqfs-ring threads."""
    return {tid: policy for tid, (policy, _) in
            thread_policies(pid, "sqfs-ring").items()}


def dev_fuse_fallback(mounts, fault_server, small_image):
    """Without rings to offer, io_uring asked for: the held-back read is
    served over /dev/fuse, no ring thread runs, one line says why."""
    m = mounts(fault_server.url("/small.sqfs"),
               ["timeout=10", "readahead=0", "io_uring", "threads=2"])
    fault = fault_server.set_fault("delay", seconds=1, count=1)
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, "f20.bin"), 30)
    assert ok and data == small_image["files"]["f20.bin"], data
    assert fault.hits == 1, "the read did not reach the server"
    assert not ring_policies(m.proc.pid), "ring threads without rings"
    assert m.log().count("does not offer FUSE over io_uring") == 1, m.log()


def test_ring_thread_leaves_sched_idle_for_a_slow_fetch(
        uring_on, mounts, fault_server, small_image):
    if not uring_on:
        return dev_fuse_fallback(mounts, fault_server, small_image)
    old_cpus = os.sched_getaffinity(0)
    # our requests (and the reader thread's) go to CPU 0's queue
    os.sched_setaffinity(0, {0})
    try:
        # threads=2: two ring threads on CPU 0's queue (the daemon runs
        # on CPU 0 only, like us), both busy with the lookups below
        m = mounts(fault_server.url("/small.sqfs"),
                   ["timeout=10", "readahead=0", "io_uring", "threads=2"])
        pid = m.proc.pid

        def idle_threads():
            return {t for t, p in ring_policies(pid).items()
                    if p == SCHED_IDLE}

        # quick requests (lookups of names never asked before: the kernel
        # caches the rest) leave their threads idle; the rings take over
        # once every CPU's queue has registered
        n = 0

        def lookups(count):
            nonlocal n
            for _ in range(count):
                n += 1
                try:
                    os.lstat(os.path.join(m.mnt, "absent-%d" % n))
                except FileNotFoundError:
                    pass

        deadline = time.monotonic() + 10
        while not idle_threads() and time.monotonic() < deadline:
            lookups(20)
            time.sleep(0.01)
        assert idle_threads(), ring_policies(pid)
        lookups(100)  # whichever entry the kernel picks, both have run
        # and stay so once they have run again (we sleep: CPU 0 is theirs)
        time.sleep(0.3)
        idle = idle_threads()
        assert idle, ring_policies(pid)

        fault = fault_server.set_fault("delay", seconds=3, count=1)
        result = {}
        reader = threading.Thread(target=lambda: result.update(
            r=read_with_timeout(os.path.join(m.mnt, "f20.bin"), 30)))
        reader.start()
        raised = set()
        deadline = time.monotonic() + 2.5
        while not raised and time.monotonic() < deadline:
            now = ring_policies(pid)
            raised = {t for t in idle if now.get(t) == SCHED_OTHER}
            time.sleep(0.02)
        reader.join()
        ok, data, _ = result["r"]
        assert ok and data == small_image["files"]["f20.bin"], data
        assert fault.hits == 1, "no fetch was held back"
        assert raised, "no idle ring thread went back to SCHED_OTHER " \
            "while its fetch waited: %r" % ring_policies(pid)
    finally:
        os.sched_setaffinity(0, old_cpus)
