"""The content-addressed part of cache_dir (docs/caching.md): the units of
a signed image are stored by their SHA-256 digest and shared by every
image mounted with the same cache_dir. Version 2 of an image fetches only
the units version 1 did not have (asserted from nginx's access log); a
stored unit that was damaged is detected and fetched again, never
served."""

import hashlib
import os
import random
import re
import shutil
import struct
import subprocess

import pytest

from conftest import _randbytes, daemon, require
from servers import TAIL, start_nginx, without_openers
from test_cache import drop_page_cache, stats
from test_verify import _genkey, _tool


def _packer():
    return os.path.join(os.environ["LSQ_BUILD_DIR"], "src", "pack",
                        "sqfs-lazy-pack")


def _write_tree(root, files):
    for rel, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)


def _units(img):
    """[(offset, length, kind, sha256)] of a signed image."""
    out = subprocess.run([_tool("sqfs-lazy-sign"), "--list", img],
                         check=True, capture_output=True, text=True,
                         timeout=120).stdout
    with open(img, "rb") as f:
        data = f.read()
    units = []
    for line in out.splitlines():
        off, length, kind = line.split(None, 2)
        off, length = int(off, 16), int(length)
        units.append((off, length, kind,
                      hashlib.sha256(data[off:off + length]).digest()))
    return units


def _cas_path(cache, digest):
    h = digest.hex()
    return os.path.join(cache, "cas", h[:2], h[2:])


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """A tree and its version 2 (5% of the files changed, added or
    removed), each packed by sqfs-lazy-pack and signed; served by nginx."""
    require(shutil.which("openssl") is not None, "openssl missing")
    d = tmp_path_factory.mktemp("cas")
    rng = random.Random(20)
    v1 = {}
    for sub in range(8):
        for i in range(40):
            v1["d%d/small-%02d" % (sub, i)] = _randbytes(
                rng, rng.randrange(1, 6000))
    for i in range(12):
        v1["big/file-%02d" % i] = _randbytes(rng, rng.randrange(100_000,
                                                                400_000))
    v2 = dict(v1)
    names = sorted(v1)
    for rel in rng.sample(names, 17):   # 5% of 332
        kind = rng.randrange(3)
        if kind == 0:
            v2[rel] = _randbytes(rng, len(v1[rel]) or 1)
        elif kind == 1:
            del v2[rel]
        else:
            v2[rel + ".new"] = _randbytes(rng, rng.randrange(1, 6000))
    www = d / "www"
    os.makedirs(www)
    pub = _genkey(str(d / "key.pem"))
    imgs = {}
    for name, files in (("v1", v1), ("v2", v2)):
        _write_tree(str(d / name), files)
        img = str(www / (name + ".sqfs"))
        subprocess.run([_packer(), "-q", "-b", "64K", str(d / name), img],
                       check=True, capture_output=True, timeout=300)
        subprocess.run([_tool("sqfs-lazy-sign"), "--key", str(d / "key.pem"),
                        img], check=True, capture_output=True, timeout=120)
        imgs[name] = img
    srv = start_nginx(d / "nginx", www)
    yield {"dir": d, "pub": pub, "files": {"v1": v1, "v2": v2},
           "img": imgs, "srv": srv}
    srv.stop()


def _read_all(mnt, files):
    for rel, data in files.items():
        with open(os.path.join(mnt, rel), "rb") as f:
            assert f.read() == data, rel
    found = set()
    for root, _, names in os.walk(mnt):
        for n in names:
            found.add(os.path.relpath(os.path.join(root, n), mnt))
    assert found == set(files)


def _fetched(srv, name):
    """Body and header bytes nginx sent for one image, and its requests."""
    per = srv.summary().get("%s.sqfs" % name, [0, 0, {}])
    return per[1], per[0]


def _opts(versions, cache):
    return ["verify=" + versions["pub"], "cache_dir=" + str(cache)]


def test_v2_fetches_only_what_v1_lacks(versions, mounts, tmp_path):
    srv, cache = versions["srv"], tmp_path / "cache"
    srv.clear_log()
    m = mounts(srv.url("v1.sqfs"), _opts(versions, cache), name="v1")
    _read_all(m.mnt, versions["files"]["v1"])
    st1 = stats(m.mnt)
    assert m.stop() == []
    assert st1["cas_writes"] > 0 and st1["cas_hits"] == 0
    assert st1["verify_units"] > 0 and st1["verify_mismatches"] == 0

    m = mounts(srv.url("v2.sqfs"), _opts(versions, cache), name="v2")
    _read_all(m.mnt, versions["files"]["v2"])
    st2 = stats(m.mnt)
    assert m.stop() == []
    fetched, requests = _fetched(srv, "v2")

    v1 = {u[3] for u in _units(versions["img"]["v1"])}
    v2 = _units(versions["img"]["v2"])
    size = os.path.getsize(versions["img"]["v2"])
    with open(versions["img"]["v2"], "rb") as f:
        sb = f.read(96)
    inode_table = struct.unpack_from("<Q", sb, 64)[0]
    data_units = [u for u in v2 if u[0] < inode_table and u[0] >= 96]
    new = sum(u[1] for u in data_units if u[3] not in v1)
    reused = sum(u[1] for u in data_units if u[3] in v1)
    # metadata (inode table to the end, manifest included) and the
    # superblock are fetched whatever the cache holds
    meta = size - inode_table + 96
    assert reused > new          # the trees share most of their blocks
    assert st2["cas_hits"] > 0
    # and beside the probe the image's last TAIL bytes, the metadata with
    # whatever precedes it, asked for before anything is known
    assert fetched <= 1.3 * (new + meta) + TAIL, (fetched, new, meta,
                                                  requests)
    # what was reused stayed off the network, but for what the open's
    # first read (64 KiB) covers: readahead stops at units the store holds
    ranges = [_range(e["range"]) for e in srv.entries()
              if e["uri"].endswith("/v2.sqfs") and e["range"]]
    refetched = sum(u[1] for u in data_units if u[3] in v1 and
                    any(s <= u[0] and u[0] + u[1] - 1 <= e
                        for s, e in ranges))
    assert refetched <= 65536, (refetched, reused)


