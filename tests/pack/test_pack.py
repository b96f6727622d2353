"""sqfs-lazy-pack: images of the edge-case tree, for every compressor and
block size, must be accepted by the kernel, unsquashfs, rdsquashfs and our
reader, and the kernel mount must equal the source tree; output must be
byte-identical for every -j and to the serial reference; failures must
leave no OUTPUT behind."""

import errno
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import time

import pytest

from conftest import cat_tool, need, pack, packer, packer_for_others

KINDS = ("gzip", "xz", "lz4", "lzo", "zstd")
SIZES = {"4K": 4096, "128K": 131072, "1M": 1048576}


def other_reader(name, package):
    """unsquashfs and rdsquashfs are independent readers of the format the
    images are checked with: without one the check would not run, so its
    absence fails (scripts/install-deps.sh installs both)."""
    p = shutil.which(name)
    if p is None:
        pytest.fail("%s is not installed (package %s; scripts/install-deps.sh"
                    " installs it): the image cannot be checked with it"
                    % (name, package), pytrace=False)
    return p


def available():
    out = subprocess.run([packer(), "--version"], capture_output=True,
                         text=True).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("compressors:")]
    return line[0].split(":", 1)[1].split() if line else []


MATRIX = [pytest.param(c, ["-c", c, "-b", str(bs)], {}, id="%s-%s" % (c, n))
          for c in KINDS for n, bs in SIZES.items()]
MATRIX += [
    pytest.param("gzip", ["-c", "gzip", "--no-fragments"],
                 {}, id="gzip-nofrag"),
    pytest.param("zstd", ["-c", "zstd", "--always-fragments"],
                 {}, id="zstd-alwaysfrag"),
    pytest.param("zstd", ["-c", "zstd", "-b", "4K", "--no-xattrs"],
                 {"xattrs": False}, id="zstd-noxattrs"),
    pytest.param("gzip", ["-c", "gzip", "--no-exports"], {},
                 id="gzip-noexports"),
    pytest.param("lz4", ["-c", "lz4", "--all-root"], {"root": True},
                 id="lz4-allroot"),
    pytest.param("lz4", ["-c", "lz4", "--lz4-hc"], {}, id="lz4-hc"),
    pytest.param("xz", ["-c", "xz", "--xz-bcj", "x86,arm"], {},
                 id="xz-bcj"),
    pytest.param("gzip", ["-c", "gzip", "-l", "1"], {}, id="gzip-level1"),
    pytest.param("zstd", ["-c", "zstd", "-l", "3", "-b", "64K"], {},
                 id="zstd-level3-64K"),
    pytest.param("gzip", ["-c", "gzip", "--reuse-layout"], {},
                 id="gzip-reuse"),
    pytest.param("zstd", ["-c", "zstd", "-b", "4K", "--reuse-layout=1K",
                          "--always-fragments"], {},
                 id="zstd-4K-reuse1K-alwaysfrag"),
]

XPREFIXES = ("user.", "trusted.", "security.")


