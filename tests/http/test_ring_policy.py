"""FUSE over io_uring: ring threads answer every request as plain
SCHED_OTHER threads, bound to their queue's CPU, quick lookups and a fetch
the fault server holds back alike (src/fuse/uring.c; answering quick
requests as SCHED_IDLE was removed on 2026-11-25, docs/decisions.md).
On a kernel without FUSE over io_uring (no enable_uring switch: before
6.14, or hidden by tests/without_fuse_uring.sh) the same mount, asked for
io_uring, must serve the held-back read over /dev/fuse with no ring thread
and say so once."""

import os
import sys
import threading
import time

import pytest

from conftest import read_with_timeout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                "integration"))
from util import (SCHED_OTHER, daemon_stats, fuse_uring_switch,  # noqa: E402
                  thread_policies)


@pytest.fixture
def uring_on():
    """True once the switch is on; False on a kernel without it. The
    switch is machine-wide: util.fuse_uring_switch() holds its lock and
    puts it back."""
    with fuse_uring_switch() as set_switch:
        yield set_switch(True)


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


def test_ring_threads_stay_plain(uring_on, mounts, fault_server,
                                 small_image):
    if not uring_on:
        return dev_fuse_fallback(mounts, fault_server, small_image)
    old_cpus = os.sched_getaffinity(0)
    # our requests (and the reader's) go to CPU 0's queue
    os.sched_setaffinity(0, {0})
    try:
        m = mounts(fault_server.url("/small.sqfs"),
                   ["timeout=10", "readahead=0", "io_uring", "threads=2"])
        pid = m.proc.pid
        seen = {}  # tid -> policies seen

        def look():
            for tid, (policy, _) in thread_policies(pid,
                                                    "sqfs-ring").items():
                seen.setdefault(tid, set()).add(policy)

        # quick requests: lookups of names never asked before (the
        # kernel caches the rest); the rings take over once every CPU's
        # queue has registered
        deadline = time.monotonic() + 10
        n = 0
        while time.monotonic() < deadline:
            for _ in range(20):
                n += 1
                try:
                    os.lstat(os.path.join(m.mnt, "absent-%d" % n))
                except FileNotFoundError:
                    pass
            look()
            if daemon_stats(m.mnt)["fuse_ring_requests"] >= 100:
                break
            time.sleep(0.01)
        assert daemon_stats(m.mnt)["fuse_ring_requests"] >= 100, \
            "the rings answered no lookups"
        # each bound to its queue's CPU (a sequential READ may float one
        # for a while: float_for_read)
        bound = {tid: cpus for tid, (_, cpus) in
                 thread_policies(pid, "sqfs-ring").items()}
        assert bound and all(len(c) == 1 for c in bound.values()), bound

        fault = fault_server.set_fault("delay", seconds=2, count=1)
        result = {}
        reader = threading.Thread(target=lambda: result.update(
            r=read_with_timeout(os.path.join(m.mnt, "f20.bin"), 30)))
        reader.start()
        while reader.is_alive():
            look()
            time.sleep(0.02)
        reader.join()
        ok, data, _ = result["r"]
        assert ok and data == small_image["files"]["f20.bin"], data
        assert fault.hits == 1, "no fetch was held back"
        assert seen and all(p == {SCHED_OTHER} for p in seen.values()), \
            "ring threads left SCHED_OTHER: %r" % seen
    finally:
        os.sched_setaffinity(0, old_cpus)
