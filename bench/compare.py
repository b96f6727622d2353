#!/usr/bin/env python3
"""Report of a bench/run.sh run (issue 4's matrix).

  compare.py report RUN_DIR [--json-only]
      read RUN_DIR/meta.tsv, measurements.tsv and raw/, write
      RUN_DIR/results.json and RUN_DIR/results.md, print the text table

  compare.py table RESULTS.json [--md]
      print the table again from a results.json

  compare.py fio-summary FIO.json [LOG_PREFIX]
      same as benchlib.py fio-summary (kept for older callers)

Ratios are speed relative to the kernel: reader/kernel for IOPS and MiB/s,
kernel/reader for seconds, so 1.00x is parity, above 1 faster, below 1
slower, in every row.
"""

import json
import os
import re
import sys

from benchlib import (bench_summary, fio_summary, fmt_bytes, fmt_ratio,
                      machine_line, measured_summary, med, num, read_kv,
                      read_meta, read_tsv, render, render_md, versions_line)

READERS = ["kernel", "squashfuse_ll", "lazy-local", "lazy-http"]
LABELS = {"kernel": "kernel", "squashfuse_ll": "squashfuse_ll",
          "lazy-local": "sqfs-lazy local", "lazy-http": "sqfs-lazy http"}
OURS = ["lazy-local", "lazy-http"]
WORKLOADS = [
    # key, label, metric column, unit, higher is better
    ("rand1", "4k rand psync 1 job", "iops", "IOPS", True),
    ("rand2", "4k rand psync 2 jobs", "iops", "IOPS", True),
    ("mmap", "4k rand mmap 1 job", "iops", "IOPS", True),
    ("seq", "1M seq, 1 pass", "mib_s", "MiB/s", True),
    ("findsize", "find -printf %s", "seconds", "s", False),
    ("findtype", "find -type f", "seconds", "s", False),
    ("tar", "tar tree | wc -c", "seconds", "s", False),
]
WL = {w[0]: w for w in WORKLOADS}
VERSIONS = [("fio_version", "fio"), ("squashfuse_version", "squashfuse"),
            ("mksquashfs_version", "mksquashfs"),
            ("nginx_version", "nginx"),
            ("sqfs_lazy_version", "sqfs-lazy-mount")]
NUMERIC = ("iops", "mib_s", "seconds", "bytes", "count", "clat_mean_us",
           "clat_p99_us", "iops_first_s", "daemon_cpu_s", "http_requests",
           "http_bytes", "load1")


def ranges_union(access_log):
    """Bytes of the union of the ranges asked for in an access log slice
    (format of lib.sh: '$msec $method $status $bytes_sent "$http_range"
    ...'), and the sum of their lengths."""
    spans = []
    with open(access_log) as f:
        for line in f:
            m = re.search(r'"bytes=(\d+)-(\d+)"', line)
            if m:
                spans.append((int(m.group(1)), int(m.group(2)) + 1))
    asked = sum(b - a for a, b in spans)
    union, end = 0, -1
    for a, b in sorted(spans):
        if a > end:
            union += b - a
            end = b
        elif b > end:
            union += b - end
            end = b
    return union, asked, len(spans)


