#!/usr/bin/env python3
"""Report of a bench/startup.sh run: results.json, results.md and the
table on stdout, with the issue-18 targets as PASS/MISS lines.

  startup_report.py RUN_DIR
"""

import json
import os
import sys

from benchlib import fmt_bytes, med, read_meta, read_tsv, render, render_md

ROWS = [("kernel", "kernel loop mount of a local copy"),
        ("curl", "curl the whole image, then loop-mount"),
        ("lazy", "sqfs-lazy-mount URL, no profile"),
        ("profile", "sqfs-lazy-mount -o prefetch= recorded profile"),
        ("order", "image packed with --order, plain mount")]


def cells(runs, row, rtt):
    got = [r for r in runs if r["row"].split(":")[0] == row and
           int(r["rtt_ms"]) == rtt]
    if not got:
        return None
    if any(r["seconds"] == "FAIL" for r in got):
        return {"fail": True}
    secs = [float(r["seconds"]) for r in got]
    out = {"seconds": med(secs), "min": min(secs),
           "max": max(secs), "n": len(secs)}
    for k in ("requests", "bytes"):
        vals = [float(r[k]) for r in got if r[k] != "-"]
        if vals:
            out[k] = med(vals)
    if row == "seq":
        size = int(got[0]["row"].split(":")[1])
        out["mb_s"] = size / 1e6 / out["seconds"]
    return out


def main(run):
    meta = read_meta(run)[0]
    runs = read_tsv(os.path.join(run, "raw", "runs.tsv"))
    rtts = sorted({int(r["rtt_ms"]) for r in runs})
    res = {}
    for row, _ in ROWS + [("seq", "")]:
        for rtt in rtts:
            c = cells(runs, row, rtt)
            if c:
                res.setdefault(row, {})[rtt] = c

    table = [["row"] + ["%d ms" % r for r in rtts]]
    for row, label in ROWS:
        line = [label]
        for rtt in rtts:
            c = res.get(row, {}).get(rtt)
            if not c:
                line.append("-")
            elif c.get("fail"):
                line.append("FAIL")
            else:
                s = "%.2f s" % c["seconds"]
                if c["n"] > 1:
                    s += " (%.2f-%.2f)" % (c["min"], c["max"])
                if "requests" in c:
                    s += ", %d req, %s" % (c["requests"],
                                           fmt_bytes(c["bytes"]))
                line.append(s)
        table.append(line)
    line = ["1 MiB sequential reads, lazy, capped link"]
    for rtt in rtts:
        c = res.get("seq", {}).get(rtt)
        line.append("%.0f MB/s" % c["mb_s"] if c and "mb_s" in c else "-")
    table.append(line)

    def get(row, rtt, key="seconds"):
        c = res.get(row, {}).get(rtt)
        return None if not c or c.get("fail") else c.get(key)

    targets = []

    def target(name, ok, detail):
        if ok is None:
            targets.append(("n/a", name, detail))
        else:
            targets.append(("PASS" if ok else "MISS", name, detail))

    hi = max(rtts)
    base_bytes = get("lazy", 0, "bytes")
    for row in ("profile", "order"):
        s, b = get(row, hi), get(row, hi, "bytes")
        target("%s: cold start at %d ms <= 1.0 s" % (row, hi),
               None if s is None else s <= 1.0, "%s s" % s)
        ratio = b / base_bytes if b and base_bytes else None
        target("%s: bytes <= 1.5x those of the start without profile "
               "(0 ms)" % row, None if ratio is None else ratio <= 1.5,
               "%.2fx" % ratio if ratio else "-")
    s, c = get("lazy", hi), get("curl", hi)
    target("no profile at %d ms no slower than curl then mount" % hi,
           None if s is None or c is None else s <= c,
           "%s s vs %s s" % (s, c))
    q0, q20 = get("seq", 0, "mb_s"), get("seq", 20, "mb_s")
    target("sequential at 20 ms >= 0.6x of 0 ms",
           None if not q0 or not q20 else q20 >= 0.6 * q0,
           "%.2fx" % (q20 / q0) if q0 and q20 else "-")
    k, l0 = get("kernel", 0), get("lazy", 0)
    target("no profile at 0 ms vs the kernel (report only)", None,
           "%.2fx the kernel's time" % (l0 / k) if k and l0 else "-")

    out = "\n".join(render(table))
    tl = "\n".join("%-4s %s: %s" % t for t in targets)
    head = ("startup.sh run %s, commit %s, %s, link %s Mbit/s behind the "
            "proxy, image %s, load %s -> %s\ncommand: %s" % (
                os.path.basename(run), meta.get("git_commit", "?")[:12],
                meta.get("cpu_model", "?"), meta.get("rate_mbit", "?"),
                fmt_bytes(float(meta.get("image_bytes", 0))),
                meta.get("loadavg_start", "?"), meta.get("loadavg_end", "?"),
                meta.get("cmdline", "?")))
    print(head + "\n\n" + out + "\n" + tl)
    with open(os.path.join(run, "results.md"), "w") as f:
        f.write("# startup.sh %s\n\n%s\n\n%s\n\n```\n%s\n```\n" % (
            os.path.basename(run), head.replace("\n", "\n\n"),
            "\n".join(render_md(table)), tl))
    with open(os.path.join(run, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": {
            r: {str(k): v for k, v in d.items()} for r, d in res.items()},
            "targets": targets}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
