"""A CDN-shaped caching tier: a real nginx origin and a real nginx caching
reverse proxy in front of it (tests/servers.py NginxTier: proxy_cache with
the slice module, 1 MiB slices, as docs/deploy.md configures it), both on
free ports of 127.0.0.1 and started per test, so every tier starts empty.

What is checked: the tier passes ETag and Last-Modified, answers ranges
across slice boundaries with the origin's bytes, and If-Range and If-Match
on cached slices as the origin would; a mount through it equals the
kernel's loop mount; three mounts (separate daemons, separate cache_dirs)
reading everything at once cost the origin at most 1.2x what one mount
straight from the origin costs; an image replaced at the origin under a
mount through the tier gives EIO, never bytes of the new image; and what a
tier cannot show: an origin without ETag lets it splice two versions into
one answer, and a change that keeps size and mtime (so the validators)
passes unseen through tier and mount alike; only a signed image mounted
with -o verify= refuses those bytes."""

import concurrent.futures
import errno
import hashlib
import http.client
import os
import random
import shutil
import subprocess
import time

import pytest

from conftest import _randbytes, daemon, mksquashfs, require
from servers import kernel_loop_mount, kernel_umount, start_nginx, start_tier
from test_nginx import walk

SLICE = 1 << 20
FAST = ["timeout=5", "connect_timeout=2", "retries=1"]


def _tree(root, seed):
    """Ten incompressible 600 KB files (stored raw: a changed byte is a
    wrong byte, not a decompression error), 60 small text files, a link."""
    rng = random.Random(seed)
    files = {}
    os.makedirs(os.path.join(root, "etc"))
    for i in range(10):
        files["f%02d.bin" % i] = _randbytes(rng, 600_000)
    for i in range(60):
        files["etc/c%02d.conf" % i] = (b"key%d = %d\n" % (i, seed)) * \
            rng.randrange(1, 400)
    for rel, data in files.items():
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    os.symlink("etc/c00.conf", os.path.join(root, "link"))
    return files


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """img.sqfs (about 6.5 MB: seven slices) and new.sqfs, the same names
    with other bytes; signed.sqfs, img's tree signed, with its key."""
    d = tmp_path_factory.mktemp("tier")
    out = {"dir": str(d)}
    for name, seed in (("img", 1), ("new", 2)):
        tree = str(d / ("tree-" + name))
        out[name + "_files"] = _tree(tree, seed)
        out[name] = str(d / (name + ".sqfs"))
        mksquashfs(tree, out[name], "-comp", "gzip")
    require(shutil.which("openssl") is not None, "openssl missing")
    key = str(d / "key.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out",
                    key], check=True, capture_output=True, timeout=60)
    os.chmod(key, 0o600)
    out["pub"] = str(d / "key.pub.pem")
    subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out",
                    out["pub"]], check=True, capture_output=True, timeout=60)
    sign = os.path.join(os.path.dirname(daemon()), "sqfs-lazy-sign")
    out["signed"] = str(d / "signed.sqfs")
    shutil.copy(out["img"], out["signed"])
    subprocess.run([sign, "--key", key, out["signed"]], check=True,
                   timeout=120)
    listing = subprocess.run([sign, "--list", out["signed"]], check=True,
                             capture_output=True, text=True,
                             timeout=120).stdout
    out["data_units"] = [(int(off, 16), int(n)) for off, n, kind in
                         (ln.split(None, 2) for ln in listing.splitlines())
                         if kind == "data block"]
    return out


@pytest.fixture
def www(images, tmp_path):
    """The origin's directory: a copy of each image, for tests to change."""
    w = tmp_path / "www"
    os.makedirs(w)
    for name in ("img", "signed"):
        shutil.copy(images[name], w / (name + ".sqfs"))
    return str(w)


@pytest.fixture
def origin(www, tmp_path):
    n = start_nginx(tmp_path / "origin", www)
    yield n
    n.stop()


@pytest.fixture
def tier(origin, tmp_path):
    t = start_tier(tmp_path / "tier", "127.0.0.1:%d" % origin.port,
                   slice_size="1m")
    yield t
    t.stop()


@pytest.fixture(scope="module")
def kernel_mount(images, tmp_path_factory):
    mnt = str(tmp_path_factory.mktemp("kmnt"))
    kernel_loop_mount(images["img"], mnt)
    yield mnt
    kernel_umount(mnt)