def refetch_results(run_dir, comp, meas):
    raw = os.path.join(run_dir, "raw")
    base = os.path.join(raw, "%s.refetch" % comp)
    if not os.path.exists(base + ".set.json"):
        return None
    with open(base + ".set.json") as f:
        fs = json.load(f)
    res = {"set": fs, "passes": {}}
    s0 = read_kv(base + ".stats0.txt")
    prev = s0.get("http_bytes")
    prev_req = s0.get("http_requests")
    for p in ("pass1", "pass2"):
        m = [x for x in meas if x["image"] == comp and
             x["workload"] == "refetch" and x["state"] == p]
        s = read_kv(base + ".stats-%s.txt" % p)
        d = {"status": m[-1]["status"] if m else "missing"}
        if m and m[-1]["status"] == "ok":
            d.update(seconds=m[-1]["seconds"], bytes_read=m[-1]["bytes"],
                     nginx_requests=m[-1]["http_requests"],
                     nginx_bytes_sent=m[-1]["http_bytes"])
        if isinstance(s.get("http_bytes"), int) and isinstance(prev, int):
            d["fetched_bytes"] = s["http_bytes"] - prev
            prev = s["http_bytes"]
        if isinstance(s.get("http_requests"), int) and \
                isinstance(prev_req, int):
            d["fetched_requests"] = s["http_requests"] - prev_req
            prev_req = s["http_requests"]
        res["passes"][p] = d
    touched = fs["set_touched"]["bytes"]
    fetched = [res["passes"][p].get("fetched_bytes") for p in
               ("pass1", "pass2")]
    if None not in fetched:
        res["fetched_bytes"] = sum(fetched)
        res["source"] = "sqfs-lazy-mount --stats http_bytes"
    else:  # no counters: nginx's bytes (headers included)
        nb = [res["passes"][p].get("nginx_bytes_sent") for p in
              ("pass1", "pass2")]
        if None not in nb:
            res["fetched_bytes"] = sum(nb)
            res["source"] = "nginx $bytes_sent"
    if os.path.exists(base + ".access.log"):
        union, asked, n = ranges_union(base + ".access.log")
        res.update(ranges_union_bytes=union, ranges_asked_bytes=asked,
                   ranges=n)
    if res.get("fetched_bytes") is not None and touched:
        res["ratio"] = res["fetched_bytes"] / touched
    return res


def build_results(run_dir):
    meta, image = read_meta(run_dir)
    images = {}
    for k, v in image.items():  # image.COMP.KEY
        comp, key = k.split(".", 1)
        images.setdefault(comp, {})[key] = v
    meas = read_tsv(os.path.join(run_dir, "measurements.tsv"))
    for m in meas:
        for k in NUMERIC:
            m[k] = num(m.get(k))
    readers = [r for r in READERS if r in meta.get("readers", "").split(",")]
    comps = [c for c in meta.get("comps", "").split(",") if c]
    rows = []
    for comp in comps:
        for key, label, col, unit, higher in WORKLOADS:
            views = [("cold", "cold", col), ("warm", "warm", col)]
            if col == "iops":  # the first second of the cold run
                views.insert(1, ("cold", "cold 1st s", "iops_first_s"))
            for state, state_label, metric in views:
                sel = [m for m in meas if m["image"] == comp and
                       m["workload"] == key and m["state"] == state]
                if not sel:
                    continue
                rows.append(make_row(comp, key, label, state_label, metric,
                                     unit, higher, sel))
        sel = [m for m in meas if m["image"] == comp and
               m["workload"] == "mount"]
        if sel:
            rows.append(make_row(comp, "mount", "mount until usable",
                                 "cold", "seconds", "s", False, sel))
    stats = {}
    raw = os.path.join(run_dir, "raw")
    if os.path.isdir(raw):
        for name in sorted(os.listdir(raw)):
            m = re.match(r"^(\w+)\.(lazy-\w+)\.(\w+)\.(\d+)\.stats\.txt$",
                         name)
            if m:
                stats.setdefault(m.group(1), {}).setdefault(
                    m.group(2), {})[m.group(3)] = read_kv(
                        os.path.join(raw, name))
    refetch = {}
    for comp in comps:
        r = refetch_results(run_dir, comp, meas)
        if r:
            refetch[comp] = r
    verify = {}
    vpath = os.path.join(run_dir, "raw", "verify.txt")
    if os.path.exists(vpath):
        with open(vpath) as f:
            for line in f:
                p = line.split()
                if len(p) == 3:
                    verify.setdefault(p[0], {})[p[1]] = p[2]
    res = {"format": "sqfs-lazy-bench/2", "meta": meta, "images": images,
           "readers": readers, "comps": comps, "rows": rows,
           "refetch": refetch, "sqfs_lazy_stats": stats,
           "verify_sha256_big": verify, "measurements": meas}
    res["targets"] = targets(res)
    return res


