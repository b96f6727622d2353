"""Builds the edge-case source tree that every test image is packed from.

The tree is deterministic (seeded PRNG, fixed times and ids) so that two
images packed from it with the same options have the same layout and inode
numbers.  `build_tree()` returns a Manifest naming the paths that tests
look at directly.
"""

import os
import random
import socket
import stat
from dataclasses import dataclass, field

GiB = 1 << 30

# Block sizes the image matrix uses; files of exactly 1 and 2 blocks and
# +/- 1 byte are created for each.
BLOCK_SIZES = (4096, 131072, 1048576)

# mtimes spread over the whole unsigned 32-bit range SquashFS can store.
MTIMES = (0, 1, 86399, 1000000000, 1234567890, 2**31 - 1, 2**31,
          2**31 + 12345, 4000000000, 2**32 - 1)

HUGE_SIZE = 5 * GiB + 12345
# (offset, length) of the data areas inside the huge sparse file.
HUGE_DATA = ((0, 5000),
             (2 * GiB + 5, 70000),
             (4 * GiB - 3000, 6000),
             (HUGE_SIZE - 10000, 10000))

LONG_XATTR = random.Random(77).randbytes(3000)


@dataclass
class Manifest:
    root: str
    huge: str = "sparse/huge"
    hardlinks: list = field(default_factory=list)   # lists of rel paths
    empty_xattr: tuple = ("xattrs/all", "user.empty")
    prefixed_xattrs: list = field(default_factory=list)  # (path, name)
    regular: list = field(default_factory=list)     # rel paths of files
    dirs: list = field(default_factory=list)
    multiblock: list = field(default_factory=list)


def _rng(seed):
    return random.Random(seed)


def _randbytes(seed, n):
    return _rng(seed).randbytes(n)


def _text(seed, n):
    """Highly compressible but unique-per-seed text."""
    r = _rng(seed)
    words = [b"squash", b"lazy", b"block", b"fragment", b"inode", b"kernel",
             b"fuse", b"mount", b"tail", b"table", b"%d" % seed]
    out = bytearray()
    line = 0
    while len(out) < n:
        out += b"%08d %d " % (line, seed)
        out += b" ".join(r.choice(words) for _ in range(10)) + b"\n"
        line += 1
    return bytes(out[:n])


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _sparse(path, size, areas):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)
        for i, (off, n) in enumerate(areas):
            f.seek(off)
            f.write(_randbytes(1000 + i + off % 997, n))


