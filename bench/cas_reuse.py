#!/usr/bin/env python3
"""What version 2 of an image costs after version 1 (issue 19): a tree,
then the same tree with 5% of its files changed, added or removed, both
packed and signed; mount v1 over HTTP with a cache_dir and read
everything; unmount; mount v2 with the same cache_dir and read everything.
Reports, per packer, the bytes nginx sent for v2 against the target of at
most 1.3x (the compressed size of the changed files + v2's metadata).

usage: bench/cas_reuse.py [--tree DIR] [--changed 0.05] [--seed 19]
                          [--packers LIST] [--build DIR] [--out DIR]

  --tree      the v1 tree (default /usr/lib/python3; regular files and
              symlinks are copied, nothing else)
  --packers   comma list of: lazy (sqfs-lazy-pack, defaults), lazy-reuse
              (--reuse-layout), lazy-nofrag (--no-fragments), mksquashfs
              (its defaults), mksquashfs-nofrag (-no-fragments)
  --out       results folder (default bench/results/UTC-cas-reuse):
              meta.tsv (the run's facts), rows.json, README.md

"The compressed size of the changed files": the data area (blocks and
fragments, no metadata) of an image of only the changed and added files,
packed with the same packer and settings. v2's metadata: the superblock,
everything from the inode table to the end of the filesystem, and the
manifest. The ideal column is what a perfect cache would still fetch: the
bytes of v2's units whose digest v1 does not have, plus v2's metadata.
Needs root (FUSE), nginx, mksquashfs, openssl.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from servers import Nginx, is_mounted, unmount  # noqa: E402
import benchlib  # noqa: E402

PACKERS = {
    "lazy": lambda b, src, out: [os.path.join(b, "src", "pack",
                                              "sqfs-lazy-pack"), "-q",
                                 src, out],
    "lazy-reuse": lambda b, src, out: [os.path.join(b, "src", "pack",
                                                    "sqfs-lazy-pack"), "-q",
                                       "--reuse-layout", src, out],
    "lazy-nofrag": lambda b, src, out: [os.path.join(b, "src", "pack",
                                                     "sqfs-lazy-pack"), "-q",
                                        "--no-fragments", src, out],
    "mksquashfs": lambda b, src, out: ["mksquashfs", src, out, "-noappend",
                                       "-quiet", "-no-progress"],
    "mksquashfs-nofrag": lambda b, src, out: [
        "mksquashfs", src, out, "-noappend", "-quiet", "-no-progress",
        "-no-fragments"],
}


def copy_tree(src, dst):
    """Regular files and symlinks of src under dst; returns the files."""
    files = []
    for root, dirs, names in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(root, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for n in sorted(names):
            s, d = os.path.join(root, n), os.path.join(dst, rel, n)
            if os.path.islink(s):
                os.symlink(os.readlink(s), d)
            elif os.path.isfile(s):
                shutil.copyfile(s, d)
                files.append(os.path.normpath(os.path.join(rel, n)))
    return files


def make_v2(v1, v2, files, share, seed):
    """Copy v1 to v2 and change share of its files: a third rewritten in
    place (a few bytes at one spot, as a patch release changes them), a
    third removed, a third added (another file's bytes, altered). Returns
    the changed and added files of v2."""
    shutil.copytree(v1, v2, symlinks=True)
    rng = random.Random(seed)
    picked = rng.sample(files, max(3, int(len(files) * share)))
    touched = []
    for i, rel in enumerate(picked):
        path = os.path.join(v2, rel)
        if i % 3 == 0:
            with open(path, "r+b") as f:
                data = bytearray(f.read())
                at = rng.randrange(len(data) + 1)
                data[at:at + 16] = rng.randbytes(16)
                f.seek(0)
                f.write(data)
                f.truncate()
            touched.append(rel)
        elif i % 3 == 1:
            os.unlink(path)
        else:
            with open(os.path.join(v1, rng.choice(files)), "rb") as f:
                data = bytearray(f.read())
            data[:16] = rng.randbytes(16)
            new = rel + ".new"
            with open(os.path.join(v2, new), "wb") as f:
                f.write(data)
            touched.append(new)
    return touched


def superblock(img):
    with open(img, "rb") as f:
        sb = f.read(96)
    return {"bytes_used": struct.unpack_from("<Q", sb, 40)[0],
            "inode_table": struct.unpack_from("<Q", sb, 64)[0]}


def units(build, img):
    out = subprocess.run([os.path.join(build, "sqfs-lazy-sign"), "--list",
                          img], check=True, capture_output=True,
                         text=True).stdout
    res = []
    with open(img, "rb") as f:
        for line in out.splitlines():
            off, length, _ = line.split(None, 2)
            f.seek(int(off, 16))
            res.append((int(off, 16), int(length),
                        hashlib.sha256(f.read(int(length))).digest()))
    return res


def read_all(mnt):
    n = 0
    for root, _, names in os.walk(mnt):
        for name in names:
            p = os.path.join(root, name)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    while f.read(1 << 20):
                        pass
                n += 1
    return n


def mounted_read(build, url, mnt, opts, log):
    os.makedirs(mnt, exist_ok=True)
    cmd = [os.path.join(build, "sqfs-lazy-mount"), "-f"]
    for o in opts:
        cmd += ["-o", o]
    with open(log, "ab") as lf:
        proc = subprocess.Popen(cmd + [url, mnt], stdout=lf, stderr=lf,
                                stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not is_mounted(mnt):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("mount of %s failed, see %s" % (url, log))
        time.sleep(0.02)
    t0 = time.monotonic()
    n = read_all(mnt)
    secs = time.monotonic() - t0
    st = subprocess.run([cmd[0], "--stats", mnt], capture_output=True,
                        text=True).stdout
    unmount(mnt)
    proc.wait(30)
    stats = dict((k, int(v)) for k, v in
                 (line.split() for line in st.splitlines()))
    return n, secs, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", default="/usr/lib/python3")
    ap.add_argument("--changed", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--packers",
                    default="lazy,lazy-reuse,lazy-nofrag,mksquashfs,"
                    "mksquashfs-nofrag")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--out")
    ap.add_argument("--work", default="/tmp/sqfs-lazy-bench-reuse")
    a = ap.parse_args()
    build = a.build = os.path.abspath(a.build)
    out = a.out = os.path.abspath(a.out or os.path.join(
        HERE, "results", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) +
        "-cas-reuse"))
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    # the run's facts: the command with every option's value, the commit
    # of the build it measures (packer, signer, daemon)
    command = benchlib.argparse_command("bench/cas_reuse.py", ap, a)
    facts = benchlib.run_facts(command, benchlib.shell_join(sys.argv), [(
        "", build, ["sqfs-lazy-mount", "src/pack/sqfs-lazy-pack",
                    "sqfs-lazy-sign"])])
    benchlib.warn_unknown(facts)
    benchlib.write_meta(os.path.join(out, "meta.tsv"), facts)
    w = lambda *p: os.path.join(a.work, *p)  # noqa: E731
    files = copy_tree(a.tree, w("v1"))
    touched = make_v2(w("v1"), w("v2"), files, a.changed, a.seed)
    for rel in touched:
        os.makedirs(os.path.dirname(w("changed", rel)), exist_ok=True)
        shutil.copyfile(w("v2", rel), w("changed", rel))
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out",
                    w("key.pem")], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", w("key.pem"), "-pubout",
                    "-out", w("pub.pem")], check=True, capture_output=True)
    os.makedirs(w("www"))
    srv = Nginx(w("nginx"), w("www")).start()
    rows = []
    try:
        for packer in a.packers.split(","):
            imgs = {}
            for v in ("v1", "v2", "changed"):
                img = w("www", "%s-%s.sqfs" % (packer, v))
                subprocess.run(PACKERS[packer](build, w(v), img), check=True,
                               capture_output=True)
                if v != "changed":
                    subprocess.run([os.path.join(build, "sqfs-lazy-sign"),
                                    "--key", w("key.pem"), img], check=True,
                                   capture_output=True)
                imgs[v] = img
            sb2 = superblock(imgs["v2"])
            changed = superblock(imgs["changed"])["inode_table"] - 96
            meta = (os.path.getsize(imgs["v2"]) - sb2["inode_table"] + 96)
            have = {u[2] for u in units(build, imgs["v1"])}
            ideal = meta + sum(u[1] for u in units(build, imgs["v2"])
                               if 96 <= u[0] < sb2["inode_table"] and
                               u[2] not in have)
            cache = w("cache-" + packer)
            opts = ["verify=" + w("pub.pem"), "cache_dir=" + cache,
                    "cache_size=4G"]
            mnt = w("mnt")
            n1, s1, st1 = mounted_read(build, srv.url(
                os.path.basename(imgs["v1"])), mnt, opts, w("daemon.log"))
            srv.clear_log()
            n2, s2, st2 = mounted_read(build, srv.url(
                os.path.basename(imgs["v2"])), mnt, opts, w("daemon.log"))
            summ = srv.summary().get(os.path.basename(imgs["v2"]),
                                     [0, 0, {}])
            target = 1.3 * (changed + meta)
            rows.append({
                "packer": packer, "files_v1": n1, "files_v2": n2,
                "touched": len(touched), "v1_size": os.path.getsize(
                    imgs["v1"]), "v2_size": os.path.getsize(imgs["v2"]),
                "changed_compressed": changed, "v2_metadata": meta,
                "ideal": ideal, "fetched": summ[1], "requests": summ[0],
                "target": target, "ratio": summ[1] / (changed + meta),
                "cas_hits": st2.get("cas_hits"),
                "verify_mismatches": st2.get("verify_mismatches"),
                "v1_read_s": round(s1, 2), "v2_read_s": round(s2, 2)})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        srv.stop()
        if is_mounted(w("mnt")):
            unmount(w("mnt"))
    with open(os.path.join(out, "rows.json"), "w") as f:
        json.dump(rows, f, indent=1)
    benchlib.meta_end(os.path.join(out, "meta.tsv"))
    mib = lambda b: "%.2f MiB" % (b / 1048576)  # noqa: E731
    lines = ["# v1 -> v2 over one cache_dir (bench/cas_reuse.py)", "",
             "`%s`" % command, "",
             "Measured build: %s" % benchlib.measured_summary(dict(facts)),
             "",
             "Tree %s: %d files; v2 changes %d%% of them (%d changed or "
             "added files in v2)." % (a.tree, len(files), a.changed * 100,
                                      len(touched)), "",
             "| packer | v2 image | changed files, compressed | v2 metadata"
             " | ideal | fetched for v2 | requests | fetched / (changed + "
             "metadata) | target |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %d | %.2fx | <= 1.3x "
                     "%s |" % (r["packer"], mib(r["v2_size"]),
                               mib(r["changed_compressed"]),
                               mib(r["v2_metadata"]), mib(r["ideal"]),
                               mib(r["fetched"]), r["requests"], r["ratio"],
                               "met" if r["fetched"] <= r["target"]
                               else "MISSED"))
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
