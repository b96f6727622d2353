"""Startup profiles over a real nginx and our fault server: -o record=
writes the files read in order with their ranges; -o prefetch= fetches a
profile's blocks ahead in a few large requests, reads then cost no request,
and a stale, empty, unreadable or failing profile never fails the mount or
a read (docs/prefetch.md)."""

import os
import signal
import struct
import subprocess
import time

from conftest import daemon, read_with_timeout, start_nginx
from servers import without_openers
from test_cache import stats
from timing import WAIT, bound, run_threads, wait_for

MiB = 1 << 20
CONF = "etc/conf.d/c%03d"


def read_profile(path):
    """[(path, ranges or None)] of a profile, comments skipped."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, _, rest = line.partition("\t")
            ranges = None
            if rest:
                ranges = [tuple(int(x) for x in r.split("-"))
                          for r in rest.split("\t")[0].split(",")]
            out.append((name, ranges))
    return out


def wait_prefetch_done(mnt):
    """Counters once every planned span was fetched, failed or found
    cached."""
    def done():
        st = stats(mnt)
        if st["prefetch_spans"] and \
                st["prefetch_spans_done"] == st["prefetch_spans"]:
            return st
        return None
    return wait_for(done, "the prefetch to be over")


def inode_table_start(image):
    with open(image, "rb") as f:
        return struct.unpack("<Q", f.read(72)[64:72])[0]


def same_bytes(mnt, tree, rel):
    with open(os.path.join(mnt, rel), "rb") as a, \
            open(os.path.join(tree, rel), "rb") as b:
        return a.read() == b.read()


def test_record_lists_first_reads_in_order(nginx, big_image, mounts,
                                           tmp_path):
    prof = str(tmp_path / "profile.txt")
    m = mounts(nginx.url("img.sqfs"), ["record=" + prof])
    tree = big_image["tree"]
    # listing and stat are not reads; none of this may appear
    os.listdir(os.path.join(m.mnt, "etc", "conf.d"))
    os.stat(os.path.join(m.mnt, CONF % 7))
    assert same_bytes(m.mnt, tree, CONF % 5)
    with open(os.path.join(m.mnt, "large.bin"), "rb") as f:
        f.seek(50 * MiB + 100)
        assert f.read(4096) == open(os.path.join(tree, "large.bin"),
                                    "rb").read()[50 * MiB + 100:
                                                 50 * MiB + 4196]
    assert same_bytes(m.mnt, tree, "etc/small.conf")
    assert same_bytes(m.mnt, tree, CONF % 5)   # again: listed once
    assert same_bytes(m.mnt, tree, CONF % 9)
    assert m.stop() == []
    got = read_profile(prof)
    names = [n for n, _ in got]
    assert names == [CONF % 5, "large.bin", "etc/small.conf", CONF % 9]
    # small files read whole: no ranges; the large one: what the kernel
    # asked for, in whole blocks, around the bytes read
    assert got[0][1] is None and got[2][1] is None
    ranges = got[1][1]
    assert ranges and len(ranges) <= 2
    lo, hi = ranges[0][0], ranges[-1][1]
    assert lo <= 50 * MiB + 100 and hi >= 50 * MiB + 4195, ranges
    assert hi - lo < 4 * MiB, ranges
    assert lo % (128 << 10) == 0, ranges


def test_record_written_on_sigterm(nginx, big_image, mounts, tmp_path):
    prof = str(tmp_path / "profile.txt")
    m = mounts(nginx.url("img.sqfs"), ["record=" + prof])
    assert same_bytes(m.mnt, big_image["tree"], CONF % 11)
    m.proc.send_signal(signal.SIGTERM)
    assert m.proc.wait(15) == 0
    m.proc = None  # stopped here, not by the fixture
    assert [n for n, _ in read_profile(prof)] == [CONF % 11]
    assert "record %s: 1 files written" % prof in m.log()


def test_record_refuses_unwritable_path(nginx, tmp_path):
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    r = subprocess.run([daemon(), "-f", "-o", "record=/nonexistent/dir/p",
                        nginx.url("img.sqfs"), mnt], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "record=/nonexistent/dir/p" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def write_profile(path, lines):
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def test_prefetch_fetches_ahead_in_few_requests(nginx, big_image, mounts,
                                                tmp_path):
    """The profile's blocks arrive in a few large requests right after the
    mount; reading the listed files afterwards costs no request."""
    files = [CONF % i for i in range(40, 120)]
    big = "large.bin\t%d-%d" % (20 * MiB, 24 * MiB - 1)
    prof = write_profile(str(tmp_path / "p.txt"), files + [big])
    nginx.clear_log()
    m = mounts(nginx.url("img.sqfs"), ["prefetch=" + prof])
    st = wait_prefetch_done(m.mnt)
    assert st["prefetch_files"] == len(files) + 1
    assert st["prefetch_missing"] == 0 and st["prefetch_failures"] == 0
    # 4 MiB of large.bin are 32 blocks; the small files share fragment
    # blocks: spans of at most 2 MiB, so a handful of requests
    assert 2 <= st["prefetch_requests"] <= 8, st
    assert st["prefetch_bytes"] >= 4 * MiB
    before = st["http_requests"]
    sizes = sorted(e["bytes"] for e in nginx.entries())
    assert sizes[-1] >= 1 * MiB, sizes  # large ranges, not block by block
    for rel in files:
        assert same_bytes(m.mnt, big_image["tree"], rel), rel
    # 3 of the 4 MiB: the kernel's readahead stays inside the range
    with open(os.path.join(m.mnt, "large.bin"), "rb") as f:
        f.seek(20 * MiB)
        got = f.read(3 * MiB)
    with open(os.path.join(big_image["tree"], "large.bin"), "rb") as f:
        f.seek(20 * MiB)
        assert got == f.read(3 * MiB)
    after = stats(m.mnt)
    assert after["http_requests"] == before, (before, after)
    assert after["prefetch_hits"] >= 24
    assert after["prefetch_hit_bytes"] >= 3 * MiB


def test_prefetch_from_url(nginx, big_image, mounts, tmp_path):
    name = "profile-%d.txt" % os.getpid()
    path = os.path.join(big_image["www"], name)
    write_profile(path, [CONF % 150, CONF % 151])
    try:
        m = mounts(nginx.url("img.sqfs"), ["prefetch=" + nginx.url(name)])
        st = wait_prefetch_done(m.mnt)
        assert st["prefetch_files"] == 2 and st["prefetch_requests"] >= 1
        assert same_bytes(m.mnt, big_image["tree"], CONF % 150)
    finally:
        os.unlink(path)


def test_stale_profile_is_one_warning(nginx, big_image, mounts, tmp_path):
    prof = write_profile(str(tmp_path / "stale.txt"), [
        "# recorded on another version of the image",
        "etc/gone.conf",          # missing
        "etc",                    # a directory
        "etc/link",               # a symlink
        "etc/conf.d/../x",        # unreadable line
        CONF % 160,
        "no/such/dir/file",
    ])
    m = mounts(nginx.url("img.sqfs"), ["prefetch=" + prof])
    st = wait_prefetch_done(m.mnt)
    assert st["prefetch_files"] == 1 and st["prefetch_missing"] == 4
    assert same_bytes(m.mnt, big_image["tree"], CONF % 160)
    warnings = [line for line in m.log().splitlines() if "prefetch" in line]
    assert len(warnings) == 1, m.log()
    assert "skipped 4 entries" in warnings[0]
    assert "etc/gone.conf" in warnings[0]
    assert "1 unreadable lines" in warnings[0]


def test_empty_or_unusable_profile_mounts(nginx, big_image, mounts,
                                          tmp_path):
    empty = write_profile(str(tmp_path / "empty.txt"), [])
    cases = [(empty, 0), (str(tmp_path / "absent.txt"), 1),
             (str(tmp_path), 1), ("off", 0), ("auto", 0)]
    for i, (value, nwarn) in enumerate(cases):
        m = mounts(nginx.url("img.sqfs"), ["prefetch=" + value],
                   name="u%d" % i)
        assert same_bytes(m.mnt, big_image["tree"], "etc/small.conf")
        st = stats(m.mnt)
        assert st["prefetch_requests"] == 0 and st["prefetch_files"] == 0
        warnings = [line for line in m.log().splitlines()
                    if "prefetch" in line]
        assert len(warnings) == nwarn, (value, m.log())


def conf_profile(tmp_path, first, count):
    return write_profile(str(tmp_path / "p%d.txt" % first),
                         [CONF % i for i in range(first, first + count)])


def small_tree_files(small_image):
    return sorted(k for k, v in small_image["files"].items() if len(v) > 0)


def test_failing_prefetch_never_fails_reads(fault_server, small_image,
                                            mounts, tmp_path):
    """Every prefetch request gets a 500: reads fetch for themselves."""
    files = small_tree_files(small_image)[:6]
    prof = write_profile(str(tmp_path / "p.txt"), files)
    meta = inode_table_start(small_image["path"])
    fault_server.set_fault("status", code=500, max_offset=meta)
    m = mounts(fault_server.url("/small.sqfs"),
               ["prefetch=" + prof, "retries=0"])
    st = wait_prefetch_done(m.mnt)
    assert st["prefetch_failures"] >= 1, st
    fault_server.clear_fault()
    for rel in files:
        with open(os.path.join(m.mnt, rel), "rb") as f:
            assert f.read() == small_image["files"][rel], rel
    assert "Input/output error" not in m.log()


def range_of(header):
    """(first, last) of a Range header's bytes=first-last."""
    first, last = header.split("=")[1].split("-")
    return int(first), int(last)