def build_tree(root, with_huge=True):
    m = Manifest(root=root)
    J = lambda *p: os.path.join(root, *p)  # noqa: E731
    os.makedirs(root, exist_ok=True)

    # --- empty things -------------------------------------------------
    _write(J("empty"), b"")
    os.makedirs(J("dir_empty"))
    _write(J("small", "one"), b"1")
    _write(J("small", "two"), b"22")
    _write(J("small", "hundred"), _text(3, 100))
    _write(J("small", "newline_only"), b"\n")

    # --- block boundary sizes -----------------------------------------
    for bs in BLOCK_SIZES:
        for size in (bs - 1, bs, bs + 1, 2 * bs):
            _write(J("sizes", "rand_%d" % size), _randbytes(size, size))
            _write(J("sizes", "text_%d" % size), _text(size, size))
            m.multiblock.append("sizes/rand_%d" % size)
            m.multiblock.append("sizes/text_%d" % size)

    # --- dedup ----------------------------------------------------------
    tail = _randbytes(4242, 5000)
    _write(J("dedup", "tail_a"), _randbytes(1, 131072) + tail)
    _write(J("dedup", "tail_b"), _randbytes(2, 131072) + tail)
    _write(J("dedup", "small_tail_a"), tail[:777])
    _write(J("dedup", "small_tail_b"), tail[:777])
    same = _randbytes(5, 300000)
    _write(J("dedup", "ident_1"), same)
    _write(J("dedup", "ident_2"), same)
    _write(J("dedup", "sub", "ident_3"), same)
    _write(J("dedup", "frag_same_1"), _text(6, 3000))
    _write(J("dedup", "frag_same_2"), _text(6, 3000))
    _write(J("dedup", "prefix_of_ident"), same[:200000])

    # --- sparse -----------------------------------------------------------
    MiB = 1 << 20
    _sparse(J("sparse", "hole_start"), MiB + 10000, [(MiB, 10000)])
    _sparse(J("sparse", "hole_middle"), 3 * MiB + 20000,
            [(0, 10000), (3 * MiB + 10000, 10000)])
    _sparse(J("sparse", "hole_end"), 3 * MiB, [(0, 10000)])
    _sparse(J("sparse", "all_hole"), 2 * MiB, [])
    _sparse(J("sparse", "block_holes"), 4 * MiB,
            [(0, MiB), (3 * MiB, MiB)])
    _sparse(J("sparse", "odd_holes"), 777777,
            [(5000, 1), (262143, 2), (655360, 4097)])
    _write(J("sparse", "zeros_written"), bytes(300000))
    _write(J("sparse", "zeros_then_data"), bytes(1048576) + b"end")
    if with_huge:
        _sparse(J("sparse", "huge"), HUGE_SIZE, HUGE_DATA)

    # --- big directories ------------------------------------------------
    for i in range(320):
        kind = i % 8
        p = J("bigdir", "entry_%04d" % i)
        if kind == 0:
            os.makedirs(p)
        elif kind == 1:
            os.symlink("entry_%04d" % ((i + 1) % 320), p)
        else:
            _write(p, _text(i, i * 7))
    r = _rng(31337)
    names = set()
    while len(names) < 3000:
        n = r.randrange(1, 256)
        stem = "".join(r.choice("abcdefghijklmnopqrstuvwxyz0123456789_-.")
                       for _ in range(n))
        if stem in (".", ".."):
            continue
        names.add(stem)
    for i, n in enumerate(sorted(names)):
        p = J("hugedir", n)
        if i % 500 == 0:
            os.makedirs(p)
        else:
            _write(p, b"" if i % 3 else b"%d" % i)
            # Many distinct owners: the id table needs > 1 metadata block
            # (2048 ids per block).
            os.chown(p, 5000 + i, 9000 + i % 7)

    # --- nesting ------------------------------------------------------------
    d = J("deep")
    for i in range(40):
        d = os.path.join(d, "level_%02d" % i)
    os.makedirs(d)
    _write(os.path.join(d, "bottom"), b"you found the bottom\n")

    # --- names ----------------------------------------------------------------
    _write(J("names", "n" * 255), b"255 ascii")
    utf = "\u00e9" * 127 + "x"            # 255 bytes of UTF-8
    assert len(utf.encode()) == 255
    _write(J("names", utf), b"255 utf8")
    for n in ("Gr\u00fc\u00dfe", "\u65e5\u672c\u8a9e\u30d5\u30a1\u30a4\u30eb",
              "emoji_\U0001F600", "with space", "-dash", ".hidden", "...",
              "a:b;c", "new\nline", "tab\tname", "quote\"'"):
        _write(J("names", n), n.encode())
    with open(os.path.join(os.fsencode(J("names")), b"latin1_\xe9\xff"),
              "wb") as f:
        f.write(b"not utf-8")

    # --- symlinks ----------------------------------------------------------
    os.makedirs(J("links"))
    os.symlink("target", J("links", "short"))
    os.symlink("x", J("links", "one_char"))
    long_target = "/".join(["d%03d" % i + "y" * 95 for i in range(41)])
    long_target = long_target[:4000]
    assert len(long_target) == 4000
    os.symlink(long_target, J("links", "long_4000"))
    os.symlink("/nonexistent/dangling/target", J("links", "dangling"))
    os.symlink("../deep", J("links", "to_dir"))
    os.symlink("/etc/hostname", J("links", "absolute"))
    os.symlink("loop", J("links", "loop"))
    os.symlink("\u00fcml\u00e4ut", J("links", "utf8_target"))
    _write(J("links", "target"), b"symlink target\n")

    # --- hardlinks -----------------------------------------------------------
    _write(J("hardlinks", "a"), _text(777, 200000))
    os.makedirs(J("hardlinks", "sub"))
    os.makedirs(J("hardlinks_other"))
    os.link(J("hardlinks", "a"), J("hardlinks", "sub", "b"))
    os.link(J("hardlinks", "a"), J("hardlinks_other", "c"))
    m.hardlinks.append(["hardlinks/a", "hardlinks/sub/b",
                        "hardlinks_other/c"])
    _write(J("hardlinks", "empty_1"), b"")
    os.link(J("hardlinks", "empty_1"), J("hardlinks", "empty_2"))
    m.hardlinks.append(["hardlinks/empty_1", "hardlinks/empty_2"])
    os.symlink("a", J("hardlinks", "sym_1"))
    os.link(J("hardlinks", "sym_1"), J("hardlinks", "sym_2"),
            follow_symlinks=False)
    m.hardlinks.append(["hardlinks/sym_1", "hardlinks/sym_2"])
    os.mkfifo(J("hardlinks", "fifo_1"))
    os.link(J("hardlinks", "fifo_1"), J("hardlinks", "fifo_2"))
    m.hardlinks.append(["hardlinks/fifo_1", "hardlinks/fifo_2"])

    # --- special files ------------------------------------------------------
    os.makedirs(J("special"))
    os.mkfifo(J("special", "fifo"))
    os.mknod(J("special", "null_chr"), 0o666 | stat.S_IFCHR,
             os.makedev(1, 3))
    os.mknod(J("special", "blk"), 0o660 | stat.S_IFBLK, os.makedev(8, 1))
    os.mknod(J("special", "chr_big"), 0o600 | stat.S_IFCHR,
             os.makedev(4095, 1048575))
    os.mknod(J("special", "blk_big"), 0o640 | stat.S_IFBLK,
             os.makedev(259, 65536 + 7))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(J("special", "socket"))
    finally:
        s.close()

    # --- modes -------------------------------------------------------------
    modes = {"setuid": 0o4755, "setgid": 0o2755, "all_bits": 0o7777,
             "none": 0o000, "write_only": 0o222, "exec_only": 0o111,
             "sticky_file": 0o1644}
    for n, mode in modes.items():
        _write(J("modes", n), n.encode())
        os.chmod(J("modes", n), mode)
    for n, mode in (("sticky_dir", 0o1777), ("setgid_dir", 0o2775),
                    ("dir_0000", 0o000), ("dir_0700", 0o700)):
        os.makedirs(J("modes", n))
        _write(J("modes", n, "inside"), b"inside " + n.encode())
        os.chmod(J("modes", n), mode)

    # --- ids ---------------------------------------------------------------
    for n, uid, gid in (("uid_65535", 65535, 65535),
                        ("uid_65536", 65536, 65537),
                        ("uid_100000", 100000, 200000),
                        ("uid_4000000000", 4000000000, 4294967294),
                        ("uid_0_gid_big", 0, 3000000000)):
        _write(J("ids", n), n.encode())
        os.chown(J("ids", n), uid, gid)
    os.makedirs(J("ids", "owned_dir"))
    os.chown(J("ids", "owned_dir"), 123456, 654321)
    os.symlink("nowhere", J("ids", "owned_link"))
    os.chown(J("ids", "owned_link"), 77777, 88888, follow_symlinks=False)

    # --- mtimes ------------------------------------------------------------
    for t in MTIMES:
        _write(J("mtimes", "t_%d" % t), b"%d" % t)
        os.utime(J("mtimes", "t_%d" % t), (t, t))
    os.symlink("t_0", J("mtimes", "link_t"))
    os.utime(J("mtimes", "link_t"), (777777, 777777), follow_symlinks=False)

    # --- xattrs --------------------------------------------------------------
    X = J("xattrs")
    _write(os.path.join(X, "all"), b"xattrs on me\n")
    f = os.path.join(X, "all")
    os.setxattr(f, "user.a", b"hello")
    os.setxattr(f, "user.empty", b"")
    os.setxattr(f, "user.binary", b"\x00\x01\x02\xff\x00")
    os.setxattr(f, "trusted.t", b"trusted value")
    os.setxattr(f, "security.lsq_test", b"security value")
    m.prefixed_xattrs += [("xattrs/all", "trusted.t"),
                          ("xattrs/all", "security.lsq_test")]
    _write(os.path.join(X, "long_value"), b"long")
    os.setxattr(os.path.join(X, "long_value"), "user.long", LONG_XATTR)
    os.setxattr(os.path.join(X, "long_value"), "trusted.empty", b"")
    for i in range(6):
        p = os.path.join(X, "shared_long_%d" % i)
        _write(p, b"shared %d" % i)
        # Identical large values are stored out of line by mksquashfs.
        os.setxattr(p, "user.long", LONG_XATTR)
        os.setxattr(p, "trusted.long", LONG_XATTR[:900])
    for i in range(40):
        p = os.path.join(X, "many", "f%02d" % i)
        _write(p, b"")
        os.setxattr(p, "user.common", b"same value everywhere")
        if i % 2:
            os.setxattr(p, "security.common", b"odd")
    p = os.path.join(X, "many_names")
    _write(p, b"")
    for i in range(30):
        os.setxattr(p, "user.name_%02d" % i, b"v%d" % i * (i + 1))
    os.setxattr(p, "user." + "L" * 250, b"long name")
    d = os.path.join(X, "dir_with_xattr")
    os.makedirs(d)
    os.setxattr(d, "user.dir", b"on a directory")
    os.setxattr(d, "trusted.dir", b"")
    os.symlink("all", os.path.join(X, "link_with_xattr"))
    os.setxattr(os.path.join(X, "link_with_xattr"), "trusted.link",
                b"on a symlink", follow_symlinks=False)
    os.mkfifo(os.path.join(X, "fifo_with_xattr"))
    os.setxattr(os.path.join(X, "fifo_with_xattr"), "trusted.fifo", b"ff")
    os.mknod(os.path.join(X, "dev_with_xattr"), 0o600 | stat.S_IFCHR,
             os.makedev(1, 5))
    os.setxattr(os.path.join(X, "dev_with_xattr"), "security.dev", b"dd")
    _write(os.path.join(X, "sparse_with_xattr"), b"")
    with open(os.path.join(X, "sparse_with_xattr"), "r+b") as fh:
        fh.truncate(600000)
        fh.seek(300000)
        fh.write(_text(11, 5000))
    os.setxattr(os.path.join(X, "sparse_with_xattr"), "user.s", b"sparse")

    # --- collect manifest, then directory times (last) -----------------------
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for n in filenames:
            p = os.path.join(dirpath, n)
            if stat.S_ISREG(os.lstat(p).st_mode):
                m.regular.append(os.path.normpath(os.path.join(rel, n)))
        m.dirs.append(rel)
    dirs = sorted(m.dirs, key=lambda p: -p.count(os.sep))
    for i, rel in enumerate(dirs):
        t = 1600000000 + i * 3601
        os.utime(os.path.join(root, rel), (t, t))
    return m
