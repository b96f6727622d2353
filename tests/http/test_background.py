"""Background fetch (-o background=off|auto|FRACTION, issue 32) over nginx
and the fault server: it fetches every unit of the image once, in large
ranges, into the RAM block cache or cache_dir, after which reads cost no
request (and a later mount with the same cache_dir fetches no data block);
it keeps to its budget; a demand read never waits behind a background
range; it stays off where told or where the round trip is short; it gives
up on an origin that fails it, stops at unmount within a request's
timeout, and reads racing with it return the kernel's bytes.

The oracle is the kernel's loop mount of the same image."""

import hashlib
import os
import random
import re
import subprocess
import sys
import threading
import time

import pytest

from conftest import (FaultServer, mksquashfs, require, start_nginx,
                      try_mount)
from test_cache import stats

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                "integration"))
import util  # noqa: E402
from timing import SCALE, wait_for  # noqa: E402

MiB = 1 << 20
SPAN = 4 * MiB      # the largest background range (background.c)
LARGE = 1 * MiB     # a range this long is a background span's: the reads
#                     here are of small files, whose ranges are shorter
DONE_TIMEOUT = 120  # generous: 2 cores, maybe a sanitizer build
NAME = "bg.sqfs"


# ---------------------------------------------------------------------------
# The image: small files packed in fragments, large files, a sparse file, a
# duplicate and a hard link (units listed more than once), an empty file,
# symlinks, an xattr, a deep directory; about 37 MiB, gzip (util.SqfsReader
# reads it), 128 KiB blocks.
# ---------------------------------------------------------------------------

def build_tree(root):
    rng = random.Random(32)

    def rb(n):
        return rng.getrandbits(8 * n).to_bytes(n, "little") if n else b""

    def put(rel, data):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)

    for i in range(150):
        put("a/s%03d" % i, rb(rng.randrange(4000, 60000)))
    put("b/big1.bin", rb(12 * MiB))
    put("b/text.txt", b"".join(b"line %d of some text\n" % i
                               for i in range(300000)))
    with open(os.path.join(root, "b", "sparse.bin"), "wb") as f:
        f.write(rb(300000))
        f.seek(3 * MiB)
        f.write(rb(200000))
    small = rb(MiB)
    put("b/small.bin", small)
    put("b/dup.bin", small)
    os.link(os.path.join(root, "b", "small.bin"),
            os.path.join(root, "b", "hard.bin"))
    put("b/empty", b"")
    os.symlink("big1.bin", os.path.join(root, "b", "link"))
    os.setxattr(os.path.join(root, "b", "text.txt"), "user.note",
                b"background")
    d = "c"
    for depth in range(4):
        d = os.path.join(d, "d%d" % depth)
        for j in range(10):
            put(os.path.join(d, "f%02d" % j),
                rb(rng.randrange(100000, 400000)))
    put("z.bin", rb(8 * MiB))


@pytest.fixture(scope="module")
def bg_image(tmp_path_factory):
    d = tmp_path_factory.mktemp("bgimage")
    tree = str(d / "tree")
    build_tree(tree)
    www = d / "www"
    os.makedirs(www)
    img = str(www / NAME)
    mksquashfs(tree, img, "-processors", "2")
    r = util.SqfsReader(img)
    units, file_units, sizes = {}, {}, {}
    for dirpath, _, names in os.walk(tree):
        for n in names:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                continue
            rel = os.path.relpath(p, tree)
            ino = r.lookup(rel)
            us = [(o, s) for o, s, _ in r.file_blocks(rel)]
            if ino.get("fragment", 0xFFFFFFFF) != 0xFFFFFFFF:
                o, s, _ = r.fragment(ino["fragment"])
                us.append((o, s))
            file_units[rel] = us
            sizes[rel] = os.path.getsize(p)
            for o, s in us:
                units[o] = s
    with open(img, "rb") as f:
        data = f.read()
    return {"path": img, "www": str(www), "tree": tree, "data": data,
            "units": units, "file_units": file_units, "sizes": sizes,
            "bytes_used": r.sb["bytes_used"],
            # the data region: units lie in [96, inode table)
            "data_end": r.sb["inode_table_start"]}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def kernel(bg_image, tmp_path_factory):
    """The kernel's loop mount of the image: its walk and every file's
    digest, taken once."""
    require(os.geteuid() == 0, "needs root for a loop mount")
    mnt = str(tmp_path_factory.mktemp("bgkernel"))
    r = subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro",
                        bg_image["path"], mnt], capture_output=True)
    require(r.returncode == 0, "kernel squashfs loop mount failed: %s"
            % r.stderr.decode(errors="replace"))
    try:
        digests = {rel: sha256(os.path.join(mnt, rel))
                   for rel in bg_image["file_units"]}
        yield {"mnt": mnt, "walk": util.collect_tree(mnt),
               "digests": digests}
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        if util.is_mounted(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True)


