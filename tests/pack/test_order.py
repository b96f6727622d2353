"""sqfs-lazy-pack --order: the listed files come first, in list order, as
one region right after the stored profile; the image still equals the
source for the kernel, unsquashfs, rdsquashfs and our reader; the output
is byte-identical for every -j; the stored record holds exactly the
entries placed (docs/prefetch.md, docs/packer-determinism.md)."""

import os
import shutil
import struct
import subprocess
import sys
import zlib

from conftest import cat_tool, need, pack, packer
from test_pack import fnv_free_manifest, sha, snapshot, strip_fnv

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "bench"))
from benchlib import Image  # noqa: E402  (an independent reader)

# in a deliberately non-tree order; with ranges on two entries
LISTED = [
    ("sizes/mixed", "0-131071"),
    ("names/with space and\ttab", None),
    ("dup/small2", None),
    ("sizes/one", None),
    ("hard/h2", None),               # a hardlink: its inode goes first
    ("dup/tail1", "262144-262200"),
    ("deep/" + "/".join("d%d" % i for i in range(40)) + "/leaf", None),
    ("names/ünïcødé-名前-🙂", None),
    ("sizes/two_blocks_4k", None),
]
JUNK = [
    "# a comment",
    "no/such/file",                  # missing
    "dup",                           # a directory
    "links/short",                   # a symlink
    "sizes/one",                     # listed twice
    "a/../b",                        # unparsable
]


def escape(p):
    return (p.replace("\\", "\\\\").replace("\t", "\\t")
            .replace("\n", "\\n"))


def profile(base, lines):
    path = os.path.join(base, "order.prof")
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def listed_profile(base, junk=True):
    lines = [escape(p) + ("\t" + r if r else "") for p, r in LISTED]
    if junk:
        lines[3:3] = JUNK
    return profile(base, lines)


def existing(tree):
    got = [p for p, _ in LISTED if os.path.isfile(os.path.join(tree, p))]
    assert got == [p for p, _ in LISTED], "the edge-case tree changed"
    return got


def record(image):
    """(text or None) of the profile stored after the superblock."""
    with open(image, "rb") as f:
        head = f.read(1 << 20)
    flags = struct.unpack_from("<H", head, 24)[0]
    at = 96
    if flags & 0x400:  # SQUASHFS_COMP_OPT
        at += 2 + (struct.unpack_from("<H", head, 96)[0] & 0x7FFF)
    at = (at + 7) & ~7
    if head[at:at + 8] != b"sqlzPRF1":
        return None
    n, crc = struct.unpack_from("<II", head, at + 8)
    text = head[at + 16:at + 16 + n]
    assert zlib.crc32(text) == crc
    return text.decode("utf-8"), at + 16 + n


def test_order_image_equals_source(tree, base, mount_image):
    existing(tree)
    image = os.path.join(base, "order.sqfs")
    r = subprocess.run([packer(), "-c", "gzip", "--order",
                        listed_profile(base), tree, image, "--force"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1, r.stderr
    assert "4 entries skipped" in warnings[0]
    assert "first: no/such/file" in warnings[0]
    assert "1 unreadable lines" in warnings[0]

    mp = mount_image(image)
    want, want_links = snapshot(tree)
    got, got_links = snapshot(mp)
    assert got == want
    assert got_links == want_links
    for tool in ("unsquashfs", "rdsquashfs"):
        need(shutil.which(tool), tool + " missing")
    out = os.path.join(base, "order-unsq")
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run(["unsquashfs", "-q", "-n", "-d", out, image],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert snapshot(out, want_xattrs=False)[0] == \
        snapshot(tree, want_xattrs=False)[0]
    shutil.rmtree(out)
    r = subprocess.run(["rdsquashfs", "-q", "-u", "/", "-p", out, image],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    shutil.rmtree(out)
    r = subprocess.run([cat_tool(), "--walk", image], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert strip_fnv(r.stdout.decode("utf-8", "surrogateescape")
                     .splitlines()) == fnv_free_manifest(mp)


def test_order_is_deterministic(tree, base):
    prof = listed_profile(base)
    digests = set()
    for args in (["--serial"], ["-j", "1"], ["-j", "2"], ["-j", "3"]):
        image = os.path.join(base, "order-det.sqfs")
        if os.path.exists(image):
            os.unlink(image)
        pack(tree, image, "-c", "zstd", "--order", prof, *args)
        digests.add(sha(image))
    assert len(digests) == 1, digests


def test_listed_files_are_one_region_in_list_order(tree, base):
    """Checked with bench/benchlib.py's reader, not ours."""
    image = os.path.join(base, "order-region.sqfs")
    if os.path.exists(image):
        os.unlink(image)
    pack(tree, image, "-c", "gzip", "-b", "4K", "--order",
         listed_profile(base))
    img = Image(image)
    files = {p.lstrip("/"): ino for p, ino in img.walk("/")}
    names = existing(tree)
    text, record_end = record(image)

    def units(ino):
        u = list(ino["blocks"])
        if ino["fragment"] is not None and ino["size"] % img.block_size:
            u.append(tuple(img.frags[ino["fragment"]]))
        return u

    listed_units = set()
    first_block = []
    for p in names:
        us = units(files[p])
        listed_units.update(us)
        if files[p]["blocks"]:
            first_block.append(files[p]["blocks"][0][0])
    lo = min(o for o, _ in listed_units)
    hi = max(o + n for o, n in listed_units)
    # right after the record, without a hole, nothing else inside
    assert lo == record_end
    assert sum(n for _, n in listed_units) == hi - lo
    # hardlinks and duplicates of listed files share their units; no
    # other file has a unit inside the region
    for p, ino in files.items():
        if p in names:
            continue
        for o, n in units(ino):
            if o < hi and o + n > lo:
                assert (o, n) in listed_units, p
    # data blocks in list order (the files listed with blocks of their own)
    assert first_block == sorted(first_block)
    assert len(first_block) >= 4


def test_record_lists_the_entries_placed(tree, base):
    image = os.path.join(base, "order-rec.sqfs")
    if os.path.exists(image):
        os.unlink(image)
    pack(tree, image, "-c", "xz", "--order", listed_profile(base))
    text, _ = record(image)
    lines = text.splitlines()
    assert lines == [escape(p) + ("\t" + r if r else "") for p, r in LISTED]
    # without --order: no record, the data starts where it always did
    plain = os.path.join(base, "plain-rec.sqfs")
    if os.path.exists(plain):
        os.unlink(plain)
    pack(tree, plain, "-c", "xz")
    assert record(plain) is None


def test_empty_profile_stores_an_empty_record(tree, base, mount_image):
    image = os.path.join(base, "order-empty.sqfs")
    if os.path.exists(image):
        os.unlink(image)
    pack(tree, image, "-c", "lz4", "--order", profile(base, []))
    assert record(image)[0] == ""
    assert snapshot(mount_image(image))[0] == snapshot(tree)[0]


def test_order_refused_for_tar_and_missing_profile(tree, base):
    tar = os.path.join(base, "src.tar")
    subprocess.run(["tar", "-C", tree, "-cf", tar, "sizes"], check=True)
    out = os.path.join(base, "never.sqfs")
    r = pack(tar, out, "--order", listed_profile(base), check=False)
    assert r.returncode != 0
    assert "--order needs a directory SOURCE" in r.stderr
    assert not os.path.exists(out)
    r = pack(tree, out, "--order", os.path.join(base, "absent.prof"),
             check=False)
    assert r.returncode != 0
    assert "absent.prof" in r.stderr
    assert not os.path.exists(out)