def test_stalled_prefetch_delays_reads_at_most_a_timeout(
        fault_server, small_image, mounts, tmp_path):
    """The origin holds the prefetch's first request; a read that waits
    for it gets its bytes once the prefetch gives up (timeout=), by
    fetching them itself, while the origin still holds the prefetch's."""
    timeout = 3
    files = small_tree_files(small_image)[:3]
    prof = write_profile(str(tmp_path / "p.txt"), files)
    meta = inode_table_start(small_image["path"])
    # the first request for data (below the metadata) is held until the
    # end of the test; later ones are answered
    fault_server.set_fault("hold", max_offset=meta, count=1)
    m = mounts(fault_server.url("/small.sqfs"),
               ["prefetch=" + prof, "timeout=%d" % timeout])
    # the test has read no file: the request held for data is the
    # prefetch's, and its span is not done
    (held,) = fault_server.wait_held(1, WAIT)
    st = stats(m.mnt)
    assert st["prefetch_spans_done"] < st["prefetch_spans"], st
    assert st["prefetch_failures"] == 0, st
    assert range_of(held)[0] < meta, held
    t0 = time.monotonic()
    for rel in files:
        ok, got, _ = read_with_timeout(os.path.join(m.mnt, rel))
        assert ok and got == small_image["files"][rel], (rel, got[:200])
    took = time.monotonic() - t0
    # the reads got their bytes without the held answer, by asking for
    # them again ...
    assert fault_server.holding == 1
    st = stats(m.mnt)
    assert st["prefetch_failures"] == 1, st
    reqs = fault_server.requests()
    lo, hi = range_of(held)
    first = [r["range"] for r in reqs].index(held)
    assert any(r["range"] and lo <= range_of(r["range"])[0] <= hi
               for r in reqs[first + 1:]), reqs
    # ... in at most the prefetch's timeout, not the origin's stall
    assert took < bound(timeout), took
    fault_server.release()