def make_row(comp, key, label, state_label, metric, unit, higher, sel):
    row = {"image": comp, "workload": key, "label": label,
           "state": state_label, "metric": metric, "unit": unit,
           "higher_is_better": higher, "values": {}, "ratio_vs_kernel": {},
           "samples": {}, "status": {}, "failures": {}, "daemon_cpu_s": {},
           "http": {}, "count_bytes": {}}
    for r in READERS:
        ms = [m for m in sel if m["reader"] == r]
        if not ms:
            continue
        ok = [m for m in ms if m["status"] == "ok" and m[metric] is not None]
        row["status"][r] = "ok" if ok else "FAIL"
        vals = [m[metric] for m in ok]
        row["values"][r] = med(vals)
        row["samples"][r] = vals
        row["failures"][r] = len(ms) - len(ok)
        row["daemon_cpu_s"][r] = med([m["daemon_cpu_s"] for m in ok])
        if any(m["http_requests"] is not None for m in ok):
            row["http"][r] = {
                "requests": med([m["http_requests"] for m in ok]),
                "bytes": med([m["http_bytes"] for m in ok])}
        if key in ("findsize", "findtype"):  # entries listed
            row["count_bytes"][r] = sorted({"%d" % (m["count"] or 0)
                                            for m in ok})
        elif key == "tar":  # bytes of the archive
            row["count_bytes"][r] = sorted({"%d" % (m["bytes"] or 0)
                                            for m in ok})
        if metric == "iops":
            row.setdefault("clat_mean_us", {})[r] = med(
                [m["clat_mean_us"] for m in ok])
            row.setdefault("clat_p99_us", {})[r] = med(
                [m["clat_p99_us"] for m in ok])
    k = row["values"].get("kernel")
    for r, v in row["values"].items():
        if r != "kernel" and k and v:
            row["ratio_vs_kernel"][r] = v / k if higher else k / v
    return row


def find_row(res, comp, wl, state):
    for row in res["rows"]:
        if row["image"] == comp and row["workload"] == wl and \
                row["state"] == state:
            return row
    return None


def targets(res):
    """Issue 4's targets, as ratios in this run, for our two readers."""
    t = []

    def add(comp, reader, what, value, ok, shown, row=None):
        # No figure: a MISS when our reader failed, no line when the run
        # has nothing to compare with (kernel not measured).
        if value is None and not (row and row["status"].get(reader) ==
                                  "FAIL"):
            return
        t.append({"image": comp, "reader": reader, "what": what,
                  "value": value, "ok": ok,
                  "shown": shown if value is not None else "FAIL"})

    for comp in res["comps"]:
        for r in OURS:
            if r not in res["readers"]:
                continue
            for wl in ("rand1", "rand2", "mmap"):
                for st in ("cold", "warm"):
                    row = find_row(res, comp, wl, st)
                    if not row or r not in row["status"]:
                        continue
                    v = row["ratio_vs_kernel"].get(r)
                    add(comp, r, "%s %s >= 0.5x kernel" % (WL[wl][1], st),
                        v, v is not None and v >= 0.5, fmt_ratio(v), row)
            for wl in ("findsize", "findtype"):
                row = find_row(res, comp, wl, "cold")
                if not row or r not in row["status"]:
                    continue
                v = row["ratio_vs_kernel"].get(r)
                tm = 1.0 / v if v else None
                add(comp, r, "%s cold <= 2x the kernel's time" % WL[wl][1],
                    tm, tm is not None and tm <= 2.0,
                    "%.2fx the time" % tm if tm else "-", row)
            row = find_row(res, comp, "seq", "cold")
            if row and r in row["status"]:
                v = row["ratio_vs_kernel"].get(r)
                add(comp, r, "1M seq cold >= 1.3x kernel", v,
                    v is not None and v >= 1.3, fmt_ratio(v), row)
            if comp == "xz":
                a = find_row(res, comp, "rand2", "cold 1st s")
                b = find_row(res, comp, "rand1", "cold 1st s")
                if a and b and r in a["status"] and r in b["status"]:
                    va, vb = a["values"].get(r), b["values"].get(r)
                    v = va / vb if va and vb else None
                    add(comp, r, "xz: 2 jobs >= 1.7x 1 job (IOPS of the "
                        "cold 1st second, decompression-bound)", v,
                        v is not None and v >= 1.7, fmt_ratio(v),
                        a if a["status"].get(r) == "FAIL" else b)
        rf = res["refetch"].get(comp)
        if rf:
            v = rf.get("ratio")
            t.append({"image": comp, "reader": "lazy-http", "what":
                "repeated read over HTTP fetches each "
                "touched block once: fetched <= 1.05x compressed bytes "
                "touched", "value": v, "ok": v is not None and v <= 1.05,
                "shown":
                "%s (%s fetched / %s touched)" % (
                    fmt_ratio(v), fmt_bytes(rf.get("fetched_bytes")),
                    fmt_bytes(rf["set"]["set_touched"]["bytes"]))})
    return t


