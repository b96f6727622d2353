"""SIF files (issue 37): sqfs-lazy-mount finds the SquashFS partition of a
SIF container image (Apptainer, SingularityCE) from its header and
descriptors, locally and over nginx, and mounts it as the kernel mounts the
same bytes at their offset. The SIF files are made by siftool, the format's
own tool (scripts/install-siftool.sh), around images from mksquashfs and
from our packer. A SIF that lies is one line naming it, exit 1. Apptainer's
own command lines for squashfuse and squashfuse_ll (the image handed over
as descriptor 3, the mount awaited in /proc/self/mountinfo for 2 s) mount
with us too."""

import os
import shutil
import struct
import subprocess
import time

import pytest

from conftest import daemon, mksquashfs, require, try_mount
from servers import TAIL, kernel_umount, without_openers
from test_nginx import walk

VERSION = "v2.25.0"
DESCR_AT, DESCR_SIZE = 4096, 585


def siftool():
    p = os.environ.get("LSQ_SIFTOOL") or os.path.join(
        os.environ.get("LSQ_TEST_CACHE", "/var/cache/sqfs-lazy-tests"),
        "bin", "siftool-" + VERSION, "siftool")
    require(os.access(p, os.X_OK),
            "siftool not built (bash scripts/install-siftool.sh): " + p)
    return p


def packer():
    return os.path.join(os.environ["LSQ_BUILD_DIR"], "src", "pack",
                        "sqfs-lazy-pack")


def tree(root, seed):
    """A small tree with what a walk compares: modes, links, xattrs, a file
    of several blocks and one in a fragment."""
    os.makedirs(os.path.join(root, "etc", "app"))
    with open(os.path.join(root, "etc", "app", "conf"), "wb") as f:
        f.write(b"sif %d\n" % seed * 3000)
    with open(os.path.join(root, "big"), "wb") as f:
        f.write(os.urandom(700_000))
    os.symlink("etc/app/conf", os.path.join(root, "link"))
    os.chmod(os.path.join(root, "etc", "app", "conf"), 0o640)
    os.setxattr(os.path.join(root, "big"), "user.seed", b"%d" % seed)


def sif(tmp_path, name, parts, deffile=True):
    """A SIF made by siftool: a definition file object, then each image of
    parts [(path, partition type)], in order (object ids 2, 3, ...)."""
    path = str(tmp_path / name)
    tool = siftool()
    subprocess.run([tool, "new", path], check=True, capture_output=True)
    if deffile:
        d = tmp_path / (name + ".def")
        d.write_text("Bootstrap: docker\nFrom: debian:12\n")
        subprocess.run([tool, "add", path, str(d), "--datatype", "1"],
                       check=True, capture_output=True)
    for img, parttype in parts:
        subprocess.run([tool, "add", path, img, "--datatype", "4",
                        "--parttype", str(parttype), "--partfs", "1",
                        "--partarch", "2"], check=True, capture_output=True)
    return path


def partitions(path):
    """[(object id, offset, size, fs type, partition type)] of the SIF's
    partition descriptors, read with struct as the format lays them out."""
    with open(path, "rb") as f:
        head = f.read(128)
        total, off = struct.unpack_from("<qq", head, 88)
        f.seek(off)
        raw = f.read(total * DESCR_SIZE)
    out = []
    for i in range(total):
        d = raw[i * DESCR_SIZE:(i + 1) * DESCR_SIZE]
        dtype, used, oid = struct.unpack_from("<iBI", d, 0)
        if used and dtype == 0x4004:
            o, s = struct.unpack_from("<qq", d, 17)
            fs, pt = struct.unpack_from("<ii", d, 201)
            out.append((oid, o, s, fs, pt))
    return out


