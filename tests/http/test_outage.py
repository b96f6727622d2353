"""The origin gone (#21): refused connections, then a blackhole that
accepts and never answers. Reads of data the mount holds keep being
served; reads of anything else fail with EIO within the configured
timeouts; unmounting works during the outage; once the origin is back the
next read succeeds at once."""

import os
import socket
import subprocess
import threading
import time

from conftest import (FaultServer, check_eio, is_mounted, read_with_timeout,
                      try_mount)
from test_cache import stats
from timing import WAIT, bound, fetch_seconds, wait_for

# each transfer gives up after 2 s (1 s to connect), one retry
OPTS = ["timeout=2", "connect_timeout=1", "retries=1"]


def read_bound(timeout, retries):
    """The worst case of one read that fails: the daemon's readahead may
    have asked for its block first (one try, waited for by the read),
    then the read's own tries with the backoff between them."""
    return bound(timeout + fetch_seconds(timeout, retries))


READ_BOUND = read_bound(2, 1)


def read_direct(path, timeout=WAIT):
    """O_DIRECT read: past the kernel's page cache, so the daemon answers
    (from its own caches or the network)."""
    t0 = time.monotonic()
    r = subprocess.run(["dd", "if=" + path, "iflag=direct", "bs=1M",
                        "status=none"], capture_output=True, timeout=timeout)
    dt = time.monotonic() - t0
    if r.returncode == 0:
        return True, r.stdout, dt
    return False, r.stderr.decode(errors="replace"), dt


class Blackhole:
    """Listens on a port, accepts every connection, never reads or
    answers."""

    def __init__(self, port):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.held = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(c)

    def close(self):
        # shutdown wakes the accept() of the thread; close alone does not
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(5)
        self.sock.close()
        for c in self.held:
            c.close()


def in_read(pid):
    """Whether process pid is blocked in a read(2) in the kernel."""
    try:
        with open("/proc/%d/stack" % pid) as f:
            return "vfs_read" in f.read()
    except OSError:
        return False


def mount_and_warm(mounts, fault_server, small_image, opts=OPTS):
    m = mounts(fault_server.url("/small.sqfs"), opts)
    ok, data, _ = read_direct(os.path.join(m.mnt, "f01.bin"))
    assert ok and data == small_image["files"]["f01.bin"], data
    return m


def check_outage(m, small_image, uncached):
    # what the mount holds: served as before
    ok, data, _ = read_direct(os.path.join(m.mnt, "f01.bin"))
    assert ok and data == small_image["files"]["f01.bin"], data
    assert sorted(os.listdir(m.mnt)) == sorted(
        os.listdir(small_image["tree"]))
    # anything else: EIO within the timeouts, one line naming the read
    ok, text, dt = read_direct(os.path.join(m.mnt, uncached))
    check_eio(ok, text)
    assert dt < READ_BOUND, dt
    assert m.alive()


def read_back_at_once(m, back, small_image, rel):
    """The first read once the origin is back succeeds at its first try:
    no retry, no failure, every request answered."""
    before = stats(m.mnt)
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, rel), WAIT)
    assert ok and data == small_image["files"][rel], data
    after = stats(m.mnt)
    for k in ("http_retries", "http_failures"):
        assert after[k] == before[k], (k, before, after)
    reqs = back.requests()
    assert reqs and all(r["status"] == 206 for r in reqs), reqs


def test_refused_then_back(mounts, fault_server, small_image):
    m = mount_and_warm(mounts, fault_server, small_image)
    port = fault_server.port
    fault_server.stop()
    check_outage(m, small_image, "f05.bin")
    assert "small.sqfs: read of bytes" in m.log(), m.log()[-2000:]
    back = FaultServer(port=port).start()
    try:
        back.add("/small.sqfs", small_image["data"])
        read_back_at_once(m, back, small_image, "f05.bin")
    finally:
        back.stop()


def test_blackhole_then_back(mounts, fault_server, small_image):
    m = mount_and_warm(mounts, fault_server, small_image)
    port = fault_server.port
    fault_server.stop()
    hole = Blackhole(port)
    try:
        check_outage(m, small_image, "f06.bin")
        assert hole.held, "the reads never reached the blackhole"
    finally:
        hole.close()
    back = FaultServer(port=port).start()
    try:
        back.add("/small.sqfs", small_image["data"])
        read_back_at_once(m, back, small_image, "f06.bin")
    finally:
        back.stop()


