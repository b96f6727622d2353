#!/usr/bin/env python3
"""The knob audit's table (bench/knobs.sh): for each row of bench/run.sh,
each configuration's speed against the kernel of its own run, and its
change against the defaults. A change counts only past the row's noise:
the larger spread (max-min over median) of the samples of the two runs.

usage: knobs_report.py OUT CONFIG...   (OUT/runs/CONFIG/<run>/results.json)
"""

import glob
import json
import os
import sys

from benchlib import measured_summary, render_md


def load(out, name):
    found = sorted(glob.glob(os.path.join(out, "runs", name, "*",
                                          "results.json")))
    if not found:
        sys.exit("knobs_report: no results.json under %s/runs/%s" % (out, name))
    with open(found[-1]) as f:
        return json.load(f)


def rows_of(run):
    return {(r["image"], r["state"], r["label"]): r for r in run["rows"]}


def spread(row, reader):
    s = [v for v in (row.get("samples") or {}).get(reader) or [] if v]
    if len(s) < 2:
        return 0.0
    s.sort()
    return (s[-1] - s[0]) / s[len(s) // 2]


def main():
    out, names = sys.argv[1], sys.argv[2:]
    runs = {n: load(out, n) for n in names}
    base = names[0]
    readers = [r for r in runs[base]["readers"] if r != "kernel"]
    print("# Knob audit: speed against the kernel, per configuration\n")
    for n in names:
        m = runs[n]["meta"]
        print("- `%s`: `%s`, enable_uring %s, args `%s`, load %s; measured "
              "build %s" % (
                  n, m.get("command", ""), m.get("fuse_enable_uring", "?"),
                  m.get("sqfs_lazy_args", ""), m.get("loadavg_start", "?"),
                  measured_summary(m)))
    print("\nEach cell: x the kernel (>1 faster); in brackets the change "
          "against `%s` when it exceeds the row's noise.\n" % base)
    base_rows = rows_of(runs[base])
    moved = {n: [] for n in names[1:]}
    for reader in readers:
        print("## %s\n" % reader)
        table = [["image", "state", "row"] + names]
        for key, row in base_rows.items():
            b = (row.get("ratio_vs_kernel") or {}).get(reader)
            if not b:
                continue
            cells = ["%.2f" % b]
            for n in names[1:]:
                r = rows_of(runs[n]).get(key)
                v = r and (r.get("ratio_vs_kernel") or {}).get(reader)
                if not v:
                    cells.append("-")
                    continue
                change = v / b - 1
                noise = max(spread(row, reader), spread(r, reader),
                            spread(row, "kernel"), spread(r, "kernel"))
                cell = "%.2f" % v
                if abs(change) > noise:
                    cell += " (%+.0f%%)" % (100 * change)
                    moved[n].append((reader, key, change))
                cells.append(cell)
            table.append(list(key) + cells)
        print("\n".join(render_md(table, left_cols=len(table[0]))) + "\n")
    print("## Rows each option moves beyond noise\n")
    for n in names[1:]:
        up = sum(1 for m in moved[n] if m[2] > 0)
        down = len(moved[n]) - up
        print("- `%s`: %d faster, %d slower than `%s`%s" % (
            n, up, down, base, "".join(
                "; %s %s %s %s %+.0f%%" % (rd, k[0], k[1], k[2], 100 * c)
                for rd, k, c in sorted(moved[n], key=lambda m: m[2]))))


if __name__ == "__main__":
    main()