def fmt_val(v, unit):
    if v is None:
        return "-"
    if unit == "IOPS":
        return "%.0f" % v
    if unit == "MiB/s":
        return "%.1f" % v if v < 100 else "%.0f" % v
    return "%.3f" % v if v < 10 else "%.2f" % v


def fmt_spread(row, r):
    """' +-N%': half the min..max range of the samples, if more than one."""
    vals = row.get("samples", {}).get(r) or []
    v = row["values"].get(r)
    if len(vals) < 2 or not v:
        return ""
    return " \u00b1%.0f%%" % ((max(vals) - min(vals)) / 2.0 / v * 100.0)


def main_table(res):
    readers = res["readers"]
    fuse = [r for r in readers if r != "kernel"]
    hdr = ["image", "workload", "state", "unit"]
    hdr += ["kernel"] * ("kernel" in readers)
    for r in fuse:
        hdr += [LABELS[r], "vs kernel"]
    lines = [hdr]
    for row in res["rows"]:
        line = [row["image"], row["label"], row["state"], row["unit"]]
        if "kernel" in readers:
            st = row["status"].get("kernel")
            line.append("FAIL" if st == "FAIL" else
                        fmt_val(row["values"].get("kernel"), row["unit"]) +
                        fmt_spread(row, "kernel"))
        for r in fuse:
            st = row["status"].get(r)
            if st == "FAIL":
                line += ["FAIL", ""]
                continue
            line.append(fmt_val(row["values"].get(r), row["unit"]) +
                        fmt_spread(row, r))
            line.append(fmt_ratio(row["ratio_vs_kernel"].get(r))
                        if r in row["ratio_vs_kernel"] else "")
        lines.append(line)
    return lines


def header_lines(res):
    meta = res["meta"]
    out = ["sqfs-lazy bench (issue 4)  %s  bench commit %s%s" % (
        meta.get("date", "?"), bench_summary(meta),
        "  QUICK" if meta.get("quick") == "1" else "")]
    out.append(machine_line(meta))
    out.append(versions_line(meta, VERSIONS))
    out.append("measured build: %s" % measured_summary(meta))
    out.append("command: %s" % meta.get("command", "?"))
    for comp in res["comps"]:
        im = res["images"].get(comp, {})
        try:
            out.append(
                "image %s: %s blocks, %s -> %s (%s:1); big.bin %s; tree/ = "
                "%s files, %s symlinks in %s dirs, %s, a subset of %s" % (
                    comp, im.get("block_size"),
                    fmt_bytes(int(im["source_bytes"])),
                    fmt_bytes(int(im["image_bytes"])), im.get("ratio"),
                    fmt_bytes(int(im["big_bytes"])), im.get("usr_files"),
                    im.get("usr_symlinks"), im.get("usr_dirs"),
                    fmt_bytes(int(im["usr_bytes"])), im.get("usr_src")))
        except (KeyError, ValueError):
            out.append("image %s: %s" % (comp, im))
    out.append("fio random runtime %s s; cold = page cache dropped + fresh "
               "mount of the reader; warm = the same again on that mount; "
               "ratio = speed vs kernel (>1 = faster than the kernel)" %
               meta.get("fio_runtime_s", "?"))
    return out


