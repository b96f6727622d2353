"""The HTTP source against our own fault-injecting server: each fault gives
the documented result (the right bytes, or EIO) within a bounded time, and
the daemon keeps serving afterwards. The bounds come from each mount's
timeouts and retries (timing.py), not from how fast this machine is."""

import os
import subprocess

import pytest

from conftest import (FaultServer, check_eio, daemon, read_with_timeout,
                      try_mount)
from servers import without_openers
from test_cache import stats
from timing import WAIT, bound, fetch_seconds, run_threads, wait_for

FAST = ["timeout=2", "connect_timeout=1", "retries=3"]


def fault_bound(try_seconds, retries, retry_after=0.0):
    """How long a read through a fault may take: one fetch's tries, each
    ending after try_seconds (the timeout for a stalled answer, 0 for an
    error one), with the longest backoffs between them, after at most one
    more such fetch that it queued behind (the kernel's or the daemon's
    readahead)."""
    return bound(2 * fetch_seconds(try_seconds, retries, retry_after))


def _mount(mounts, fault_server, opts=FAST):
    return mounts(fault_server.url("/small.sqfs"), opts)


def _check_file(m, small_image, rel, timeout=WAIT):
    ok, data, dt = read_with_timeout(os.path.join(m.mnt, rel), timeout)
    assert ok, "read of %s failed: %s\n%s" % (rel, data, m.log()[-3000:])
    assert data == small_image["files"][rel], rel
    return dt


def _still_serving(m, small_image, rel="d/small.txt"):
    assert m.alive()
    _check_file(m, small_image, rel)


def profile_requests(server):
    """The requests for URL.profile: with prefetch=auto a mount of a URL
    asks once, on the prefetch's thread, for a startup profile published
    beside the image (the fault server has none: 404)."""
    return [r for r in server.requests() if r["target"].endswith(".profile")]


def test_mount_cost_and_conditional_requests(mounts, fault_server,
                                             small_image):
    m = _mount(mounts, fault_server)
    (prof,) = wait_for(lambda: profile_requests(fault_server),
                       "the mount to ask for URL.profile")
    assert prof["target"] == "/small.sqfs.profile" and \
        prof["status"] == 404, prof
    reqs = [r for r in without_openers(fault_server.requests())
            if r is not prof]
    assert 1 <= len(reqs) <= 3, reqs
    assert reqs[0]["range"] == "bytes=0-65535"
    for r in reqs:
        assert r["method"] == "GET" and r["status"] == 206, r
        assert r["ua"].startswith("sqfs-lazy/"), r
    for r in reqs[1:]:
        assert r["if_range"] == '"v1"', r
    for rel in small_image["files"]:
        _check_file(m, small_image, rel)
    assert os.readlink(os.path.join(m.mnt, "d/link")) == "small.txt"
    for r in without_openers(fault_server.requests())[1:]:
        if r is not prof:
            assert r["if_range"] == '"v1"' and r["status"] == 206, r
    assert profile_requests(fault_server) == [prof]


def test_delay_then_success(mounts, fault_server, small_image):
    m = _mount(mounts, fault_server, ["timeout=1", "retries=3"])
    f = fault_server.set_fault("delay", seconds=4, count=1)
    dt = _check_file(m, small_image, "f01.bin")
    assert f.hits == 1
    # the delayed try ends after timeout=1; the next one is answered
    assert dt < fault_bound(1, 1), dt


def test_stalled_server_gives_eio_then_recovers(mounts, fault_server,
                                                small_image):
    m = _mount(mounts, fault_server, ["timeout=1", "retries=1"])
    fault_server.set_fault("delay", seconds=20)
    ok, text, dt = read_with_timeout(os.path.join(m.mnt, "f02.bin"), WAIT)
    check_eio(ok, text)
    assert dt < fault_bound(1, 1), dt
    assert "small.sqfs: read of bytes" in m.log()
    fault_server.clear_fault()
    _check_file(m, small_image, "f02.bin")
    _still_serving(m, small_image)