def test_unmount_during_outage(mounts, fault_server, small_image):
    """A read waits on a blackhole while the mount is unmounted: the lazy
    unmount takes the mount away without waiting for the read (it is gone
    while the read still waits), the read ends with an error within the
    timeouts, and the daemon exits 0."""
    # one try of 5 s: the read is in flight for that long once it reached
    # the blackhole, far longer than an unmount that does not wait for it
    timeout = 5
    m = mount_and_warm(mounts, fault_server, small_image,
                       ["timeout=%d" % timeout, "connect_timeout=1",
                        "retries=0"])
    bound_s = read_bound(timeout, 0)
    port = fault_server.port
    fault_server.stop()
    hole = Blackhole(port)
    reader = None
    try:
        reader = subprocess.Popen(["cat", os.path.join(m.mnt, "f07.bin")],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        # in flight: the reader waits in read(2) for the daemon, whose
        # fetch went to the blackhole (the daemon's own readahead may have
        # got there first: that alone is not the read)
        wait_for(lambda: reader.poll() is not None or
                 (hole.held and in_read(reader.pid)),
                 "the read to wait on the blackhole")
        assert reader.poll() is None, "the read ended before the unmount"
        r = subprocess.run(["fusermount3", "-u", "-z", m.mnt],
                           capture_output=True, timeout=WAIT)
        assert r.returncode == 0, r.stderr
        assert not is_mounted(m.mnt)
        assert reader.poll() is None, "the unmount waited for the read"
        _, err = reader.communicate(timeout=bound_s)
        assert reader.returncode != 0, "a read through a blackhole succeeded"
        assert m.proc.wait(timeout=bound_s) == 0, m.log()[-2000:]
        m.proc = None  # stopped here; nothing left for the fixture
        for bad in ("Sanitizer", "runtime error:"):
            assert bad not in m.log(), m.log()[-6000:]
    finally:
        if reader is not None and reader.poll() is None:
            reader.kill()
            reader.wait(WAIT)
        hole.close()
        if m.proc is not None and not is_mounted(m.mnt):
            # unmounted here, failed after: the daemon ends with its last
            # reader, which the fixture would report as a second problem
            try:
                m.proc.wait(WAIT)
                m.proc = None
            except subprocess.TimeoutExpired:
                pass  # the fixture kills it and says so


def test_offline_ok(mounts, fault_server, small_image, tmp_path):
    """Mounted with offline_ok while the origin is down: what cache_dir
    holds is served (a warning says it was not revalidated), anything else
    fails with EIO until the origin is back. Without offline_ok, or with a
    cache_dir that never saw the image, the mount is refused."""
    cache = str(tmp_path / "cache")
    os.makedirs(cache)
    url = fault_server.url("/small.sqfs")
    opts = OPTS + ["cache_dir=" + cache]
    m = mounts(url, opts)
    ok, data, _ = read_direct(os.path.join(m.mnt, "f08.bin"))
    assert ok and data == small_image["files"]["f08.bin"], data
    assert not m.stop()
    records = [f for f in os.listdir(cache) if f.startswith("origin-")]
    assert len(records) == 1, os.listdir(cache)
    assert os.stat(os.path.join(cache, records[0])).st_mode & 0o077 == 0
    port = fault_server.port
    fault_server.stop()

    # refused without offline_ok, and with offline_ok but no record
    rc, err, _ = try_mount(url, str(tmp_path / "refused"), None, opts)
    assert rc != 0 and "small.sqfs" in err, err
    empty = str(tmp_path / "empty")
    os.makedirs(empty)
    rc, err, _ = try_mount(url, str(tmp_path / "norecord"), None,
                           OPTS + ["cache_dir=" + empty, "offline_ok"])
    assert rc != 0 and "has no record of this image" in err, err

    m = mounts(url, opts + ["offline_ok"], name="offline")
    assert "offline_ok: serving what" in m.log(), m.log()
    ok, data, _ = read_direct(os.path.join(m.mnt, "f08.bin"))
    assert ok and data == small_image["files"]["f08.bin"], data
    assert sorted(os.listdir(m.mnt)) == sorted(
        os.listdir(small_image["tree"]))
    ok, text, dt = read_direct(os.path.join(m.mnt, "f09.bin"))
    check_eio(ok, text)
    assert dt < READ_BOUND, dt
    back = FaultServer(port=port).start()
    try:
        back.add("/small.sqfs", small_image["data"])
        ok, data, _ = read_direct(os.path.join(m.mnt, "f09.bin"))
        assert ok and data == small_image["files"]["f09.bin"], data
        # the image changed while we were offline: the next fetch is
        # refused as a change (If-Range), never mixed in
        back.add("/small.sqfs", small_image["data"], etag='"v2"')
        ok, text, _ = read_direct(os.path.join(m.mnt, "f10.bin"))
        check_eio(ok, text)
        ok, data, _ = read_direct(os.path.join(m.mnt, "f08.bin"))
        assert ok and data == small_image["files"]["f08.bin"], data
    finally:
        back.stop()
