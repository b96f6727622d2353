"""sqfs-lazy-pack with a tar archive as SOURCE (libarchive).

"Equivalent" (docs/packer-determinism.md, "Tar input"): a tar that holds
the directory's entries in the packer's own order (GNU tar --sort=name,
with "." first, --xattrs) gives the same image bytes as packing the
directory. Sockets cannot be stored in a tar, so the trees compared here
have none. A tar in any other order (bsdtar lists in readdir order) gives
an image whose kernel mount equals the directory in everything.
"""

import hashlib
import io
import os
import shutil
import subprocess
import tarfile

import pytest

import packtree
from conftest import cat_tool, need, pack, packer
from test_pack import snapshot

FAST = ["-c", "zstd", "-l", "3"]


def have_tar_input():
    out = subprocess.run([packer(), "--version"], capture_output=True,
                         text=True).stdout
    return " tar" in out


@pytest.fixture(scope="module")
def sockless_tree(base):
    """The edge-case tree without its socket (tar cannot hold one)."""
    need(os.geteuid() == 0, "the edge-case tree needs root (devices, ids)")
    need(have_tar_input(), "tar input not built in (libarchive)")
    root = os.path.join(base, "tartree")
    packtree.build(root)
    special = os.path.join(root, "special")
    st = os.lstat(special)
    os.unlink(os.path.join(special, "sock"))
    os.utime(special, ns=(0, st.st_mtime_ns))
    return root


