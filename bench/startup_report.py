#!/usr/bin/env python3
"""Report of a bench/startup.sh run: results.json, results.md and the
tables on stdout (one per workload), with the issue-32 targets as
PASS/MISS lines. Reads run folders of the one-workload format of before
(no workload column: the python start) as well.

  startup_report.py RUN_DIR

Targets, at the largest round trip of the run (50 ms in a full run):
  lazy     <= max(kernel + 1.0 s, 0.5 x curl)
  nextver  <= kernel of the next version + 0.3 s + the time to fetch what
              changed (changed bytes / link rate measured by curl at that
              round trip, or the --rate-mbit cap without a curl row, plus
              one round trip)
  seq      at 20 ms >= 0.8x, at 50 ms >= 0.6x the 0 ms throughput
"""

import json
import os
import sys

from benchlib import fmt_bytes, med, num, read_meta, read_tsv, render, render_md

ROWS = [("kernel", "kernel loop mount of a local copy"),
        ("kernel_next", "kernel loop mount, next version"),
        ("curl", "curl the whole image, then loop-mount"),
        ("mount", "sqfs-lazy-mount URL and ls -la of its root, no program"),
        ("lazy", "sqfs-lazy-mount URL, no profile, first mount"),
        ("nextver", "next version, cache_dir= of the previous one"),
        ("profile", "-o prefetch= recorded profile"),
        ("order", "image packed with --order, plain mount")]


def cells(runs, row, rtt):
    got = [r for r in runs if r["row"].split(":")[0] == row and
           int(r["rtt_ms"]) == rtt]
    if not got:
        return None
    if any(r["seconds"] == "FAIL" for r in got):
        return {"fail": True, "n": len(got)}
    secs = [float(r["seconds"]) for r in got]
    out = {"seconds": med(secs), "min": min(secs),
           "max": max(secs), "n": len(secs)}
    for k in ("requests", "bytes", "download_s"):
        vals = [float(r[k]) for r in got if r.get(k, "-") not in ("-", "")]
        if vals:
            out[k] = med(vals)
    if row == "seq":
        size = int(got[0]["row"].split(":")[1])
        out["mb_s"] = size / 1e6 / out["seconds"]
    return out


def cell_text(c):
    if not c:
        return "-"
    if c.get("fail"):
        return "FAIL"
    s = "%.2f s" % c["seconds"]
    if c["n"] > 1:
        s += " (%.2f-%.2f)" % (c["min"], c["max"])
    if "requests" in c:
        s += ", %d req, %s" % (c["requests"], fmt_bytes(c["bytes"]))
    return s


def workload_report(wl, runs, rtts, meta, targets):
    """The table of one workload; appends its targets."""
    wm = {k[len("wl.%s." % wl):]: v for k, v in meta.items()
          if k.startswith("wl.%s." % wl)}
    res = {}
    for row, _ in ROWS + [("seq", "")]:
        for rtt in rtts:
            c = cells(runs, row, rtt)
            if c:
                res.setdefault(row, {})[rtt] = c

    table = [["row"] + ["%d ms" % r for r in rtts]]
    for row, label in ROWS:
        if row in res:
            table.append([label] + [cell_text(res[row].get(rtt))
                                    for rtt in rtts])
    if "seq" in res:
        c0 = res["seq"].get(0)
        line = ["1 MiB sequential reads (capped link)"]
        for rtt in rtts:
            c = res["seq"].get(rtt)
            if not c or "mb_s" not in c:
                line.append("FAIL" if c else "-")
                continue
            s = "%.0f MB/s" % c["mb_s"]
            if rtt and c0 and "mb_s" in c0:
                s += " (%.2fx)" % (c["mb_s"] / c0["mb_s"])
            line.append(s)
        table.append(line)

    def get(row, rtt, key="seconds"):
        c = res.get(row, {}).get(rtt)
        return None if not c or c.get("fail") else c.get(key)

    def target(name, ok, detail):
        state = "n/a" if ok is None else ("PASS" if ok else "MISS")
        targets.append((state, "%s: %s" % (wl, name), detail))

    hi = max(rtts)
    k, k2 = get("kernel", 0), get("kernel_next", 0)
    if "lazy" in res:
        s, c = get("lazy", hi), get("curl", hi)
        limit = None
        if k is not None or c is not None:
            limit = max(x for x in (None if k is None else k + 1.0,
                                    None if c is None else 0.5 * c)
                        if x is not None)
        target("no profile at %d ms <= max(kernel + 1.0 s, 0.5x curl)" % hi,
               None if s is None or limit is None else s <= limit,
               "%s s, limit %s s (kernel %s s, curl %s s)" % (
                   fmt_s(s), fmt_s(limit), fmt_s(k), fmt_s(c)))
    if "nextver" in res:
        s = get("nextver", hi)
        changed = float(wm["changed_bytes"]) if "changed_bytes" in wm \
            else None
        img = float(wm.get("image_bytes", 0)) or None
        dl = get("curl", hi, "download_s")
        if dl and img:
            rate, how = img / dl, "curl at %d ms" % hi
        else:
            rate = float(meta.get("rate_mbit", 1000)) * 1e6 / 8
            how = "the cap"
        base = k2 if k2 is not None else k
        limit = None
        if base is not None and changed is not None:
            limit = base + 0.3 + changed / rate + hi / 1000.0
        target("next version at %d ms <= kernel + 0.3 s + fetch of what "
               "changed" % hi,
               None if s is None or limit is None else s <= limit,
               "%s s, limit %s s (kernel %s s; changed %s at %.0f MB/s, "
               "%s; fetched %s)" % (
                   fmt_s(s), fmt_s(limit), fmt_s(base),
                   fmt_bytes(changed) if changed is not None else "?",
                   rate / 1e6, how,
                   fmt_bytes(get("nextver", hi, "bytes"))
                   if get("nextver", hi, "bytes") is not None else "?"))
    if "seq" in res:
        q0 = get("seq", 0, "mb_s")
        for rtt, want in ((20, 0.8), (50, 0.6)):
            q = get("seq", rtt, "mb_s")
            if rtt not in rtts:
                continue
            target("sequential at %d ms >= %.1fx of 0 ms" % (rtt, want),
                   None if not q0 or not q else q >= want * q0,
                   "%.2fx" % (q / q0) if q0 and q else "-")
    l0 = get("lazy", 0)
    if k and l0:
        target("no profile at 0 ms vs the kernel (report only)", None,
               "%.2fx the kernel's time" % (l0 / k))

    head = "## %s: %s\n\nimage %s, %s files" % (
        wl, wm.get("desc", "?"),
        fmt_bytes(float(wm.get("image_bytes", 0))), wm.get("tree_files", "?"))
    if "changed_files" in wm:
        head += "; next version: %s files changed, %s new (%s of data " \
                "blocks, %s of metadata tables)" % (
                    wm["changed_files"],
                    fmt_bytes(float(wm.get("changed_bytes", 0))),
                    fmt_bytes(float(wm.get("new_data_bytes", 0))),
                    fmt_bytes(float(wm.get("metadata_bytes", 0))))
    if "seq_file" in wm and "seq" in res:
        head += "; sequential: %s" % wm["seq_file"]
    return head, table, res


