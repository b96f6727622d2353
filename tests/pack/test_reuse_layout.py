"""sqfs-lazy-pack --reuse-layout (docs/packer-determinism.md, "Reuse across
versions"): fragment blocks end where the files say, so the fragment
blocks of unchanged small files come out the same in the next version of
a tree; the image is the same for every -j, from a tar as from the
directory, and the kernel reads it as the tree."""

import hashlib
import os
import random
import shutil
import subprocess

from conftest import need, pack, build_dir


def make_tree(root, seed=7, n=600):
    """n small files of text-like content, 200 B to 6 KiB, in a few
    directories, plus two files of several blocks."""
    rnd = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"squash", b"lazy",
             b"block", b"fragment", b"manifest", b"unit"]
    os.makedirs(root)
    for i in range(n):
        d = os.path.join(root, "d%d" % (i % 7))
        os.makedirs(d, exist_ok=True)
        size = rnd.randrange(200, 6000)
        data = b" ".join(rnd.choice(words) for _ in range(size // 5))
        with open(os.path.join(d, "f%04d" % i), "wb") as f:
            f.write(data[:size] + b"%d\n" % i)
    for name in ("big1", "big2"):
        with open(os.path.join(root, name), "wb") as f:
            f.write(rnd.randbytes(3 * 131072 + 999))
    return root


def fragment_blocks(image):
    """SHA-256 of every fragment block of image, from the units
    sqfs-lazy-sign --list names."""
    sign = os.path.join(build_dir(), "sqfs-lazy-sign")
    need(os.access(sign, os.X_OK), "sqfs-lazy-sign not built")
    r = subprocess.run([sign, "--list", image], capture_output=True,
                       text=True, check=True)
    with open(image, "rb") as f:
        data = f.read()
    out = []
    for line in r.stdout.splitlines():
        off, length, kind = line.split(" ", 2)
        if kind == "fragment block":
            off, length = int(off, 16), int(length)
            out.append(hashlib.sha256(data[off:off + length]).digest())
    return out


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def versions(base, name):
    """v1, and v2 = v1 with one small file early in the tree changed, one
    added and one removed."""
    d = os.path.join(base, name)
    v1 = make_tree(os.path.join(d, "v1"))
    v2 = os.path.join(d, "v2")
    shutil.copytree(v1, v2, symlinks=True)
    with open(os.path.join(v2, "d0", "f0007"), "ab") as f:
        f.write(b"changed in v2\n")
    with open(os.path.join(v2, "d1", "f0050-new"), "wb") as f:
        f.write(b"added in v2\n" * 30)
    os.unlink(os.path.join(v2, "d2", "f0100"))
    return d, v1, v2


def test_unchanged_fragment_blocks_repeat(base):
    d, v1, v2 = versions(base, "reuse-frag")
    got = {}
    for tag, args in (("default", []), ("reuse", ["--reuse-layout"])):
        imgs = []
        for v in (v1, v2):
            out = os.path.join(d, "%s-%s.sqfs" % (tag, os.path.basename(v)))
            pack(v, out, "-c", "gzip", *args)
            imgs.append(fragment_blocks(out))
        old = set(imgs[0])
        new = [h for h in imgs[1] if h not in old]
        got[tag] = (len(imgs[1]), len(new))
    # by default the changed file near the start moves every later tail:
    # (nearly) every fragment block is new
    total, new = got["default"]
    assert total >= 10 and new >= total - 3, got
    # with --reuse-layout three changes disturb at most a few blocks each
    # (the block they land in, and one more where an end comes or goes)
    total, new = got["reuse"]
    assert total >= 50 and new <= 8, got
    shutil.rmtree(d)


def test_same_for_every_job_count_and_from_tar(base):
    d = os.path.join(base, "reuse-det")
    src = make_tree(os.path.join(d, "src"), seed=11, n=300)
    digests = {}
    for extra in (["--serial"], ["-j", "1"], ["-j", "2"], ["-j", "3"]):
        out = os.path.join(d, "o.sqfs")
        pack(src, out, "--force", "--reuse-layout=2K", *extra)
        digests[" ".join(extra)] = sha(out)
    need(shutil.which("tar"), "tar missing")
    t = os.path.join(d, "t.tar")
    subprocess.run(["tar", "--format=pax", "--sort=name", "-C", src, "-cf",
                    t, "."], check=True)
    out = os.path.join(d, "o.sqfs")
    pack(t, out, "--force", "--reuse-layout=2K", "-j", "2")
    digests["tar"] = sha(out)
    assert len(set(digests.values())) == 1, digests
    # the layout is not the default one
    pack(src, out, "--force")
    assert sha(out) not in digests.values()
    shutil.rmtree(d)


def test_kernel_reads_the_tree(base, mount_image):
    d = os.path.join(base, "reuse-kernel")
    src = make_tree(os.path.join(d, "src"), seed=3, n=200)
    out = os.path.join(d, "o.sqfs")
    pack(src, out, "--reuse-layout")
    mp = mount_image(out)
    for dirpath, _dirs, files in os.walk(src):
        for n in files:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, src)
            with open(p, "rb") as a, open(os.path.join(mp, rel), "rb") as b:
                assert a.read() == b.read(), rel