@pytest.fixture(scope="module")
def bg_nginx(bg_image, tmp_path_factory):
    n = start_nginx(tmp_path_factory.mktemp("bgnginx"), bg_image["www"])
    yield n
    n.stop()


@pytest.fixture
def bg_fault(bg_image):
    s = FaultServer().start()
    s.add("/" + NAME, bg_image["data"])
    yield s
    s.stop()


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def wait_stats(mnt, pred, what, timeout=DONE_TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        st = stats(mnt)
        if pred(st):
            return st
        assert time.monotonic() < deadline, ("timed out waiting for %s"
                                             % what, st)
        time.sleep(0.05)


def wait_done(mnt, timeout=DONE_TIMEOUT):
    return wait_stats(mnt, lambda st: st["background_done"] == 1,
                      "background_done", timeout)


def same_as_kernel(mnt, kernel, rels=None):
    """The mount's walk (names, stat, links, xattrs, readdir) and every
    file's bytes (or those of rels) equal the kernel's."""
    if rels is None:
        f = util.collect_tree(mnt)
        k = kernel["walk"]
        for compare in (util.compare_names, util.compare_stat,
                        util.compare_links, util.compare_xattrs,
                        util.compare_readdir):
            compare(k, f).check()
        rels = sorted(kernel["digests"])
    bad = [rel for rel in rels
           if sha256(os.path.join(mnt, rel)) != kernel["digests"][rel]]
    assert not bad, "bytes differ from the kernel's: %s" % bad[:10]


def range_of(header):
    """(start, end inclusive) of a 'bytes=a-b' Range header, or None."""
    m = re.match(r"bytes=(\d+)-(\d*)$", header or "")
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)) if m.group(2) else None


def data_requests(entries, img):
    """nginx log entries of ranges that start inside the data region (the
    probe and the superblock start at 0, the metadata past it)."""
    out = []
    for e in entries:
        r = range_of(e["range"])
        if r and 96 <= r[0] < img["data_end"]:
            out.append(e)
    return out


def small_files(img, prefix, limit=400_000):
    return sorted(rel for rel, us in img["file_units"].items()
                  if rel.startswith(prefix) and us and
                  img["sizes"][rel] <= limit)


def check_whole_image(st, img):
    """Counters of a background fetch of the whole image, with nothing
    read before it."""
    planned = sum(img["units"].values())
    assert st["background_done"] == 1, st
    assert st["background_failures"] == 0, st
    # the plan lists every unit once: hard links, duplicates and files
    # sharing a fragment block count once, sparse blocks not at all
    assert st["background_units"] == len(img["units"]), st
    assert st["background_planned_bytes"] == planned, st
    # spans are disjoint ranges of the data region: every unit fetched,
    # none twice
    assert planned <= st["background_bytes"] <= img["data_end"], st
    # nothing was held before: every unit was stored
    assert st["background_blocks"] == st["background_units"], st
    # in large ranges (at most one span each), not unit by unit
    assert planned / SPAN <= st["background_requests"] <= \
        2 * planned / SPAN + 4, st
    assert st["background_spans"] >= st["background_requests"], st


# ---------------------------------------------------------------------------
# 1. The whole image, then reads cost no request
# ---------------------------------------------------------------------------

