"""The image's tail beside the probe (src/http/http_warmup.c): a mount asks
for the image's last TAIL bytes while the probe runs; when they hold the
metadata region and are the probed object's, the mount asks for nothing
else. A tail that is another object's, that stalls, that cannot hold the
region, or that an unchanged cached image does not need, costs the mount
nothing but the request."""

import os
import struct
import subprocess
import time

from conftest import mksquashfs
from servers import TAIL, TAIL_RANGE, without_openers
from test_cache import drop_page_cache, image_entries, stats
from timing import WAIT


def region(image):
    """(inode_table_start, bytes_used) of a SquashFS image."""
    with open(image, "rb") as f:
        sb = f.read(96)
    return struct.unpack_from("<Q", sb, 64)[0], \
        struct.unpack_from("<Q", sb, 40)[0]


def read_all(mnt, files):
    for rel, data in files.items():
        with open(os.path.join(mnt, rel), "rb") as f:
            assert f.read() == data, rel


def fetches(log):
    """The requests of the log for the image that are not the mount's
    openers (nor for IMAGE.profile, which a mount looks for)."""
    return [e for e in without_openers(log) if e["method"] == "GET" and
            not e.get("target", e.get("uri", "")).endswith(".profile")]


def starts_at(e, off):
    return (e["range"] or "").startswith("bytes=%d-" % off)


def test_tail_brings_the_metadata(fault_server, small_image, mounts):
    """The probe and the tail are all a mount asks for; a walk and the
    reads then cost data requests only, and every byte is right."""
    lo, hi = region(small_image["path"])
    assert hi - lo < TAIL < len(small_image["data"])
    m = mounts(fault_server.url("/small.sqfs"), ["background=off"])
    at_mount = fault_server.requests()
    tails = [e for e in at_mount if e["range"] == TAIL_RANGE]
    assert len(tails) == 1 and tails[0]["status"] == 206, at_mount
    assert tails[0]["bytes"] == TAIL, tails
    assert [e["range"] for e in fetches(at_mount)] == ["bytes=0-65535"], \
        at_mount
    for dirpath, _, names in os.walk(m.mnt):
        for n in names:
            os.lstat(os.path.join(dirpath, n))
    read_all(m.mnt, small_image["files"])
    # nothing asked past the data's end: the metadata came with the tail
    assert not any(e["range"] and e["range"].startswith("bytes=") and
                   e["range"] != TAIL_RANGE and
                   int(e["range"][6:].split("-")[0]) >= lo
                   for e in fault_server.requests()), \
        fault_server.requests()
    assert stats(m.mnt)["metadata_pinned_bytes"] >= hi - lo


def test_tail_of_another_object_is_not_kept(fault_server, small_image,
                                            mounts):
    """A tail answered with another ETag than the probe's (the image
    replaced in between, or a mirror out of step) is dropped: the mount
    fetches the metadata itself and reads right bytes, without calling
    the image changed."""
    lo, _ = region(small_image["path"])
    fault_server.set_fault("other_etag", min_offset=0, suffix="only")
    m = mounts(fault_server.url("/small.sqfs"), ["background=off"])
    fault_server.clear_fault()
    log = fault_server.requests()
    assert any(e["range"] == TAIL_RANGE for e in log), log
    assert any(starts_at(e, lo) for e in log), log
    read_all(m.mnt, small_image["files"])
    assert "changed" not in m.log(), m.log()


def test_stalled_tail_does_not_hold_the_mount(fault_server, small_image,
                                              mounts):
    """An origin that holds the tail's body: the mount goes on without it
    (it waits at most as long again as the probe took, then about the
    second libcurl takes to notice an abort), fetches the metadata itself,
    and reads right bytes while the tail is still held."""
    lo, _ = region(small_image["path"])
    fault_server.set_fault("hold", min_offset=0, suffix="only", count=1)
    t0 = time.monotonic()
    m = mounts(fault_server.url("/small.sqfs"), ["background=off"])
    took = time.monotonic() - t0
    assert fault_server.wait_held(1, WAIT) == [TAIL_RANGE]
    assert took < 10, took
    assert any(starts_at(e, lo) for e in fault_server.requests()), \
        fault_server.requests()
    read_all(m.mnt, small_image["files"])
    fault_server.release()


def test_no_tail_without_prefetch_metadata(fault_server, small_image,
                                           mounts):
    """-o prefetch_metadata=off: the metadata is read block by block on
    demand, so the mount does not fetch the tail either."""
    m = mounts(fault_server.url("/small.sqfs"),
               ["background=off", "prefetch_metadata=off"])
    read_all(m.mnt, {"d/small.txt": small_image["files"]["d/small.txt"]})
    assert not any(e["range"] == TAIL_RANGE
                   for e in fault_server.requests()), \
        fault_server.requests()
    assert stats(m.mnt)["metadata_pinned_bytes"] == 0


def test_large_metadata_region_is_fetched_whole(fault_server, mounts,
                                                tmp_path):
    """An image whose metadata region is larger than the tail: the tail is
    aborted once the superblock says so, the region is fetched as one
    request, and the walk agrees with the tree."""
    tree = tmp_path / "tree"
    for d in range(8):
        os.makedirs(tree / ("dir%d" % d))
        for i in range(1500):
            with open(tree / ("dir%d" % d) / ("file-%05d" % i), "wb") as f:
                f.write(b"%d/%d\n" % (d, i))
    img = str(tmp_path / "wide.sqfs")
    # uncompressed tables: a region past TAIL without a huge tree
    mksquashfs(str(tree), img, "-noI", "-noD", "-noF", "-noId")
    lo, hi = region(img)
    assert hi - lo > TAIL, hi - lo
    with open(img, "rb") as f:
        fault_server.add("/wide.sqfs", f.read())
    m = mounts(fault_server.url("/wide.sqfs"), ["background=off"])
    log = fault_server.requests()
    assert any(starts_at(e, lo) for e in log), log
    names = sorted(os.listdir(os.path.join(m.mnt, "dir7")))
    assert names == sorted(os.listdir(tree / "dir7"))
    with open(os.path.join(m.mnt, "dir3", "file-01234"), "rb") as f:
        assert f.read() == b"3/1234\n"


def test_unchanged_cached_image_answers_304(nginx, big_image, mounts,
                                            tmp_path):
    """With cache_dir, a remount asks for the tail on the condition that
    the image changed since the last mount (If-None-Match with the
    recorded ETag): nginx answers 304 without a body, and the metadata
    comes from the disk cache."""
    opts = ["cache_dir=" + str(tmp_path / "cache"), "background=off"]
    small = os.path.join("etc", "small.conf")
    nginx.clear_log()
    m = mounts(nginx.url("img.sqfs"), opts)
    with open(os.path.join(m.mnt, small), "rb") as f:
        want = f.read()
    first = [e for e in image_entries(nginx) if e["range"] == TAIL_RANGE]
    assert [e["status"] for e in first] == [206], image_entries(nginx)
    assert m.stop() == []

    drop_page_cache()
    nginx.clear_log()
    m = mounts(nginx.url("img.sqfs"), opts)
    with open(os.path.join(m.mnt, small), "rb") as f:
        assert f.read() == want
    log = image_entries(nginx)
    tails = [e for e in log if e["range"] == TAIL_RANGE]
    assert [(e["status"], e["body"]) for e in tails] == [(304, 0)], log
    assert [e["range"] for e in fetches(log)] == ["bytes=0-65535"], log
    assert stats(m.mnt)["disk_cache_hits"] > 0
