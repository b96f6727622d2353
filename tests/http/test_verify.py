"""Mounts of signed images (-o verify=, docs/manifest.md) over HTTP, from
our fault server: a server that flips bytes in one data block, one
fragment block or one metadata block gets EIO for the reads that need that
unit and nothing else; a good mirror makes them succeed; a mount without a
good manifest is refused with one line."""

import errno
import hashlib
import os
import random
import shutil
import subprocess

import pytest

from conftest import (FaultServer, _randbytes, daemon, mksquashfs, require,
                      try_mount)
from servers import wait_for
from test_cache import drop_page_cache, stats

FAST = ["timeout=2", "connect_timeout=1", "retries=1"]


def _tool(name):
    return os.path.join(os.path.dirname(daemon()), name)


def _env(keys):
    return dict(os.environ, SQFS_LAZY_KEYS_DIR=str(keys))


def _genkey(path):
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out",
                    path], check=True, capture_output=True, timeout=60)
    os.chmod(path, 0o600)
    pub = path[:-4] + ".pub.pem"
    subprocess.run(["openssl", "pkey", "-in", path, "-pubout", "-out", pub],
                   check=True, capture_output=True, timeout=60)
    return pub


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A mksquashfs image with many inodes (several inode and directory
    table blocks), files of whole blocks and fragment tails, signed; its
    units by kind; the tree's bytes; a key pair and a stranger's key."""
    require(shutil.which("openssl") is not None, "openssl missing")
    d = tmp_path_factory.mktemp("signed")
    tree = d / "tree"
    rng = random.Random(19)
    files = {}
    for sub in range(6):
        os.makedirs(tree / ("dir%d" % sub))
        for i in range(120):
            rel = "dir%d/file-with-a-longish-name-%03d" % (sub, i)
            files[rel] = _randbytes(rng, rng.randrange(0, 3000))
    for i in range(4):
        files["big%d.bin" % i] = _randbytes(rng, 200_000 + 5000 * i)
    for rel, data in files.items():
        with open(tree / rel, "wb") as f:
            f.write(data)
    img = str(d / "img.sqfs")
    mksquashfs(str(tree), img, "-b", "65536", "-comp", "gzip")
    pub = _genkey(str(d / "key.pem"))
    other = _genkey(str(d / "other.pem"))
    subprocess.run([_tool("sqfs-lazy-sign"), "--key", str(d / "key.pem"),
                    img], check=True, timeout=120)
    units = {}
    out = subprocess.run([_tool("sqfs-lazy-sign"), "--list", img],
                         check=True, capture_output=True, text=True,
                         timeout=120).stdout
    for line in out.splitlines():
        off, length, kind = line.split(None, 2)
        units.setdefault(kind, []).append((int(off, 16), int(length)))
    with open(img, "rb") as f:
        data = f.read()
    return {"path": img, "data": data, "files": files, "units": units,
            "pub": pub, "other": other, "dir": d}


def _serve(signed, tamper=None):
    s = FaultServer().start()
    s.add("/img.sqfs", signed["data"])
    if tamper is not None:
        # the image's tail beside the probe too: a lying server lies there
        s.set_fault("tamper", at=[tamper], min_offset=0, suffix=True)
    return s


def _read_all(m, files):
    """{rel: errno or None}, every file read whole and compared."""
    result = {}
    for rel, want in files.items():
        try:
            with open(os.path.join(m.mnt, rel), "rb") as f:
                got = f.read()
            assert got == want, "wrong bytes in " + rel
            result[rel] = None
        except OSError as e:
            result[rel] = e.errno
    return result


def _stats(m):
    return stats(m.mnt)


def test_signed_mount_serves_everything(mounts, signed):
    s = _serve(signed)
    try:
        m = mounts(s.url("/img.sqfs"), FAST + ["verify=" + signed["pub"]])
        assert all(v is None for v in _read_all(m, signed["files"]).values())
        st = _stats(m)
        assert st["verify_units"] > 0, st
        assert st["verify_mismatches"] == 0 and st["verify_refused"] == 0, st
        assert "verifying every block" in m.log()
    finally:
        s.stop()


@pytest.mark.parametrize("kind", ["data block", "fragment block",
                                  "inode table block",
                                  "directory table block"])
def test_tampered_unit_fails_alone(mounts, signed, kind):
    units = signed["units"][kind]
    assert len(units) >= 2, (kind, units)
    # mksquashfs writes the root's inode and listing last: the mount
    # must come up, so a table loses its first block
    off, length = units[0] if "table" in kind else units[-1]
    s = _serve(signed, tamper=off + length // 2)
    try:
        m = mounts(s.url("/img.sqfs"), FAST + ["verify=" + signed["pub"]])
        result = _read_all(m, signed["files"])
        failed = {r: e for r, e in result.items() if e is not None}
        assert failed, "no read failed with a tampered " + kind
        assert set(failed.values()) == {errno.EIO}, failed
        assert len(failed) < len(result), "every read failed"
        st = _stats(m)
        assert st["verify_mismatches"] >= 2 and st["verify_refused"] >= 1, st
        assert "does not match the signed manifest" in m.log()
        # the bad copy was kept nowhere as checked: it fails again
        drop_page_cache()
        again = _read_all(m, {r: signed["files"][r] for r in failed})
        assert set(again.values()) == {errno.EIO}, again
        assert m.alive()
    finally:
        s.stop()


def test_checked_copies_are_not_hashed_again(mounts, signed):
    """The caching layer hashes a unit once, as it loads it; reads served
    later from that RAM copy are not hashed again (verify_reused). Whole
    blocks are decompressed straight into the reply, past the data cache,
    so a second pass over the big files needs every unit again."""
    big = {r: d for r, d in signed["files"].items() if r.startswith("big")}
    blocks = sum(len(d) // 65536 for d in big.values())
    s = _serve(signed)
    try:
        m = mounts(s.url("/img.sqfs"), FAST + ["verify=" + signed["pub"]])
        assert all(v is None for v in _read_all(m, big).values())
        first = _stats(m)
        drop_page_cache()
        assert all(v is None for v in _read_all(m, big).values())
        second = _stats(m)
        reused = second["verify_reused"] - first["verify_reused"]
        units = second["verify_units"] - first["verify_units"]
        assert reused >= blocks and reused == units, (blocks, first, second)
        assert second["verify_mismatches"] == 0, second
    finally:
        s.stop()


def test_tampered_unit_is_never_stored(mounts, signed, tmp_path):
    """With cache_dir, a unit whose bytes fail their digest does not enter
    the content-addressed store (docs/caching.md); the good ones do."""
    units = signed["units"]["data block"]
    bad_off, bad_len = units[-1]
    s = _serve(signed, tamper=bad_off + bad_len // 2)
    cache = tmp_path / "cache"
    try:
        m = mounts(s.url("/img.sqfs"), FAST + ["verify=" + signed["pub"],
                                                 "cache_dir=" + str(cache)])
        result = _read_all(m, signed["files"])
        assert errno.EIO in result.values(), result
        assert m.stop() == []
    finally:
        s.stop()

    def stored(off, length):
        h = hashlib.sha256(signed["data"][off:off + length]).hexdigest()
        return os.path.exists(os.path.join(cache, "cas", h[:2], h[2:]))

    assert not stored(bad_off, bad_len)
    assert all(stored(off, length) for off, length in units[:-1])


def test_good_mirror_saves_the_read(mounts, signed):
    off, length = signed["units"]["data block"][-1]
    bad = _serve(signed, tamper=off + 1)
    good = _serve(signed)
    try:
        m = mounts(bad.url("/img.sqfs"),
                   FAST + ["verify=" + signed["pub"],
                           "mirror=" + good.url("/img.sqfs")])
        assert all(v is None for v in _read_all(m, signed["files"]).values())
        st = _stats(m)
        assert st["verify_mismatches"] >= 1, st
        assert st["verify_refetches"] >= 1 and st["verify_refused"] == 0, st
        # one line names the unit, the copy that was bad, the one that
        # was good
        line = "unit of %d bytes at %d from %s did not match the signed " \
            "manifest; a fresh copy from %s did" % (
                length, off, bad.url("/img.sqfs"), good.url("/img.sqfs"))
        assert line in m.log(), m.log()
    finally:
        bad.stop()
        good.stop()


def _refused(url, mnt, log, opts, why):
    rc, err, _ = try_mount(url, mnt, log, FAST + opts)
    assert rc == 1, (rc, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and why in lines[0], err


def test_refusals(tmp_path, signed, small_image):
    s = _serve(signed)
    s.add("/unsigned.sqfs", small_image["data"])
    truncated = signed["data"][:-200]
    s.add("/truncated.sqfs", truncated)
    try:
        mnt, log = str(tmp_path / "m"), str(tmp_path / "log")
        os.makedirs(mnt)
        _refused(s.url("/img.sqfs"), mnt, log, ["verify=" + signed["other"]],
                 "signed by another key")
        _refused(s.url("/unsigned.sqfs"), mnt, log,
                 ["verify=" + signed["pub"]], "no manifest")
        _refused(s.url("/truncated.sqfs"), mnt, log,
                 ["verify=" + signed["pub"]], "manifest")
    finally:
        s.stop()


def test_auto_uses_the_key_directory(tmp_path, mounts, signed, small_image):
    keys = tmp_path / "keys"
    os.makedirs(keys)
    s = _serve(signed)
    s.add("/unsigned.sqfs", small_image["data"])
    try:
        # no keys: nothing checked, the tail is not even fetched
        m = mounts(s.url("/img.sqfs"), FAST,
                   env=_env(keys))
        assert _stats(m)["verify_units"] == 0
        shutil.copy(signed["other"], keys / "a-stranger.pem")
        mnt, log = str(tmp_path / "m2"), str(tmp_path / "log2")
        os.makedirs(mnt)
        rc, err, _ = try_mount(s.url("/img.sqfs"), mnt, log, FAST,
                               env=_env(keys))
        assert rc == 1 and "signed by another key" in err, err
        shutil.copy(signed["pub"], keys / "ours.pem")
        m = mounts(s.url("/img.sqfs"), FAST,
                   env=_env(keys))
        wait_for(lambda: os.path.exists(os.path.join(m.mnt, "big0.bin")), 10,
                 "the signed mount")
        assert _read_all(m, {"big0.bin": signed["files"]["big0.bin"]}) == \
            {"big0.bin": None}
        assert _stats(m)["verify_units"] > 0
        # an unsigned image mounts as before under auto
        m = mounts(s.url("/unsigned.sqfs"), FAST,
                   env=_env(keys))
        assert os.path.exists(os.path.join(m.mnt, "d", "small.txt"))
    finally:
        s.stop()