def test_whole_image_into_ram(bg_nginx, bg_image, kernel, mounts):
    """background=1 without cache_dir: every unit into the RAM block cache
    (256M, twice the image); reading the whole tree afterwards costs no
    request and gives the kernel's bytes."""
    bg_nginx.clear_log()
    m = mounts(bg_nginx.url(NAME), ["background=1"])
    st = wait_done(m.mnt)
    check_whole_image(st, bg_image)
    sizes = [e["body"] for e in data_requests(bg_nginx.entries(), bg_image)]
    assert sizes and max(sizes) <= SPAN and max(sizes) > LARGE, sizes
    before = st["http_requests"]
    same_as_kernel(m.mnt, kernel)
    after = stats(m.mnt)
    assert after["http_requests"] == before, (st, after)
    # every unit was read from what the background fetch stored
    assert after["background_hits"] >= len(bg_image["units"]), after
    assert after["background_hit_bytes"] > 0, after


def test_whole_image_that_fits_block_cache(bg_nginx, bg_image, kernel,
                                           mounts):
    """Without cache_dir, an image that fits in seven eighths of
    block_cache but not in half of it is fetched whole (its blocks are
    what readers fetch anyway: a database's lookups then find every block
    in memory); before, half of block_cache bounded it."""
    cache = -(-bg_image["bytes_used"] * 6 // 5 // MiB) * MiB
    assert bg_image["bytes_used"] > cache // 2, cache
    m = mounts(bg_nginx.url(NAME), ["background=1", "block_cache=%d" % cache])
    st = wait_done(m.mnt)
    check_whole_image(st, bg_image)
    before = st["http_requests"]
    same_as_kernel(m.mnt, kernel)
    assert stats(m.mnt)["http_requests"] == before, st


def test_whole_image_into_cache_dir(bg_nginx, bg_image, kernel, mounts,
                                    tmp_path):
    """background=1 with cache_dir: every unit on disk; reads cost no
    request, and a later mount with the same cache_dir (background off)
    fetches no data block."""
    cache = str(tmp_path / "cache")
    bg_nginx.clear_log()
    m = mounts(bg_nginx.url(NAME), ["background=1", "cache_dir=" + cache])
    st = wait_done(m.mnt)
    check_whole_image(st, bg_image)
    before = st["http_requests"]
    same_as_kernel(m.mnt, kernel)
    after = stats(m.mnt)
    assert after["http_requests"] == before, (st, after)
    assert m.stop() == []

    bg_nginx.clear_log()
    m2 = mounts(bg_nginx.url(NAME), ["background=off",
                                     "cache_dir=" + cache], name="again")
    same_as_kernel(m2.mnt, kernel)
    fetched = data_requests(bg_nginx.entries(), bg_image)
    assert not fetched, fetched[:10]
    st2 = stats(m2.mnt)
    assert st2["background_requests"] == 0, st2


def test_units_already_kept_are_skipped(bg_nginx, bg_image, kernel, mounts,
                                        tmp_path):
    """A mount without background reads some files into cache_dir; the
    next mount's background fetch stores every other unit and none of
    those again."""
    cache = str(tmp_path / "cache")
    m = mounts(bg_nginx.url(NAME), ["background=off", "readahead=0",
                                    "cache_dir=" + cache])
    rels = small_files(bg_image, "a/")[::3] + small_files(bg_image, "c/")[:8]
    same_as_kernel(m.mnt, kernel, rels)
    assert m.stop() == []
    held = {o for rel in rels for o, _ in bg_image["file_units"][rel]}
    m2 = mounts(bg_nginx.url(NAME), ["background=1", "cache_dir=" + cache],
                name="bg")
    st = wait_done(m2.mnt)
    assert st["background_units"] == len(bg_image["units"]), st
    assert st["background_failures"] == 0, st
    assert st["background_blocks"] == len(bg_image["units"]) - len(held), \
        (len(held), st)
    before = st["http_requests"]
    same_as_kernel(m2.mnt, kernel)
    assert stats(m2.mnt)["http_requests"] == before


def test_bad_value_refused(bg_nginx, tmp_path):
    for value in ("2", "-0.5", "yes", ""):
        rc, err, _ = try_mount(bg_nginx.url(NAME), str(tmp_path / "mnt"),
                               None, ["background=" + value])
        assert rc != 0, value
        assert "background" in err and len(err.strip().splitlines()) == 1, \
            (value, err)


# ---------------------------------------------------------------------------
# 2. Budgets
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["fraction", "block_cache", "cache_size"])
def test_budget(case, bg_nginx, bg_image, mounts, tmp_path):
    """It fetches its budget (a fraction of the image; half of
    block_cache; cache_size with cache_dir), at most one span more, and
    stops."""
    if case == "fraction":
        opts = ["background=0.25"]
        budget = int(0.25 * bg_image["bytes_used"])
    elif case == "block_cache":
        opts = ["background=1", "block_cache=16M"]
        budget = 8 * MiB
    else:
        opts = ["background=1", "cache_dir=" + str(tmp_path / "cache"),
                "cache_size=8M"]
        budget = 8 * MiB
    bg_nginx.clear_log()
    m = mounts(bg_nginx.url(NAME), opts)
    st = wait_done(m.mnt)
    assert st["background_failures"] == 0, st
    assert budget <= st["background_bytes"] <= budget + SPAN, (budget, st)
    assert st["background_blocks"] < st["background_units"], st
    # what the origin sent of the data region: the background's alone
    sent = sum(e["body"] for e in data_requests(bg_nginx.entries(),
                                                bg_image))
    assert sent <= budget + SPAN, (budget, sent, st)


