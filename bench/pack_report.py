#!/usr/bin/env python3
"""table.md of a bench/pack.sh run from its runs.tsv (rows missing from an
interrupted run are left out).

    bench/pack_report.py RESULTS_DIR
"""
import sys

from benchlib import read_tsv, render_md


def main(out):
    rows = read_tsv(out + "/runs.tsv")
    get = {(r["tool"], r["comp"], r["jobs"]): r for r in rows}
    wall = lambda r: float(r["wall_s"])  # noqa: E731
    size = lambda r: int(r["bytes"])  # noqa: E731
    table = [["tool", "comp", "-j", "wall s", "CPU s", "image bytes",
              "wall / mksquashfs", "size / mksquashfs", "-j1/-j2 wall"]]
    for r in rows:
        m = get.get(("mksquashfs", r["comp"], r["jobs"]))
        one = get.get((r["tool"], r["comp"], "1"))
        table.append([
            r["tool"], r["comp"], r["jobs"], "%.2f" % wall(r),
            "%.2f" % float(r["cpu_s"]), format(size(r), ","),
            "%.3f" % (wall(r) / wall(m)) if m else "",
            "%.4f" % (size(r) / size(m)) if m else "",
            "%.2fx" % (wall(one) / wall(r)) if r["jobs"] == "2" and one
            else ""])
    lines = render_md(table, left_cols=len(table[0]))
    lines += ["", "Targets (issue 5), sqfs-lazy-pack:"]
    for comp in ("xz", "zstd"):
        for j in ("1", "2"):
            o = get.get(("sqfs-lazy-pack", comp, j))
            m = get.get(("mksquashfs", comp, j))
            if not (o and m):
                continue
            d = size(o) / size(m) - 1
            lines.append(
                "- %s -j%s: wall %.2f s vs mksquashfs %.2f s (%s); "
                "size %+.3f%% (%s)" % (
                    comp, j, wall(o), wall(m),
                    "met" if wall(o) <= wall(m) else "MISSED",
                    100 * d, "met" if abs(d) <= 0.01 else "MISSED"))
    o1 = get.get(("sqfs-lazy-pack", "xz", "1"))
    o2 = get.get(("sqfs-lazy-pack", "xz", "2"))
    if o1 and o2:
        sp = wall(o1) / wall(o2)
        lines.append("- xz -j2 / -j1 speedup: %.2fx (%s, target 1.8x)" % (
            sp, "met" if sp >= 1.8 else "MISSED"))
    open(out + "/table.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
