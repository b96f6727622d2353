#!/usr/bin/env python3
"""A deterministic subset of a real tree (/usr) for the benchmark image.

  usr_subset.py --src /usr --out DIR --bytes N [--seed S]

Issue 4 measured a 3 GiB tree of /usr; on a 2-core shared machine the
bench packs a subset of about N bytes (1 GiB by default in mkdata.sh).
Every regular file and symlink of SRC (one filesystem, no special files) is
kept when a hash of (seed, its path) falls below N / (bytes of all regular
files): the choice depends only on the path, so the same /usr gives the
same subset, files are spread over the whole tree (not all of bin/ and
none of share/), and directories keep their real shapes. Files are
hard-linked into OUT when SRC and OUT share a filesystem, copied otherwise.

Prints key=value lines: files, bytes, symlinks, dirs and manifest_sha256
(of the sorted "path size [-> target]" lines), so a changed /usr shows in
the image stamp.
"""

import argparse
import hashlib
import os
import shutil
import stat
import sys


def scan(src):
    """(relpath, lstat) of every regular file and symlink under src,
    sorted, staying on src's filesystem."""
    dev = os.lstat(src).st_dev
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        keep = []
        for d in sorted(dirnames):
            p = os.path.join(dirpath, d)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
                keep.append(d)
            elif stat.S_ISLNK(st.st_mode):
                out.append((os.path.relpath(p, src), st))
        dirnames[:] = keep
        for n in sorted(filenames):
            p = os.path.join(dirpath, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                out.append((os.path.relpath(p, src), st))
    out.sort(key=lambda e: e[0])
    return out


def pick(rel, seed, ratio):
    h = hashlib.sha256(("%d:%s" % (seed, rel)).encode("utf-8",
                                                      "surrogateescape"))
    return int.from_bytes(h.digest()[:8], "big") / 2.0 ** 64 < ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="/usr")
    ap.add_argument("--out", required=True)
    ap.add_argument("--bytes", type=int, required=True)
    ap.add_argument("--seed", type=int, default=20240601)
    a = ap.parse_args()
    if os.path.exists(a.out):
        sys.exit("usr_subset: %s exists, refusing to write into it" % a.out)
    entries = scan(a.src)
    total = sum(st.st_size for _, st in entries if stat.S_ISREG(st.st_mode))
    ratio = min(1.0, a.bytes / total) if total else 1.0
    os.makedirs(a.out)
    man = hashlib.sha256()
    nfiles = nbytes = nlinks = 0
    dirs = set()
    linked = copied = 0
    for rel, st in entries:
        if not pick(rel, a.seed, ratio):
            continue
        src, dst = os.path.join(a.src, rel), os.path.join(a.out, rel)
        parent = os.path.dirname(rel)
        if parent and parent not in dirs:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            while parent:
                dirs.add(parent)
                parent = os.path.dirname(parent)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(src)
            os.symlink(target, dst)
            man.update(("%s -> %s\n" % (rel, target)).encode(
                "utf-8", "surrogateescape"))
            nlinks += 1
            continue
        try:
            os.link(src, dst, follow_symlinks=False)
            linked += 1
        except OSError:
            shutil.copyfile(src, dst)
            copied += 1
        man.update(("%s %d\n" % (rel, st.st_size)).encode(
            "utf-8", "surrogateescape"))
        nfiles += 1
        nbytes += st.st_size
    print("usr_src=%s" % a.src)
    print("usr_src_bytes=%d" % total)
    print("usr_target_bytes=%d" % a.bytes)
    print("usr_files=%d" % nfiles)
    print("usr_bytes=%d" % nbytes)
    print("usr_symlinks=%d" % nlinks)
    print("usr_dirs=%d" % len(dirs))
    print("usr_manifest_sha256=%s" % man.hexdigest())
    print("usr_hardlinked=%d usr_copied=%d" % (linked, copied),
          file=sys.stderr)


if __name__ == "__main__":
    main()