def kernel_mount_at(path, offset, mnt):
    require(os.geteuid() == 0, "needs root for a loop mount")
    os.makedirs(mnt, exist_ok=True)
    r = subprocess.run(["mount", "-t", "squashfs", "-o",
                        "loop,ro,offset=%d" % offset, path, mnt],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.fail("the kernel's loop mount of %s at %d failed: %s"
                    % (path, offset, r.stderr.strip()), pytrace=False)


def same_as_kernel(path, offset, mnt, tmp_path):
    kmnt = str(tmp_path / ("k-%d" % offset))
    kernel_mount_at(path, offset, kmnt)
    try:
        k, f = walk(kmnt), walk(mnt)
    finally:
        kernel_umount(kmnt)
    assert sorted(k) == sorted(f)
    diffs = [(p, k[p], f[p]) for p in k if k[p] != f[p]]
    assert not diffs, diffs[:5]
    assert len(k) >= 6


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Two SquashFS images of different trees: one by mksquashfs, one by
    sqfs-lazy-pack."""
    d = tmp_path_factory.mktemp("sif-images")
    out = {}
    for seed, maker in ((1, "mksquashfs"), (2, "pack")):
        t = str(d / ("tree%d" % seed))
        tree(t, seed)
        img = str(d / ("%s.sqfs" % maker))
        if maker == "mksquashfs":
            mksquashfs(t, img, "-comp", "zstd", "-b", "65536")
        else:
            subprocess.run([packer(), "-q", t, img], check=True,
                           capture_output=True, timeout=120)
        out[maker] = img
    return out


@pytest.mark.parametrize("maker", ["mksquashfs", "pack"])
def test_local_sif_same_as_kernel(images, mounts, tmp_path, maker):
    path = sif(tmp_path, "local.sif", [(images[maker], 2)])
    (oid, off, size, fs, pt), = partitions(path)
    assert (oid, fs, pt) == (2, 1, 2) and off >= 32768, partitions(path)
    m = mounts(path)
    same_as_kernel(path, off, m.mnt, tmp_path)


def test_remote_sif_lazily_with_cache(images, nginx, mounts, tmp_path):
    """Over nginx: the header and descriptors come with the mount's first
    request; the partition's superblock costs one more; files read equal
    the kernel's; a second mount with the same cache_dir fetches nothing of
    what the first read."""
    path = sif(tmp_path, "remote.sif", [(images["pack"], 2)])
    (_, off, _, _, _), = partitions(path)
    url = nginx.url(path)
    cache = str(tmp_path / "cache")
    nginx.clear_log()
    m = mounts(url, ["cache_dir=" + cache, "background=off",
                     "prefetch=off"])
    first = [e for e in without_openers(nginx.entries())
             if e["uri"].endswith("remote.sif")]
    assert len(first) <= 3, first
    same_as_kernel(path, off, m.mnt, tmp_path)
    assert m.stop() == []
    nginx.clear_log()
    m2 = mounts(url, ["cache_dir=" + cache, "background=off",
                      "prefetch=off"])
    with open(os.path.join(m2.mnt, "big"), "rb") as f:
        assert len(f.read()) == 700_000
    ranged = [e for e in nginx.entries() if e["uri"].endswith("remote.sif")
              and e["status"] == 206]
    # the probe of the file, and of the partition's head; no data again
    # (but what the mount asks for beside its probe, before it knows the
    # cache: 1-byte openers and the image's last 512 KiB)
    assert sum(e["body"] for e in without_openers(ranged)) <= 2 * 65536, \
        ranged
    assert sum(e["body"] for e in ranged) <= 2 * 65536 + TAIL + 8, ranged


def test_partition_choice_and_offset(images, mounts, tmp_path):
    """Two system partitions: the primary one by default, the other by
    -o sif_partition=ID, and an explicit offset= wins over both."""
    path = sif(tmp_path, "two.sif", [(images["mksquashfs"], 1),
                                     (images["pack"], 2)])
    parts = {p[0]: p for p in partitions(path)}
    assert sorted(parts) == [2, 3], parts
    with open(os.path.join(mounts(path).mnt, "etc", "app", "conf"),
              "rb") as f:
        assert f.read(5) == b"sif 2"  # object 3 is the primary one
    m = mounts(path, ["sif_partition=2"])
    same_as_kernel(path, parts[2][1], m.mnt, tmp_path)
    m = mounts(path, ["offset=%d" % parts[2][1], "sif_partition=3"])
    with open(os.path.join(m.mnt, "etc", "app", "conf"), "rb") as f:
        assert f.read(5) == b"sif 1"


def test_signed_partition_verified(tmp_path, mounts):
    """A partition signed by sqfs-lazy-sign, followed by another object:
    the partition ends where its descriptor says, so its manifest is found
    there, and every block read is checked against it."""
    from test_verify import _genkey, _tool
    t = str(tmp_path / "tree")
    tree(t, 3)
    img = str(tmp_path / "signed.sqfs")
    mksquashfs(t, img, "-comp", "gzip")
    key = _genkey(str(tmp_path / "k.pem"))
    subprocess.run([_tool("sqfs-lazy-sign"), "--key",
                    str(tmp_path / "k.pem"), img], check=True,
                   capture_output=True, timeout=60)
    path = sif(tmp_path, "signed.sif", [(img, 2)])
    trailer = tmp_path / "labels.json"
    trailer.write_text('{"org.example.signed": "yes"}')
    subprocess.run([siftool(), "add", path, str(trailer), "--datatype",
                    "3"], check=True, capture_output=True)
    (_, off, size, _, _), = partitions(path)
    assert off + size < os.path.getsize(path)  # something follows it
    m = mounts(path, ["verify=" + key])
    same_as_kernel(path, off, m.mnt, tmp_path)
    st = subprocess.run([daemon(), "--stats", m.mnt], capture_output=True,
                        text=True, check=True).stdout
    units = dict(line.split() for line in st.splitlines())
    assert int(units["verify_units"]) > 0 and \
        int(units["verify_mismatches"]) == 0, units


def patched(path, out, at, fmt, value):
    data = bytearray(open(path, "rb").read())
    struct.pack_into(fmt, data, at, value)
    with open(out, "wb") as f:
        f.write(data)
    return out


def test_lying_sifs_are_one_line_each(images, tmp_path):
    path = sif(tmp_path, "good.sif", [(images["mksquashfs"], 2)],
               deffile=False)
    (oid, off, size, _, _), = partitions(path)
    d0 = DESCR_AT  # the partition is the first descriptor
    cases = {
        "many": (patched(path, str(tmp_path / "many.sif"), 88, "<q", 1 << 40),
                 "SIF header:"),
        "past": (patched(path, str(tmp_path / "past.sif"), d0 + 17, "<q",
                         1 << 40), "SIF descriptor 0 (object 1):"),
        "over": (patched(path, str(tmp_path / "over.sif"), d0 + 17, "<q",
                         DESCR_AT), "SIF descriptor 0 (object 1):"),
        "raw": (patched(path, str(tmp_path / "raw.sif"), d0 + 201, "<i", 4),
                "another kind of partition, not SquashFS"),
        "encrypted": (patched(path, str(tmp_path / "enc.sif"), d0 + 201,
                              "<i", 5),
                      "an encrypted partition, not SquashFS"),
        "none": (patched(path, str(tmp_path / "none.sif"), d0 + 205, "<i",
                         3), "no primary system partition"),
    }
    for name, (bad, want) in cases.items():
        rc, err, _ = try_mount(bad, str(tmp_path / ("m-" + name)),
                               str(tmp_path / "log"))
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert rc == 1 and len(lines) == 1, (name, rc, err)
        assert bad in lines[0] and want in lines[0], (name, lines[0])
    rc, err, _ = try_mount(images["pack"], str(tmp_path / "m-notsif"),
                           str(tmp_path / "log"), ["sif_partition=2"])
    assert rc == 1 and "not a SIF file" in err, err


APPTAINER_FORMS = {
    # internal/pkg/image/driver/imagedriver.go: unprivileged, squashfuse_ll
    "squashfuse_ll": lambda off, uid, gid: ["-f", "-o", "offset=%d" % off],
    # and with squashfuse, owners set to the caller
    "squashfuse": lambda off, uid, gid: [
        "-f", "-o", "uid=%d,gid=%d,offset=%d" % (uid, gid, off)],
}


@pytest.mark.parametrize("form", sorted(APPTAINER_FORMS))
def test_apptainer_command_lines(images, tmp_path, form):
    """As Apptainer runs squashfuse_ll or squashfuse: the SIF open on
    descriptor 3, the source /proc/self/fd/3, the mount awaited in
    /proc/self/mountinfo for 2 s; then the same files as the kernel's
    mount of the partition (owners as asked in the squashfuse form)."""
    path = sif(tmp_path, "app.sif", [(images["mksquashfs"], 2)])
    (_, off, _, _, _), = partitions(path)
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    uid, gid = 4321, 8765
    args = APPTAINER_FORMS[form](off, uid, gid)
    # the image on descriptor 3, as Apptainer's ExtraFiles hands it over
    proc = subprocess.Popen(["sh", "-c", 'exec "$@" 3<"$SIF"', "sh",
                             daemon()] + args + ["/proc/self/fd/3", mnt],
                            env=dict(os.environ, SIF=path),
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline, seen = time.monotonic() + 2, False
        while time.monotonic() < deadline and not seen:
            with open("/proc/self/mountinfo") as f:
                seen = any(line.split()[4] == mnt for line in f)
            time.sleep(0.01)
        assert seen, "not in mountinfo within 2 s"
        if form == "squashfuse":
            for root, dirs, files in os.walk(mnt):
                for n in [root] + [os.path.join(root, x)
                                   for x in dirs + files]:
                    st = os.lstat(n)
                    assert (st.st_uid, st.st_gid) == (uid, gid), n
            kmnt = str(tmp_path / "k")
            kernel_mount_at(path, off, kmnt)
            try:
                for rel in ("big", "etc/app/conf"):
                    with open(os.path.join(kmnt, rel), "rb") as a, \
                            open(os.path.join(mnt, rel), "rb") as b:
                        assert a.read() == b.read(), rel
            finally:
                kernel_umount(kmnt)
        else:
            same_as_kernel(path, off, mnt, tmp_path)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            subprocess.run(["fusermount3", "-u", "-z", mnt],
                           capture_output=True)
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, proc.stderr.read()
    assert shutil.which("fusermount3")
