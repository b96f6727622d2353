"""Learned and published startup profiles over a real nginx (issue 32).

With -o cache_dir=DIR (and learn=on, the default) every mount notes the
files its start reads and merges them at unmount into
DIR/profiles/SHA256(location).prof: a 16-byte header (magic "sqlzPRF1", u32
LE length, u32 LE CRC-32 of the text) and profile text whose entries may
carry missed=N. prefetch=auto takes, in order: that learned profile, the
one stored in the image, and for a URL the publisher's URL.profile.

Here: the profile carries over to the next version published at the same
URL (paths gone are skipped, and it converges on the new version's reads);
a damaged one is one warning and is replaced; the next version's blocks
replace the last one's in cache_dir; two daemons sharing cache_dir leave a
valid file; learn=off and no cache_dir write none; the publisher's
profile is used when nothing was learned, and loses to a learned one. And:
files are learned in the order they were read, under the 4096-file bound,
whatever their names; the location drops a URL's query and is a file's
real path; SIGTERM and record= do not stop the learning.

The location is the URL, so one nginx (one port) serves the whole module.
Mounts run with background=off so that every request counted is one a
read or the prefetch made.
"""

import glob
import hashlib
import os
import random
import shutil
import signal
import struct
import subprocess
import threading
import time
import zlib

import pytest

from conftest import Mount, mksquashfs, require_mount_env, start_nginx
from test_cache import stats
from test_prefetch import wait_prefetch_done

HEADER = 16
MAGIC = b"sqlzPRF1"
MAX_MISSED = 3
LEARN_MAX_FILES = 4096
OPTS = ["background=off"]


# ---------------------------------------------------------------------------
# Trees, images, the server
# ---------------------------------------------------------------------------

def _randbytes(rng, n):
    return rng.getrandbits(8 * n).to_bytes(n, "little") if n else b""


