"""The packer's edge-case source tree: small (a few MiB) so that every
compressor and block size can be packed, mounted and compared quickly.

Deterministic: seeded data, fixed ids, modes and times.
"""

import os
import random
import socket
import stat

LONG_XATTR = random.Random(77).randbytes(3000)
MTIMES = (0, 1, 1234567890, 2**31 - 1, 2**31, 4000000000, 2**32 - 1)


def _rand(seed, n):
    return random.Random(seed).randbytes(n)


def _text(seed, n):
    r = random.Random(seed)
    words = [b"squash", b"lazy", b"block", b"fragment", b"inode", b"tail",
             b"%d" % seed]
    out = bytearray()
    while len(out) < n:
        out += r.choice(words) + b" "
    return bytes(out[:n])


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def build(root):
    """Create the tree under root (which must not exist)."""
    os.makedirs(root)
    j = lambda *p: os.path.join(root, *p)  # noqa: E731

    # --- sizes around every block size used (4K, 128K, 1M) ---
    os.mkdir(j("sizes"))
    _write(j("sizes", "empty"), b"")
    _write(j("sizes", "one"), b"x")
    seed = 1
    for bs in (4096, 131072, 1048576):
        for delta in (-1, 0, 1):
            n = bs + delta
            _write(j("sizes", "r%d" % n), _rand(seed, n))
            _write(j("sizes", "t%d" % n), _text(seed, n))
            seed += 1
    _write(j("sizes", "two_blocks_4k"), _text(99, 8192))
    _write(j("sizes", "mixed"), _text(5, 200000) + _rand(6, 150000))

    # --- duplicates and shared tails ---
    os.mkdir(j("dup"))
    big = _text(7, 300001)
    _write(j("dup", "a"), big)
    _write(j("dup", "b"), big)             # whole-file duplicate
    _write(j("dup", "small1"), b"same small content\n")
    _write(j("dup", "small2"), b"same small content\n")
    tail = _rand(8, 3000)
    _write(j("dup", "tail1"), _text(9, 262144) + tail)   # same tail,
    _write(j("dup", "tail2"), _text(10, 262144) + tail)  # other blocks
    _write(j("dup", "prefix"), big[:131072])  # equals a's first block

    # --- sparse ---
    os.mkdir(j("sparse"))
    with open(j("sparse", "holes"), "wb") as f:
        f.truncate(3 * 1048576 + 77)
        f.seek(1048576 + 5)
        f.write(_rand(11, 70000))
    with open(j("sparse", "allzero"), "wb") as f:
        f.truncate(262144)
    _write(j("sparse", "zeros_written"), bytes(200000))

    # --- big directory (listing > 8 KiB: directory index) ---
    os.mkdir(j("bigdir"))
    for i in range(400):
        _write(j("bigdir", "entry-with-a-longish-name-%04d" % i),
               b"%d\n" % i)

    # --- deep nesting, long and UTF-8 names ---
    p = j("deep")
    for i in range(40):
        p = os.path.join(p, "d%d" % i)
    os.makedirs(p)
    _write(os.path.join(p, "leaf"), b"deep leaf\n")
    os.mkdir(j("names"))
    _write(j("names", "n" * 255), b"long name\n")
    _write(j("names", "ünïcødé-名前-🙂"), b"utf8\n")
    _write(j("names", "with space and\ttab"), b"ws\n")
    _write(j("names", "-dash"), b"dash\n")

    # --- symlinks ---
    os.mkdir(j("links"))
    os.symlink("../sizes/one", j("links", "short"))
    os.symlink("x" * 4000, j("links", "long_dangling"))
    os.symlink("/nonexistent/target", j("links", "dangling"))
    os.symlink(".", j("links", "self"))

    # --- hardlinks (incl. a hardlinked symlink) ---
    os.mkdir(j("hard"))
    _write(j("hard", "h1"), _text(12, 5000))
    os.link(j("hard", "h1"), j("hard", "h2"))
    os.link(j("hard", "h1"), j("links", "h3"))
    os.symlink("h1", j("hard", "sym"))
    os.link(j("hard", "sym"), j("hard", "sym2"), follow_symlinks=False)
    _write(j("hard", "bigh"), _rand(13, 200000))
    os.link(j("hard", "bigh"), j("hard", "bigh2"))

    # --- special files ---
    os.mkdir(j("special"))
    os.mkfifo(j("special", "fifo"))
    s = socket.socket(socket.AF_UNIX)
    s.bind(j("special", "sock"))
    s.close()
    os.mknod(j("special", "null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(j("special", "blk"), stat.S_IFBLK | 0o660, os.makedev(8, 1))
    os.mknod(j("special", "bigdev"), stat.S_IFCHR | 0o600,
             os.makedev(259, 70000))

    # --- modes and ids ---
    os.mkdir(j("modes"))
    for name, mode in (("setuid", 0o4755), ("setgid", 0o2711),
                       ("none", 0o000), ("all", 0o777)):
        _write(j("modes", name), name.encode())
        os.chmod(j("modes", name), mode)
    os.mkdir(j("modes", "sticky"))
    os.chmod(j("modes", "sticky"), 0o1777)
    os.mkdir(j("ids"))
    for i, (u, g) in enumerate(((0, 0), (1000, 1000), (65534, 65535),
                                (70000, 80000), (4000000000, 12345))):
        _write(j("ids", "f%d" % i), b"id\n")
        os.chown(j("ids", "f%d" % i), u, g)

    # --- xattrs ---
    os.mkdir(j("xattrs"))
    _write(j("xattrs", "all"), b"x\n")
    for name, val in ((b"user.a", b"1"), (b"user.empty", b""),
                      (b"user.long", LONG_XATTR),
                      (b"trusted.t", b"trusted value"),
                      (b"security.s", b"sec")):
        os.setxattr(j("xattrs", "all"), name, val)
    for k in range(3):   # identical sets share one xattr id
        _write(j("xattrs", "same%d" % k), b"s\n")
        os.setxattr(j("xattrs", "same%d" % k), b"user.shared", b"v")
    os.setxattr(j("xattrs"), b"user.dir", b"on a directory")
    os.setxattr(j("links", "short"), b"trusted.onlink", b"l",
                follow_symlinks=False)
    os.setxattr(j("special", "fifo"), b"trusted.f", b"fifo")

    # --- times last (children first so dir mtimes stick) ---
    i = 0
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for n in filenames + dirnames:
            os.utime(os.path.join(dirpath, n),
                     ns=(0, MTIMES[i % len(MTIMES)] * 10**9),
                     follow_symlinks=False)
            i += 1
    os.utime(root, ns=(0, 1700000000 * 10**9))