def test_reset_mid_body_is_retried(mounts, fault_server, small_image):
    m = _mount(mounts, fault_server)
    f = fault_server.set_fault("reset", count=2)
    _check_file(m, small_image, "f03.bin")
    assert f.hits == 2


def test_short_body_is_retried(mounts, fault_server, small_image):
    m = _mount(mounts, fault_server)
    f = fault_server.set_fault("short", count=2)
    _check_file(m, small_image, "f04.bin")
    assert f.hits == 2


def test_short_body_forever_is_eio(mounts, fault_server, small_image):
    m = _mount(mounts, fault_server, ["retries=2"])
    fault_server.set_fault("short")
    ok, text, dt = read_with_timeout(os.path.join(m.mnt, "f05.bin"), WAIT)
    check_eio(ok, text)
    assert dt < fault_bound(0, 2), dt
    fault_server.clear_fault()
    _check_file(m, small_image, "f05.bin")


def test_5xx_retried(mounts, fault_server, small_image):
    m = _mount(mounts, fault_server)
    f = fault_server.set_fault("status", code=500, count=2)
    _check_file(m, small_image, "f06.bin")
    assert f.hits == 2
    st = m.log()
    assert "failed" not in st


def test_503_and_429_honour_retry_after(mounts, fault_server, small_image):
    # readahead=0: the one faulty answer must go to the reader's own
    # request, not to a background readahead (which gives up at once)
    m = _mount(mounts, fault_server, FAST + ["readahead=0"])
    for code, rel in ((503, "f07.bin"), (429, "f08.bin")):
        f = fault_server.set_fault("status", code=code, retry_after=1,
                                   count=1)
        dt = _check_file(m, small_image, rel)
        assert f.hits == 1
        # Retry-After: 1 is waited for, and not much more
        assert 0.9 <= dt < fault_bound(0, 1, retry_after=1), (code, dt)


def test_persistent_500_is_eio_then_server_back(mounts, fault_server,
                                                small_image):
    m = _mount(mounts, fault_server, ["retries=2"])
    fault_server.set_fault("status", code=500)
    ok, text, dt = read_with_timeout(os.path.join(m.mnt, "f09.bin"), WAIT)
    check_eio(ok, text)
    assert dt < fault_bound(0, 2), dt
    assert "HTTP 500" in m.log()
    assert m.alive()
    fault_server.clear_fault()
    _check_file(m, small_image, "f09.bin")


def test_wrong_content_range_later_is_retried(mounts, fault_server,
                                              small_image):
    m = _mount(mounts, fault_server)
    f = fault_server.set_fault("wrong_range", count=2)
    _check_file(m, small_image, "f10.bin")
    assert f.hits == 2
    fault_server.set_fault("wrong_range")
    ok, text, _ = read_with_timeout(os.path.join(m.mnt, "f11.bin"))
    check_eio(ok, text)
    assert "wrong Content-Range" in m.log()
    fault_server.clear_fault()
    _check_file(m, small_image, "f11.bin")


def test_offset_and_wrong_content_range_at_open(tmp_path, mounts,
                                               fault_server, small_image):
    # the image behind 4 KiB of padding, mounted with -o offset
    fault_server.add("/pad.sqfs", bytes(4096) + small_image["data"])
    url = fault_server.url("/pad.sqfs")
    m = mounts(url, FAST + ["offset=4096"])
    _check_file(m, small_image, "f00.bin")
    fault_server.set_fault("wrong_range", min_offset=0)
    rc, err, dt = try_mount(url, str(tmp_path / "mnt"), None,
                            ["offset=4096"])
    assert rc != 0 and "wrong Content-Range" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_range_ignored_at_open_is_refused(tmp_path, fault_server):
    fault_server.set_fault("ignore_range", min_offset=0)
    rc, err, dt = try_mount(fault_server.url("/small.sqfs"),
                            str(tmp_path / "mnt"), None)
    assert rc != 0
    assert "ignores Range" in err, err
    assert len(err.strip().splitlines()) == 1, err
    # the whole body was not downloaded
    assert sum(r["bytes"] for r in fault_server.requests()) > 0
    assert dt < fault_bound(0, 5), dt   # default retries=5


