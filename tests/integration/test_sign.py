"""sqfs-lazy-sign: the signed block manifest (docs/manifest.md).

Images of one small edge-case tree (fragments, a sparse file, hard links,
deduplicated files, xattrs, a large directory) from all three packers:
mksquashfs, gensquashfs (squashfs-tools-ng) and sqfs-lazy-pack, with and
without export table and xattrs, padded and not, with a stored startup
profile. For each:

- the signed image reads exactly as before through unsquashfs (-lls and
  extraction), rdsquashfs and the kernel (loop mounts compared);
- --verify passes with the right key, and refuses with one line and exit
  status 1: another key, a flipped byte in a data block, a fragment block
  and a metadata block (naming its offset), a truncated manifest, altered
  digests, no manifest, the manifest of another image;
- signing twice gives the same bytes; --detached leaves the image as it
  was and its manifest verifies;
- the units tile [0, bytes_used) but for the documented gap before a
  stored profile, and every block the independent Python reader of
  util.py finds is one of them.

Nothing here mounts through FUSE, so both integration modes run the same
checks.
"""

import hashlib
import os
import random
import re
import shutil
import stat
import struct
import subprocess

import pytest

import util

END_MAGIC = b"sqlzEND1"
TRAILER = 160

# name -> (tool, args)
IMAGES = {
    "mk-gzip": ("mksquashfs", ["-comp", "gzip"]),
    "mk-4k-noexport-noxattr": ("mksquashfs", ["-comp", "gzip", "-b", "4096",
                                              "-no-exports", "-no-xattrs"]),
    "mk-zstd19-nopad": ("mksquashfs", ["-comp", "zstd", "-Xcompression-level",
                                       "19", "-nopad"]),
    "ng-xz": ("gensquashfs", ["-c", "xz"]),
    "ng-gzip-noexport": ("gensquashfs", ["-c", "gzip"]),
    "pack-gzip": ("sqfs-lazy-pack", []),
    # compressor options (the BCJ filter) put the profile record at 112,
    # after a 6-byte alignment gap
    "pack-xzbcj-order-noexport": ("sqfs-lazy-pack", [
        "-c", "xz", "--xz-bcj", "x86", "--no-exports", "--order", "PROFILE"]),
}


# --------------------------------------------------------------------------
# Binaries, tree, keys, images
# --------------------------------------------------------------------------

def signer():
    b = util.build_dir()
    util.require(b is not None, "LSQ_BUILD_DIR is not set")
    p = os.path.join(b, "sqfs-lazy-sign")
    util.require(os.access(p, os.X_OK), "sqfs-lazy-sign not built: %s" % p)
    return p


def packer():
    p = os.path.join(util.build_dir() or "", "src", "pack", "sqfs-lazy-pack")
    util.require(os.access(p, os.X_OK), "sqfs-lazy-pack not built: %s" % p)
    return p


