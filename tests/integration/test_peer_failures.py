"""Targeted tests for behaviour other SquashFS FUSE implementations get
wrong, each stated explicitly (the conformance matrix would also catch
them, but buried among other differences).  Uses the gzip image, mounted
once by the kernel and once by sqfs-lazy-mount.
"""

import mmap
import os
import random
import subprocess
import threading

import pytest

import treebuilder
import util


@pytest.fixture(scope="module")
def gz(request, module_mounter):
    util.require_kernel_squashfs()
    util.require_fuse()
    util.require_daemon()
    image_cache = request.getfixturevalue("image_cache")
    image = image_cache.path("gzip")
    k = module_mounter.kernel(image)
    f = module_mounter.fuse(image, name="gzip")
    return {"k": k.mnt, "f": f.mnt, "fuse": f, "tree": image_cache.tree}


DIRS = ["", "bigdir", "dir_empty", "hugedir", "xattrs", "modes/dir_0000",
        "deep/level_00/level_01"]


@pytest.mark.parametrize("rel", DIRS)
def test_readdir_returns_dot_and_dotdot(gz, rel):
    kd = util.getdents(os.path.join(gz["k"], rel))
    fd = util.getdents(os.path.join(gz["f"], rel))
    names = [d[0] for d in fd]
    assert names.count(b".") == 1 and names.count(b"..") == 1, \
        "getdents on %r: '.' x%d, '..' x%d (first entries: %r)" % (
            rel, names.count(b"."), names.count(b".."), names[:4])
    assert names[:2] == [d[0] for d in kd[:2]] == [b".", b".."]
    # d_ino of '.' is the directory itself; of '..' its parent (as kernel)
    kmap = {d[0]: d[1] for d in kd}
    fmap = {d[0]: d[1] for d in fd}
    assert fmap[b"."] == os.lstat(os.path.join(gz["f"], rel)).st_ino
    assert (fmap[b"."], fmap[b".."]) == (kmap[b"."], kmap[b".."])
    # and ls -a -f (unsorted, raw readdir) shows them as well
    out = subprocess.run(["ls", "-a", "-f", os.path.join(gz["f"], rel)],
                         capture_output=True, check=True).stdout.split(b"\n")
    assert b"." in out and b".." in out


def test_xattr_prefixes_kept(gz):
    tree = gz["tree"]
    problems = []
    for rel, name in tree.prefixed_xattrs + [
            ("xattrs/dev_with_xattr", "security.dev"),
            ("xattrs/fifo_with_xattr", "trusted.fifo"),
            ("xattrs/link_with_xattr", "trusted.link"),
            ("xattrs/dir_with_xattr", "trusted.dir")]:
        p = os.path.join(gz["f"], rel)
        names = os.listxattr(p, follow_symlinks=False)
        want = os.getxattr(os.path.join(tree.root, rel), name,
                           follow_symlinks=False)
        if name not in names:
            problems.append("%s: %s not in listxattr %r" % (rel, name, names))
            continue
        try:
            got = os.getxattr(p, name, follow_symlinks=False)
        except OSError as e:
            problems.append("%s: getxattr %s: %s" % (rel, name, e))
            continue
        if got != want:
            problems.append("%s: %s = %r, want %r" % (rel, name, got, want))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rel,name", [("xattrs/all", "user.empty"),
                                      ("xattrs/long_value", "trusted.empty"),
                                      ("xattrs/dir_with_xattr", "trusted.dir")])
def test_empty_xattr_value(gz, rel, name):
    p = os.path.join(gz["f"], rel)
    assert name in os.listxattr(p, follow_symlinks=False)
    assert os.getxattr(p, name, follow_symlinks=False) == b""


def test_long_and_shared_xattr_values(gz):
    for i in range(6):
        p = os.path.join(gz["f"], "xattrs", "shared_long_%d" % i)
        assert os.getxattr(p, "user.long") == treebuilder.LONG_XATTR
        assert os.getxattr(p, "trusted.long") == treebuilder.LONG_XATTR[:900]
    p = os.path.join(gz["f"], "xattrs", "many_names")
    names = os.listxattr(p)
    assert len(names) == 31 and "user." + "L" * 250 in names


def test_hardlinks_share_inode(gz):
    tree = gz["tree"]
    seen = {}
    for group in tree.hardlinks:
        fst = [os.lstat(os.path.join(gz["f"], r)) for r in group]
        kst = [os.lstat(os.path.join(gz["k"], r)) for r in group]
        inos = {s.st_ino for s in fst}
        assert len(inos) == 1, "hardlink group %r has st_ino %r" % (
            group, [s.st_ino for s in fst])
        assert fst[0].st_ino == kst[0].st_ino
        assert [s.st_nlink for s in fst] == [s.st_nlink for s in kst] == \
            [len(group)] * len(group)
        ino = fst[0].st_ino
        assert ino not in seen, "groups %r and %r share st_ino" % (
            seen.get(ino), group)
        seen[ino] = group