def test_damaged_unit_is_fetched_again(versions, mounts, tmp_path):
    srv, cache = versions["srv"], tmp_path / "cache"
    files = versions["files"]["v1"]
    m = mounts(srv.url("v1.sqfs"), _opts(versions, cache), name="fill")
    _read_all(m.mnt, files)
    assert m.stop() == []

    units = [u for u in _units(versions["img"]["v1"]) if u[2] == "data block"]
    flipped, truncated = units[3], units[7]
    with open(_cas_path(cache, flipped[3]), "r+b") as f:
        f.seek(flipped[1] // 2)
        b = f.read(1)
        f.seek(flipped[1] // 2)
        f.write(bytes([b[0] ^ 0x40]))
    os.truncate(_cas_path(cache, truncated[3]), truncated[1] - 1)

    drop_page_cache()
    srv.clear_log()
    # learn=off: the first mount's learned profile would prefetch the
    # damaged copies into block_cache, and the line would name that
    m = mounts(srv.url("v1.sqfs"), _opts(versions, cache) + ["learn=off"],
               name="again")
    _read_all(m.mnt, files)          # every byte as packed
    st = stats(m.mnt)
    log = m.log()
    assert m.stop() == []
    assert st["verify_mismatches"] >= 1 and st["verify_refetches"] >= 1
    assert st["verify_refused"] == 0
    # one line: the offset, where the bad copy came from, where the good
    assert re.search(r"at %d from cache_dir %s/cas did not match the signed "
                     r"manifest; a fresh copy from http://127\.0\.0\.1:\d+/"
                     r"v1\.sqfs did" % (flipped[0], cache), log), log
    # both were fetched again, and stored again whole
    ranges = [e["range"] for e in srv.entries()]
    for off, length, _, digest in (flipped, truncated):
        assert any(_covers(r, off, length) for r in ranges), (off, ranges)
        with open(_cas_path(cache, digest), "rb") as f:
            assert hashlib.sha256(f.read()).digest() == digest


def _range(header):
    m = re.match(r"bytes=(\d+)-(\d+)", header)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def _covers(header, off, length):
    start, end = _range(header)
    return start <= off and off + length - 1 <= end


def test_unsigned_image_keeps_its_own_cache(versions, mounts, tmp_path):
    """Without verification nothing can tell a stored unit is right: the
    image keeps the per-image cache, and the shared store is not used."""
    srv, cache = versions["srv"], tmp_path / "cache"
    m = mounts(srv.url("v1.sqfs"), ["verify=off", "cache_dir=" + str(cache)],
               name="plain")
    _read_all(m.mnt, versions["files"]["v1"])
    st = stats(m.mnt)
    assert m.stop() == []
    assert st["cas_writes"] == 0 and st["disk_cache_writes"] > 0
    assert not os.path.exists(cache / "cas")


def test_signed_mount_fetches_three_ranges(versions, mounts):
    """Mounting a signed image costs what an unsigned mount does plus the
    manifest, in one request with its trailer: the probe's head, the
    image's end (trailer, manifest, metadata region as one window or two
    ranges), and no data block (the first one sits where a stored startup
    profile would, and a signed image without one must not fetch it)."""
    srv = versions["srv"]
    img = versions["img"]["v1"]
    with open(img, "rb") as f:
        sb = f.read(96)
    inode_table = struct.unpack_from("<Q", sb, 64)[0]
    srv.clear_log()
    m = mounts(srv.url("v1.sqfs"), ["verify=" + versions["pub"]],
               name="mount-only")
    os.listdir(m.mnt)
    ranges = [_range(e["range"]) for e in without_openers(srv.entries())
              if e["uri"].endswith("v1.sqfs") and e["ua"].startswith("sqfs")]
    assert m.stop() == []
    assert 2 <= len(ranges) <= 3, ranges
    for start, end in ranges:
        assert end < 65536 or start >= inode_table, (ranges, inode_table)
    tails = [r for r in ranges if r[0] >= inode_table]
    assert any(end == os.path.getsize(img) - 1 for _, end in tails), ranges