def sign(*args):
    return subprocess.run([signer(), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def refused(r, path, *wants):
    """r is a refusal: exit 1, nothing on stdout, exactly one line on
    stderr naming path, containing every string of wants."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("sqfs-lazy-sign: %s: " % path), lines[0]
    for w in wants:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def build_tree(root):
    rnd = random.Random(19)
    os.makedirs(root)

    def put(rel, data):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        return p

    big = bytes(rnd.getrandbits(8) for _ in range(600 * 1024 + 77))
    put("big", big)
    put("copies/big_dup", big)                  # whole-file dedup
    os.link(os.path.join(root, "big"), os.path.join(root, "big_link"))
    text = b"".join(b"line %06d of the text\n" % i for i in range(20000))
    put("text.txt", text)                       # compressible blocks
    for i in range(40):                         # fragments
        put("small/f%02d" % i, b"small file %d\n" % i * (i + 1))
    put("small/dup_of_f03", b"small file 3\n" * 4)
    put("empty", b"")
    p = put("sparse", b"")                      # holes: sparse blocks
    with open(p, "r+b") as f:
        f.seek(1 << 20)
        f.write(b"in the middle")
        f.seek((3 << 20) - 5)
        f.write(b"tail!")
    for i in range(300):                        # a listing over 8 KiB
        put("many/entry_with_a_longish_name_%04d" % i, b"%d\n" % i)
    os.symlink("big", os.path.join(root, "link_to_big"))
    os.mkfifo(os.path.join(root, "fifo"))
    for rel, name, value in (("big", "user.origin", b"random"),
                             ("small/f01", "user.empty", b""),
                             ("many", "user.dir", b"x" * 300),
                             ("text.txt", "trusted.t", b"1")):
        os.setxattr(os.path.join(root, rel), name, value)
    return root


@pytest.fixture(scope="module")
def base(workdir):
    util.require_root()  # trusted.* xattrs, fifos, owners
    d = workdir / "sign"
    d.mkdir(exist_ok=True)
    return d


@pytest.fixture(scope="module")
def tree(base):
    root = str(base / "tree")
    if not os.path.exists(root):
        build_tree(root)
    return root


def genkey(path):
    util.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out",
              str(path)])
    os.chmod(path, 0o600)
    util.run(["openssl", "pkey", "-in", str(path), "-pubout", "-out",
              str(path) + ".pub"])
    der = util.run(["openssl", "pkey", "-in", str(path), "-pubout",
                    "-outform", "DER"]).stdout
    # the key id: SHA-256 of the raw 32-byte key, the DER's last 32 bytes
    return hashlib.sha256(der[-32:]).hexdigest()[:16]


@pytest.fixture(scope="module")
def keys(base):
    util.require(util.have_tool("openssl"), "openssl not installed")
    out = {}
    for name in ("a", "b"):
        path = base / ("%s.pem" % name)
        key_id = genkey(path)
        out[name] = {"priv": str(path), "pub": str(path) + ".pub",
                     "id": key_id}
    return out


_built = {}


def image(base, tree, name):
    """The unsigned image `name` (built once per module)."""
    if name in _built:
        return _built[name]
    tool, args = IMAGES[name]
    out = str(base / (name + ".sqfs"))
    if tool == "mksquashfs":
        util.require_mksquashfs()
        cmd = ["mksquashfs", tree, out, "-noappend", "-quiet", "-no-progress",
               "-processors", "2", "-mkfs-time", "1700000000"] + args
    elif tool == "gensquashfs":
        util.require(util.have_tool("gensquashfs"),
                     "gensquashfs (squashfs-tools-ng) not installed")
        cmd = ["gensquashfs", "--pack-dir", tree, "-q", "-f", "-j", "2",
               "-k", "-x"] + args + [out]
        if "noexport" not in name:
            cmd.insert(-1, "-e")  # --exportable
    else:
        profile = str(base / "profile.txt")
        with open(profile, "w") as f:
            f.write("small/f07\ntext.txt\nbig\n")
        cmd = [packer(), "-q", "--force"] + \
            [profile if a == "PROFILE" else a for a in args] + [tree, out]
    util.run(cmd, timeout=300)
    _built[name] = out
    return out


def superblock(path):
    with open(path, "rb") as f:
        sb = f.read(96)
    return {"bytes_used": struct.unpack_from("<Q", sb, 40)[0],
            "compression": struct.unpack_from("<H", sb, 20)[0]}


def units_of(path):
    r = sign("--list", path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    out = []
    for line in r.stdout.splitlines():
        off, length, kind = line.split(" ", 2)
        out.append((int(off, 16), int(length), kind))
    return out


def signed_copy(base, src, key, tag):
    dst = str(base / ("%s.%s.signed" % (os.path.basename(src), tag)))
    shutil.copyfile(src, dst)
    r = sign("--key", key, dst)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == "", (r.stdout, r.stderr)
    return dst


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


@pytest.fixture(scope="module", params=sorted(IMAGES))
def img(request, base, tree, keys):
    name = request.param
    plain = image(base, tree, name)
    signed = signed_copy(base, plain, keys["a"]["priv"], "a")
    return {"name": name, "plain": plain, "signed": signed,
            "units": units_of(plain), "sb": superblock(plain)}


# --------------------------------------------------------------------------
# The signed file
# --------------------------------------------------------------------------

def test_layout_and_verify(img, keys, base):
    plain, signed = read(img["plain"]), read(img["signed"])
    used = img["sb"]["bytes_used"]
    body_at = (used + 4095) // 4096 * 4096
    # the filesystem is untouched, the padding is zeros, the manifest
    # follows, its trailer ends the file
    assert signed[:used] == plain[:used]
    assert signed[used:body_at] == bytes(body_at - used)
    assert signed[body_at:body_at + 8] == b"sqlzMAN1"
    assert signed[-8:] == END_MAGIC
    assert signed[-TRAILER:-TRAILER + 8] == b"sqlzSIG1"
    count = struct.unpack_from("<I", signed, body_at + 12)[0]
    assert count == len(img["units"])
    assert len(signed) == body_at + 48 + 44 * count + TRAILER
    # each entry is (offset, length, SHA-256 of those bytes)
    for i, (off, length, _kind) in enumerate(img["units"]):
        e = body_at + 48 + 44 * i
        assert struct.unpack_from("<QI", signed, e) == (off, length)
        assert signed[e + 12:e + 44] == \
            hashlib.sha256(plain[off:off + length]).digest()
    # the list is the same read from the signed image
    assert units_of(img["signed"]) == img["units"]

    r = sign("--verify", keys["a"]["pub"], img["signed"])
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "good signature by key id %s" % keys["a"]["id"] in r.stdout
    assert "%d units" % count in r.stdout
    # a private key file serves as a public key; several keys may be given
    r = sign("--verify", keys["b"]["pub"], "--verify", keys["a"]["priv"],
             img["signed"])
    assert r.returncode == 0, r.stderr


def test_signing_twice_is_identical(img, keys, base):
    again = str(base / ("%s.twice" % img["name"]))
    shutil.copyfile(img["signed"], again)
    r = sign("--key", keys["a"]["priv"], again)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert read(again) == read(img["signed"])
    # a second signature by another key replaces the first
    r = sign("--key", keys["b"]["priv"], again)
    assert r.returncode == 0, r.stderr
    assert os.path.getsize(again) == os.path.getsize(img["signed"])
    assert sign("--verify", keys["b"]["pub"], again).returncode == 0
    refused(sign("--verify", keys["a"]["pub"], again), again,
            "signed by another key (key id %s)" % keys["b"]["id"])
    os.unlink(again)


def test_detached(img, keys, base):
    out = str(base / ("%s.manifest" % img["name"]))
    before = hashlib.sha256(read(img["plain"])).digest()
    mtime = os.stat(img["plain"]).st_mtime_ns
    r = sign("--key", keys["a"]["priv"], "--detached", out, img["plain"])
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    assert hashlib.sha256(read(img["plain"])).digest() == before
    assert os.stat(img["plain"]).st_mtime_ns == mtime
    man = read(out)
    assert man[:8] == b"sqlzMAN1" and man[-8:] == END_MAGIC
    # the same body as the embedded one but for its image size field and
    # placement (body offset 0)
    assert struct.unpack_from("<Q", man, len(man) - TRAILER + 8)[0] == 0
    assert struct.unpack_from("<Q", man, 24)[0] == \
        os.path.getsize(img["plain"])
    r = sign("--verify", keys["a"]["pub"], "--detached", out, img["plain"])
    assert r.returncode == 0, r.stderr
    refused(sign("--verify", keys["b"]["pub"], "--detached", out,
                 img["plain"]), img["plain"], "signed by another key")
    # an embedded manifest is not a detached one, nor the reverse
    refused(sign("--verify", keys["a"]["pub"], "--detached", img["signed"],
                 img["plain"]), img["plain"], "detached manifest with the body offset")
    refused(sign("--verify", keys["a"]["pub"], write(
        str(base / "detached-appended"), read(img["plain"]) + man)),
        str(base / "detached-appended"), "embedded manifest with the body offset 0")


# --------------------------------------------------------------------------
# Other readers see the same image
# --------------------------------------------------------------------------

def snapshot(root, with_ino):
    """path -> attributes and content hash, for comparing trees."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in [None] + sorted(dirnames) + sorted(filenames):
            p = dirpath if n is None else os.path.join(dirpath, n)
            if n is None and dirpath != root:
                continue
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            rec = [st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns,
                   st.st_nlink]
            if with_ino:
                rec.append(st.st_ino)
            if stat.S_ISREG(st.st_mode):
                rec += [st.st_size, hashlib.sha256(read(p)).hexdigest()]
            elif stat.S_ISLNK(st.st_mode):
                rec.append(os.readlink(p))
            try:
                names = sorted(os.listxattr(p, follow_symlinks=False))
                rec.append([(x, os.getxattr(p, x, follow_symlinks=False))
                            for x in names])
            except OSError as e:
                rec.append(e.errno)
            out[rel] = rec
    return out


def test_unsquashfs_and_rdsquashfs(img, base, tree):
    util.require(util.have_tool("unsquashfs"), "unsquashfs not installed")
    util.require(util.have_tool("rdsquashfs"), "rdsquashfs not installed")
    lls = [util.run(["unsquashfs", "-lls", p]).stdout
           for p in (img["plain"], img["signed"])]
    assert lls[0] == lls[1]
    assert b"squashfs-root/big_link" in lls[0]
    desc = [util.run(["rdsquashfs", "-d", p]).stdout
            for p in (img["plain"], img["signed"])]
    assert desc[0] == desc[1] and b"sparse" in desc[0]
    snaps = []
    for tag, p in (("plain", img["plain"]), ("signed", img["signed"])):
        d = str(base / ("x-%s-%s" % (img["name"], tag)))
        shutil.rmtree(d, ignore_errors=True)
        util.run(["unsquashfs", "-n", "-q", "-d", d, p], timeout=300)
        snaps.append(snapshot(d, with_ino=False))
        shutil.rmtree(d)
    assert snaps[0] == snaps[1]
    assert snaps[1]["big"][-2] == \
        hashlib.sha256(read(os.path.join(tree, "big"))).hexdigest()
    # rdsquashfs reads file contents of the signed image as well
    out = util.run(["rdsquashfs", "-c", "/sparse", img["signed"]]).stdout
    assert out == read(os.path.join(tree, "sparse"))


def test_kernel_mount(img, base, mounter):
    oracle = img["plain"]
    if img["name"].endswith("nopad"):
        # the loop device drops a partial last sector; the oracle is a
        # zero-padded copy (the signed image is padded by signing)
        oracle = str(base / (img["name"] + ".padded"))
        data = read(img["plain"])
        write(oracle, data + bytes(-len(data) % 4096))
    k_plain = mounter.kernel(oracle)
    k_signed = mounter.kernel(img["signed"])
    a = snapshot(k_plain.mnt, with_ino=True)
    b = snapshot(k_signed.mnt, with_ino=True)
    assert a == b
    assert len(a) > 300


def test_verified_mount(img, base, keys, mounter):
    """Our mount with -o verify= reads the signed image exactly as the
    kernel reads the unsigned one, and every unit it fetched was checked
    (none of them refused)."""
    oracle = img["plain"]
    if img["name"].endswith("nopad"):
        oracle = str(base / (img["name"] + ".padded"))
        data = read(img["plain"])
        write(oracle, data + bytes(-len(data) % 4096))
    k = mounter.kernel(oracle)
    ours = mounter.fuse(img["signed"],
                        opts=["verify=" + keys["a"]["pub"]])
    assert snapshot(ours.mnt, with_ino=True) == \
        snapshot(k.mnt, with_ino=True)
    log = ours.log() if hasattr(ours, "log") else ""
    assert "does not match" not in log and "not a unit" not in log, log
    # the stored startup profile is a checked unit where there is one;
    # where there is none, the unit at its place (the first data block)
    # is not taken for one (test_cas.py checks it is not even fetched)
    st = subprocess.run([util.daemon_path(), "--stats", ours.mnt],
                        capture_output=True, text=True, timeout=30)
    assert st.returncode == 0, st.stderr
    files = int(re.search(r"^prefetch_files (\d+)$", st.stdout,
                          re.M).group(1))
    assert (files > 0) == ("order" in img["name"]), (img["name"], files)


# --------------------------------------------------------------------------
# The units: what a reader fetches
# --------------------------------------------------------------------------

def test_units_tile_the_filesystem(img):
    units = img["units"]
    used = img["sb"]["bytes_used"]
    plain = read(img["plain"])
    assert units[0] == (0, 96, "superblock")
    pos = 0
    gaps = []
    for off, length, kind in units:
        assert length > 0
        assert off >= pos, "overlap at 0x%x" % off
        if off > pos:
            gaps.append((pos, off, kind))
        pos = off + length
    assert pos <= used
    if pos < used:
        gaps.append((pos, used, "end"))
    # The only gap: the alignment before a stored startup profile, up to 7
    # zero bytes (docs/manifest.md).
    for start, end, kind in gaps:
        assert kind == "startup profile" and end - start < 8 and \
            plain[start:end] == bytes(end - start), (hex(start), hex(end),
                                                     kind)
    kinds = {k for _, _, k in units}
    assert {"superblock", "inode table block", "directory table block",
            "data block", "fragment block", "fragment table block",
            "fragment table index", "id table block",
            "id table index"} <= kinds
    name = img["name"]
    assert ("export table index" in kinds) == ("noexport" not in name)
    assert ("xattr table block" in kinds) == ("noxattr" not in name)
    assert ("xattr id table header" in kinds) == ("noxattr" not in name)
    assert ("startup profile" in kinds) == ("order" in name)
    opts = [off for off, _, k in units if k == "compressor options"]
    assert opts == ([96] if "bcj" in name or "zstd19" in name else [])
    if "order" in name:
        assert len(gaps) == 1 and gaps[0][1] == 112
    # the large directory spans more than one metadata block
    assert sum(k == "directory table block" for _, _, k in units) >= 2


# util.SqfsReader decompresses gzip and xz only
@pytest.mark.parametrize("name", [n for n in sorted(IMAGES)
                                  if "zstd" not in n])
def test_units_cover_every_block(name, base, tree):
    """Every data block, fragment and directory block that an independent
    reader (util.SqfsReader) finds is a unit."""
    plain = image(base, tree, name)
    assert superblock(plain)["compression"] in (util.COMP_GZIP, util.COMP_XZ)
    units = {(off, length) for off, length, _ in units_of(plain)}
    starts = {off for off, _ in units}
    r = util.SqfsReader(plain)
    checked = 0
    for dirpath, dirnames, filenames in os.walk(tree):
        rel_dir = os.path.relpath(dirpath, tree)
        rel_dir = "" if rel_dir == "." else rel_dir
        dino = r.lookup(rel_dir)
        _, touched = r.dir_entries(dino)
        assert set(touched) <= starts, rel_dir
        for n in filenames:
            rel = os.path.join(rel_dir, n)
            if not stat.S_ISREG(os.lstat(os.path.join(tree, rel)).st_mode):
                continue
            for off, size, _ in r.file_blocks(rel):
                assert (off, size) in units, (rel, hex(off), size)
                checked += 1
            ino = r.lookup(rel)
            if ino.get("fragment", 0xFFFFFFFF) != 0xFFFFFFFF:
                off, size, _ = r.fragment(ino["fragment"])
                assert (off, size) in units, (rel, "fragment", hex(off))
    assert checked >= 10


# --------------------------------------------------------------------------
# Refusals: one line, exit 1, a reason of its own
# --------------------------------------------------------------------------

def flipped(base, img, offset, tag):
    data = bytearray(read(img["signed"]))
    data[offset] ^= 0x40
    return write(str(base / ("%s.%s" % (img["name"], tag))), bytes(data))


def test_refusals(img, keys, base):
    pub, signed = keys["a"]["pub"], img["signed"]
    refused(sign("--verify", keys["b"]["pub"], signed), signed,
            "signed by another key (key id %s)" % keys["a"]["id"])
    refused(sign("--verify", pub, img["plain"]), img["plain"],
            "no manifest")

    first = {}
    for off, length, kind in img["units"]:
        first.setdefault(kind, (off, length))
    for kind in ("data block", "fragment block", "inode table block",
                 "directory table block"):
        off, length = first[kind]
        bad = flipped(base, img, off + length // 2, kind.replace(" ", "_"))
        line = refused(sign("--verify", pub, bad), bad,
                       " at 0x%x (%d bytes) does not match the manifest"
                       % (off, length))
        # a damaged metadata block may keep the reader from listing the
        # image, and then from naming the kind
        named = line.split(": ", 2)[2]
        assert named.startswith(kind) or (named.startswith("unit ") and
                                          "table" in kind), line
        os.unlink(bad)

    data = read(signed)
    used = img["sb"]["bytes_used"]
    body_at = (used + 4095) // 4096 * 4096
    # one entry cut out of the body: the trailer no longer fits
    cut = write(str(base / "cut"), data[:body_at + 48 + 44] +
                data[body_at + 48 + 88:])
    refused(sign("--verify", pub, cut), cut, "truncated manifest")
    # the end cut off: no trailer at all
    short = write(str(base / "short"), data[:-1])
    refused(sign("--verify", pub, short), short, "no manifest")
    # a digest changed after signing
    alt = bytearray(data)
    alt[body_at + 48 + 44 + 20] ^= 1
    alt = write(str(base / "altered"), bytes(alt))
    refused(sign("--verify", pub, alt), alt, "manifest altered")
    # the signature itself damaged
    sig = bytearray(data)
    sig[-TRAILER + 100] ^= 1
    sig = write(str(base / "badsig"), bytes(sig))
    refused(sign("--verify", pub, sig), sig, "bad signature (key id %s)"
            % keys["a"]["id"])
    for p in (cut, short, alt, sig):
        os.unlink(p)


def test_manifest_of_another_image(img, keys, base, tree):
    """An image with this image's manifest: appended after its own
    filesystem, and given as a detached file."""
    other_tree = str(base / "other-tree")
    if not os.path.exists(other_tree):
        os.makedirs(other_tree)
        write(os.path.join(other_tree, "only"), b"another image\n")
    other = str(base / "other.sqfs")
    if not os.path.exists(other):
        util.run(["mksquashfs", other_tree, other, "-noappend", "-quiet",
                  "-no-progress", "-comp", "gzip"])
    data, odata = read(img["signed"]), read(other)
    used = img["sb"]["bytes_used"]
    body_at = (used + 4095) // 4096 * 4096
    o_used = superblock(other)["bytes_used"]
    assert o_used <= body_at
    mixed = write(str(base / "mixed"), odata[:o_used] +
                  bytes(body_at - o_used) + data[body_at:])
    refused(sign("--verify", keys["a"]["pub"], mixed), mixed,
            "manifest of another image")
    man = str(base / ("%s.det" % img["name"]))
    r = sign("--key", keys["a"]["priv"], "--detached", man, img["plain"])
    assert r.returncode == 0, r.stderr
    refused(sign("--verify", keys["a"]["pub"], "--detached", man, other),
            other, "manifest of another image")
    os.unlink(mixed)
    os.unlink(man)


# --------------------------------------------------------------------------
# The signer's own refusals and interface
# --------------------------------------------------------------------------

def test_sign_refusals(base, tree, keys):
    plain = image(base, tree, "mk-gzip")
    copy = str(base / "refuse.sqfs")
    shutil.copyfile(plain, copy)
    before = read(copy)
    # a private key that others may read
    loose = str(base / "loose.pem")
    shutil.copyfile(keys["a"]["priv"], loose)
    os.chmod(loose, 0o644)
    r = sign("--key", loose, copy)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "readable by group or others (mode 0644); chmod 600 it" in r.stderr
    # data after the padded filesystem that is not a manifest
    with open(copy, "ab") as f:
        f.write(b"someone's data")
    refused(sign("--key", keys["a"]["priv"], copy), copy,
            "neither zeros nor a manifest")
    assert read(copy) == before + b"someone's data"
    # not an image
    junk = write(str(base / "junk"), b"x" * 4096)
    refused(sign("--list", junk), junk, "not a SquashFS image")
    refused(sign("--key", keys["a"]["priv"], junk), junk,
            "not a SquashFS image")
    assert read(junk) == b"x" * 4096
    # extra zeros after the padding are padding: dropped on signing
    shutil.copyfile(plain, copy)
    with open(copy, "ab") as f:
        f.write(bytes(8192))
    r = sign("--key", keys["a"]["priv"], copy)
    assert r.returncode == 0, r.stderr
    assert read(copy) == read(signed_copy(base, plain, keys["a"]["priv"],
                                          "again"))
    # usage errors: exit 2
    assert sign(copy).returncode == 2
    assert sign("--key", keys["a"]["priv"], "--list", copy).returncode == 2
    for p in (copy, loose, junk):
        os.unlink(p)


def test_verbose_output(base, tree, keys):
    plain = image(base, tree, "pack-gzip")
    copy = str(base / "verbose.sqfs")
    shutil.copyfile(plain, copy)
    r = sign("-v", "--key", keys["a"]["priv"], copy)
    assert r.returncode == 0, r.stderr
    assert re.search(r"signed \d+ units with key id %s" % keys["a"]["id"],
                     r.stdout)
    os.unlink(copy)


def test_help_matches_man_page():
    here = os.path.dirname(os.path.abspath(__file__))
    man = read(os.path.join(here, "..", "..", "docs", "man",
                            "sqfs-lazy-sign.1.scd")).decode()
    out = sign("--help").stdout
    opts = lambda t: set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", t))  # noqa: E731,E501
    assert opts(out) - {"--help", "--version"} <= opts(man)
    assert opts(man) <= opts(out) | {"--help", "--version"}
    assert {"--key", "--verify", "--detached", "--list",
            "--verbose"} <= opts(man)


# --------------------------------------------------------------------------
# sqfs-lazy-pack --sign: the same manifest while packing
# --------------------------------------------------------------------------

def pack_run(*args):
    return subprocess.run([packer(), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def leftovers(d):
    """Temporary files the packer or signer may have left in d."""
    return sorted(n for n in os.listdir(d) if n.startswith(".") or
                  ".tmp." in n)


@pytest.mark.parametrize("jobs", [["-j", "1"], ["-j", "2"], ["--serial"]],
                         ids=["j1", "j2", "serial"])
def test_pack_sign_is_pack_then_sign(jobs, base, tree, keys):
    """pack --sign KEY gives the bytes of pack, then sqfs-lazy-sign --key
    KEY, for every -j; both verify."""
    d = base / ("packsign-%s" % jobs[-1].lstrip("-"))
    d.mkdir(exist_ok=True)
    both = str(d / "both.sqfs")
    r = pack_run("-q", *jobs, "--sign", keys["a"]["priv"], tree, both)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    apart = str(d / "apart.sqfs")
    r = pack_run("-q", *jobs, tree, apart)
    assert r.returncode == 0, r.stderr
    r = sign("--key", keys["a"]["priv"], apart)
    assert r.returncode == 0, r.stderr
    assert read(both) == read(apart)
    assert read(both)[-8:] == END_MAGIC
    r = sign("--verify", keys["a"]["pub"], both)
    assert r.returncode == 0, r.stderr
    # with --reuse-layout too: the manifest covers what the layout wrote
    r = pack_run("-q", *jobs, "--reuse-layout", "--sign", keys["b"]["priv"],
                 tree, str(d / "reuse.sqfs"))
    assert r.returncode == 0, r.stderr
    assert sign("--verify", keys["b"]["pub"],
                str(d / "reuse.sqfs")).returncode == 0
    assert leftovers(str(d)) == []
    shutil.rmtree(str(d))


def test_pack_sign_summary_line(base, tree, keys):
    out = str(base / "packsign-summary.sqfs")
    r = pack_run("--sign", keys["a"]["priv"], tree, out)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert re.search(r": signed \d+ units, manifest of \d+ bytes, file %d "
                     r"bytes$" % os.path.getsize(out), lines[-1]), lines
    os.unlink(out)


def contents(root):
    """rel path -> kind and content (regular files: SHA-256, symlinks:
    target), mode: what a reader must give back of the source."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            rec = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode)]
            if stat.S_ISREG(st.st_mode):
                rec.append(hashlib.sha256(read(p)).hexdigest())
            elif stat.S_ISLNK(st.st_mode):
                rec.append(os.readlink(p))
            out[os.path.relpath(p, root)] = rec
    return out


def test_pack_signed_image_reads_as_the_source(base, tree, keys, mounter):
    """The kernel (loop mount) and unsquashfs read a pack --sign image as
    the source tree."""
    util.require(util.have_tool("unsquashfs"), "unsquashfs not installed")
    img = str(base / "packsign-read.sqfs")
    r = pack_run("-q", "-j", "2", "--sign", keys["a"]["priv"], tree, img)
    assert r.returncode == 0, r.stderr
    want = contents(tree)
    assert len(want) > 300
    k = mounter.kernel(img)
    assert contents(k.mnt) == want
    assert snapshot(k.mnt, with_ino=False)["big"][-2] == \
        hashlib.sha256(read(os.path.join(tree, "big"))).hexdigest()
    x = str(base / "packsign-x")
    shutil.rmtree(x, ignore_errors=True)
    util.run(["unsquashfs", "-n", "-q", "-d", x, img], timeout=300)
    assert contents(x) == want
    shutil.rmtree(x)


def test_pack_sign_bad_key(base, tree, keys):
    """A key that cannot sign: one line naming it, exit 1, nothing packed,
    no OUTPUT and no temporary file; an existing OUTPUT is left as it
    was."""
    d = base / "packsign-bad"
    d.mkdir(exist_ok=True)
    junk = write(str(d / "junk.pem"), b"not a key\n")
    os.chmod(junk, 0o600)
    loose = str(d / "loose.pem")
    shutil.copyfile(keys["a"]["priv"], loose)
    os.chmod(loose, 0o644)
    cases = {
        "missing": (str(d / "missing.pem"), "No such file"),
        "junk": (junk, "junk.pem"),
        "public": (keys["a"]["pub"], "a.pem.pub"),
        "loose": (loose, "readable by group or others"),
    }
    out = str(d / "out.sqfs")
    for name, (key, want) in cases.items():
        r = pack_run("-q", "--sign", key, tree, out)
        assert r.returncode == 1, (name, r.returncode, r.stderr)
        lines = r.stderr.splitlines()
        assert len(lines) == 1, (name, r.stderr)
        assert lines[0].startswith("sqfs-lazy-pack: ") and \
            want in lines[0], (name, lines[0])
        assert not os.path.exists(out), name
        assert leftovers(str(d)) == [], name
    # with --force over an existing image: that image stays
    old = write(out, b"the old image")
    r = pack_run("-q", "--force", "--sign", junk, tree, out)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert read(old) == b"the old image"
    assert leftovers(str(d)) == []
    shutil.rmtree(str(d))
