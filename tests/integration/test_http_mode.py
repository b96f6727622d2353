"""Checks of the HTTP mode itself (collected only with LSQ_VIA_HTTP=1, see
conftest.py): the FUSE side really reads through the session's nginx, and
from its access log ($bytes_sent, $http_range) a mount costs the head plus
the image's tail (its metadata region, when the tail holds it), and
reading a small file adds its fragment block, not the image.
"""

import os

import util
from servers import TAIL, TAIL_RANGE

HEADERS = 1024          # slack per response for the status line and headers


def _uri_entries(server, name):
    return [e for e in server.entries() if e["uri"] == "/" + name]


def test_mounts_go_through_nginx(http_server, image_cache, mounter):
    assert http_server is not None and util.via_http()
    assert http_server.alive(), "nginx is not running"
    image = image_cache.path("gzip")
    # A second name for the same image, so its log lines are this test's.
    probe = os.path.join(os.path.dirname(image), "probe-gzip.sqfs")
    if not os.path.exists(probe):
        os.link(image, probe)
    sb = util.SqfsReader(image).sb
    m = mounter.fuse(probe, name="probe-gzip")
    url = "http://127.0.0.1:%d/probe-gzip.sqfs" % http_server.port
    assert url in m.cmd, m.cmd

    assert util.wait_until(lambda: _uri_entries(http_server,
                                                "probe-gzip.sqfs"), 5)
    at_mount = _uri_entries(http_server, "probe-gzip.sqfs")
    assert all(e["status"] == 206 and e["range"].startswith("bytes=")
               for e in at_mount), at_mount
    # besides a request on each connection that readahead will use,
    # opened while the probe runs (docs/http-source.md): 1 byte, but the
    # image's last 512 KiB on the first, which holds the metadata region
    # of an image whose region is smaller: then nothing else is asked
    openers = [e for e in at_mount if e["range"] == "bytes=0-0"]
    tail = [e for e in at_mount if e["range"] == TAIL_RANGE]
    assert len(openers) <= 2 and all(e["body"] == 1 for e in openers), \
        openers
    assert len(tail) == 1, at_mount
    size = os.path.getsize(image)
    assert tail[0]["body"] == min(TAIL, size), tail
    meta = sb["bytes_used"] - sb["inode_table_start"]
    fetches = [e for e in at_mount if e not in openers + tail]
    assert len(fetches) == (1 if meta <= TAIL else 2), \
        "mount took %d requests: %r" % (len(at_mount), at_mount)
    sent = sum(e["bytes"] for e in at_mount)
    assert sent <= 65536 + min(TAIL, size) + (meta if meta > TAIL else 0) + \
        HEADERS * len(at_mount), \
        "mount moved %d bytes; head 64 KiB + tail + metadata %d" % (sent,
                                                                    meta)

    with open(os.path.join(m.mnt, "small", "hundred"), "rb") as f:
        got = f.read()
    with open(os.path.join(image_cache.tree.root, "small", "hundred"),
              "rb") as f:
        assert got == f.read()
    assert util.wait_until(lambda: len(_uri_entries(
        http_server, "probe-gzip.sqfs")) > len(at_mount), 5)
    after = _uri_entries(http_server, "probe-gzip.sqfs")[len(at_mount):]
    assert all(e["status"] == 206 for e in after), after
    added = sum(e["bytes"] for e in after)
    assert len(after) <= 2 and added <= sb["block_size"] + HEADERS * 2, \
        "reading a 100-byte file took %d requests, %d bytes: %r" % (
            len(after), added, after)
    assert sent + added < os.path.getsize(image) // 5

    # Over HTTP/1.1 the workers make their transfers themselves: no
    # transfer engine thread (it only serves HTTP/2 multiplexing; see
    # tests/http/test_https.py). Threads carry names (top -H, perf, gdb):
    # requests are served by /dev/fuse workers, or, where the kernel has
    # FUSE over io_uring, by ring threads (then no /dev/fuse worker may
    # have been needed after the INIT).
    assert m.pid is not None
    names = util.thread_names(m.pid)
    assert names & {"sqfs-worker", "sqfs-ring"}, names
    assert "sqfs-http" not in names, names