def test_reads_racing_prefetch_get_right_bytes(nginx, big_image, mounts,
                                               tmp_path):
    """Eight readers start with the prefetch: every byte is right, and no
    block is fetched twice (prefetch and reads share single flights)."""
    files = [CONF % i for i in range(0, 200)]
    prof = write_profile(str(tmp_path / "p.txt"), files +
                         ["large.bin\t0-%d" % (16 * MiB - 1)])
    m = mounts(nginx.url("img.sqfs"), ["prefetch=" + prof])

    def reader(k):
        bad = [rel for rel in files[k::8]
               if not same_bytes(m.mnt, big_image["tree"], rel)]
        with open(os.path.join(m.mnt, "large.bin"), "rb") as f:
            f.seek(k * 2 * MiB)
            got = f.read(2 * MiB)
        with open(os.path.join(big_image["tree"], "large.bin"), "rb") as f:
            f.seek(k * 2 * MiB)
            if got != f.read(2 * MiB):
                bad.append("large.bin@%d" % k)
        return bad

    # every reader finished, none raised (an EIO is an OSError there)
    bad = sum(run_threads(reader, [(k,) for k in range(8)]), [])
    assert not bad, bad
    st = wait_prefetch_done(m.mnt)
    # what was fetched is the profile plus the metadata and the probe,
    # not twice the profile
    assert st["http_bytes"] < st["prefetch_planned_bytes"] * 1.25 + 2 * MiB, \
        st


def first_bytes_of_files(m, small_image, names, n=4096):
    for rel in names:
        with open(os.path.join(m.mnt, rel), "rb") as f:
            assert f.read(n) == small_image["files"][rel][:n], rel


