"""Conformance: every image of the matrix mounted by the kernel (loop) and by
sqfs-lazy-mount must look the same through every system call we can make.

Each test is parametrized over the image matrix (images.py); mounts are
module-scoped per image, so one image is mounted at a time.
"""

import ctypes
import errno
import os
import stat

import pytest

import images
import treebuilder
import util

GiB = 1 << 30


class Pair:
    def __init__(self, spec, image, kernel, fuse, tree):
        self.spec = spec
        self.image = image
        self.kernel = kernel
        self.fuse = fuse
        self.tree = tree
        self._k = None
        self._f = None

    @property
    def k(self):
        return self.kernel.mnt

    @property
    def f(self):
        return self.fuse.mnt

    def trees(self):
        if self._k is None:
            self._k = util.collect_tree(self.k)
            self._f = util.collect_tree(self.f)
        return self._k, self._f

    def regular_files(self):
        k, _ = self.trees()
        return sorted(p for p, r in k.items() if r.stat.get("type") == "reg")


def _selected_images():
    """LSQ_IMAGES=name,name restricts the matrix (for quick local runs)."""
    sel = os.environ.get("LSQ_IMAGES")
    names = [s.name for s in images.IMAGES]
    if sel:
        names = [n for n in names if n in sel.split(",")]
    return names


@pytest.fixture(scope="module", params=_selected_images())
def pair(request, workdir):
    spec = images.BY_NAME[request.param]
    util.require_kernel_squashfs()
    util.require_fuse()
    util.require_daemon()
    image_cache = request.getfixturevalue("image_cache")
    image = image_cache.path(spec.name)
    oracle = image_cache.path(spec.oracle) if spec.oracle else image
    if spec.pad_oracle:
        oracle = image + ".padded"
        if not os.path.exists(oracle):
            with open(image, "rb") as f:
                data = f.read()
            assert len(data) % 4096, "-nopad image is 4K-aligned anyway"
            with open(oracle, "wb") as f:
                f.write(data + bytes(-len(data) % 4096))
    m = util.Mounter(workdir / "mnt" / ("conf-" + spec.name))
    try:
        kernel = m.kernel(oracle)
        fuse = m.fuse(image, name=spec.name)
        yield Pair(spec, image, kernel, fuse, image_cache.tree)
    finally:
        m.cleanup()


# --------------------------------------------------------------------------

def test_path_set(pair):
    k, f = pair.trees()
    assert len(k) > 3000, "kernel tree unexpectedly small: %d" % len(k)
    util.compare_names(k, f).check()


def test_stat(pair):
    k, f = pair.trees()
    util.compare_stat(k, f).check()


def test_st_blksize(pair):
    """st_blksize is what tools size their buffers by; the kernel reports
    the device block size (1024) for squashfs."""
    k, f = pair.trees()
    util.compare_stat(k, f, fields=("st_blksize",)).check()


def test_readlink(pair):
    k, f = pair.trees()
    links = [p for p, r in k.items() if r.stat.get("type") == "lnk"]
    assert len(links) > 40
    util.compare_links(k, f).check()


def test_xattrs(pair):
    k, f = pair.trees()
    if "-no-xattrs" not in pair.spec.args:
        assert any(r.xattr_names for r in k.values()), \
            "oracle shows no xattrs at all"
    util.compare_xattrs(k, f).check()


def test_readdir(pair):
    k, f = pair.trees()
    util.compare_readdir(k, f).check()


def test_content(pair):
    bad = []
    n = 0
    for p in pair.regular_files():
        if p == os.fsencode(treebuilder.Manifest.huge) and \
                not pair.spec.full_huge:
            continue
        n += 1
        why = util.read_all_compare(os.path.join(os.fsencode(pair.k), p),
                                    os.path.join(os.fsencode(pair.f), p))
        if why:
            bad.append("%s: %s" % (util.show(p), why))
    assert n > 2500
    if bad:
        raise AssertionError("%d of %d files differ:\n  %s" % (
            len(bad), n, "\n  ".join(bad[:60])))


def _edge_files(pair):
    out = []
    k, _ = pair.trees()
    for p in pair.regular_files():
        top = p.split(b"/", 1)[0]
        if top in (b"hugedir", b"bigdir") or \
                p == os.fsencode(treebuilder.Manifest.huge):
            continue
        out.append((p, k[p].stat["st_size"]))
    return out


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "odirect"])
def test_pread_edges(pair, direct):
    """preads at odd offsets across block edges, at and past EOF.  The
    O_DIRECT variant makes FUSE pass the unaligned offsets and lengths
    straight to the daemon."""
    bs = pair.spec.block_size
    bad = []
    files = _edge_files(pair)
    assert len(files) > 40
    for p, size in files:
        kp = os.path.join(os.fsencode(pair.k), p)
        fp = os.path.join(os.fsencode(pair.f), p)
        if direct:
            # the mount must take O_DIRECT (the kernel's does): a refusal
            # fails here, before the comparison would report every read
            try:
                os.close(os.open(fp, os.O_RDONLY | os.O_DIRECT))
            except OSError as e:
                raise AssertionError("the FUSE mount refuses O_DIRECT on "
                                     "%s: %s" % (util.show(p), e)) from None
        for msg in util.pread_compare(kp, fp, util.edge_reads(size, bs),
                                      direct=direct):
            bad.append("%s (size %d): %s" % (util.show(p), size, msg))
    if bad:
        raise AssertionError("%d bad preads:\n  %s" % (
            len(bad), "\n  ".join(bad[:60])))