def _get(port, path, method="GET", **headers):
    """(status, {lower-case header: value}, body); body None when the
    connection closed before or during it."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        c.request(method, path, headers={k.replace("_", "-"): v
                                         for k, v in headers.items()})
        try:
            r = c.getresponse()
        except (http.client.RemoteDisconnected, ConnectionError):
            return None, {}, None
        h = {k.lower(): v for k, v in r.getheaders()}
        try:
            body = r.read()
        except http.client.IncompleteRead:
            body = None
        return r.status, h, body
    finally:
        c.close()


def _slice_ranges(entries):
    return {e["range"] for e in entries if e["method"] == "GET"}


def test_validators_ranges_and_conditions(origin, tier, images):
    """ETag and Last-Modified pass; ranges inside a slice, across slice
    boundaries and at the end are the origin's bytes; If-Range and If-Match
    are judged by the tier on its cached slices; the origin sees only whole
    slices and no conditional header."""
    data = open(images["img"], "rb").read()
    size = len(data)
    st, ho, _ = _get(origin.port, "/img.sqfs", "HEAD")
    assert st == 200 and ho["etag"].startswith('"'), ho
    for a, b in ((0, 65535), (SLICE - 1000, SLICE + 1000),
                 (SLICE // 2, 3 * SLICE + 5), (size - 4096, size - 1),
                 (5 * SLICE, 5 * SLICE)):
        st, h, body = _get(tier.port, "/img.sqfs",
                           Range="bytes=%d-%d" % (a, b))
        assert st == 206, (a, b, st)
        assert h["content-range"] == "bytes %d-%d/%d" % (a, b, size)
        assert h["etag"] == ho["etag"]
        assert h["last-modified"] == ho["last-modified"]
        assert body == data[a:b + 1], (a, b)
    rng = "bytes=%d-%d" % (SLICE - 10, SLICE + 10)
    st, _, body = _get(tier.port, "/img.sqfs", Range=rng,
                       If_Range=ho["etag"])
    assert st == 206 and body == data[SLICE - 10:SLICE + 11]
    st, _, body = _get(tier.port, "/img.sqfs", Range=rng,
                       If_Match=ho["etag"])
    assert st == 206 and body == data[SLICE - 10:SLICE + 11]
    st, _, _ = _get(tier.port, "/img.sqfs", Range=rng, If_Match='"other"')
    assert st == 412
    st, _, body = _get(tier.port, "/img.sqfs", Range=rng,
                       If_Range='"other"')
    assert st == 200 and body == data      # the whole object, as RFC 9110
    cached = [e for e in tier.entries() if e["uri"] == "/img.sqfs"]
    assert {e["cache"] for e in cached[-4:]} == {"HIT"}, cached
    want = {"bytes=%d-%d" % (i * SLICE, (i + 1) * SLICE - 1)
            for i in range((size + SLICE - 1) // SLICE)}
    seen = [e for e in origin.entries() if e["uri"] == "/img.sqfs"
            and e["method"] == "GET"]
    assert _slice_ranges(seen) == want, seen
    assert len(seen) == len(want), seen      # each slice fetched once
    assert all(e["if_range"] == "-" for e in seen), seen


def test_same_as_kernel_through_the_tier(tier, kernel_mount, mounts):
    m = mounts(tier.url("img.sqfs"))
    k, f = walk(kernel_mount), walk(m.mnt)
    assert sorted(k) == sorted(f)
    diffs = [(p, k[p], f[p]) for p in k if k[p] != f[p]]
    assert not diffs, diffs[:5]


def _workload(mnt):
    """Walk the tree, lstat everything, read every file: {rel: sha256}."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(mnt):
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                out[os.path.relpath(p, mnt)] = hashlib.sha256(
                    f.read()).hexdigest()
    return out


def _origin_bytes(origin):
    e = [x for x in origin.entries() if x["uri"].endswith(".sqfs")]
    return len(e), sum(x["body"] for x in e)


def test_three_mounts_cost_the_origin_one(origin, tier, images, mounts,
                                         tmp_path):
    want = {rel: hashlib.sha256(d).hexdigest()
            for rel, d in images["img_files"].items()}
    origin.clear_log()
    one = mounts(origin.url("img.sqfs"),
                 ["cache_dir=" + str(tmp_path / "c-direct")], name="direct")
    assert _workload(one.mnt) == want
    assert not one.stop()
    n1, b1 = _origin_bytes(origin)
    origin.clear_log()
    three = [mounts(tier.url("img.sqfs"),
                    ["cache_dir=" + str(tmp_path / ("c%d" % i))],
                    name="tier%d" % i) for i in range(3)]
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        got = list(ex.map(lambda m: _workload(m.mnt), three))
    assert all(g == want for g in got)
    n3, b3 = _origin_bytes(origin)
    size = os.path.getsize(images["img"])
    print("\norigin: one mount straight %d requests %d bytes; three mounts "
          "through the tier %d requests %d bytes (%.2fx; image %d bytes)"
          % (n1, b1, n3, b3, b3 / b1, size))
    assert b3 <= 1.2 * b1, (b1, b3, origin.entries())


