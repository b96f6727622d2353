#!/usr/bin/env python3
"""Deterministic benchmark dataset for sqfs-lazy (see bench/README.md).

Writes into OUT:
  big.bin   one large file (default 1 GiB) for the fio workloads
  tree/     many files of varied sizes (--tree-bytes; 0 writes no tree:
            bench/mkdata.sh packs a subset of /usr as tree/ instead)

Content is built from 4 KiB chunks of four kinds, picked by a seeded PRNG so
that a 128 KiB SquashFS block compresses roughly like real binaries (about
2:1 with zstd at mksquashfs' default level):

  random      pseudo-random bytes (already-compressed data, hashes)
  code        bytes from a skewed 64-symbol alphabet (machine code-like)
  text        words from a 256-word vocabulary (string tables, docs)
  table       little-endian u32 values with small increments (relocations)

Everything depends only on --seed and the size arguments: the same arguments
give the same bytes, names, sizes and timestamps on every machine (Python's
random.Random is stable across versions for randbytes/getrandbits/random).
"""

import argparse
import math
import os
import random
import sys

CHUNK = 4096
# Weights of random, code, text, table chunks; tuned for ~2:1 with zstd -15.
KIND_WEIGHTS = (12, 28, 40, 20)
FIXED_TIME = 1700000000  # 2023-11-14, every file and directory


class ChunkGen:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        rng = self.rng
        syll = [b"ab", b"re", b"con", b"tion", b"str", b"get", b"set", b"_",
                b"init", b"buf", b"len", b"ptr", b"size", b"lsq", b"err", b"fd"]
        self.words = [b"".join(rng.choice(syll) for _ in range(rng.randint(1, 4)))
                      for _ in range(256)]
        alpha = bytes([0x00, 0x48, 0x89, 0x8b, 0xe8, 0xff, 0x0f, 0x85,
                       0x84, 0xc3, 0x24, 0x44, 0x45, 0x31, 0xc0, 0x01] * 2
                      + list(range(0x40, 0x60)))
        self.code_table = bytes(alpha[i % len(alpha)] for i in range(256))
        cum, total = [], 0
        for w in KIND_WEIGHTS:
            total += w
            cum.append(total)
        self.cum = cum
        self.total = total

    def chunk(self):
        rng = self.rng
        r = rng.randrange(self.total)
        if r < self.cum[0]:
            return rng.randbytes(CHUNK)
        if r < self.cum[1]:
            return rng.randbytes(CHUNK).translate(self.code_table)
        if r < self.cum[2]:
            s = b" ".join(map(self.words.__getitem__, rng.randbytes(900)))
            return s[:CHUNK].ljust(CHUNK, b"\n")
        base = rng.getrandbits(32)
        out = bytearray()
        for d in rng.randbytes(CHUNK // 4):
            base = (base + (d & 0x1f)) & 0xffffffff
            out += base.to_bytes(4, "little")
        return bytes(out)

    def write(self, f, size):
        left = size
        buf = []
        while left > 0:
            c = self.chunk()
            if left < CHUNK:
                c = c[:left]
            buf.append(c)
            left -= len(c)
            if len(buf) >= 256:
                f.write(b"".join(buf))
                buf.clear()
        if buf:
            f.write(b"".join(buf))


def log_uniform(rng, lo, hi):
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def make_tree(root, gen, seed, tree_bytes):
    """Files until tree_bytes is reached: 98% log-uniform in [64 B, 64 KiB]
    (mostly fragments), 2% log-uniform in [64 KiB, 4 MiB] (full blocks).
    16 top directories x 8 subdirectories, plus one flat directory holding
    about 15% of the files (large directory, exercises directory indexes).
    A few symlinks. Returns (files, bytes, dirs, symlinks)."""
    rng = random.Random(seed ^ 0x5eed)
    exts = [".so", ".txt", ".py", ".h", ".mo", ".png", ".json", ""]
    dirs = []
    for i in range(16):
        top = "d%02d" % i
        dirs.append(top)
        for j in range(8):
            dirs.append("%s/s%d" % (top, j))
    dirs.append("many")
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    total = 0
    nfiles = 0
    paths = []
    while total < tree_bytes:
        if rng.random() < 0.98:
            size = log_uniform(rng, 64, 64 * 1024)
        else:
            size = log_uniform(rng, 64 * 1024, 4 * 1024 * 1024)
        size = min(size, tree_bytes - total)
        d = "many" if rng.random() < 0.15 else rng.choice(dirs[:-1])
        name = "f%05d%s" % (nfiles, rng.choice(exts))
        rel = os.path.join(d, name)
        with open(os.path.join(root, rel), "wb") as f:
            gen.write(f, size)
        os.chmod(os.path.join(root, rel), 0o644)
        paths.append(rel)
        total += size
        nfiles += 1
    nlinks = 0
    for k in range(max(1, nfiles // 200)):
        target = paths[rng.randrange(len(paths))]
        link = os.path.join(root, "d00", "link%03d" % k)
        os.symlink(os.path.relpath(os.path.join(root, target),
                                   os.path.dirname(link)), link)
        nlinks += 1
    return nfiles, total, len(dirs) + 1, nlinks


def fix_times(root):
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for n in filenames + dirnames:
            os.utime(os.path.join(dirpath, n), (FIXED_TIME, FIXED_TIME),
                     follow_symlinks=False)
        os.chmod(dirpath, 0o755)
        os.utime(dirpath, (FIXED_TIME, FIXED_TIME))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--big-bytes", type=int, default=1 << 30)
    ap.add_argument("--tree-bytes", type=int, default=350 << 20)
    a = ap.parse_args()

    if os.path.exists(a.out):
        sys.exit("gendata: %s exists, refusing to write into it" % a.out)
    os.makedirs(a.out)
    gen = ChunkGen(a.seed)
    with open(os.path.join(a.out, "big.bin"), "wb") as f:
        gen.write(f, a.big_bytes)
    os.chmod(os.path.join(a.out, "big.bin"), 0o644)
    nfiles = tbytes = ndirs = nlinks = 0
    if a.tree_bytes > 0:  # 0: big.bin only (mkdata.sh adds a /usr subset)
        tree = os.path.join(a.out, "tree")
        nfiles, tbytes, ndirs, nlinks = make_tree(tree, gen, a.seed,
                                                  a.tree_bytes)
    fix_times(a.out)
    # key=value lines, appended to the image stamp by mkdata.sh
    print("seed=%d" % a.seed)
    print("big_bytes=%d" % a.big_bytes)
    if a.tree_bytes > 0:
        print("tree_files=%d" % nfiles)
        print("tree_bytes=%d" % tbytes)
        print("tree_dirs=%d" % ndirs)
        print("tree_symlinks=%d" % nlinks)
    print("chunk_weights=random:%d,code:%d,text:%d,table:%d" % KIND_WEIGHTS)


if __name__ == "__main__":
    main()