# ---------------------------------------------------------------------------
# 3. A demand read never waits behind a background range
# ---------------------------------------------------------------------------

# seconds the fault server holds a background range's body: not scaled
# for sanitizer builds, whose small reads still take well under STALL/2,
# while a daemon's exit at teardown waits for the stalled spans
STALL = 8.0


@pytest.mark.parametrize("conns", [4, 1])
def test_demand_reads_not_delayed_behind_background(conns, bg_fault,
                                                    bg_image, kernel,
                                                    mounts):
    """Every range of 1 MiB or more (a background span) gets its headers
    and then nothing for STALL seconds. Small files whose units lie inside
    those stalled spans, read meanwhile, each take well under STALL/2:
    the reads neither wait for a connection a span holds (with
    max_connections=1 the one stream holds as many connections as the
    readers have) nor for the span's bytes."""
    streams = max(1, conns - 1)
    bg_fault.set_fault("delay", seconds=STALL, min_length=LARGE,
                       max_offset=bg_image["data_end"])
    m = mounts(bg_fault.url("/" + NAME),
               ["background=1", "readahead=0", "max_connections=%d" % conns])
    deadline = time.monotonic() + 30
    while True:
        big = [range_of(e["range"]) for e in bg_fault.requests()
               if e["method"] == "GET"]
        big = [r for r in big if r and r[1] is not None and
               r[1] - r[0] + 1 >= LARGE]
        if len(big) >= streams:    # every stream holds a stalled span
            break
        assert time.monotonic() < deadline, bg_fault.requests()
        time.sleep(0.02)
    t_stalled = time.monotonic()

    def inside(rel):
        return all(any(a <= o and o + s - 1 <= b for a, b in big)
                   for o, s in bg_image["file_units"][rel])

    targets = [rel for rel in small_files(bg_image, "a/") if inside(rel)]
    targets = targets[::max(1, len(targets) // 6)][:6]
    assert len(targets) >= 3, (big, targets)
    took = {}
    for rel in targets:
        t0 = time.monotonic()
        with open(os.path.join(m.mnt, rel), "rb") as f:
            data = f.read()
        took[rel] = time.monotonic() - t0
        assert hashlib.sha256(data).hexdigest() == kernel["digests"][rel], \
            rel
    st = stats(m.mnt)
    still = time.monotonic() - t_stalled
    assert max(took.values()) < STALL / 2, took
    # the spans were stalled all along: none came back, they are still out
    assert still < STALL - 1, (still, took)
    assert st["background_spans"] == 0, st
    assert st["http_in_flight"] >= streams, st
    # the reads fetched for themselves, in small ranges
    small = [r for r in (range_of(e["range"]) for e in bg_fault.requests())
             if r and r[1] is not None and r[1] - r[0] + 1 < LARGE and
             r[0] < bg_image["data_end"] and r[0] >= 96]
    assert len(small) >= len(targets) // 4, small


# ---------------------------------------------------------------------------
# 4. Off, and auto on a short round trip
# ---------------------------------------------------------------------------

def test_off_fetches_nothing(bg_nginx, bg_image, kernel, mounts):
    bg_nginx.clear_log()
    m = mounts(bg_nginx.url(NAME), ["background=off"])
    rels = small_files(bg_image, "a/")[:20] + small_files(bg_image, "c/")[:5]
    same_as_kernel(m.mnt, kernel, rels)
    wait_stats(m.mnt, lambda st: st["http_in_flight"] == 0,
               "no transfer in flight", 30)
    time.sleep(0.3)
    st = stats(m.mnt)
    for k in ("background_units", "background_requests",
              "background_bytes", "background_blocks", "background_spans"):
        assert st[k] == 0, (k, st)
    # nothing span-sized went out; the reads' own ranges are small
    assert all(e["body"] <= 2 * MiB for e in bg_nginx.entries()), \
        bg_nginx.entries()
    assert "background fetch" not in m.log(), m.log()


def test_auto_is_off_on_loopback(bg_nginx, bg_image, kernel, mounts):
    """Default (auto) over loopback: once the source timed three transfers
    (round trip well under 2 ms) the background fetch says it is off, in
    one line, and fetches nothing."""
    m = mounts(bg_nginx.url(NAME))
    rels = small_files(bg_image, "a/")[:12]
    same_as_kernel(m.mnt, kernel, rels)
    st = wait_done(m.mnt, 30)
    assert st["http_rtt_us"] < 2000, st
    lines = [ln for ln in m.log().splitlines() if "background fetch" in ln]
    assert len(lines) == 1 and "background fetch: off (round trip" in \
        lines[0], m.log()
    for k in ("background_units", "background_requests",
              "background_bytes", "background_blocks"):
        assert st[k] == 0, (k, st)


def test_auto_starts_behind_latency(bg_fault, bg_image, kernel, mounts):
    """Default (auto) behind a 10 ms round trip: it fetches."""
    bg_fault.set_fault("latency", seconds=0.01, min_offset=0, suffix=True)
    m = mounts(bg_fault.url("/" + NAME))
    same_as_kernel(m.mnt, kernel, small_files(bg_image, "a/")[:3])
    st = wait_done(m.mnt)
    # not the round trip measured at the end: one ASan run of CI read
    # http_rtt_us 1649 there, after the fetch (docs/status.md); that auto
    # fetched at all is what says it saw the 10 ms
    assert st["background_units"] == len(bg_image["units"]), st
    assert st["background_failures"] == 0, st
    assert st["background_blocks"] > 0, st
    assert "background fetch: off" not in m.log(), m.log()
    before = stats(m.mnt)["http_requests"]
    same_as_kernel(m.mnt, kernel, small_files(bg_image, "c/"))
    assert stats(m.mnt)["http_requests"] == before


# ---------------------------------------------------------------------------
# 5. An origin that fails the background's ranges
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["status", "reset"])
def test_failing_origin_gives_up(kind, bg_fault, bg_image, kernel, mounts):
    """Every range of 1 MiB or more fails (500, or a reset halfway): the
    background fetch gives up with one warning; reads (small ranges) keep
    working, during and after, with the kernel's bytes and no error."""
    kw = {"code": 500} if kind == "status" else {}
    bg_fault.set_fault(kind, min_length=LARGE,
                       max_offset=bg_image["data_end"], **kw)
    m = mounts(bg_fault.url("/" + NAME), ["background=1", "readahead=0"])
    during = small_files(bg_image, "a/")[:40]
    same_as_kernel(m.mnt, kernel, during)
    st = wait_done(m.mnt)
    assert st["background_failures"] >= 1, st
    assert st["background_requests"] >= st["background_failures"], st
    lines = [ln for ln in m.log().splitlines() if "background fetch" in ln]
    assert len(lines) == 1 and "stopped after" in lines[0], m.log()
    same_as_kernel(m.mnt, kernel, small_files(bg_image, "c/"))
    assert "failed" not in m.log().replace(lines[0], ""), m.log()
    # the origin saw failing large ranges, and no reader's range failed
    log = bg_fault.requests()
    large = [e for e in log if e["method"] == "GET" and
             (lambda r: r and r[1] is not None and
              r[1] - r[0] + 1 >= LARGE)(range_of(e["range"]))]
    assert large, log[-10:]


# ---------------------------------------------------------------------------
# 6. Unmount with spans in flight
# ---------------------------------------------------------------------------

TIMEOUT = 3


def test_unmount_with_spans_in_flight(bg_fault, bg_image, mounts):
    """The origin holds every background range for a minute: unmounting
    ends the daemon within the request timeout (timeout=3), not after the
    minute."""
    bg_fault.set_fault("delay", seconds=60, min_length=LARGE)
    m = mounts(bg_fault.url("/" + NAME),
               ["background=1", "timeout=%d" % TIMEOUT])
    st = wait_stats(m.mnt, lambda st: st["http_in_flight"] >= 1 and
                    st["background_units"] > 0, "spans in flight", 30)
    assert st["background_spans"] == 0, st  # all of them held up
    t0 = time.monotonic()
    r = subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        rc = m.proc.wait(TIMEOUT + 20)
        m.proc = None  # ended here; else the fixture kills it
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    assert rc == 0, (rc, took, m.log()[-3000:])
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        assert bad not in m.log(), m.log()[-6000:]
    assert took <= TIMEOUT + 3 * SCALE, (took, m.log()[-3000:])
    assert not util.is_mounted(m.mnt)


# ---------------------------------------------------------------------------
# 7. Reads racing with it
# ---------------------------------------------------------------------------

def test_reads_racing_background(bg_fault, bg_image, kernel, mounts):
    """Four readers read the whole tree, each in its own order, while the
    background fetch runs (its ranges trickle in: about 2 s for the
    image): every byte is the kernel's; then the background fetch ends
    cleanly, and the tree still reads as the kernel's."""
    bg_fault.set_fault("slow", chunk=256 * 1024, pause=0.03,
                       min_length=LARGE, max_offset=bg_image["data_end"])
    m = mounts(bg_fault.url("/" + NAME), ["background=1"])
    st0 = stats(m.mnt)
    rels = sorted(kernel["digests"])
    errors = []

    def reader(k):
        order = list(rels)
        random.Random(k).shuffle(order)
        try:
            for rel in order:
                if sha256(os.path.join(m.mnt, rel)) != \
                        kernel["digests"][rel]:
                    errors.append((k, rel, "bytes differ"))
        except Exception as e:  # noqa: BLE001 - recorded, asserted below
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=reader, args=(k,), daemon=True)
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DONE_TIMEOUT)
    assert not [t for t in threads if t.is_alive()], "a reader hung"
    assert not errors, errors[:10]
    # the readers started while the background fetch was at its start
    assert st0["background_done"] == 0 and \
        st0["background_bytes"] < sum(bg_image["units"].values()) / 2, st0
    st = wait_done(m.mnt)
    assert st["background_failures"] == 0, st
    assert st["background_units"] == len(bg_image["units"]), st
    assert st["background_requests"] > 0, st
    same_as_kernel(m.mnt, kernel)


