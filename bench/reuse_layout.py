#!/usr/bin/env python3
"""Helper of bench/reuse_layout.sh: make version 2 of a tree, and count
what a client holding version 1's units fetches for version 2.

  reuse_layout.py mutate --v2 DIR --changed DIR [--pct 5] [--seed S]
      DIR is a private copy of v1 (nothing in it is hard-linked to v1: files
      are replaced, never written in place). pct% of its regular files
      (chosen by a seeded PRNG over the sorted paths) are changed, removed
      or added, a third each:
        changed  a few bytes inserted at a random offset (every block
                 from there on differs; earlier ones do not)
        removed  deleted
        added    a new name in the directory of a random file, with that
                 file's bytes plus a small insertion
      The changed and added files are also copied to --changed (same
      relative paths): packed alone, that tree gives the compressed size of
      what really changed. Prints key=value lines.

  reuse_layout.py report --name NAME --v1 IMG --v2 IMG --changed-img IMG
                         --sign PATH [--tsv FILE]
      IMG are signed images (embedded manifests, docs/manifest.md). Units
      are split into data (data and fragment blocks) and metadata (all
      other kinds, from `sqfs-lazy-sign --list`). Fetched: v2's units whose
      SHA-256 is not among v1's. Reference: the data units of the image of
      the changed files alone (same tool and options) plus all of v2's
      metadata. Appends a row to the TSV and prints it.

  reuse_layout.py table TSV
      The rows as a Markdown table, image sizes against the first row's.
"""

import argparse
import os
import random
import shutil
import stat
import struct
import subprocess
import sys

TRAILER = 160
DATA_KINDS = ("data block", "fragment block")


def regular_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for n in sorted(filenames):
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                out.append((os.path.relpath(p, root), st.st_size))
    return sorted(out)


def insert_bytes(data, rnd):
    off = rnd.randrange(len(data) + 1)
    return data[:off] + b"v2 change %d\n" % rnd.getrandbits(32) + data[off:]


def replace(path, data):
    """Write a new file over path (never into the old inode)."""
    tmp = path + ".reuse-tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    st = os.lstat(path) if os.path.lexists(path) else None
    os.replace(tmp, path)
    if st:
        os.chmod(path, stat.S_IMODE(st.st_mode))


def mutate(args):
    rnd = random.Random(args.seed)
    files = regular_files(args.v2)
    n = max(3, round(len(files) * args.pct / 100.0))
    picked = rnd.sample(files, n)
    small_limit = args.block
    counts = {"changed": 0, "removed": 0, "added": 0}
    sizes = {"small": 0, "large": 0}
    touched = []
    for i, (rel, size) in enumerate(picked):
        what = ("changed", "removed", "added")[i % 3]
        p = os.path.join(args.v2, rel)
        sizes["small" if size < small_limit else "large"] += 1
        if what == "removed":
            os.unlink(p)
        else:
            with open(p, "rb") as f:
                data = insert_bytes(f.read(), rnd)
            if what == "added":
                base, ext = os.path.splitext(p)
                p = "%s-v2-%d%s" % (base, i, ext)
                while os.path.lexists(p):
                    p = p + "x"
                with open(p, "wb") as f:
                    f.write(data)
                os.chmod(p, 0o644)
            else:
                replace(p, data)
            touched.append(os.path.relpath(p, args.v2))
        counts[what] += 1
    os.makedirs(args.changed, exist_ok=True)
    changed_bytes = 0
    for rel in touched:
        dst = os.path.join(args.changed, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(args.v2, rel), dst)
        changed_bytes += os.path.getsize(dst)
    print("files_v1=%d" % len(files))
    print("picked=%d small=%d large=%d (large: >= %d bytes)" %
          (n, sizes["small"], sizes["large"], small_limit))
    print("changed=%d removed=%d added=%d" % (counts["changed"],
                                              counts["removed"],
                                              counts["added"]))
    print("changed_or_added_bytes=%d" % changed_bytes)