def refetch_lines(res):
    out = []
    # in the run's image order (a results.json read back has sorted keys)
    for comp in [c for c in res["comps"] if c in res["refetch"]]:
        rf = res["refetch"][comp]
        fs = rf["set"]
        tch = fs["set_touched"]
        out.append("%s: %d files, %s uncompressed; touched: %d data blocks "
                   "(%s) + %d fragment blocks (%s) = %s compressed" % (
                       comp, fs["set_files"],
                       fmt_bytes(fs["set_uncompressed_bytes"]),
                       tch["data_blocks"], fmt_bytes(tch["data_bytes"]),
                       tch["fragment_blocks"],
                       fmt_bytes(tch["fragment_bytes"]),
                       fmt_bytes(tch["bytes"])))
        for p in ("pass1", "pass2"):
            d = rf["passes"].get(p, {})
            if d.get("status") != "ok":
                out.append("  %s: %s" % (p, d.get("status")))
                continue
            out.append("  %s: %.3f s, %s read; fetched %s in %s requests "
                       "(nginx: %s sent in %d requests)" % (
                           p, d["seconds"], fmt_bytes(d["bytes_read"]),
                           fmt_bytes(d.get("fetched_bytes")),
                           d.get("fetched_requests", "?"),
                           fmt_bytes(d.get("nginx_bytes_sent")),
                           d.get("nginx_requests") or 0))
        if "ranges_union_bytes" in rf:
            out.append("  ranges asked %s in %d requests, %s distinct "
                       "(%s asked more than once)" % (
                           fmt_bytes(rf["ranges_asked_bytes"]),
                           rf["ranges"], fmt_bytes(rf["ranges_union_bytes"]),
                           fmt_bytes(rf["ranges_asked_bytes"] -
                                     rf["ranges_union_bytes"])))
    return out


def target_lines(res):
    return ["%s  %-4s %-15s %s: %s" % (
        "PASS" if t["ok"] else "MISS", t["image"], LABELS[t["reader"]],
        t["what"], t["shown"]) for t in res["targets"]]


def notes(res):
    out = []
    meta = res["meta"]
    if int(meta.get("repeat", "1") or 1) > 1:
        out.append("values are medians of %s repetitions; \u00b1 is half "
                   "the min..max range" % meta["repeat"])
    for row in res["rows"]:
        cb = {r: v for r, v in row.get("count_bytes", {}).items() if v}
        if len({tuple(v) for v in cb.values()}) > 1 or \
                any(len(v) > 1 for v in cb.values()):
            out.append("%s %s %s: %s differ between readers: %s" % (
                row["image"], row["workload"], row["state"],
                "archive sizes" if row["workload"] == "tar" else
                "entry counts", cb))
        for r, n in (row.get("failures") or {}).items():
            if n:
                out.append("%s %s %s %s: %d failed sample(s), see raw/" % (
                    row["image"], LABELS.get(r, r), row["workload"],
                    row["state"], n))
    for comp, ver in res.get("verify_sha256_big", {}).items():
        if len(set(ver.values())) > 1:
            out.append("%s: big.bin sha256 differs between readers: %s" %
                       (comp, ver))
        elif ver:
            out.append("%s: big.bin sha256 identical on %s" % (
                comp, ", ".join(sorted(ver))))
    loads = [m["load1"] for m in res.get("measurements", [])
             if m.get("load1") is not None]
    if loads:
        out.append("1-min load average after the rows: %.2f .. %.2f (the "
                   "bench itself adds about 1-2 on 2 CPUs); treat "
                   "differences under about 1.5x as noise" % (
                       min(loads), max(loads)))
    out.append("'cold' fio rows are averages over the whole run, which "
               "also counts page-cache hits once misses filled it; 'cold "
               "1st s' is the first second alone (fio's IOPS log)")
    return out