def xattrs(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        # the kernel's answer for an image without an xattr table (packed
        # --no-xattrs); any other error is compared like a value, so an
        # error on one side only fails
        if e.errno == errno.EOPNOTSUPP:
            return ()
        return (("listxattr error", e.errno),)
    return tuple(sorted((n, os.getxattr(path, n, follow_symlinks=False))
                        for n in names if n.startswith(XPREFIXES)))


def snapshot(root, want_xattrs=True, all_root=False):
    """{relpath: attributes}, plus the hardlink partition."""
    snap, groups = {}, {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [""] + dirnames + filenames:
            if name == "" and dirpath != root:
                continue
            p = os.path.join(dirpath, name) if name else dirpath
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            a = {"mode": st.st_mode,
                 "uid": 0 if all_root else st.st_uid,
                 "gid": 0 if all_root else st.st_gid,
                 "mtime": int(st.st_mtime)}
            if stat.S_ISDIR(st.st_mode):
                a["nlink"] = 2 + sum(
                    1 for e in os.scandir(p)
                    if e.is_dir(follow_symlinks=False))
            else:
                a["nlink"] = st.st_nlink
                a["size"] = st.st_size
                groups.setdefault((st.st_dev, st.st_ino), []).append(rel)
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                a["rdev"] = st.st_rdev
            if stat.S_ISLNK(st.st_mode):
                a["target"] = os.readlink(p)
            if stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                a["sha256"] = h.hexdigest()
            a["xattrs"] = xattrs(p) if want_xattrs else ()
            snap[rel] = a
    links = sorted(sorted(g) for g in groups.values())
    return snap, links


def fnv_free_manifest(root):
    """tests/fixtures/kwalk.py's manifest without the content hash."""
    out = []

    def one(path, rel):
        st = os.lstat(path)
        s = ("%s mode=%o ino=%d uid=%d gid=%d size=%d mtime=%d nlink=%d "
             "blocks=%d" % (rel, st.st_mode, st.st_ino, st.st_uid,
                            st.st_gid, st.st_size, int(st.st_mtime),
                            st.st_nlink, st.st_blocks))
        if stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode):
            s += " rdev=%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        if stat.S_ISLNK(st.st_mode):
            s += " target=" + os.readlink(path)
        try:
            names = os.listxattr(path, follow_symlinks=False)
        except OSError as e:
            names = []
            s += " listxattr=errno%d" % e.errno
        for x in names:
            v = os.getxattr(path, x, follow_symlinks=False)
            h = 0xcbf29ce484222325
            for b in v:
                h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
            s += " xattr:%s=%d:%016x" % (x, len(v), h)
        out.append(s)
        if stat.S_ISDIR(st.st_mode):
            for name in sorted(os.listdir(path.encode())):
                n = name.decode("utf-8", "surrogateescape")
                one(os.path.join(path, n), rel + "/" + n)

    one(root, "")
    return out


def strip_fnv(lines):
    return [" ".join(w for w in ln.split(" ") if not w.startswith("fnv="))
            for ln in lines]


@pytest.mark.parametrize("kind,args,expect", MATRIX)
def test_image(kind, args, expect, tree, base, mount_image):
    need(kind in available(), kind + " not built in")
    image = os.path.join(base, "img-%s.sqfs" % "_".join(args).replace(
        "-", "").replace(",", ""))
    if os.path.exists(image):
        os.unlink(image)
    pack(tree, image, *args)
    assert os.path.getsize(image) % 4096 == 0

    mp = mount_image(image)
    want, want_links = snapshot(tree, expect.get("xattrs", True),
                                expect.get("root", False))
    got, got_links = snapshot(mp)
    assert sorted(got) == sorted(want)
    for rel in want:
        assert got[rel] == want[rel], rel
    assert got_links == want_links

    # other readers accept it
    r = subprocess.run([other_reader("unsquashfs", "squashfs-tools"),
                        "-lls", image], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) >= len(want)
    rdsquashfs = other_reader("rdsquashfs", "squashfs-tools-ng")
    r = subprocess.run([rdsquashfs, "-l", "/", image],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([rdsquashfs, "-q", "-u", "/", "-p",
                        os.path.join(base, "rd-" + os.path.basename(image)),
                        image], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    shutil.rmtree(os.path.join(base, "rd-" + os.path.basename(image)),
                  ignore_errors=True)

    # our reader walks it and agrees with the kernel
    r = subprocess.run([cat_tool(), "--walk", image], capture_output=True)
    assert r.returncode == 0, r.stderr
    ours = strip_fnv(r.stdout.decode("utf-8", "surrogateescape")
                     .splitlines())
    assert ours == fnv_free_manifest(mp)
    os.unlink(image)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("args", [["-c", "gzip", "-b", "4K"],
                                  ["-c", "zstd"],
                                  ["-c", "gzip", "--reuse-layout"],
                                  ["-c", "zstd", "-b", "4K",
                                   "--reuse-layout=1K"]],
                         ids=["gzip-4K", "zstd-128K", "gzip-reuse",
                              "zstd-4K-reuse1K"])
def test_determinism(args, tree, base):
    digests = {}
    runs = [["--serial"]] + [["-j", str(j)] for j in (1, 2, 4, 8)
                             for _ in range(2)]
    for i, extra in enumerate(runs):
        out = os.path.join(base, "det%d.sqfs" % i)
        pack(tree, out, *args, *extra)
        digests[" ".join(extra) + " #%d" % i] = sha(out)
        os.unlink(out)
    assert len(set(digests.values())) == 1, digests


def test_times(tree, base, mount_image):
    out = os.path.join(base, "sde.sqfs")
    pack(tree, out, env={"SOURCE_DATE_EPOCH": "1500000000"})
    mp = mount_image(out)
    for dirpath, dirnames, filenames in os.walk(tree):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            want = min(int(os.lstat(p).st_mtime), 1500000000)
            got = int(os.lstat(os.path.join(mp, os.path.relpath(p, tree)))
                      .st_mtime)
            assert got == want, p
    with open(out, "rb") as f:
        sb = f.read(96)
    assert int.from_bytes(sb[8:12], "little") == 1500000000
    out2 = os.path.join(base, "mtime.sqfs")
    pack(tree, out2, "--mtime", "42")
    mp2 = mount_image(out2)
    for dirpath, dirnames, filenames in os.walk(mp2):
        for n in dirnames + filenames:
            assert int(os.lstat(os.path.join(dirpath, n)).st_mtime) == 42


def test_superblock_fields(tree, base):
    out = os.path.join(base, "sb.sqfs")
    pack(tree, out, "-c", "zstd", "-b", "1M")
    with open(out, "rb") as f:
        sb = f.read(96)
    le = lambda a, b: int.from_bytes(sb[a:b], "little")  # noqa: E731
    assert le(0, 4) == 0x73717368
    assert le(12, 16) == 1048576 and le(22, 24) == 20
    assert le(20, 22) == 6
    assert le(28, 30) == 4 and le(30, 32) == 0
    assert le(40, 48) <= os.path.getsize(out)
    os.unlink(out)


def listing(d):
    return sorted(os.listdir(d))


def test_output_exists_needs_force(tree, base):
    out = os.path.join(base, "exists.sqfs")
    with open(out, "w") as f:
        f.write("keep me")
    r = pack(tree, out, check=False)
    assert r.returncode != 0 and "--force" in r.stderr
    assert open(out).read() == "keep me"
    pack(tree, out, "--force")
    assert os.path.getsize(out) > 4096
    os.unlink(out)


def _unreadable_setup(base, name):
    need(shutil.which("runuser"), "runuser missing")
    src = os.path.join(base, name)
    os.makedirs(os.path.join(src, "sub"))
    with open(os.path.join(src, "ok"), "w") as f:
        f.write("fine\n")
    outdir = os.path.join(base, name + "-out")
    os.mkdir(outdir)
    os.chmod(outdir, 0o777)
    return src, outdir


def test_unreadable_file_no_output(base):
    src, outdir = _unreadable_setup(base, "unreadable")
    secret = os.path.join(src, "sub", "secret")
    with open(secret, "w") as f:
        f.write("secret\n")
    os.chmod(secret, 0)
    out = os.path.join(outdir, "img.sqfs")
    r = pack(src, out, check=False, user="nobody")
    assert r.returncode != 0
    assert secret in r.stderr
    assert listing(outdir) == []


def test_unreadable_dir_no_output(base):
    src, outdir = _unreadable_setup(base, "unreadable-dir")
    os.chmod(os.path.join(src, "sub"), 0)
    out = os.path.join(outdir, "img.sqfs")
    r = pack(src, out, check=False, user="nobody")
    assert r.returncode != 0
    assert os.path.join(src, "sub") in r.stderr
    assert listing(outdir) == []


def test_growing_file_no_output(base):
    src = os.path.join(base, "growing")
    os.mkdir(src)
    grow = os.path.join(src, "log")
    outdir = os.path.join(base, "growing-out")
    os.mkdir(outdir)
    writer = subprocess.Popen(
        ["python3", "-c",
         "import sys\nf=open(sys.argv[1],'ab',buffering=0)\n"
         "while True: f.write(b'x'*100)", grow])
    try:
        while not os.path.exists(grow) or os.path.getsize(grow) < 10**6:
            time.sleep(0.01)
        r = pack(src, os.path.join(outdir, "img.sqfs"), check=False)
    finally:
        writer.kill()
        writer.wait()
    assert r.returncode != 0
    assert grow in r.stderr and "changed size" in r.stderr
    assert listing(outdir) == []


def _one_random_file(base, name, size):
    """A source directory NAME holding one incompressible file of SIZE
    bytes, and an empty output directory NAME-out next to it."""
    src = os.path.join(base, name)
    os.mkdir(src)
    with open(os.path.join(src, "big"), "wb") as f:
        f.write(os.urandom(size))
    outdir = os.path.join(base, name + "-out")
    os.mkdir(outdir)
    return src, outdir


def test_sigint_leaves_nothing(base):
    src, outdir = _one_random_file(base, "slow", 96 << 20)
    p = subprocess.Popen([packer(), "-q", "-c", "xz", "-j", "1", src,
                          os.path.join(outdir, "img.sqfs")])
    deadline = time.time() + 30
    while not listing(outdir) and time.time() < deadline:
        time.sleep(0.02)
    assert listing(outdir), "no temporary file appeared"
    assert not os.path.exists(os.path.join(outdir, "img.sqfs"))
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) != 0
    assert listing(outdir) == []
    shutil.rmtree(src)


def _threads_while_packing(cmd, outdir, settle=1.0):
    """Highest thread count of cmd's process in the settle seconds after
    its temporary output appears (the pool starts right after it is
    created); then SIGINT it."""
    p = subprocess.Popen(cmd)
    most, started = 0, None
    try:
        while p.poll() is None:
            if started is None and listing(outdir):
                started = time.time()
            if started is not None:
                try:
                    n = len(os.listdir("/proc/%d/task" % p.pid))
                except FileNotFoundError:
                    break
                most = max(most, n)
                if time.time() - started > settle:
                    break
            time.sleep(0.01)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
    return most


def test_jobs_are_worker_threads(base):
    """-j N starts N compressor threads next to the main thread, which
    reads and writes (as mksquashfs -processors N); --serial starts
    none."""
    src, outdir = _one_random_file(base, "jobs", 32 << 20)
    out = os.path.join(outdir, "img.sqfs")
    for extra, want in ((["-j", "1"], 2), (["-j", "3"], 4),
                        (["--serial"], 1)):
        got = _threads_while_packing([packer(), "-q", "-c", "xz", *extra,
                                      src, out], outdir)
        assert got == want, (extra, got)
        assert listing(outdir) == []
    shutil.rmtree(outdir)
    shutil.rmtree(src)


def test_bad_options(base, tree):
    for args in (["-b", "3000"], ["-b", "2M"], ["-c", "nope"],
                 ["-l", "30", "-c", "gzip"], ["--xz-bcj", "x86"],
                 ["--no-fragments", "--always-fragments"], ["-j", "0"],
                 ["--reuse-layout=100"], ["--reuse-layout=2M"],
                 ["--reuse-layout", "--no-fragments"],
                 ["--reuse-layout=x"]):
        r = pack(tree, os.path.join(base, "bad.sqfs"), *args, check=False)
        assert r.returncode != 0, args
        assert not os.path.exists(os.path.join(base, "bad.sqfs"))


def test_dedup(base):
    """Whole files, tails and small files that repeat cost (almost) no
    space; a file equal to another's first block is not confused."""
    def tree_size(name, files):
        src = os.path.join(base, name)
        os.mkdir(src)
        for n, data in files.items():
            with open(os.path.join(src, n), "wb") as f:
                f.write(data)
        out = os.path.join(base, name + ".sqfs")
        pack(src, out, "-c", "gzip", "--no-exports")
        size = os.path.getsize(out)
        return size, out

    big = os.urandom(1 << 20 | 12345)
    small = os.urandom(5000)
    one, _ = tree_size("dd1", {"a": big, "s1": small})
    two, img = tree_size("dd2", {"a": big, "b": big, "s1": small,
                                 "s2": small, "c": big[:131072]})
    # b and s2 add inodes and names only; c (a's first block as a file of
    # its own) is not a whole-file match, so it may cost one block
    assert two - one <= 131072 + 8192, (one, two)
    three, _ = tree_size("dd3", {"a": big, "b": big, "s1": small,
                                 "s2": small})
    assert three - one <= 4096, (one, three)


def test_huge_sparse_file(base, mount_image):
    """> 4 GiB file (extended inode, 64-bit size, sparse blocks)."""
    src = os.path.join(base, "huge")
    os.mkdir(src)
    p = os.path.join(src, "huge")
    size = 5 * (1 << 30) + 12345
    regions = ((0, 5000), (2 * (1 << 30) + 5, 70000),
               (4 * (1 << 30) - 3000, 6000), (size - 10000, 10000))
    with open(p, "wb") as f:
        f.truncate(size)
        for i, (off, n) in enumerate(regions):
            f.seek(off)
            f.write(os.urandom(n))
    out = os.path.join(base, "huge.sqfs")
    pack(src, out, "-c", "zstd", "-b", "1M")
    assert os.path.getsize(out) < 1 << 20
    mp = mount_image(out)
    q = os.path.join(mp, "huge")
    assert os.path.getsize(q) == size
    with open(p, "rb") as a, open(q, "rb") as b:
        for off, n in regions + ((1 << 31, 4096), (size - 20000, 20000)):
            a.seek(off - 100 if off >= 100 else off)
            b.seek(off - 100 if off >= 100 else off)
            assert a.read(n + 200) == b.read(n + 200), off
    r = subprocess.run([cat_tool(), "--walk", out], capture_output=True)
    assert r.returncode == 0, r.stderr
    os.unlink(p)


def _metadata(d, start, end):
    import zlib
    out, offs, p = b"", {}, start
    while p < end:
        h = int.from_bytes(d[p:p + 2], "little")
        n = h & 0x7fff
        blk = d[p + 2:p + 2 + n]
        offs[p - start] = len(out)
        out += blk if h & 0x8000 else zlib.decompress(blk)
        p += 2 + n
    return out, offs


def test_root_inode(tree, base):
    """Root: the highest inode number; its parent is inode_count + 1."""
    out = os.path.join(base, "root.sqfs")
    pack(tree, out, "-c", "gzip")
    d = open(out, "rb").read()
    le = lambda a, b: int.from_bytes(d[a:b], "little")  # noqa: E731
    count, root_ref = le(4, 8), le(32, 40)
    itab, dtab = le(64, 72), le(72, 80)
    table, offs = _metadata(d, itab, dtab)
    o = offs[root_ref >> 16] + (root_ref & 0xffff)
    itype = int.from_bytes(table[o:o + 2], "little")
    number = int.from_bytes(table[o + 12:o + 16], "little")
    assert number == count
    assert itype in (1, 8)
    parent_at = o + 28  # same place in basic and extended directories
    assert int.from_bytes(table[parent_at:parent_at + 4], "little") == \
        count + 1
    os.unlink(out)


def test_help_matches_man_page():
    import re
    here = os.path.dirname(os.path.abspath(__file__))
    man = open(os.path.join(here, "..", "..", "docs", "man",
                            "sqfs-lazy-pack.1.scd")).read()
    out = subprocess.run([packer(), "--help"], capture_output=True,
                         text=True).stdout
    opts = lambda t: set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", t))  # noqa: E731,E501
    assert opts(out) - {"--help"} <= opts(man)
    assert opts(man) <= opts(out) | {"--help", "--version"}


def test_output_inside_source_is_left_out(base):
    src = os.path.join(base, "selfsrc")
    os.mkdir(src)
    with open(os.path.join(src, "f"), "w") as f:
        f.write("f\n")
    out = os.path.join(src, "img.sqfs")
    pack(src, out)
    pack(src, out, "--force")
    r = subprocess.run([cat_tool(), "--walk", out], capture_output=True)
    assert r.returncode == 0
    assert b"img.sqfs" not in r.stdout


def test_enospc_leaves_nothing(base):
    """A full disk while writing: error, no OUTPUT, no temporary file."""
    need(os.geteuid() == 0, "mounting a small tmpfs needs root")
    src = os.path.join(base, "enospc-src")
    os.mkdir(src)
    with open(os.path.join(src, "big"), "wb") as f:
        f.write(os.urandom(4 << 20))
    small = os.path.join(base, "enospc-fs")
    os.mkdir(small)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs",
                        small], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    try:
        r = pack(src, os.path.join(small, "img.sqfs"), "-c", "lz4",
                 check=False)
        assert r.returncode != 0
        assert "No space left" in r.stderr, r.stderr
        assert listing(small) == []
    finally:
        subprocess.run(["umount", small], check=False)


def walk_paths(image):
    r = subprocess.run([cat_tool(), "--walk", image], capture_output=True)
    assert r.returncode == 0, r.stderr
    return [ln.split(b" ")[0].decode() for ln in r.stdout.splitlines()]


def test_skip_unreadable_as_nobody(base):
    """chmod 000 file (with a hardlink elsewhere) and directory: an error
    without the flag, left out entirely with it."""
    src, outdir = _unreadable_setup(base, "skipnobody")
    secret = os.path.join(src, "sub", "secret")
    with open(secret, "w") as f:
        f.write("secret\n")
    os.chmod(secret, 0)
    os.link(secret, os.path.join(src, "secret-link"))
    locked = os.path.join(src, "locked")
    os.makedirs(os.path.join(locked, "inner"))
    os.chmod(locked, 0)
    with open(os.path.join(src, "zlast"), "w") as f:
        f.write("after the skipped ones\n")
    out = os.path.join(outdir, "img.sqfs")
    r = pack(src, out, check=False, user="nobody")
    assert r.returncode == 1 and locked in r.stderr, r.stderr
    assert listing(outdir) == []

    cmd = [packer_for_others(), "--skip-unreadable", src, out]
    r = subprocess.run(["runuser", "-u", "nobody", "--"] + cmd,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # the file is read through its first link in tree order
    for p in (os.path.join(src, "secret-link"), locked):
        assert p in r.stderr and "left out" in r.stderr, r.stderr
    assert "2 unreadable entries left out" in r.stderr, r.stderr
    assert walk_paths(out) == ["", "/ok", "/sub", "/zlast"]
    # -q silences the warnings, not the result
    r = subprocess.run(["runuser", "-u", "nobody", "--",
                        packer_for_others(), "-q", "--force",
                        "--skip-unreadable", src, out],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_skip_unreadable_eio_mid_file(base, mount_image):
    """A file whose second block fails with EIO (a corrupt block on a
    kernel squashfs mount used as the source): its first block was already
    written and must be taken back; the file after it must be intact."""
    need(os.geteuid() == 0, "loop mounts need root")
    src = os.path.join(base, "eio-src")
    os.mkdir(src)
    text = b"".join(b"line %d of compressible text\n" % i
                    for i in range(20000))
    files = {"a_bad": os.urandom(131072) + text[:262144],
             "b_good": text[:300000] + b"end\n",
             "c_small": text[:5000]}
    for n, data in files.items():
        with open(os.path.join(src, n), "wb") as f:
            f.write(data)
    img = os.path.join(base, "eio.sqfs")
    pack(src, img, "-c", "gzip", "--no-fragments", "--no-exports")
    # a_bad's first block is random, so stored raw at 96; its second block
    # (compressed text) follows: break it
    with open(img, "r+b") as f:
        f.seek(96 + 131072 + 200)
        f.write(b"\xff" * 64)
    mp = mount_image(img)
    with pytest.raises(OSError):
        open(os.path.join(mp, "a_bad"), "rb").read()

    out = os.path.join(base, "eio-out.sqfs")
    r = pack(mp, out, check=False)
    assert r.returncode == 1 and "a_bad: read failed" in r.stderr, r.stderr
    assert not os.path.exists(out)
    r = pack(mp, out, "--skip-unreadable", "-c", "gzip", check=False)
    assert r.returncode == 0, r.stderr
    mp2 = mount_image(out)
    assert sorted(os.listdir(mp2)) == ["b_good", "c_small"]
    for n in ("b_good", "c_small"):
        assert open(os.path.join(mp2, n), "rb").read() == files[n], n
    # nothing of a_bad's first block stayed in the image
    assert os.path.getsize(out) < 65536, os.path.getsize(out)


def test_progress_only_on_a_terminal(base):
    import pty
    src = os.path.join(base, "progress")
    os.mkdir(src)
    for i in range(3):
        with open(os.path.join(src, "f%d" % i), "wb") as f:
            f.write(os.urandom(200000))
    out = os.path.join(base, "progress.sqfs")

    def run(*args):
        master, slave = pty.openpty()
        p = subprocess.Popen([packer(), "--force", *args, src, out],
                             stderr=slave, stdout=subprocess.DEVNULL)
        os.close(slave)
        chunks = []
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:
                break
            if not b:
                break
            chunks.append(b)
        os.close(master)
        assert p.wait(timeout=60) == 0
        return b"".join(chunks).decode()

    shown = run()
    assert "\r" in shown and "3/3 files" in shown and "MiB/s" in shown, \
        shown
    assert "bytes image" in shown and "saved by dedup" in shown, shown
    assert run("-q") == ""
    # not a terminal: the summary only
    r = subprocess.run([packer(), "--force", src, out], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "\r" not in r.stderr
    assert r.stderr.count("\n") == 1 and "bytes image" in r.stderr


def test_shared_xattr_values_out_of_line(base, mount_image):
    """A long value repeated in different xattr sets is stored once; the
    other sets refer to it (out of line); the kernel, unsquashfs,
    rdsquashfs and our reader all read every value back."""
    big = os.urandom(1500)  # two per file fit an ext4 inode

    def make(name, shared):
        src = os.path.join(base, name)
        os.mkdir(src)
        want = {}
        for i in range(6):
            p = os.path.join(src, "f%d" % i)
            with open(p, "w") as f:
                f.write("x\n")
            v = big if shared else os.urandom(1500)
            xs = {b"user.big": v, b"user.own%d" % i: b"%d" % i,
                  b"user.short": b"12345678"}
            if i % 2:
                xs[b"trusted.big"] = v
            for k, val in xs.items():
                os.setxattr(p, k, val)
            want["f%d" % i] = xs
        out = os.path.join(base, name + ".sqfs")
        pack(src, out, "-c", "gzip", "--no-exports")
        return out, want

    shared, want = make("ool-shared", True)
    distinct, _ = make("ool-distinct", False)
    # 6 + 3 copies of 1500 random bytes vs one
    assert os.path.getsize(distinct) - os.path.getsize(shared) >= 8000, \
        (os.path.getsize(distinct), os.path.getsize(shared))
    mp = mount_image(shared)
    for n, xs in want.items():
        p = os.path.join(mp, n)
        assert sorted(os.listxattr(p)) == sorted(k.decode() for k in xs)
        for k, v in xs.items():
            assert os.getxattr(p, k) == v, (n, k)
    r = subprocess.run([cat_tool(), "--walk", shared], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert strip_fnv(r.stdout.decode().splitlines()) == \
        fnv_free_manifest(mp)
    d = os.path.join(base, "ool-unsq")
    r = subprocess.run([other_reader("unsquashfs", "squashfs-tools"),
                        "-d", d, shared], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert os.getxattr(os.path.join(d, "f3"), "trusted.big") == big
    shutil.rmtree(d)
    r = subprocess.run([other_reader("rdsquashfs", "squashfs-tools-ng"),
                        "-x", "/f5", shared], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert b"user.big" in r.stdout and b"trusted.big" in r.stdout