def huge_reads():
    size = treebuilder.HUGE_SIZE
    out = [(4 * GiB - 1, 2), (4 * GiB, 4096), (4 * GiB - 131072, 262144),
           (3 * GiB, 65536), (size - 1, 1), (size, 1), (size + 5, 10),
           (size - 5, 100), (size - 12345, 12345), (GiB + 17, 4097),
           (5 * GiB - 1, 3)]
    for off, n in treebuilder.HUGE_DATA:
        out += [(off, n), (max(0, off - 1), 2), (off + n - 1, 2),
                (max(0, off - 4096), 8192), (off + n // 2, 1000)]
    return out


def test_huge_sparse_file(pair):
    """The > 4 GiB sparse file: sampled preads checked against the kernel
    and the source tree; the full comparison runs in test_content on the
    images marked full_huge."""
    rel = treebuilder.Manifest.huge
    if not pair.spec.huge:
        # packed without it (-e): it must be absent on both sides
        assert not os.path.lexists(os.path.join(pair.k, rel))
        assert not os.path.lexists(os.path.join(pair.f, rel))
        return
    src = os.path.join(pair.tree.root, rel)
    fp = os.path.join(pair.f, rel)
    st = os.lstat(fp)
    assert st.st_size == treebuilder.HUGE_SIZE
    bad = util.pread_compare(os.path.join(pair.k, rel), fp, huge_reads())
    bad += ["vs source tree: " + b for b in
            util.pread_compare(src, fp, huge_reads())]
    bad += ["O_DIRECT vs source tree: " + b for b in
            util.pread_compare(src, fp, huge_reads(), direct=True)]
    if bad:
        raise AssertionError("\n".join(bad))


def test_statfs(pair):
    a = os.statvfs(pair.k)
    b = os.statvfs(pair.f)
    fields = ["f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
              "f_files", "f_ffree", "f_favail", "f_namemax"]
    expected = {fld: getattr(a, fld) for fld in fields}
    if pair.spec.oracle:
        sb = util.SqfsReader(pair.image).sb
        expected["f_blocks"] = ((sb["bytes_used"] - 1) >> sb["block_log"]) + 1
        assert expected["f_files"] == sb["inodes"]
    diffs = ["%s: kernel=%r fuse=%r" % (fld, expected[fld], getattr(b, fld))
             for fld in fields if expected[fld] != getattr(b, fld)]
    if (a.f_flag & os.ST_RDONLY) != (b.f_flag & os.ST_RDONLY):
        diffs.append("ST_RDONLY: kernel=%s fuse=%s" % (
            bool(a.f_flag & os.ST_RDONLY), bool(b.f_flag & os.ST_RDONLY)))
    if diffs:
        raise AssertionError("statvfs differs (kernel gives %r):\n  %s" % (
            a, "\n  ".join(diffs)))


# --------------------------------------------------------------------------
# errno conformance
# --------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _small_getxattr(path, name, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _libc.lgetxattr(os.fsencode(path), name.encode(), buf,
                        ctypes.c_size_t(size))
    if n < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return n


def _small_listxattr(path, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _libc.llistxattr(os.fsencode(path), buf, ctypes.c_size_t(size))
    if n < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return n


def _open_read(p, flags):
    fd = os.open(p, flags)
    try:
        return os.read(fd, 16)
    finally:
        os.close(fd)


ERRNO_CASES = [
    ("lstat missing", lambda r: os.lstat(r + "/does_not_exist")),
    ("lstat missing nested", lambda r: os.lstat(r + "/nope/nope")),
    ("lstat through file", lambda r: os.lstat(r + "/empty/x")),
    ("lstat 255-byte missing", lambda r: os.lstat(r + "/" + "q" * 255)),
    ("lstat 256-byte name", lambda r: os.lstat(r + "/" + "q" * 256)),
    ("lstat 257-byte name", lambda r: os.lstat(r + "/" + "q" * 257)),
    ("lstat 1100-byte name", lambda r: os.lstat(r + "/" + "q" * 1100)),
    ("stat dangling", lambda r: os.stat(r + "/links/dangling")),
    ("stat loop", lambda r: os.stat(r + "/links/loop")),
    ("stat link to dir", lambda r: stat.S_IFMT(
        os.stat(r + "/links/to_dir").st_mode)),
    ("open O_WRONLY", lambda r: os.open(r + "/small/one", os.O_WRONLY)),
    ("open O_RDWR", lambda r: os.open(r + "/small/one", os.O_RDWR)),
    ("open O_CREAT", lambda r: os.open(r + "/newfile",
                                       os.O_CREAT | os.O_WRONLY, 0o644)),
    ("open O_CREAT existing", lambda r: os.open(r + "/small/one",
                                                os.O_CREAT | os.O_RDONLY)),
    ("open O_TRUNC", lambda r: os.open(r + "/small/one",
                                       os.O_RDONLY | os.O_TRUNC)),
    ("read dir", lambda r: _open_read(r + "/bigdir", os.O_RDONLY)),
    ("open file O_DIRECTORY", lambda r: os.open(r + "/small/one",
                                                os.O_RDONLY | os.O_DIRECTORY)),
    ("open symlink O_NOFOLLOW", lambda r: os.open(r + "/links/short",
                                                  os.O_RDONLY | os.O_NOFOLLOW)),
    ("listdir file", lambda r: os.listdir(r + "/small/one")),
    ("read mode 0000", lambda r: _open_read(r + "/modes/none", os.O_RDONLY)),
    ("listdir mode 0000 dir", lambda r: os.listdir(r + "/modes/dir_0000")),
    ("mkdir", lambda r: os.mkdir(r + "/newdir")),
    ("rmdir", lambda r: os.rmdir(r + "/dir_empty")),
    ("unlink", lambda r: os.unlink(r + "/small/one")),
    ("rename", lambda r: os.rename(r + "/small/one", r + "/small/uno")),
    ("link", lambda r: os.link(r + "/small/one", r + "/small/uno")),
    ("symlink", lambda r: os.symlink("x", r + "/small/sym")),
    ("mknod", lambda r: os.mkfifo(r + "/small/fifo")),
    ("chmod", lambda r: os.chmod(r + "/small/one", 0o600)),
    ("chown", lambda r: os.chown(r + "/small/one", 1, 1)),
    ("utime", lambda r: os.utime(r + "/small/one", (1, 1))),
    ("truncate", lambda r: os.truncate(r + "/small/one", 0)),
    ("setxattr", lambda r: os.setxattr(r + "/small/one", "user.x", b"1")),
    ("removexattr", lambda r: os.removexattr(r + "/xattrs/all", "user.a")),
    ("readlink file", lambda r: os.readlink(r + "/small/one")),
    ("readlink dir", lambda r: os.readlink(r + "/bigdir")),
    ("readlink missing", lambda r: os.readlink(r + "/nope")),
    ("getxattr missing", lambda r: os.getxattr(r + "/xattrs/all",
                                               "user.nope")),
    ("getxattr missing trusted", lambda r: os.getxattr(r + "/xattrs/all",
                                                       "trusted.nope")),
    ("getxattr unknown namespace", lambda r: os.getxattr(r + "/xattrs/all",
                                                         "bogus.name")),
    ("getxattr no namespace", lambda r: os.getxattr(r + "/xattrs/all",
                                                    "noprefix")),
    ("getxattr empty name after prefix", lambda r: os.getxattr(
        r + "/xattrs/all", "user.")),
    ("getxattr on file without xattrs", lambda r: os.getxattr(
        r + "/small/one", "user.a")),
    ("getxattr size 1", lambda r: _small_getxattr(r + "/xattrs/all",
                                                  "user.a", 1)),
    ("getxattr size 0", lambda r: _small_getxattr(r + "/xattrs/all",
                                                  "user.a", 0)),
    ("getxattr empty size 0", lambda r: _small_getxattr(r + "/xattrs/all",
                                                        "user.empty", 0)),
    ("listxattr size 1", lambda r: _small_listxattr(r + "/xattrs/all", 1)),
    ("listxattr size 0", lambda r: _small_listxattr(r + "/xattrs/all", 0)),
    ("listxattr size 0 none", lambda r: _small_listxattr(r + "/small/one",
                                                         0)),
    ("listxattr fifo", lambda r: os.listxattr(r + "/special/fifo",
                                              follow_symlinks=False)),
    ("access W_OK", lambda r: os.access(r + "/small/one", os.W_OK)),
    ("access X_OK file", lambda r: os.access(r + "/small/one", os.X_OK)),
    ("access X_OK 0111", lambda r: os.access(r + "/modes/exec_only",
                                             os.X_OK)),
]


def _outcome(fn, root):
    try:
        v = fn(root)
    except OSError as e:
        return "errno " + errno.errorcode.get(e.errno, str(e.errno))
    if isinstance(v, int) and not isinstance(v, bool) and v > 2 and \
            fn.__code__.co_names and "open" in fn.__code__.co_names:
        os.close(v)
        return "ok (opened)"
    return "ok %r" % (v,)


def test_errno(pair):
    cases = ERRNO_CASES
    diffs = []
    for name, fn in cases:
        a = _outcome(fn, pair.k)
        b = _outcome(fn, pair.f)
        if a != b:
            diffs.append("%s: kernel %s, fuse %s" % (name, a, b))
    if diffs:
        raise AssertionError("%d of %d errno cases differ:\n  %s" % (
            len(diffs), len(cases), "\n  ".join(diffs)))


def test_daemon_alive(pair):
    """Runs last for each image: the daemon survived everything above."""
    assert util.is_mounted(pair.f)
    assert pair.fuse.alive(), "daemon died:\n" + pair.fuse.log()[-4000:]
    assert os.listdir(pair.f)