def test_range_ignored_later_is_retried_or_eio(mounts, fault_server,
                                               small_image):
    m = _mount(mounts, fault_server, ["retries=2"])
    fault_server.set_fault("ignore_range", count=1)
    _check_file(m, small_image, "f12.bin")
    fault_server.set_fault("ignore_range")
    ok, text, dt = read_with_timeout(os.path.join(m.mnt, "f13.bin"), WAIT)
    check_eio(ok, text)
    assert dt < fault_bound(0, 2), dt
    assert "remote image changed" not in m.log()
    fault_server.clear_fault()
    _check_file(m, small_image, "f13.bin")


def test_etag_change_is_sticky_eio(mounts, fault_server, small_image):
    m = _mount(mounts, fault_server)
    _check_file(m, small_image, "f14.bin")
    changed = bytearray(small_image["data"])
    changed[200_000] ^= 0xFF
    fault_server.add("/small.sqfs", bytes(changed), etag='"v2"')
    ok, text, dt = read_with_timeout(os.path.join(m.mnt, "f15.bin"), WAIT)
    check_eio(ok, text)
    assert dt < fault_bound(0, 0), dt   # a changed image is not retried
    log = m.log()
    assert log.count("remote image changed: " +
                     fault_server.url("/small.sqfs")) == 1, log
    # sticky: even once the old image is back, uncached reads fail
    fault_server.add("/small.sqfs", small_image["data"])
    ok, text, _ = read_with_timeout(os.path.join(m.mnt, "f16.bin"))
    check_eio(ok, text)
    assert m.alive()
    assert os.path.isdir(os.path.join(m.mnt, "d"))


def test_server_gone_and_back(mounts, fault_server, small_image):
    m = _mount(mounts, fault_server, ["retries=2", "connect_timeout=1"])
    port = fault_server.port
    fault_server.stop()
    ok, text, dt = read_with_timeout(os.path.join(m.mnt, "f17.bin"), WAIT)
    check_eio(ok, text)
    # refused connections: each try fails at once (connect_timeout=1 at
    # most)
    assert dt < fault_bound(1, 2), dt
    back = FaultServer(port=port).start()
    try:
        back.add("/small.sqfs", small_image["data"])
        _check_file(m, small_image, "f17.bin")
        _still_serving(m, small_image)
    finally:
        back.stop()


def test_not_found_and_refused_at_open(tmp_path, fault_server):
    rc, err, _ = try_mount(fault_server.url("/nope.sqfs"),
                           str(tmp_path / "mnt"), None)
    assert rc != 0 and "HTTP 404" in err and "/nope.sqfs" in err, err
    rc, err, dt = try_mount("http://127.0.0.1:1/x.sqfs",
                            str(tmp_path / "mnt"), None,
                            ["retries=1", "connect_timeout=1"])
    assert rc != 0 and "127.0.0.1:1/x.sqfs" in err, err
    assert dt < fault_bound(1, 1), dt


def test_header_file(tmp_path, mounts, fault_server, small_image):
    fault_server.require_header = ("Authorization", "Bearer s3cret-token")
    url = fault_server.url("/small.sqfs")
    rc, err, _ = try_mount(url, str(tmp_path / "mnt0"), None)
    assert rc != 0 and "HTTP 403" in err, err
    hf = tmp_path / "headers"
    hf.write_text("# credentials\nAuthorization: Bearer s3cret-token\n")
    os.chmod(hf, 0o644)
    rc, err, _ = try_mount(url, str(tmp_path / "mnt1"), None,
                           ["header_file=%s" % hf])
    assert rc != 0 and "readable by everyone" in err, err
    os.chmod(hf, 0o600)
    m = mounts(url, FAST + ["header_file=%s" % hf])
    _check_file(m, small_image, "f18.bin")
    assert "s3cret" not in m.log()
    assert all(r["auth"] == "Bearer s3cret-token"
               for r in fault_server.requests() if r["status"] == 206)


