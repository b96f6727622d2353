#!/usr/bin/env python3
"""The next version of a bench/startup.sh image, and what it changed.

  startup_nextver.py mutate TREE LIST_OUT [--fraction 0.05]
      TREE is a copy of the first version's tree made with `cp -al` (hard
      links): change FRACTION of its regular files (by count), spread
      evenly over the tree in path order, each broken out of its hard link
      and rewritten as its old bytes plus an appended change, so the
      programs of the workloads keep working: ELF files and .pyc get
      bytes nobody reads (a loader and marshal ignore what follows),
      C/C++ headers and ld scripts a /* comment */, JavaScript a //
      comment, JSON trailing blanks, other text a # comment. Files of other kinds (archives, compressed, other
      binaries) and .py sources (their .pyc would go stale) are left
      alone. Writes the changed paths to LIST_OUT.

  startup_nextver.py changed V1.sqfs V2.sqfs
      JSON: the compressed bytes of V2 that V1 does not hold: every data
      block and fragment block of V2 whose bytes appear nowhere among
      V1's blocks, plus V2's metadata tables (inode, directory, fragment,
      id tables: they shift with every change, and a mount reads them
      whole). What a mount of V2 must fetch at the least when it kept V1
      whole.
"""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Image  # noqa: E402

JS_EXT = {".js", ".mjs", ".cjs"}
HEADER_EXT = {".h", ".hh", ".hpp", ".hxx", ".tcc", ".c", ".cc", ".cpp",
              ".def", ".inc"}
SKIP_EXT = {".py", ".gz", ".xz", ".bz2", ".zst", ".zip", ".jar", ".a",
            ".png", ".jpg", ".gif", ".svgz", ".mo", ".whl"}


def kind(path):
    """'elf', 'pyc', 'header', 'js', 'json', 'text' or None (leave
    alone)."""
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    if ext in SKIP_EXT:
        return None
    with open(path, "rb") as f:
        head = f.read(8192)
    if head.startswith(b"\x7fELF"):
        return "elf"
    if ext == ".pyc":
        return "pyc"
    if b"\0" in head or not head:
        return None
    # extension-less C++ headers (include/c++/12/vector) count as headers
    if ext in HEADER_EXT or "/include/" in path or \
            head.startswith(b"/* GNU ld script"):
        return "header"
    if ext in JS_EXT:
        return "js"
    if ext == ".json":
        return "json"
    return "text"


def mutate(tree, list_out, fraction):
    files = []
    for root, dirs, names in os.walk(tree):
        dirs.sort()
        for n in sorted(names):
            p = os.path.join(root, n)
            if os.path.isfile(p) and not os.path.islink(p):
                files.append(p)
    want = max(1, round(len(files) * fraction))
    eligible = [(p, k) for p in files for k in [kind(p)] if k]
    if not eligible:
        print("no file of %s can be changed" % tree, file=sys.stderr)
        sys.exit(3)  # bench/startup.sh: no next-version row
    want = min(want, len(eligible))
    step = len(eligible) / want
    chosen = [eligible[int(i * step)] for i in range(want)]
    with open(list_out, "w") as out:
        for i, (p, k) in enumerate(chosen):
            with open(p, "rb") as f:
                data = f.read()
            st = os.stat(p)
            tag = hashlib.sha256(("%d %s" % (i, p)).encode()).hexdigest()
            if k in ("elf", "pyc"):
                extra = hashlib.sha256(tag.encode()).digest() * 128  # 4 KiB
            elif k == "header":
                extra = ("\n/* version 2: %s */\n" % tag).encode()
            elif k == "js":
                extra = ("\n// version 2: %s\n" % tag).encode()
            elif k == "json":   # blanks may follow a JSON value
                extra = b"\n" + b" " * (1 + int(tag[:4], 16) % 256) + b"\n"
            else:
                extra = ("\n# version 2: %s\n" % tag).encode()
            os.unlink(p)   # break the hard link to the first version
            with open(p, "wb") as f:
                f.write(data + extra)
            os.chmod(p, st.st_mode & 0o7777)
            out.write(os.path.relpath(p, tree) + "\n")
    print("%d of %d files changed (%d could be)" % (
        want, len(files), len(eligible)))


def chunks(img):
    """{(offset, size)} of every data block and fragment block."""
    out = set()
    for _, ino in img.walk("/"):
        out.update(ino["blocks"])
    out.update((o, n) for o, n in img.frags if n)
    return out


def digests(path, img):
    res = {}
    with open(path, "rb") as f:
        for off, n in sorted(chunks(img)):
            f.seek(off)
            res[(off, n)] = hashlib.sha256(f.read(n)).digest()
    return res


def changed(v1, v2):
    i1, i2 = Image(v1), Image(v2)
    old = set(digests(v1, i1).values())
    new = {k: d for k, d in digests(v2, i2).items()}
    fresh = [(k, d) for k, d in new.items() if d not in old]
    seen, data = set(), 0
    for (off, n), d in fresh:
        if d not in seen:
            seen.add(d)
            data += n
    meta = i2.bytes_used - i2.inode_start
    print(json.dumps({
        "v1_bytes": os.path.getsize(v1), "v2_bytes": os.path.getsize(v2),
        "new_data_bytes": data, "new_data_blocks": len(seen),
        "metadata_bytes": meta, "changed_bytes": data + meta}, indent=1))


def main(argv):
    if len(argv) >= 3 and argv[0] == "mutate":
        frac = 0.05
        if len(argv) >= 5 and argv[3] == "--fraction":
            frac = float(argv[4])
        mutate(argv[1], argv[2], frac)
        return 0
    if len(argv) == 3 and argv[0] == "changed":
        changed(argv[1], argv[2])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