def cpu_lines(res):
    fuse = [r for r in res["readers"] if r != "kernel"]
    cl = [["image", "workload", "state"] + [LABELS[r] for r in fuse]]
    for row in res["rows"]:
        if row["workload"] == "mount" or row["metric"] == "iops_first_s":
            continue
        cl.append([row["image"], row["label"], row["state"]] + [
            "%.2f" % row["daemon_cpu_s"][r]
            if row["daemon_cpu_s"].get(r) is not None else "-"
            for r in fuse])
    return cl


def text_report(res):
    L = header_lines(res) + [""]
    L += render(main_table(res), left_cols=4)
    if any(r != "kernel" for r in res["readers"]):
        L += ["", "FUSE daemon CPU seconds (user+sys) per row:"]
        L += render(cpu_lines(res), left_cols=3)
    http = [(row, row["http"]["lazy-http"]) for row in res["rows"]
            if "lazy-http" in row.get("http", {}) and
            row["metric"] != "iops_first_s"]
    if http:
        L += ["", "sqfs-lazy http: nginx requests and bytes sent per row:"]
        hl = [["image", "workload", "state", "requests", "bytes"]]
        for row, h in http:
            hl.append([row["image"], row["label"], row["state"],
                       "%d" % (h["requests"] or 0), fmt_bytes(h["bytes"])])
        L += render(hl, left_cols=3)
    if res["refetch"]:
        L += ["", "repeated read over HTTP (a file set read twice, page "
              "cache dropped in between, one mount):"]
        L += refetch_lines(res)
    if res["targets"]:
        L += ["", "issue 4 targets (ratios in this run):"]
        L += target_lines(res)
        n = sum(t["ok"] for t in res["targets"])
        L.append("%d PASS, %d MISS" % (n, len(res["targets"]) - n))
    L += [""] + ["note: " + n for n in notes(res)]
    return "\n".join(L) + "\n"


def md_report(res):
    L = ["# sqfs-lazy bench run %s" % res["meta"].get("date", "?"), ""]
    L += ["- " + x for x in header_lines(res)[1:]] + [""]
    L += render_md(main_table(res), left_cols=4) + [""]
    if res["refetch"]:
        L += ["## Repeated read over HTTP", "", "```"] + \
            refetch_lines(res) + ["```", ""]
    if res["targets"]:
        L += ["## Issue 4 targets", "", "```"] + target_lines(res) + \
            ["```", ""]
    L += ["## Daemon CPU seconds", ""]
    L += render_md(cpu_lines(res), left_cols=3) + [""]
    L += ["## Notes", ""] + ["- " + n for n in notes(res)]
    return "\n".join(L) + "\n"


def main(argv):
    if len(argv) >= 3 and argv[1] == "fio-summary":
        print(fio_summary(argv[2], argv[3] if len(argv) > 3 else None))
        return 0
    if len(argv) >= 3 and argv[1] == "report":
        res = build_results(argv[2])
        with open(os.path.join(argv[2], "results.json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
            f.write("\n")
        with open(os.path.join(argv[2], "results.md"), "w") as f:
            f.write(md_report(res))
        if "--json-only" not in argv:
            sys.stdout.write(text_report(res))
        return 0
    if len(argv) >= 3 and argv[1] == "table":
        with open(argv[2]) as f:
            res = json.load(f)
        if res.get("format") != "sqfs-lazy-bench/2":
            sys.stderr.write("compare.py: %s is %s, not sqfs-lazy-bench/2 "
                             "(older runs: git show 9a5ba1e:bench/compare.py)"
                             "\n" % (argv[2], res.get("format")))
            return 1
        sys.stdout.write(md_report(res) if "--md" in argv
                         else text_report(res))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