# ---------------------------------------------------------------------------
# 8. A large file a reader is in comes first
# ---------------------------------------------------------------------------

def test_file_a_reader_is_in_comes_first(bg_fault, bg_image, kernel, mounts):
    """A budget that the lowest-first order spends before it reaches z.bin
    (the image's last file): one read in the middle of z.bin makes the
    background fetch the rest of z.bin next, so reading it whole afterwards
    costs no request. Spans trickle in (2 MiB take about 0.4 s), so only
    the few in flight at the read were started before it."""
    bg_fault.set_fault("slow", chunk=256 * 1024, pause=0.05,
                       min_length=LARGE, max_offset=bg_image["data_end"])
    z = bg_image["file_units"]["z.bin"]
    z_start = min(o for o, _ in z)
    budget = 0.7
    # lowest first, the budget ends before z.bin
    assert budget * bg_image["bytes_used"] < z_start, z_start
    m = mounts(bg_fault.url("/" + NAME),
               ["background=%g" % budget, "readahead=0"])
    wait_stats(m.mnt, lambda st: st["background_units"] > 0, "a plan", 30)
    path = os.path.join(m.mnt, "z.bin")
    with open(path, "rb") as f:
        f.seek(4 * MiB)
        part = f.read(4096)
    with open(os.path.join(kernel["mnt"], "z.bin"), "rb") as f:
        f.seek(4 * MiB)
        assert part == f.read(4096)
    st = wait_done(m.mnt)
    assert st["background_failures"] == 0, st
    assert st["background_hot_files"] == 1, st
    assert st["background_hot_spans"] >= 3, st
    assert st["background_bytes"] <= budget * bg_image["bytes_used"] + \
        SPAN, st
    before = st["http_requests"]
    same_as_kernel(m.mnt, kernel, ["z.bin"])
    assert stats(m.mnt)["http_requests"] == before, (st, stats(m.mnt))