def fmt_s(v):
    return "-" if v is None else "%.2f" % v


def main(run):
    meta = read_meta(run)[0]
    every = read_tsv(os.path.join(run, "raw", "runs.tsv"))
    # a run the host stole too much CPU from was run again (startup.sh
    # --max-steal); older runs have no such column
    runs = [r for r in every if r.get("kept", "1") != "0"]
    again = len(every) - len(runs)
    stolen = sum(num(r.get("steal_s")) or 0 for r in runs)
    for r in runs:
        r.setdefault("workload", "python")
        if "wl.python.image_bytes" not in meta and "image_bytes" in meta:
            meta["wl.python.image_bytes"] = meta["image_bytes"]
            meta["wl.python.seq_file"] = meta.get("seq_file", "?")
    rtts = sorted({int(r["rtt_ms"]) for r in runs})
    wls = []
    for r in runs:
        if r["workload"] not in wls:
            wls.append(r["workload"])

    targets, parts, allres = [], [], {}
    for wl in wls:
        head, table, res = workload_report(
            wl, [r for r in runs if r["workload"] == wl], rtts, meta,
            targets)
        parts.append((head, table))
        allres[wl] = {row: {str(k): v for k, v in d.items()}
                      for row, d in res.items()}

    tl = "\n".join("%-4s %s: %s" % t for t in targets)
    lazy_args = meta.get("lazy_args", "")
    # run facts (benchlib.py facts); older runs had git_commit, build,
    # cmdline
    measured = meta.get("measured_commit") or meta.get("git_commit", "?")
    top = ("startup.sh run %s, %s, link %s Mbit/s behind the proxy, load "
           "%s -> %s, %s s of rows (%s s preparing images)\nmeasured build: %s (%s), commit %s%s\n"
           "extra mount arguments: %s\ncommand: %s" % (
               os.path.basename(run), meta.get("cpu_model", "?"),
               meta.get("rate_mbit", "?"), meta.get("loadavg_start", "?"),
               meta.get("loadavg_end", "?"), meta.get("suite_seconds", "?"),
               meta.get("prepare_seconds", "?"),
               meta.get("measured_build") or meta.get("build", "?"),
               meta.get("measured_version") or meta.get("build_version", "?"),
               measured[:12],
               "" if measured != "unknown" else " (%s; source tree at %s)" % (
                   meta.get("measured_commit_from", "?"),
                   meta.get("measured_source_commit", "?")[:12]),
               lazy_args or "none",
               meta.get("command") or meta.get("cmdline", "?")))
    if "steal_s" in (every[0] if every else {}):
        top += "\nCPU stolen by the host (steal) during the runs: %.1f s" \
            % stolen
        if (num(meta.get("max_steal")) or 1) < 1:
            top += "; %d runs repeated after losing more than %s of " \
                "their CPU time to it" % (again, meta["max_steal"])
    out = [top]
    md = ["# startup.sh %s" % os.path.basename(run), "",
          top.replace("\n", "\n\n")]
    for head, table in parts:
        out += ["", head.replace("## ", "").replace("\n\n", "\n"), ""]
        out += render(table)
        md += ["", head, ""] + render_md(table)
    out += ["", tl]
    md += ["", "## Targets", "", "```", tl, "```", ""]
    print("\n".join(out))
    with open(os.path.join(run, "results.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(run, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": allres, "targets": targets},
                  f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