def test_directory_sizes_match_kernel(gz):
    bad = []
    for rel in ["", "bigdir", "hugedir", "dir_empty", "deep", "names",
                "xattrs/many", "links"]:
        a = os.lstat(os.path.join(gz["k"], rel)).st_size
        b = os.lstat(os.path.join(gz["f"], rel)).st_size
        if a != b:
            bad.append("%r: kernel %d, fuse %d" % (rel, a, b))
    assert not bad, "\n".join(bad)
    assert os.lstat(os.path.join(gz["f"], "dir_empty")).st_size == 3


@pytest.mark.parametrize("rel", ["hugedir", "bigdir"])
def test_readdir_seek_resume(gz, rel):
    """lseek to a d_off returned by getdents and continue from there."""
    for root in (gz["k"], gz["f"]):
        path = os.path.join(root, rel)
        full = util.getdents(path)
        assert len(full) > 300
        small = util.getdents(path, bufsize=300)
        assert [d[0] for d in small] == [d[0] for d in full], \
            "small-buffer getdents differs on %s" % path
        for i in (0, 1, 2, 17, len(full) // 2, len(full) - 2, len(full) - 1):
            rest = util.getdents(path, seek_to=full[i][3])
            assert [d[0] for d in rest] == [d[0] for d in full[i + 1:]], \
                "%s: resuming after entry %d (d_off %d) gave %r..." % (
                    path, i, full[i][3], [d[0] for d in rest[:3]])


def test_lookup_absent_names_between_present(gz):
    """Absent names sorting between present ones (directory index search)
    give ENOENT, present ones are found."""
    names = sorted(os.listdir(os.path.join(gz["k"], "hugedir")))
    present = set(names)
    r = random.Random(5)
    for n in r.sample(names, 60):
        for probe in (n + "~", n[:-1] if len(n) > 1 else n + "0", n):
            ok = probe in present
            p = os.path.join(gz["f"], "hugedir", probe)
            if len(probe.encode()) > 255:
                continue
            if ok:
                os.lstat(p)
            else:
                with pytest.raises(FileNotFoundError):
                    os.lstat(p)


def test_mmap_matches_kernel(gz):
    for rel in ("sizes/rand_262144", "sizes/text_1048577", "sparse/odd_holes",
                "dedup/tail_b"):
        with open(os.path.join(gz["k"], rel), "rb") as a, \
                open(os.path.join(gz["f"], rel), "rb") as b:
            ma = mmap.mmap(a.fileno(), 0, prot=mmap.PROT_READ)
            mb = mmap.mmap(b.fileno(), 0, prot=mmap.PROT_READ)
            try:
                assert len(ma) == len(mb)
                for off in (0, 4095, 131071, len(ma) - 1):
                    assert ma[off:off + 5000] == mb[off:off + 5000], \
                        "%s at %d" % (rel, off)
                assert ma[:] == mb[:]
            finally:
                ma.close()
                mb.close()


def test_concurrent_readers(gz):
    """Eight threads doing random preads on shared files agree with the
    source tree, and the daemon survives."""
    tree = gz["tree"]
    files = [r for r in tree.multiblock if "1048577" in r or "262144" in r
             or "131073" in r] + ["dedup/ident_1", "dedup/ident_2",
                                  "hardlinks/a", "sparse/block_holes"]
    src = {}
    for r in files:
        with open(os.path.join(tree.root, r), "rb") as fh:
            src[r] = fh.read()
    errors = []

    def worker(seed):
        rng = random.Random(seed)
        flags = os.O_RDONLY | (os.O_DIRECT if seed % 2 else 0)
        fds = {}
        for r in files:
            p = os.path.join(gz["f"], r)
            try:
                fds[r] = os.open(p, flags)
            except OSError:     # no O_DIRECT: buffered is still a test
                fds[r] = os.open(p, os.O_RDONLY)
        try:
            for _ in range(150):
                r = rng.choice(files)
                data = src[r]
                off = rng.randrange(0, len(data) + 10)
                n = rng.choice((1, 4096, 65537, 300000))
                got = os.pread(fds[r], n, off)
                if got != data[off:off + n]:
                    errors.append("%s off=%d len=%d" % (r, off, n))
                    return
        except OSError as e:
            errors.append("thread %d: %s" % (seed, e))
        finally:
            for fd in fds.values():
                os.close(fd)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "readers hung"
    assert not errors, "\n".join(errors[:20])
    assert gz["fuse"].alive()