def test_mirror_failover(mounts, fault_server, small_image):
    mirror = FaultServer().start()
    try:
        mirror.add("/copy.sqfs", small_image["data"])
        m = mounts(fault_server.url("/small.sqfs"),
                   FAST + ["mirror=" + mirror.url("/copy.sqfs")])
        fault_server.set_fault("status", code=500)
        dt = _check_file(m, small_image, "f19.bin")
        # FAST: retries=3, the mirror answers the first retry
        assert dt < fault_bound(0, 3), dt
        assert any(r["range"] and r["status"] == 206 and
                   r["range"] != "bytes=0-65535" for r in mirror.requests())
        # --status names the copy in use now
        out = subprocess.run([daemon(), "--status", m.mnt], text=True,
                             capture_output=True, timeout=30).stdout
        assert "mirror in use: %s (2 of 2)" % mirror.url("/copy.sqfs") \
            in out, out
        # and back: the mirror fails, the primary has recovered
        mirror.set_fault("status", code=500)
        fault_server.clear_fault()
        _check_file(m, small_image, "f21.bin")
        mirror.clear_fault()
        fault_server.set_fault("status", code=503)
        _check_file(m, small_image, "f22.bin")
    finally:
        mirror.stop()


def test_mirror_of_another_image_is_refused(tmp_path, fault_server,
                                            small_image):
    other = FaultServer().start()
    try:
        data = bytearray(small_image["data"])
        data[100] ^= 1
        other.add("/copy.sqfs", bytes(data))
        rc, err, _ = try_mount(fault_server.url("/small.sqfs"),
                               str(tmp_path / "mnt"), None,
                               ["mirror=" + other.url("/copy.sqfs")])
        assert rc != 0 and "not the same image" in err, err
    finally:
        other.stop()


def test_parallel_reads_with_few_connections(mounts, fault_server,
                                             small_image):
    m = _mount(mounts, fault_server, ["max_connections=2", "readahead=256K"])
    fault_server.set_fault("reset", count=3)
    names = ["f%02d.bin" % i for i in range(20, 24)] + ["d/small.txt"]
    # every reader finished with the right bytes, none raised
    run_threads(lambda rel: _check_file(m, small_image, rel),
                [(n,) for n in names])


def test_proxy_from_environment(mounts, fault_server, small_image):
    env = dict(os.environ)
    for k in ("https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
              "all_proxy", "ALL_PROXY"):
        env.pop(k, None)
    env["http_proxy"] = "http://127.0.0.1:%d" % fault_server.port
    m = mounts("http://image.invalid/small.sqfs", FAST, env=env)
    _check_file(m, small_image, "f20.bin")
    assert all(r["target"].startswith("http://image.invalid/")
               for r in fault_server.requests())


@pytest.fixture
def big_fault_server(big_image):
    s = FaultServer().start()
    with open(big_image["path"], "rb") as f:
        s.add("/img.sqfs", f.read())
    yield s
    s.stop()


def test_sequential_reader_over_broken_readahead(mounts, big_fault_server,
                                                big_image):
    """Three of a sequential reader's readahead ranges break off halfway
    (the server resets the connection): a readahead is one quiet try, so
    the reads it would have served fetch for themselves, and every byte
    is the file's."""
    m = mounts(big_fault_server.url("/img.sqfs"),
               FAST + ["background=off"])
    # readahead's ranges, not the reads of the metadata and the first
    # blocks, which are shorter
    f = big_fault_server.set_fault("reset", count=3, min_length=256 * 1024)
    path = os.path.join(big_image["tree"], "large.bin")
    with open(os.path.join(m.mnt, "large.bin"), "rb") as got, \
            open(path, "rb") as want:
        for off in range(0, 24 << 20, 1 << 20):
            assert got.read(1 << 20) == want.read(1 << 20), off
    st = stats(m.mnt)
    brief = {k: v for k, v in st.items() if k.startswith("http_")}
    assert f.hits == 3, brief
    assert st["http_readahead_bytes"] > 0, brief
    assert m.alive()