def manifest(path):
    """[(offset, length, digest)] of an image's embedded manifest."""
    with open(path, "rb") as f:
        f.seek(-TRAILER, os.SEEK_END)
        t = f.read(TRAILER)
        if t[:8] != b"sqlzSIG1" or t[-8:] != b"sqlzEND1":
            sys.exit("%s: no manifest" % path)
        body_offset, body_length = struct.unpack_from("<QQ", t, 8)
        f.seek(body_offset)
        body = f.read(body_length)
    if body[:8] != b"sqlzMAN1":
        sys.exit("%s: bad manifest body" % path)
    count = struct.unpack_from("<I", body, 12)[0]
    out = []
    for i in range(count):
        e = 48 + 44 * i
        off, length = struct.unpack_from("<QI", body, e)
        out.append((off, length, body[e + 12:e + 44]))
    return out


def kinds(sign, path):
    r = subprocess.run([sign, "--list", path], capture_output=True,
                       text=True, check=True)
    out = {}
    for line in r.stdout.splitlines():
        off, _length, kind = line.split(" ", 2)
        out[int(off, 16)] = kind
    return out


def split(sign, path):
    """(data units, metadata units) of a signed image."""
    k = kinds(sign, path)
    data, meta = [], []
    for u in manifest(path):
        (data if k[u[0]] in DATA_KINDS else meta).append(u)
    return data, meta


def total(units):
    return sum(u[1] for u in units)


def report(args):
    v1 = manifest(args.v1)
    have = {u[2] for u in v1}
    d2, m2 = split(args.sign, args.v2)
    dc, _mc = split(args.sign, args.changed_img)
    new_d = [u for u in d2 if u[2] not in have]
    new_m = [u for u in m2 if u[2] not in have]
    fetched = total(new_d) + total(new_m)
    ref = total(dc) + total(m2)
    row = {
        "variant": args.name,
        "v1_image": os.path.getsize(args.v1),
        "v2_image": os.path.getsize(args.v2),
        "v2_units": len(d2) + len(m2),
        "v2_data": total(d2),
        "v2_meta": total(m2),
        "fetched_data": total(new_d),
        "fetched_meta": total(new_m),
        "fetched": fetched,
        "changed_data": total(dc),
        "reference": ref,
        "ratio": "%.3f" % (fetched / ref if ref else 0.0),
        "fetched_pct_of_v2": "%.1f" % (100.0 * fetched /
                                       (total(d2) + total(m2))),
    }
    cols = list(row)
    new = not os.path.exists(args.tsv) if args.tsv else False
    line = "\t".join(str(row[c]) for c in cols)
    if args.tsv:
        with open(args.tsv, "a") as f:
            if new:
                f.write("\t".join(cols) + "\n")
            f.write(line + "\n")
    print(" ".join("%s=%s" % (c, row[c]) for c in cols))


def table(args):
    """runs.tsv as a Markdown table; sizes against the first row's."""
    import csv
    rows = list(csv.DictReader(open(args.tsv), delimiter="\t"))
    mib = lambda b: "%.2f" % (int(b) / 1048576)  # noqa: E731
    ref = int(rows[0]["v2_image"])
    print("| variant | v2 image MiB | size vs %s | fetched data MiB | "
          "fetched metadata MiB | changed files' data MiB | v2 metadata MiB "
          "| fetched / reference | fetched %% of v2 |" % rows[0]["variant"])
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %+.1f%% | %s | %s | %s | %s | %s | %s |" % (
            r["variant"], mib(r["v2_image"]),
            100.0 * (int(r["v2_image"]) - ref) / ref,
            mib(r["fetched_data"]), mib(r["fetched_meta"]),
            mib(r["changed_data"]), mib(r["v2_meta"]), r["ratio"],
            r["fetched_pct_of_v2"]))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mutate")
    m.add_argument("--v2", required=True)
    m.add_argument("--changed", required=True)
    m.add_argument("--pct", type=float, default=5.0)
    m.add_argument("--seed", type=int, default=19)
    m.add_argument("--block", type=int, default=131072)
    r = sub.add_parser("report")
    r.add_argument("--name", required=True)
    r.add_argument("--v1", required=True)
    r.add_argument("--v2", required=True)
    r.add_argument("--changed-img", required=True)
    r.add_argument("--sign", required=True)
    r.add_argument("--tsv")
    t = sub.add_parser("table")
    t.add_argument("tsv")
    args = ap.parse_args()
    {"mutate": mutate, "report": report, "table": table}[args.cmd](args)


if __name__ == "__main__":
    main()