def _read_each(mnt, files):
    """{rel: "old" | "other" | errno}"""
    out = {}
    for rel, data in files.items():
        try:
            with open(os.path.join(mnt, rel), "rb") as f:
                got = f.read()
            out[rel] = "old" if got == data else "other"
        except OSError as e:
            out[rel] = e.errno
    return out


def _replace(path, new_path, mtime):
    tmp = path + ".new"
    shutil.copy(new_path, tmp)
    os.utime(tmp, (mtime, mtime))
    os.rename(tmp, path)


def test_origin_change_under_a_mount_gives_eio(origin, tier, images, www,
                                              mounts):
    """The image is replaced at the origin (new ETag). The tier still holds
    the slices the mount read, with the old ETag; every other slice comes
    fresh with the new one, and nginx cuts the answer (slice ETag mismatch)
    or the mount refuses it: EIO, never a byte of the new image."""
    old = images["img_files"]
    m = mounts(tier.url("img.sqfs"), FAST)
    with open(os.path.join(m.mnt, "f00.bin"), "rb") as f:
        assert f.read() == old["f00.bin"]
    _replace(os.path.join(www, "img.sqfs"), images["new"], time.time() + 10)
    t0 = time.monotonic()
    result = _read_each(m.mnt, old)
    dt = time.monotonic() - t0
    failed = [r for r, v in result.items() if v not in ("old",)]
    assert "other" not in result.values(), result
    assert set(result[r] for r in failed) == {errno.EIO}, result
    assert sum(1 for r in failed if r.startswith("f")) >= 5, result
    print("\nafter the change: %d of %d files EIO, the rest old bytes from "
          "slices the tier held (%.1f s)" % (len(failed), len(result), dt))
    log = tier.dir + "/error.log"
    assert "etag mismatch in slice response" in open(log).read()
    assert m.alive()


def test_tier_splices_versions_without_etag(tmp_path):
    """Behind an origin that sends Last-Modified but no ETag, a changed
    object of the same size comes out of the tier as one 206 of old and new
    bytes under the old Last-Modified: the slice module compares ETags
    only. This is documented in docs/deploy.md (origins must send a strong
    ETag); only -o verify= catches such bytes."""
    w = tmp_path / "www"
    os.makedirs(w)
    old, new = os.urandom(3 * SLICE), os.urandom(3 * SLICE)
    (w / "obj").write_bytes(old)
    o = start_nginx(tmp_path / "o", str(w), server_extra="etag off;")
    t = start_tier(tmp_path / "t", "127.0.0.1:%d" % o.port)
    try:
        st, h, body = _get(t.port, "/obj", Range="bytes=0-99")
        assert st == 206 and "etag" not in h and body == old[:100]
        lm = h["last-modified"]
        p = str(w / "obj")
        (w / "obj.new").write_bytes(new)
        os.utime(str(w / "obj.new"), (time.time() + 10,) * 2)
        os.rename(str(w / "obj.new"), p)
        a, b = SLICE - 50, SLICE + 49
        st, h, body = _get(t.port, "/obj", Range="bytes=%d-%d" % (a, b),
                           If_Range=lm)
        assert st == 206 and h["last-modified"] == lm
        assert body == old[a:SLICE] + new[SLICE:b + 1]
    finally:
        t.stop()
        o.stop()


def test_verify_refuses_what_the_tier_cannot_see(origin, tier, images, www,
                                                 mounts, tmp_path):
    """Data blocks of the signed image change at the origin in place, size
    and mtime kept: ETag and Last-Modified stay, so neither the tier nor
    the mount can tell. A mount without verify= returns the changed bytes;
    one with -o verify= fails those reads with EIO and serves the rest."""
    keys = tmp_path / "nokeys"
    os.makedirs(keys)
    env = dict(os.environ, SQFS_LAZY_KEYS_DIR=str(keys))
    plain = mounts(tier.url("signed.sqfs"), FAST, name="plain", env=env)
    checked = mounts(tier.url("signed.sqfs"),
                     FAST + ["verify=" + images["pub"]], name="verify",
                     env=env)
    old = images["img_files"]
    path = os.path.join(www, "signed.sqfs")
    st = os.stat(path)
    # the data blocks in slices 1 and 2: the mounts so far read the head
    # (slice 0) and the metadata at the end
    units = [(off, n) for off, n in images["data_units"]
             if SLICE <= off and off + n <= 3 * SLICE]
    assert len(units) >= 8, images["data_units"]
    with open(path, "r+b") as f:
        for off, n in units:
            f.seek(off + n // 2)
            f.write(b"\xff" * 16)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    bad = _read_each(plain.mnt, old)
    good = _read_each(checked.mnt, old)
    assert "other" in bad.values(), bad
    assert "other" not in good.values(), good
    for rel, v in bad.items():
        if v == "other":
            assert good[rel] == errno.EIO, (rel, good[rel])
    assert "old" in good.values()
    assert "does not match the signed manifest" in checked.log()
