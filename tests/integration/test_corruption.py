"""Corruption found at read time: the mount succeeds, the damaged file or
directory gives EIO promptly, everything else still reads correctly, the
daemon stays alive and logs the offset of the bad block.

Blocks are located with the small SquashFS reader in util.py; each test
flips 32 bytes in the middle of one compressed (gzip) block.
"""

import errno
import os
import random
import re
import time

import pytest

import treebuilder
import util
from timing import SCALE

BS = 131072


@pytest.fixture(scope="module")
def base(workdir):
    util.require_root()
    util.require_mksquashfs()
    d = workdir / "corrupt"
    src = d / "src"
    files = {
        "victim": treebuilder._text(4242, 5 * BS),           # 5 full blocks
        "other_text": treebuilder._text(100, 3 * BS),
        "other_rand": random.Random(1).randbytes(2 * BS + 1000),
        "other_tail": treebuilder._text(101, BS + 5000),
        "small_1": treebuilder._text(102, 3000),
        "small_2": treebuilder._text(103, 7000),
        "okdir/a": b"ok\n",
        "okdir/b": treebuilder._text(104, 20000),
    }
    for rel, data in files.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    r = random.Random(3)
    vd = src / "victimdir"
    vd.mkdir()
    for i in range(1500):
        name = "%04d_" % i + "".join(r.choice("abcdefghijklmnopqrstuvwxyz")
                                     for _ in range(r.randrange(40, 200)))
        (vd / name).write_bytes(b"")
    image = str(d / "base.sqfs")
    util.run(["mksquashfs", str(src), image, "-noappend", "-quiet",
              "-no-progress", "-comp", "gzip", "-b", str(BS)])
    return {"src": str(src), "image": image, "files": files,
            "reader": util.SqfsReader(image)}


def corrupt(base, dest, off, size):
    with open(base["image"], "rb") as f:
        data = bytearray(f.read())
    mid = off + size // 2
    for i in range(mid - 16, mid + 16):
        data[i] ^= 0xFF
    with open(dest, "wb") as f:
        f.write(data)
    return str(dest)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def expect_eio(fn, what):
    t0 = time.monotonic()
    with pytest.raises(OSError) as ei:
        fn()
    took = time.monotonic() - t0
    assert ei.value.errno == errno.EIO, "%s: %s (want EIO)" % (what, ei.value)
    assert took < 10 * SCALE, "%s: EIO took %.1fs" % (what, took)


def block_line(img, kind, off):
    """The daemon's per-read line for a block that does not decompress:
    the image, the kind of block and its offset (image.c/file.c,
    lsq_image_corrupt)."""
    return re.compile(r"^sqfs-lazy-mount: %s: %s block of \d+ bytes at "
                      r"offset 0x%x: decompression failed$"
                      % (re.escape(img), kind, off), re.M)


def wait_log(m, pattern):
    """The daemon's stderr gets a line matching pattern (polled: the
    daemon may log from another thread)."""
    ok = util.wait_until(lambda: pattern.search(m.log()), 5)
    assert ok, "daemon stderr has no line %r:\n%s" % (
        pattern.pattern, m.log()[-3000:])


def check_others(base, root, skip):
    bad = []
    for rel, data in base["files"].items():
        if rel in skip:
            continue
        try:
            if read_file(os.path.join(root, rel)) != data:
                bad.append("%s: wrong bytes" % rel)
        except OSError as e:
            bad.append("%s: %s" % (rel, e))
    assert not bad, "intact files affected by the corruption:\n" + \
        "\n".join(bad)
    assert sorted(os.listdir(os.path.join(root, "okdir"))) == ["a", "b"]


def test_corrupt_data_block(base, mounter, tmp_path):
    rd = base["reader"]
    blocks = rd.file_blocks("victim")
    assert len(blocks) == 5
    off, size, compressed = blocks[2]
    assert compressed, "victim block 2 was stored uncompressed"
    img = corrupt(base, tmp_path / "data.sqfs", off, size)
    m = mounter.fuse(img, name="corrupt-data")
    victim = os.path.join(m.mnt, "victim")
    want = base["files"]["victim"]

    expect_eio(lambda: read_file(victim), "full read of victim")
    fd = os.open(victim, os.O_RDONLY)
    try:
        for blk in (0, 1, 3, 4):
            got = os.pread(fd, 5000, blk * BS + 17)
            assert got == want[blk * BS + 17:blk * BS + 5017], \
                "intact block %d of the damaged file reads wrong" % blk
        for _ in range(2):      # not cached as good data the second time
            expect_eio(lambda: os.pread(fd, 100, 2 * BS + 1000),
                       "pread in the corrupt block")
    finally:
        os.close(fd)
    check_others(base, m.mnt, skip={"victim"})
    assert m.alive(), "daemon died after reading a corrupt block"
    wait_log(m, block_line(util.image_source(img), "data", off))

    # The kernel agrees that this image gives EIO for the file only.
    k = mounter.kernel(img)
    expect_eio(lambda: read_file(os.path.join(k.mnt, "victim")),
               "kernel full read of victim")
    check_others(base, k.mnt, skip={"victim"})


def test_corrupt_fragment_block(base, mounter, tmp_path):
    rd = base["reader"]
    ino = rd.lookup("small_1")
    assert ino["fragment"] != 0xFFFFFFFF, "small_1 has no fragment"
    off, size, compressed = rd.fragment(ino["fragment"])
    assert compressed
    users = [rel for rel in base["files"]
             if rd.lookup(rel).get("fragment") == ino["fragment"]]
    assert "small_1" in users and len(users) >= 2
    img = corrupt(base, tmp_path / "frag.sqfs", off, size)
    m = mounter.fuse(img, name="corrupt-fragment")
    for rel in users:
        expect_eio(lambda: read_file(os.path.join(m.mnt, rel)),
                   "read of %s (tail in the corrupt fragment)" % rel)
    check_others(base, m.mnt, skip=set(users))
    assert m.alive()
    # a fragment block is loaded as a data block (lsq_data_block_load)
    wait_log(m, block_line(util.image_source(img), "data", off))
    k = mounter.kernel(img)
    for rel in users:
        expect_eio(lambda: read_file(os.path.join(k.mnt, rel)),
                   "kernel read of %s" % rel)


def test_corrupt_directory_block(base, mounter, tmp_path):
    """A metadata block in the middle of a large directory listing.

    Note: the kernel does not report this as an error; its readdir stops
    at the bad block and returns a truncated listing (dir.c: failed_read
    returns 0).  We require EIO, which tells the user something is wrong.
    """
    rd = base["reader"]
    dino = rd.lookup("victimdir")
    ents, touched = rd.dir_entries(dino)
    assert len(ents) == 1500 and len(touched) >= 5
    hdr = touched[len(touched) // 2]    # interior: only victimdir uses it
    payload, compressed, _, nxt = rd.metablock(hdr)
    assert compressed
    img = corrupt(base, tmp_path / "dir.sqfs", hdr + 2, nxt - hdr - 2)
    m = mounter.fuse(img, name="corrupt-dir")
    expect_eio(lambda: os.listdir(os.path.join(m.mnt, "victimdir")),
               "listing the directory with a corrupt block")
    expect_eio(lambda: os.listdir(os.path.join(m.mnt, "victimdir")),
               "listing it again")
    assert sorted(os.listdir(m.mnt)) == sorted(
        ["victim", "other_text", "other_rand", "other_tail", "small_1",
         "small_2", "okdir", "victimdir"])
    check_others(base, m.mnt, skip=set())
    assert m.alive()
    wait_log(m, block_line(util.image_source(img), "metadata", hdr))