# twelve files packed next to each other, read out of order (in order,
# sequential readahead takes them, one request per file)
SCATTERED = ["f%02d.bin" % i for i in (11, 3, 7, 1, 9, 5, 2, 10, 4, 8, 6, 0)]


def test_latency_windows_cut_round_trips(fault_server, small_image, mounts):
    """Behind a 30 ms round trip, the start of twelve neighbouring files
    costs a few window requests, not one request per file; every byte is
    right."""
    names = SCATTERED
    fault_server.set_fault("latency", seconds=0.03, min_offset=0,
                           suffix=True)
    # background fetch would fill the cache behind the windows' backs
    m = mounts(fault_server.url("/small.sqfs"), ["background=off"])
    first_bytes_of_files(m, small_image, names)
    st = stats(m.mnt)
    assert st["http_rtt_us"] >= 25000, st
    assert st["http_windows"] >= 1 and st["http_window_hits"] >= 4, st
    data_requests = st["http_requests"] - 2   # the probe and the tail
    assert data_requests <= 6, st


# MIN_RTT_NS of src/http/latency_window.c: below it, no windows
MIN_RTT_US = 2000


def test_no_latency_windows_on_loopback(fault_server, small_image, mounts):
    """The same reads without added latency: no window, one request per
    file start, as before windows existed. What the daemon decides on is
    the round trip it measured (the least of the mount's transfers); a
    machine so loaded that a mount measured one of 2 ms or more on
    loopback gets another mount, and the test fails only when three did,
    saying so."""
    names = SCATTERED
    measured = []
    for attempt in range(3):
        m = mounts(fault_server.url("/small.sqfs"), name="a%d" % attempt)
        first_bytes_of_files(m, small_image, names)
        st = stats(m.mnt)
        assert m.stop() == []
        if st["http_rtt_us"] >= MIN_RTT_US:
            measured.append(st["http_rtt_us"])
            continue
        assert st["http_windows"] == 0, st
        assert st["http_requests"] - 2 >= len(names), st
        return
    raise AssertionError("every mount measured a loopback round trip of "
                         "2 ms or more (%r us): too loaded to test this"
                         % measured)


def test_record_pack_order_mount_cycle(small_image, mounts, tmp_path):
    """record -> sqfs-lazy-pack --order -> plain mount: the profile lists
    the files read, in order; the packed image carries it, and a mount with
    no option fetches their region in a few large requests before they are
    read, after which reading them costs no request."""
    www = tmp_path / "www"
    www.mkdir()
    os.link(small_image["path"], www / "orig.sqfs")
    ng = start_nginx(tmp_path, www)
    try:
        order = ["d/small.txt", "f05.bin", "f17.bin", "f02.bin"]
        prof = str(tmp_path / "start.prof")
        m = mounts(ng.url("orig.sqfs"), ["record=" + prof])
        for rel in order:
            with open(os.path.join(m.mnt, rel), "rb") as f:
                assert f.read() == small_image["files"][rel]
        assert m.stop() == []
        assert [n for n, _ in read_profile(prof)] == order

        packer = os.path.join(os.environ["LSQ_BUILD_DIR"], "src", "pack",
                              "sqfs-lazy-pack")
        r = subprocess.run([packer, "-q", "-c", "zstd", "-l", "3", "-b",
                            "64K", "--order", prof, small_image["tree"],
                            str(www / "ordered.sqfs")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr

        ng.clear_log()
        m = mounts(ng.url("ordered.sqfs"))
        st = wait_prefetch_done(m.mnt)
        assert st["prefetch_files"] == len(order), st
        listed = sum(len(small_image["files"][rel]) for rel in order)
        big = [e for e in ng.entries() if e["bytes"] >= 512 * 1024]
        # probe, metadata, and the region in at most a few requests
        # (besides the 1-byte requests that open connections at mount)
        assert len(without_openers(ng.entries())) <= 2 + 4, ng.entries()
        # (what the pinned head holds of the region is copied, not
        # fetched: http_span_memory_bytes)
        assert sum(e["bytes"] for e in big) + \
            st["http_span_memory_bytes"] >= listed // 2, ng.entries()
        before = stats(m.mnt)["http_requests"]
        for rel in order:
            with open(os.path.join(m.mnt, rel), "rb") as f:
                assert f.read() == small_image["files"][rel], rel
        after = stats(m.mnt)
        assert after["http_requests"] == before, (before, after)
        assert after["prefetch_hits"] > 0
    finally:
        ng.stop()