def gnu_tar(tree, out, *extra):
    need(shutil.which("tar"), "GNU tar missing")
    r = subprocess.run(["tar", "--format=pax", "--sort=name", "--xattrs",
                        "--xattrs-include=*", *extra, "-C", tree, "-cf",
                        out, "."], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_tar_gives_the_directory_image(sockless_tree, base, mount_image):
    d = os.path.join(base, "tareq")
    os.mkdir(d)
    want = os.path.join(d, "dir.sqfs")
    pack(sockless_tree, want, *FAST)
    plain = gnu_tar(sockless_tree, os.path.join(d, "t.tar"), "--sparse")

    images = {}
    out = os.path.join(d, "tar.sqfs")
    pack(plain, out, *FAST)
    images["tar"] = out
    # stdin
    out = os.path.join(d, "stdin.sqfs")
    with open(plain, "rb") as f:
        r = subprocess.run([packer(), "-q", *FAST, "-", out], stdin=f,
                           capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    images["stdin"] = out
    # compressed tars, by content (the names are not looked at)
    need(shutil.which("zstd"), "zstd missing")
    for kind, cmd in (("gz", ["gzip", "-1", "-c"]),
                      ("zst", ["zstd", "-q", "-1", "-c"])):
        comp = os.path.join(d, "t.tar." + kind)
        with open(plain, "rb") as f, open(comp, "wb") as g:
            subprocess.run(cmd, stdin=f, stdout=g, check=True)
        out = os.path.join(d, kind + ".sqfs")
        pack(comp, out, *FAST)
        images[kind] = out
    # a tar without GNU sparse headers: same bytes
    nosparse = gnu_tar(sockless_tree, os.path.join(d, "ns.tar"))
    out = os.path.join(d, "nosparse.sqfs")
    pack(nosparse, out, *FAST)
    images["nosparse"] = out

    digests = {k: sha(v) for k, v in images.items()}
    assert set(digests.values()) == {sha(want)}, digests

    # and the kernel agrees that it is the tree
    mp = mount_image(images["tar"])
    w, wl = snapshot(sockless_tree)
    g, gl = snapshot(mp)
    assert sorted(g) == sorted(w)
    for rel in w:
        assert g[rel] == w[rel], rel
    assert gl == wl
    shutil.rmtree(d)


def test_tar_determinism_across_jobs(sockless_tree, base):
    d = os.path.join(base, "tardet")
    os.mkdir(d)
    t = gnu_tar(sockless_tree, os.path.join(d, "t.tar"))
    digests = {}
    for extra in (["--serial"], ["-j", "1"], ["-j", "2"], ["-j", "4"],
                  ["-j", "4"]):
        out = os.path.join(d, "o.sqfs")
        pack(t, out, "-c", "gzip", "-b", "4K", "--force", *extra)
        digests[" ".join(extra)] = sha(out)
    assert len(set(digests.values())) == 1, digests
    shutil.rmtree(d)


def test_tar_in_other_order_mounts_as_the_tree(sockless_tree, base,
                                               mount_image):
    need(shutil.which("bsdtar"), "bsdtar (libarchive-tools) missing")
    d = os.path.join(base, "tarbsd")
    os.mkdir(d)
    t = os.path.join(d, "b.tar")
    r = subprocess.run(["bsdtar", "--xattrs", "-C", sockless_tree, "-cf", t,
                        "."], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = os.path.join(d, "b.sqfs")
    pack(t, out, *FAST)
    mp = mount_image(out)
    w, wl = snapshot(sockless_tree)
    g, gl = snapshot(mp)
    assert sorted(g) == sorted(w)
    for rel in w:
        assert g[rel] == w[rel], rel
    assert gl == wl


# ---- archives with entries SquashFS cannot hold, made with tarfile ----

def make_tar(path, members, fmt=tarfile.PAX_FORMAT):
    """members: list of (TarInfo kwargs, data or None)."""
    with tarfile.open(path, "w", format=fmt) as tf:
        for kw, data in members:
            ti = tarfile.TarInfo(kw.pop("name"))
            pax = kw.pop("pax_headers", None)
            for k, v in kw.items():
                setattr(ti, k, v)
            if pax:
                ti.pax_headers = pax
            if data is not None:
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            else:
                tf.addfile(ti)
    return path


def test_tar_implied_directories(base, mount_image):
    need(have_tar_input(), "tar input not built in (libarchive)")
    d = os.path.join(base, "tarimpl")
    os.mkdir(d)
    t = make_tar(os.path.join(d, "i.tar"), [
        (dict(name="a/b/c", mode=0o640, uid=7, gid=8, mtime=1000), b"c\n"),
        (dict(name="./a/x//y", mode=0o600, mtime=2000), b"y\n"),
        (dict(name="a/b", type=tarfile.DIRTYPE, mode=0o711, uid=5,
              mtime=3000), None),
    ])
    out = os.path.join(d, "i.sqfs")
    pack(t, out, env={"SOURCE_DATE_EPOCH": "1500000000"})
    mp = mount_image(out)
    implied = [mp, os.path.join(mp, "a"), os.path.join(mp, "a", "x")]
    for p in implied:
        st = os.lstat(p)
        assert (st.st_mode & 0o7777, st.st_uid, st.st_gid,
                int(st.st_mtime)) == (0o755, 0, 0, 1500000000), p
    st = os.lstat(os.path.join(mp, "a", "b"))   # listed after its child
    assert (st.st_mode & 0o7777, st.st_uid, int(st.st_mtime)) == \
        (0o711, 5, 3000)
    st = os.lstat(os.path.join(mp, "a", "b", "c"))
    assert (st.st_uid, st.st_gid, int(st.st_mtime)) == (7, 8, 1000)
    assert open(os.path.join(mp, "a", "x", "y"), "rb").read() == b"y\n"
    assert os.lstat(os.path.join(mp, "a")).st_nlink == 4


LONG = "n" * 256

BAD = [
    ("dotdot", [(dict(name="a/../../evil"), b"x")], "would leave"),
    ("longname", [(dict(name="d/" + LONG), b"x")], "longer than 255"),
    ("too-deep", [(dict(name="d/" * 3000 + "f"), b"x")], "path longer"),
    ("twice", [(dict(name="f"), b"1"), (dict(name="./f"), b"2")],
     "appears twice"),
    ("dangling-hardlink", [(dict(name="h", type=tarfile.LNKTYPE,
                                 linkname="missing"), None)],
     "not earlier in the archive"),
    ("file-as-parent", [(dict(name="f"), b"1"), (dict(name="f/g"), b"2")],
     "not a directory"),
    ("long-symlink", [(dict(name="s", type=tarfile.SYMTYPE,
                            linkname="x" * 5000), None)],
     "longer than 4096"),
    ("long-xattr-name", [(dict(name="f", pax_headers={
        "SCHILY.xattr.user." + "k" * 300: "v"}), b"1")],
     "name longer than 255"),
]


@pytest.mark.parametrize("name,members,message", BAD,
                         ids=[b[0] for b in BAD])
def test_tar_entries_squashfs_cannot_hold(name, members, message, base):
    need(have_tar_input(), "tar input not built in (libarchive)")
    d = os.path.join(base, "tarbad-" + name)
    os.mkdir(d)
    t = make_tar(os.path.join(d, "bad.tar"),
                 [(dict(kw), data) for kw, data in members])
    out = os.path.join(d, "out.sqfs")
    r = pack(t, out, check=False)
    assert r.returncode == 1, r.stderr
    assert message in r.stderr, r.stderr
    assert os.listdir(d) == ["bad.tar"]


def test_tar_truncated_and_garbage(base):
    need(have_tar_input(), "tar input not built in (libarchive)")
    d = os.path.join(base, "tartrunc")
    os.mkdir(d)
    t = make_tar(os.path.join(d, "t.tar"),
                 [(dict(name="big"), os.urandom(300000))])
    with open(t, "rb") as f:
        data = f.read()
    for label, blob in (("truncated", data[:200000]),
                        ("garbage", os.urandom(5000)),
                        ("zero-bytes", b""),
                        ("empty", bytes(10240))):
        src = os.path.join(d, label)
        with open(src, "wb") as f:
            f.write(blob)
        out = os.path.join(d, label + ".sqfs")
        r = pack(src, out, check=False)
        if label == "empty":
            # an empty archive is an empty tree
            assert r.returncode == 0, r.stderr
            w = subprocess.run([cat_tool(), "--walk", out],
                               capture_output=True, text=True)
            assert w.returncode == 0 and len(w.stdout.splitlines()) == 1
            continue
        assert r.returncode == 1, (label, r.stderr)
        assert src in r.stderr or "big" in r.stderr, r.stderr
        assert r.stderr.count("\n") == 2, r.stderr  # the reason + 'not written'
        assert not os.path.exists(out)