def test_the_unit_cut_at_the_readers_2mib_comes_first(bg_fault, bg_image,
                                                      kernel, mounts):
    """The spans of a file a reader is in start past the 2 MiB around the
    reader's block, where a latency window around it ends. That boundary
    cuts a unit in two (the window holds its head): the first span starts
    at that unit, not at the one after it, whose reader would otherwise
    wait a round trip for the cut unit's rest (a JVM's module image at
    50 ms, 2026-11-28)."""
    bg_fault.set_fault("slow", chunk=256 * 1024, pause=0.05,
                       min_length=LARGE, max_offset=bg_image["data_end"])
    z = sorted(bg_image["file_units"]["z.bin"])
    z_start, z_end = z[0][0], z[-1][0] + z[-1][1]
    # one stream: with more, one goes up from the edge while another
    # comes down to it at once, and the order is not seen
    m = mounts(bg_fault.url("/" + NAME), ["background=0.7", "readahead=0",
                                          "max_connections=2"])
    wait_stats(m.mnt, lambda st: st["background_units"] > 0, "a plan", 30)
    with open(os.path.join(m.mnt, "z.bin"), "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        f.seek(4 * MiB + 100)
        part = f.read(4096)
    with open(os.path.join(kernel["mnt"], "z.bin"), "rb") as f:
        f.seek(4 * MiB + 100)
        assert part == f.read(4096)

    def in_z(e):
        r = range_of(e["range"])
        return r and r[1] is not None and z_start <= r[0] < z_end and r

    def requests_to_a_span():
        """The reader's own units, then the background's first span in
        z.bin, in the order asked; None before that span."""
        rs = [r for r in map(in_z, bg_fault.requests()) if r]
        spans = [r for r in rs if r[1] + 1 - r[0] >= LARGE]
        return (rs, spans) if spans else None

    rs, spans = wait_for(requests_to_a_span, "a background span in z.bin")
    first = rs.index(spans[0])
    read_end = max(r[1] for r in rs[:first])
    last = max(o for o, _ in z if o <= read_end)
    edge = (last | (2 * MiB - 1)) + 1
    cut = [(o, s) for o, s in z if o < edge < o + s]
    # random data: stored 128 KiB units from an offset no multiple of 2 MiB
    assert cut, (edge, z[:3])
    assert spans[0][0] == cut[0][0], (spans[0], cut, edge, rs[:first])
    st = wait_done(m.mnt)
    assert st["background_failures"] == 0, st
    assert st["background_hot_files"] == 1, st