def _text(rng, n):
    words = [b"import", b"def", b"return", b"self", b"value", b"class",
             b"None", b"path", b"%d" % rng.randrange(1 << 30)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + (b"\n" if rng.random() < 0.1 else b" ")
    return bytes(out[:n])


def tree_v1():
    """300 files: 280 small modules (text or random, fragments) in ten
    packages, and 20 blobs of several 64 KiB blocks."""
    rng = random.Random(3201)
    files = {}
    for d in range(10):
        for i in range(28):
            n = rng.randrange(200, 12000)
            files["lib/p%02d/m%02d.py" % (d, i)] = (
                _text(rng, n) if i % 2 else _randbytes(rng, n))
    for i in range(20):
        files["data/blob%02d.bin" % i] = _randbytes(
            rng, rng.randrange(70_000, 400_000))
    return files


# S: what the first version's start reads, in this order
S = ["lib/p03/m07.py", "data/blob04.bin", "lib/p00/m01.py",
     "lib/p07/m20.py", "lib/p05/m11.py", "data/blob11.bin",
     "lib/p01/m02.py", "lib/p09/m27.py", "lib/p02/m13.py",
     "lib/p06/m00.py", "data/blob17.bin", "lib/p04/m04.py",
     "lib/p08/m15.py", "lib/p03/m22.py", "data/blob00.bin",
     "lib/p06/m09.py", "lib/p00/m19.py", "lib/p02/m26.py",
     "lib/p05/m03.py", "lib/p09/m10.py"]
S_DELETED = [S[2], S[9], S[15]]
S_CHANGED = [S[4], S[10], S[17]]
S_REMAINING = [p for p in S if p not in S_DELETED]
# S2: what the second version's start reads (some of it new in v2)
S2 = ["lib/new/n03.py", "lib/p01/m16.py", "data/blob08.bin",
      "lib/p04/m21.py", "lib/new/n07.py", "lib/p08/m05.py",
      "lib/p02/m00.py", "data/blob19.bin", "lib/p07/m08.py",
      "lib/p05/m25.py", "lib/p00/m12.py", "lib/new/n00.py"]


def tree_v2(v1):
    """The next version: 15 of 300 files changed (3 of them in S), 5 deleted
    (3 of S), 10 added."""
    rng = random.Random(3202)
    files = dict(v1)
    others = sorted(p for p in v1 if p not in S and p not in S2)
    changed = S_CHANGED + rng.sample(others, 12)
    for p in changed:
        n = len(v1[p])
        n = max(100, n + rng.randrange(-n // 4, n // 4))
        files[p] = _randbytes(rng, n)
    for p in S_DELETED + [q for q in others if q not in changed][:2]:
        del files[p]
    for i in range(10):
        files["lib/new/n%02d.py" % i] = _text(rng, rng.randrange(300, 9000))
    return files


def write_tree(root, files):
    for rel, data in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """{"v1": {...}, "v2": {...}}, each with path (image), files, tree."""
    d = tmp_path_factory.mktemp("learned-images")
    out = {}
    v1 = tree_v1()
    for name, files in (("v1", v1), ("v2", tree_v2(v1))):
        tree = str(d / ("tree-" + name))
        write_tree(tree, files)
        img = str(d / (name + ".sqfs"))
        mksquashfs(tree, img, "-b", "65536")
        out[name] = {"path": img, "files": files, "tree": tree}
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """One nginx for the module: a location is its URL, port included."""
    d = tmp_path_factory.mktemp("learned-nginx")
    www = d / "www"
    www.mkdir()
    n = start_nginx(d, www)
    yield n
    n.stop()


def publish(site, name, src):
    """Put src at NAME on the server, replacing what was there at once."""
    dst = os.path.join(site.root, name)
    shutil.copyfile(src, dst + ".tmp")
    os.replace(dst + ".tmp", dst)
    return site.url(name)


def requests_for(site, name):
    return [e for e in site.entries() if e["uri"] == "/" + name]


def wait_requests_for(site, name, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        got = requests_for(site, name)
        if got:
            return got
        assert time.monotonic() < deadline, "no request for " + name
        time.sleep(0.02)


# ---------------------------------------------------------------------------
# Learned profiles
# ---------------------------------------------------------------------------

def profile_path(cache_dir, location):
    return os.path.join(cache_dir, "profiles",
                        hashlib.sha256(location.encode()).hexdigest() +
                        ".prof")


def read_learned(path):
    """[(path, missed)] of a learned profile, after checking its header:
    magic, length (the rest of the file) and CRC-32."""
    with open(path, "rb") as f:
        raw = f.read()
    assert len(raw) >= HEADER, raw
    assert raw[:8] == MAGIC, raw[:16]
    length, crc = struct.unpack("<II", raw[8:16])
    text = raw[HEADER:]
    assert length == len(text), (length, len(text))
    assert zlib.crc32(text) == crc, "CRC mismatch"
    out = []
    for line in text.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        missed = 0
        for f in fields[2:]:
            if f.startswith("missed="):
                missed = int(f[len("missed="):])
        out.append((unescape(fields[0]), missed))
    return out


def unescape(field):
    """A profile's path field as a name (src/profile/profile.h): leading
    "/" and "./" dropped, backslash escapes undone."""
    while field.startswith("/") or field.startswith("./"):
        field = field[1 if field[0] == "/" else 2:]
    out, i = [], 0
    while i < len(field):
        c = field[i]
        if c == "\\" and i + 1 < len(field) and field[i + 1] in "\\tnr":
            c = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}[field[i + 1]]
            i += 1
        out.append(c)
        i += 1
    return "".join(out)


def check_profile(got, want, what=""):
    """got == want, or a failure that says whether only the order differs
    (the files' order is what a learned profile is for)."""
    if got == want:
        return
    if sorted(got) == sorted(want):
        i = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        raise AssertionError(
            "%s: the same entries in another order; from #%d on:\n"
            "  learned: %s\n  wanted:  %s" % (what, i, got[i:i + 4],
                                              want[i:i + 4]))
    raise AssertionError("%s:\n  learned: %s\n  wanted:  %s\n"
                         "  missing: %s\n  extra: %s"
                         % (what, got, want, sorted(set(want) - set(got)),
                            sorted(set(got) - set(want))))


def same_files(got, want, what=""):
    """The same entries, in any order: the order of a start's reads is
    checked by test_learned_order_is_read_order and the first test."""
    check_profile(sorted(got), sorted(want), what)


def temp_files(cache_dir):
    return glob.glob(os.path.join(cache_dir, "profiles", "*.prof.*"))


def read_files(m, files, names):
    for rel in names:
        with open(os.path.join(m.mnt, rel), "rb") as f:
            assert f.read() == files[rel], rel


def prefetch_lines(m):
    """The log's lines about prefetching (not the counters at exit)."""
    return [ln for ln in m.log().splitlines()
            if "prefetch" in ln and "stats:" not in ln]


def expect_plan(before, files):
    """(files, missing) the prefetch of a profile should plan."""
    present = [p for p, _ in before if p in files]
    return len(present), len(before) - len(present)


def check_plan(m, before, files):
    """The prefetch took the learned profile `before`: every entry still in
    the image planned, the others skipped with one warning."""
    st = wait_prefetch_done(m.mnt)
    n_files, n_missing = expect_plan(before, files)
    assert st["prefetch_files"] == n_files, (st, before)
    assert st["prefetch_missing"] == n_missing, (st, before)
    warnings = prefetch_lines(m)
    if n_missing:
        assert len(warnings) == 1, m.log()
        assert "skipped %d entries" % n_missing in warnings[0], warnings
    else:
        assert warnings == [], m.log()
    return st


def test_learned_profile_carries_over_to_next_version(site, versions,
                                                      mounts, tmp_path):
    v1, v2 = versions["v1"], versions["v2"]
    cache = str(tmp_path / "cache")
    opts = OPTS + ["cache_dir=" + cache]
    url = publish(site, "app.sqfs", v1["path"])
    prof = profile_path(cache, url)

    # v1: the start reads S
    m = mounts(url, opts, name="v1")
    read_files(m, v1["files"], S)
    assert m.stop() == []
    assert os.listdir(os.path.join(cache, "profiles")) == \
        [os.path.basename(prof)]
    check_profile(read_learned(prof), [(p, 0) for p in S], "after v1")

    # v2 at the same URL: S prefetched, less what v2 deleted
    assert all(v1["files"][p] != v2["files"][p] for p in S_CHANGED)
    url2 = publish(site, "app.sqfs", v2["path"])
    assert url2 == url
    m = mounts(url, opts, name="v2-0")
    st = check_plan(m, read_learned(prof), v2["files"])
    assert st["prefetch_files"] == len(S_REMAINING)
    assert st["prefetch_missing"] == len(S_DELETED)
    assert st["prefetch_requests"] >= 1 and st["prefetch_failures"] == 0, st
    warning = prefetch_lines(m)[0]
    assert "learned" in warning and S_DELETED[0] in warning, warning
    before = st["http_requests"]
    read_files(m, v2["files"], S_REMAINING)   # v2's bytes, changed ones too
    after = stats(m.mnt)
    assert after["prefetch_hits"] > 0, after
    assert after["http_requests"] == before, (st, after)
    for p in S_DELETED:
        assert not os.path.exists(os.path.join(m.mnt, p)), p
    assert m.stop() == []
    check_profile(read_learned(prof), [(p, 0) for p in S_REMAINING] +
                  [(p, 1) for p in S_DELETED], "after the first start of v2")

    # the start of v2 reads S2 only: S2 first, then the entries it did
    # not read in their order, one more miss each, gone past MAX_MISSED
    for k in range(4):
        before_prof = read_learned(prof)
        m = mounts(url, opts, name="v2-%d" % (k + 1))
        check_plan(m, before_prof, v2["files"])
        read_files(m, v2["files"], S2)
        assert m.stop() == []
        got = read_learned(prof)
        check_profile(got, [(p, 0) for p in S2] +
                      [(p, n + 1) for p, n in before_prof
                       if p not in S2 and n < MAX_MISSED],
                      "after start %d of v2 reading S2" % (k + 1))
        if k == 0:
            assert got[len(S2):] == [(p, 1) for p in S_REMAINING] + \
                [(p, 2) for p in S_DELETED], got
    # four starts without S: every S entry is gone, S2 stays
    check_profile(read_learned(prof), [(p, 0) for p in S2], "at the end")
    assert temp_files(cache) == []


def cached_images(cache):
    """NAMEs of the images whose blocks cache_dir holds (NAME.data), after
    checking each has its log and lock and nothing else is left of one."""
    files = os.listdir(cache)
    names = sorted(f[:-len(".data")] for f in files if f.endswith(".data"))
    for ext in (".log", ".lock"):
        assert sorted(f[:-len(ext)] for f in files
                      if f.endswith(ext)) == names, files
    return names


def wait_cached_images(cache, n, timeout=30):
    """cached_images() once n images' lock files are left: the last
    version's files are removed on a thread of their own, the lock last."""
    deadline = time.monotonic() + timeout
    while sum(f.endswith(".lock") for f in os.listdir(cache)) != n:
        assert time.monotonic() < deadline, os.listdir(cache)
        time.sleep(0.02)
    return cached_images(cache)


def publish_at(site, name, src, when):
    """publish(), with the file's time set: nginx's ETag is its time and
    size, so each publication of a file is a version of its own."""
    url = publish(site, name, src)
    os.utime(os.path.join(site.root, name), (when, when))
    return url


def test_next_version_replaces_the_cached_blocks(site, versions, mounts,
                                                 tmp_path):
    """A location keeps one image's blocks in cache_dir: the mount of the
    next version at its URL removes the last one's, or, while a daemon
    still serves the last one, that daemon does when it stops. The
    learned profile stays: it is the location's."""
    v1, v2 = versions["v1"], versions["v2"]
    cache = str(tmp_path / "cache")
    opts = OPTS + ["cache_dir=" + cache]
    name = "nextver.sqfs"
    t = int(time.time()) - 1000
    url = publish_at(site, name, v1["path"], t)
    m = mounts(url, opts, name="v1")
    read_files(m, v1["files"], S)
    assert m.stop() == []
    first = cached_images(cache)
    assert len(first) == 1, first

    publish_at(site, name, v2["path"], t + 1)
    m = mounts(url, opts, name="v2")
    second = wait_cached_images(cache, 1)
    assert len(second) == 1 and second != first, (first, second)
    deadline = time.monotonic() + 10   # logged once the files are gone
    while "removed the cache of the image published before" not in m.log():
        assert time.monotonic() < deadline, m.log()
        time.sleep(0.02)
    read_files(m, v2["files"], S_REMAINING)
    assert m.stop() == []
    assert cached_images(cache) == second
    assert os.path.exists(profile_path(cache, url))

    # v2's blocks serve its next mount: no request once the prefetch of
    # the learned profile (from cache_dir) is done
    m = mounts(url, opts, name="v2-again")
    wait_prefetch_done(m.mnt)
    before = stats(m.mnt)
    read_files(m, v2["files"], S_REMAINING)
    after = stats(m.mnt)
    assert after["disk_cache_hits"] > 0, after
    assert after["http_requests"] == before["http_requests"], (before, after)
    assert m.stop() == []

    # v3 served by one daemon while v4 mounts beside it: both kept while
    # both run, v3's go when its daemon stops, v4's stay
    publish_at(site, name, v1["path"], t + 2)
    held = mounts(url, opts, name="v3")
    read_files(held, v1["files"], S[:3])
    third = wait_cached_images(cache, 1)
    assert len(third) == 1 and third != second, (second, third)
    publish_at(site, name, v2["path"], t + 3)
    m = mounts(url, opts, name="v4")
    read_files(m, v2["files"], S_REMAINING[:3])
    both = cached_images(cache)
    assert len(both) == 2 and third[0] in both, both
    read_files(held, v1["files"], S[3:6])   # still served, and cached
    assert held.stop() == []
    assert cached_images(cache) == [n for n in both if n != third[0]]
    assert m.stop() == []
    assert len(cached_images(cache)) == 1
    assert temp_files(cache) == []


def test_learned_order_is_read_order(versions, mounts, tmp_path):
    """The profile lists files in the order they were read, even when the
    reader runs the moment its reply is out: with the reader and the
    daemon on one CPU the reader usually runs before the worker thread
    that replied goes on (so a worker that notes the read after replying
    notes it late)."""
    v1 = versions["v1"]
    url = v1["path"]   # a file: no network between a read and its reply
    small = sorted(p for p in v1["files"] if p.startswith("lib/"))
    rng = random.Random(3203)
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})   # the daemon inherits it
    try:
        for r in range(3):
            cache = str(tmp_path / ("cache%d" % r))
            order = rng.sample(small, 40)
            m = mounts(url, OPTS + ["cache_dir=" + cache], name="o%d" % r)
            read_files(m, v1["files"], order)
            assert m.stop() == []
            check_profile(read_learned(profile_path(cache, url)),
                          [(p, 0) for p in order], "mount %d" % r)
    finally:
        os.sched_setaffinity(0, saved)


def flip_text_byte(raw):
    b = bytearray(raw)
    b[HEADER + (len(raw) - HEADER) // 2] ^= 0x20
    return bytes(b)


def with_length(raw, delta):
    n, = struct.unpack("<I", raw[8:12])
    return raw[:8] + struct.pack("<I", (n + delta) & 0xFFFFFFFF) + raw[12:]


DAMAGE = {
    "flipped-text-byte": flip_text_byte,
    "truncated-text": lambda raw: raw[:HEADER + (len(raw) - HEADER) // 2],
    "truncated-header": lambda raw: raw[:10],
    "empty": lambda raw: b"",
    "length-short": lambda raw: with_length(raw, -7),
    "length-long": lambda raw: with_length(raw, +7),
    "length-huge": lambda raw: with_length(raw, 64 << 20),
    "bad-magic": lambda raw: b"sqlzPRF0" + raw[8:],
}

FIRST = ["lib/p01/m05.py", "data/blob03.bin", "lib/p06/m14.py"]
AFTER = ["lib/p08/m23.py", "lib/p02/m09.py", "data/blob12.bin",
         "lib/p00/m00.py"]


@pytest.fixture(scope="module")
def learned_once(site, versions, tmp_path_factory):
    """A good learned profile of FIRST for damaged.sqfs."""
    v1 = versions["v1"]
    url = publish(site, "damaged.sqfs", v1["path"])
    d = tmp_path_factory.mktemp("learned-once")
    cache = str(d / "cache")
    require_mount_env()
    m = Mount(url, str(d / "mnt"), str(d / "daemon.log"),
              OPTS + ["cache_dir=" + cache])
    m.start()
    try:
        read_files(m, v1["files"], FIRST)
    finally:
        assert m.stop() == []
    prof = profile_path(cache, url)
    same_files(read_learned(prof), [(p, 0) for p in FIRST])
    with open(prof, "rb") as f:
        return url, os.path.basename(prof), f.read()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_learned_profile_is_one_warning(damage, site, versions,
                                                learned_once, mounts,
                                                tmp_path):
    url, name, good = learned_once
    v1 = versions["v1"]
    cache = str(tmp_path / "cache")
    os.makedirs(os.path.join(cache, "profiles"))
    prof = os.path.join(cache, "profiles", name)
    with open(prof, "wb") as f:
        f.write(DAMAGE[damage](good))
    site_name = "damaged.sqfs.profile"
    seen = len(requests_for(site, site_name))

    m = mounts(url, OPTS + ["cache_dir=" + cache], name=damage)
    # ignored: auto goes on to the publisher's guess (absent here)
    wait_for_more_requests(site, site_name, seen)
    read_files(m, v1["files"], AFTER)
    st = stats(m.mnt)
    assert st["prefetch_files"] == 0 and st["prefetch_requests"] == 0, st
    # the whole log so far: that one warning
    warnings = m.log().splitlines()
    assert len(warnings) == 1, m.log()
    assert "prefetch: the learned profile" in warnings[0] and \
        "unusable" in warnings[0] and prof in warnings[0], warnings
    assert m.stop() == []
    # replaced by what this mount read, nothing of the damaged one
    same_files(read_learned(prof), [(p, 0) for p in AFTER])
    assert temp_files(cache) == []


def wait_for_more_requests(site, name, seen, timeout=30):
    deadline = time.monotonic() + timeout
    while len(requests_for(site, name)) <= seen:
        assert time.monotonic() < deadline, "no request for " + name
        time.sleep(0.02)
    return requests_for(site, name)[seen:]


def unmount_at_once(ms):
    """fusermount3 -u on every mount at the same moment."""
    go = threading.Barrier(len(ms))

    def one(m):
        go.wait()
        subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True)

    threads = [threading.Thread(target=one, args=(m,)) for m in ms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    problems = []
    for m in ms:
        try:
            rc = m.proc.wait(15)
        except subprocess.TimeoutExpired:
            problems += m.stop()   # lazy unmount, kill: the fixture's way
            continue
        if rc != 0:
            problems.append("daemon exited with %d:\n%s" % (rc, m.log()))
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                    "ThreadSanitizer"):
            if bad in m.log():
                problems.append(m.log()[-6000:])
        m.proc = None   # stopped: the fixture has nothing left to do
    return problems


def test_two_daemons_share_cache_dir(site, versions, mounts, tmp_path):
    """Two daemons of one URL with one cache_dir (the second without its
    disk cache: the first owns it) unmount at the same moment, three times:
    the profile is one of theirs, whole, and no temp file is left."""
    v1 = versions["v1"]
    cache = str(tmp_path / "cache")
    url = publish(site, "shared.sqfs", v1["path"])
    prof = profile_path(cache, url)
    reads_a = ["lib/p02/m03.py", "data/blob05.bin", "lib/p09/m01.py"]
    reads_b = ["lib/p04/m17.py", "lib/p07/m02.py", "data/blob14.bin",
               "lib/p01/m26.py"]
    for r in range(3):
        a = mounts(url, OPTS + ["cache_dir=" + cache], name="a%d" % r)
        b = mounts(url, OPTS + ["cache_dir=" + cache], name="b%d" % r)
        errors = []

        def read_a():
            try:
                read_files(a, v1["files"], reads_a)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        ta = threading.Thread(target=read_a)
        ta.start()
        read_files(b, v1["files"], reads_b)
        ta.join(60)
        assert not ta.is_alive() and errors == [], errors
        assert unmount_at_once([a, b]) == []
        for m in (a, b):
            assert "not saved" not in m.log(), m.log()
        got = read_learned(prof)
        names = [p for p, _ in got]
        assert len(set(names)) == len(names), got
        assert set(names) <= set(reads_a) | set(reads_b), got
        # one daemon's reads first (their order is for
        # test_learned_order_is_read_order), then what it had not read
        assert sorted((p, 0) for p in reads_a) == \
            sorted(got[:len(reads_a)]) or \
            sorted((p, 0) for p in reads_b) == \
            sorted(got[:len(reads_b)]), got
        assert temp_files(cache) == []
        assert os.listdir(os.path.join(cache, "profiles")) == \
            [os.path.basename(prof)]


class TracedMount(Mount):
    """The daemon under strace -f, its file calls (whole paths) in trace."""

    def __init__(self, *a, trace=None, **kw):
        super().__init__(*a, **kw)
        self.trace = trace

    def cmd(self):
        return ["strace", "-f", "-qq", "-s", "4096", "-o", self.trace,
                "-e", "trace=%file"] + super().cmd()


def mount_read_unmount(site, versions, tmp_path, opts, name):
    """Mount NAME (v1) with opts and fresh HOME, XDG_CACHE_HOME and TMPDIR
    under tmp_path, read FIRST, unmount. Returns (files and dirs under
    tmp_path that look like learned profiles, the daemon's file calls
    naming one: None without strace)."""
    require_mount_env()
    v1 = versions["v1"]
    url = publish(site, name, v1["path"])
    for d in ("home", "xdg", "tmp"):
        os.makedirs(str(tmp_path / d), exist_ok=True)
    env = dict(os.environ, HOME=str(tmp_path / "home"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"),
               TMPDIR=str(tmp_path / "tmp"))
    trace = str(tmp_path / "strace.out") if shutil.which("strace") else None
    if trace:
        # LeakSanitizer cannot run under ptrace: in a sanitizer build it
        # would report that instead of leaks
        env["ASAN_OPTIONS"] = ":".join(
            filter(None, [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    args = (url, str(tmp_path / "mnt"), str(tmp_path / "daemon.log"),
            OPTS + opts)
    m = TracedMount(*args, env=env, trace=trace) if trace else \
        Mount(*args, env=env)
    m.start()
    try:
        read_files(m, v1["files"], FIRST)
    finally:
        assert m.stop() == []
    found = [os.path.join(dp, f) for dp, dn, fn in os.walk(str(tmp_path))
             for f in fn + dn if f.endswith(".prof") or f == "profiles"]
    if not trace:
        return found, None
    with open(trace) as f:
        calls = f.read().splitlines()
    # the trace is of the daemon: it opened its image's URL's cache or at
    # least its mount point
    assert any(str(tmp_path / "mnt") in c for c in calls), calls[:20]
    return found, [c for c in calls if ".prof" in c or "/profiles" in c]


def test_learn_on_writes_profile_seen_by_the_checks(site, versions,
                                                    tmp_path):
    """The checks of the two tests below see a profile where one is
    written."""
    cache = str(tmp_path / "cache")
    found, calls = mount_read_unmount(site, versions, tmp_path,
                                      ["cache_dir=" + cache], "learnon.sqfs")
    assert sorted(os.path.basename(f) for f in found) == \
        sorted(["profiles", os.path.basename(
            profile_path(cache, site.url("learnon.sqfs")))]), found
    assert calls is None or any("rename(" in c and ".prof" in c
                                for c in calls), calls


def test_learn_off_writes_no_profile(site, versions, tmp_path):
    cache = str(tmp_path / "cache")
    found, calls = mount_read_unmount(site, versions, tmp_path,
                                      ["cache_dir=" + cache, "learn=off"],
                                      "learnoff.sqfs")
    assert found == [] and not calls, (found, calls)
    assert os.path.isdir(cache)  # the disk cache was there all the same


def test_no_cache_dir_writes_no_profile(site, versions, tmp_path):
    found, calls = mount_read_unmount(site, versions, tmp_path, [],
                                      "nocache.sqfs")
    assert found == [] and not calls, (found, calls)


# ---------------------------------------------------------------------------
# The publisher's profile
# ---------------------------------------------------------------------------

PUBLISHED = ["lib/p05/m05.py", "data/blob09.bin", "lib/p03/m18.py",
             "lib/p07/m11.py", "data/blob16.bin", "lib/p01/m00.py"]


def publish_profile(site, name, lines):
    path = os.path.join(site.root, name + ".profile")
    with open(path + ".tmp", "w") as f:
        f.write("# the start of the application\n")
        f.write("".join(line + "\n" for line in lines))
    os.replace(path + ".tmp", path)


def test_publisher_profile_beside_the_image(site, versions, mounts):
    v1 = versions["v1"]
    url = publish(site, "pub.sqfs", v1["path"])
    publish_profile(site, "pub.sqfs", PUBLISHED)
    m = mounts(url, OPTS)
    st = wait_prefetch_done(m.mnt)
    assert st["prefetch_files"] == len(PUBLISHED), st
    assert st["prefetch_missing"] == 0, st
    # nginx (one worker) logged the profile's request before it served
    # the prefetch's
    assert st["prefetch_requests"] >= 1, st
    # one request (it is small: the probe's range has all of it)
    got = requests_for(site, "pub.sqfs.profile")
    assert [(e["method"], e["status"] in (200, 206)) for e in got] == \
        [("GET", True)], got
    before = st["http_requests"]
    read_files(m, v1["files"], PUBLISHED)
    after = stats(m.mnt)
    assert after["prefetch_hits"] > 0, after
    assert after["http_requests"] == before, (st, after)
    assert prefetch_lines(m) == [], m.log()


def test_no_publisher_profile_is_quiet(site, versions, mounts):
    v1 = versions["v1"]
    url = publish(site, "nopub.sqfs", v1["path"])
    m = mounts(url, OPTS)
    got = wait_requests_for(site, "nopub.sqfs.profile")
    read_files(m, v1["files"], PUBLISHED)
    assert [(e["method"], e["status"]) for e in got] == [("GET", 404)], got
    st = stats(m.mnt)
    assert st["prefetch_files"] == 0 and st["prefetch_requests"] == 0, st
    assert m.stop() == []
    assert prefetch_lines(m) == [], m.log()
    assert len(requests_for(site, "nopub.sqfs.profile")) == 1


def test_learned_profile_wins_over_publisher(site, versions, mounts,
                                             tmp_path):
    v1 = versions["v1"]
    cache = str(tmp_path / "cache")
    opts = OPTS + ["cache_dir=" + cache]
    url = publish(site, "both.sqfs", v1["path"])
    learned = ["lib/p06/m06.py", "data/blob01.bin"]
    m = mounts(url, opts, name="learn")
    read_files(m, v1["files"], learned)
    assert m.stop() == []
    same_files(read_learned(profile_path(cache, url)),
               [(p, 0) for p in learned])
    # the first mount had nothing learned: it asked for the guess
    assert [e["status"] for e in requests_for(site, "both.sqfs.profile")] \
        == [404]

    publish_profile(site, "both.sqfs", PUBLISHED)
    m = mounts(url, opts, name="both")
    st = wait_prefetch_done(m.mnt)
    assert st["prefetch_files"] == len(learned), st
    assert st["prefetch_missing"] == 0, st
    read_files(m, v1["files"], learned)
    assert stats(m.mnt)["prefetch_hits"] > 0
    assert m.stop() == []
    # the learned profile was had: the publisher's was never asked for
    assert len(requests_for(site, "both.sqfs.profile")) == 1


# ---------------------------------------------------------------------------
# The location
# ---------------------------------------------------------------------------

def test_location_of_url_ignores_query(site, versions, mounts, tmp_path):
    """A presigned URL's query changes between mounts: the location is the
    URL without it, so the profile learned under one signature is used
    under the next."""
    v1 = versions["v1"]
    cache = str(tmp_path / "cache")
    opts = OPTS + ["cache_dir=" + cache]
    url = publish(site, "signed.sqfs", v1["path"])
    m = mounts(url + "?sig=aaaa&exp=1", opts, name="s1")
    read_files(m, v1["files"], FIRST)
    assert m.stop() == []
    prof = profile_path(cache, url + "?***")
    same_files(read_learned(prof), [(p, 0) for p in FIRST])
    m = mounts(url + "?sig=bbbb&exp=2", opts, name="s2")
    st = wait_prefetch_done(m.mnt)
    assert st["prefetch_files"] == len(FIRST), st
    assert m.stop() == []
    assert os.listdir(os.path.join(cache, "profiles")) == \
        [os.path.basename(prof)]


def test_location_of_file_is_its_real_path(versions, mounts, tmp_path):
    """A local image is known by its real path: a mount through a symlink
    uses what the mount of the file learned."""
    v1 = versions["v1"]
    cache = str(tmp_path / "cache")
    os.makedirs(cache)
    opts = OPTS + ["cache_dir=" + cache]
    img = str(tmp_path / "local.sqfs")
    shutil.copyfile(v1["path"], img)
    link = str(tmp_path / "link.sqfs")
    os.symlink(img, link)
    m = mounts(img, opts, name="file")
    read_files(m, v1["files"], FIRST)
    assert m.stop() == []
    prof = profile_path(cache, os.path.realpath(img))
    same_files(read_learned(prof), [(p, 0) for p in FIRST])
    m = mounts(link, opts, name="link")
    st = wait_prefetch_done(m.mnt)
    assert st["prefetch_files"] == len(FIRST), st
    read_files(m, v1["files"], AFTER)
    assert m.stop() == []
    got = read_learned(prof)
    same_files(got[:len(AFTER)], [(p, 0) for p in AFTER])
    same_files(got[len(AFTER):], [(p, 1) for p in FIRST])


def test_record_and_learn_together(site, versions, mounts, tmp_path):
    """-o record= and cache_dir: the recorded file and the learned profile
    both list the reads."""
    v1 = versions["v1"]
    cache = str(tmp_path / "cache")
    rec = str(tmp_path / "rec.txt")
    url = publish(site, "record.sqfs", v1["path"])
    m = mounts(url, OPTS + ["cache_dir=" + cache, "record=" + rec])
    read_files(m, v1["files"], FIRST)
    assert m.stop() == []
    with open(rec) as f:
        names = [ln.split("\t")[0] for ln in f.read().splitlines()
                 if ln and not ln.startswith("#")]
    assert sorted(names) == sorted(FIRST)
    same_files(read_learned(profile_path(cache, url)),
               [(p, 0) for p in FIRST])


def test_learned_on_sigterm(site, versions, mounts, tmp_path):
    """A daemon ended by SIGTERM (systemd's stop) learns all the same."""
    v1 = versions["v1"]
    cache = str(tmp_path / "cache")
    url = publish(site, "term.sqfs", v1["path"])
    m = mounts(url, OPTS + ["cache_dir=" + cache])
    read_files(m, v1["files"], FIRST)
    m.proc.send_signal(signal.SIGTERM)
    assert m.proc.wait(15) == 0
    m.proc = None  # stopped here, not by the fixture
    same_files(read_learned(profile_path(cache, url)),
               [(p, 0) for p in FIRST])
    assert temp_files(cache) == []


def test_learned_profile_is_bounded(site, mounts, tmp_path):
    """A start that reads more than 4096 files: the first 4096 are learned,
    the profile is whole, and the next mount prefetches them."""
    tree = tmp_path / "tree"
    files = {}
    for i in range(4300):
        files["d%02d/f%04d" % (i % 40, i)] = b"%d\n" % i * (1 + i % 50)
    write_tree(str(tree), files)
    img = str(tmp_path / "many.sqfs")
    mksquashfs(str(tree), img)
    url = publish(site, "many.sqfs", img)
    cache = str(tmp_path / "cache")
    order = sorted(files, key=lambda p: (p[-2:], p))   # not the tree's order
    m = mounts(url, OPTS + ["cache_dir=" + cache], name="many")
    read_files(m, files, order)
    assert m.stop() == []
    got = read_learned(profile_path(cache, url))
    names = [p for p, _ in got]
    assert len(names) == LEARN_MAX_FILES, len(names)
    # the first 4096 reads (their order is for
    # test_learned_order_is_read_order)
    same_files(got, [(p, 0) for p in order[:LEARN_MAX_FILES]])
    m = mounts(url, OPTS + ["cache_dir=" + cache], name="again")
    st = wait_prefetch_done(m.mnt)
    assert st["prefetch_files"] == LEARN_MAX_FILES, st
    assert st["prefetch_missing"] == 0, st


ODD_NAMES = ["#notes", "d/#also", "tab\there", "new\nline", "back\\slash",
             "spa ce", "caf\u00e9", "d/-dash", "d/missed=1", "dots..",
             "d/\\t"]


def test_odd_names_round_trip(site, mounts, tmp_path):
    """Names that profile text escapes or could mistake for something else
    (a comment, a field) are learned, prefetched by the next mount, and
    known again when read again (missed stays 0, no duplicates)."""
    tree = tmp_path / "tree"
    files = {n: ("%s\n" % n).encode() * 100 for n in ODD_NAMES}
    files["plain"] = b"plain\n"
    write_tree(str(tree), files)
    img = str(tmp_path / "odd.sqfs")
    mksquashfs(str(tree), img)
    url = publish(site, "odd.sqfs", img)
    cache = str(tmp_path / "cache")
    opts = OPTS + ["cache_dir=" + cache]
    names = sorted(files)
    prof = profile_path(cache, url)
    m = mounts(url, opts, name="odd0")
    read_files(m, files, names)
    assert m.stop() == []
    # read as the daemon reads it: a line starting with '#' is a comment
    same_files(read_learned(prof), [(p, 0) for p in names],
               "learned from the first mount")
    m = mounts(url, opts, name="odd1")
    st = wait_prefetch_done(m.mnt)
    assert prefetch_lines(m) == [], m.log()
    assert st["prefetch_missing"] == 0, st
    assert st["prefetch_files"] == len(names), st
    read_files(m, files, names)
    assert m.stop() == []
    same_files(read_learned(prof), [(p, 0) for p in names],
               "after the second")
