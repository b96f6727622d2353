#!/usr/bin/env python3
"""Summaries for bench/run.sh.

  compare.py fio-summary FIO.json [LOG_PREFIX]
      print "iops mib_s seconds bytes clat_mean_us clat_p99_us iops_first_s"
      for one fio --output-format=json file (all jobs summed; seconds is the
      longest job runtime); iops_first_s is the IOPS of the first second,
      summed over LOG_PREFIX_iops.<job>.log, or "-" without logs

  compare.py report RUN_DIR [--json-only]
      read RUN_DIR/meta.tsv and RUN_DIR/measurements.tsv, write
      RUN_DIR/results.json and print the comparison table

  compare.py table RESULTS.json
      print the table again from a results.json (also of an older run)

Ratios are "speed relative to the kernel": reader/kernel for IOPS and MiB/s,
kernel/reader for seconds, so 1.00x is parity and smaller is slower in every
row.
"""

import csv
import json
import os
import statistics
import sys

READERS = ["kernel", "squashfuse_ll", "sqfs-lazy"]
LABELS = {"kernel": "kernel", "squashfuse_ll": "squashfuse_ll",
          "sqfs-lazy": "sqfs-lazy-mount"}
WORKLOADS = [
    # key, label, metric column, unit, higher is better
    ("rand1", "rand 4k psync, 1 job", "iops", "IOPS", True),
    ("rand2", "rand 4k psync, 2 jobs", "iops", "IOPS", True),
    ("seq", "seq 1M, 1 pass", "mib_s", "MiB/s", True),
    ("tar", "tar tree | wc -c", "seconds", "s", False),
]


def first_second_iops(prefix):
    """Sum over jobs of the first 1 s interval of fio's averaged IOPS log."""
    total, found = 0.0, False
    d = os.path.dirname(prefix) or "."
    base = os.path.basename(prefix) + "_iops."
    for name in sorted(os.listdir(d)):
        if not (name.startswith(base) and name.endswith(".log")):
            continue
        with open(os.path.join(d, name)) as f:
            line = f.readline().split(",")
        if len(line) >= 2:
            total += float(line[1])
            found = True
    return "%.1f" % total if found else "-"


def fio_summary(path, log_prefix=None):
    with open(path) as f:
        text = f.read()
    # fio may print warnings before the JSON document
    data = json.loads(text[text.index("{"):])
    iops = bw = io_bytes = 0.0
    secs = 0.0
    clat_w = clat_n = 0.0
    p99 = 0.0
    for job in data["jobs"]:
        rd = job["read"]
        iops += rd["iops"]
        bw += rd["bw_bytes"]
        io_bytes += rd["io_bytes"]
        secs = max(secs, rd["runtime"] / 1000.0)
        n = rd.get("total_ios") or rd["clat_ns"].get("N", 0)
        clat_w += rd["clat_ns"]["mean"] * n
        clat_n += n
        pct = rd["clat_ns"].get("percentile", {})
        p99 = max(p99, pct.get("99.000000", 0))
    clat = clat_w / clat_n / 1000.0 if clat_n else 0.0
    first = first_second_iops(log_prefix) if log_prefix else "-"
    print("%.1f %.1f %.3f %d %.1f %.1f %s" % (iops, bw / 1048576.0, secs,
                                             io_bytes, clat, p99 / 1000.0,
                                             first))


def read_meta(run_dir):
    meta, image = {}, {}
    with open(os.path.join(run_dir, "meta.tsv")) as f:
        for line in f:
            line = line.rstrip("\n")
            if "\t" not in line:
                continue
            k, v = line.split("\t", 1)
            if k.startswith("image."):
                image[k[6:]] = v
            else:
                meta[k] = v
    return meta, image


def num(v):
    if v is None or v == "":
        return None
    try:
        return float(v)
    except ValueError:
        return None


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def read_stats(run_dir):
    """Counters printed by sqfs-lazy-mount --stats after each workload's
    warm row ("name value" lines); the last repetition wins."""
    out = {}
    raw = os.path.join(run_dir, "raw")
    if not os.path.isdir(raw):
        return out
    files = []
    for name in os.listdir(raw):
        # sqfs-lazy.<workload>.<rep>.stats.txt
        parts = name.split(".")
        if len(parts) == 5 and parts[0] == "sqfs-lazy" and \
                parts[3:] == ["stats", "txt"] and parts[2].isdigit():
            files.append((int(parts[2]), parts, name))
    for _, parts, name in sorted(files):
        d = {}
        with open(os.path.join(raw, name)) as f:
            for line in f:
                kv = line.split()
                if len(kv) == 2:
                    try:
                        d[kv[0]] = int(kv[1])
                    except ValueError:
                        d[kv[0]] = kv[1]
        if d:
            out[parts[1]] = d
    return out


def build_results(run_dir):
    meta, image = read_meta(run_dir)
    with open(os.path.join(run_dir, "measurements.tsv")) as f:
        meas = list(csv.DictReader(f, delimiter="\t"))
    for m in meas:
        for k in ("iops", "mib_s", "seconds", "bytes", "clat_mean_us",
                  "clat_p99_us", "iops_first_s", "daemon_cpu_s", "load1"):
            m[k] = num(m.get(k))
    readers = [r for r in meta.get("readers", "").split(",") if r]
    rows = []
    for key, label, col, unit, higher in WORKLOADS:
        views = [("cold", "cold", col), ("warm", "warm", col)]
        if col == "iops":  # the first second of the cold run, from fio's log
            views.insert(1, ("cold", "cold 1st s", "iops_first_s"))
        for state, state_label, metric in views:
            sel = [m for m in meas if m["workload"] == key and m["state"] == state]
            if not sel:
                continue
            row = {"workload": key, "label": label, "state": state_label,
                   "metric": metric, "unit": unit, "higher_is_better": higher,
                   "values": {}, "ratio_vs_kernel": {}, "daemon_cpu_s": {},
                   "status": {}}
            # with --repeat, several samples per reader: report medians
            for r in sorted({m["reader"] for m in sel}):
                ms = [m for m in sel if m["reader"] == r]
                ok = [m for m in ms if m["status"] == "ok" and m[metric] is not None]
                row["status"][r] = "ok" if ok else "FAIL"
                vals = [m[metric] for m in ok]
                row["values"][r] = med(vals)
                row.setdefault("samples", {})[r] = vals
                row.setdefault("failures", {})[r] = len(ms) - len(ok)
                row["daemon_cpu_s"][r] = med([m["daemon_cpu_s"] for m in ok])
                if key == "tar":
                    row.setdefault("tar_bytes", {})[r] = sorted(
                        {int(m["bytes"]) for m in ok if m["bytes"]})
                if metric == "iops":
                    row.setdefault("clat_mean_us", {})[r] = med(
                        [m["clat_mean_us"] for m in ok])
                    row.setdefault("clat_p99_us", {})[r] = med(
                        [m["clat_p99_us"] for m in ok])
            k = row["values"].get("kernel")
            for r, v in row["values"].items():
                if r == "kernel" or not k or not v:
                    continue
                row["ratio_vs_kernel"][r] = v / k if higher else k / v
            rows.append(row)
    # mount time: median over the cold mounts of each reader
    mrow = {"workload": "mount", "label": "mount until usable (median)",
            "state": "cold", "metric": "seconds", "unit": "s",
            "higher_is_better": False, "values": {}, "ratio_vs_kernel": {},
            "daemon_cpu_s": {}, "status": {}, "samples": {}}
    for r in readers:
        v = [m["seconds"] for m in meas if m["workload"] == "mount"
             and m["reader"] == r and m["seconds"] is not None]
        if v:
            mrow["values"][r] = statistics.median(v)
            mrow["samples"][r] = v
            mrow["status"][r] = "ok"
    k = mrow["values"].get("kernel")
    for r, v in mrow["values"].items():
        if r != "kernel" and k and v:
            mrow["ratio_vs_kernel"][r] = k / v
    if mrow["values"]:
        rows.append(mrow)
    verify = {}
    vpath = os.path.join(run_dir, "raw", "verify.txt")
    if os.path.exists(vpath):
        with open(vpath) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2:
                    verify[parts[0]] = parts[1]
    return {"format": "sqfs-lazy-bench/1", "meta": meta, "image": image,
            "readers": readers, "rows": rows, "verify_sha256_big": verify,
            "sqfs_lazy_stats": read_stats(run_dir), "measurements": meas}


def fmt_spread(row, r):
    """" +-N%" half the min..max range of the samples, if more than one."""
    vals = row.get("samples", {}).get(r) or []
    v = row["values"].get(r)
    if len(vals) < 2 or not v:
        return ""
    return " \u00b1%.0f%%" % ((max(vals) - min(vals)) / 2.0 / v * 100.0)


def fmt_val(v, unit):
    if v is None:
        return "-"
    if unit == "IOPS":
        return "%.0f" % v
    if unit == "MiB/s":
        return "%.1f" % v if v < 100 else "%.0f" % v
    return "%.3f" % v if v < 10 else "%.2f" % v


def fmt_ratio(r):
    if r is None:
        return ""
    if r >= 10:
        return "%.1fx" % r
    if r >= 0.1:
        return "%.2fx" % r
    return "%.2gx" % r


def print_table(res, out=sys.stdout):
    meta, image = res["meta"], res["image"]
    readers = [r for r in READERS if r in res["readers"]]
    fuse = [r for r in readers if r != "kernel"]
    w = out.write
    w("sqfs-lazy bench  %s  commit %s%s  kernel %s  nproc %s%s\n" % (
        meta.get("date", "?"), meta.get("git_commit", "?")[:12],
        " (+%s dirty)" % meta["git_dirty_files"]
        if meta.get("git_dirty_files", "0") not in ("0", "") else "",
        meta.get("uname_r", "?"), meta.get("nproc", "?"),
        "  QUICK" if meta.get("quick") == "1" else ""))
    w("command: %s\n" % meta.get("command", "?"))
    try:
        src = int(image["source_bytes"]) / 1048576.0
        img = int(image["image_bytes"]) / 1048576.0
        w("image: %s, %s blocks, %.0f MiB -> %.0f MiB (%s:1); big.bin %d MiB, "
          "tree %s files + %s symlinks, %.0f MiB\n" % (
              image.get("compressor"), image.get("block_size"), src, img,
              image.get("ratio"), int(image["big_bytes"]) >> 20,
              image.get("tree_files"), image.get("tree_symlinks"),
              int(image["tree_bytes"]) / 1048576.0))
    except (KeyError, ValueError):
        w("image: %s\n" % image)
    w("fio random runtime %s s; ratio = speed vs kernel (higher is better, "
      "1.00x = parity)\n\n" % meta.get("fio_runtime_s", "?"))

    hdr = ["workload", "state", "unit"] + [LABELS["kernel"]] * ("kernel" in readers)
    for r in fuse:
        hdr += [LABELS[r], "vs kernel"]
    lines = [hdr]
    for row in res["rows"]:
        line = [row["label"], row["state"], row["unit"]]
        if "kernel" in readers:
            line.append(fmt_val(row["values"].get("kernel"), row["unit"])
                        + fmt_spread(row, "kernel")
                        if row["status"].get("kernel", "ok") == "ok" else "FAIL")
        for r in fuse:
            st = row["status"].get(r)
            if st is not None and st != "ok":
                line += ["FAIL", ""]
                continue
            line.append(fmt_val(row["values"].get(r), row["unit"])
                        + fmt_spread(row, r))
            ratio = row["ratio_vs_kernel"].get(r)
            line.append(fmt_ratio(ratio))
        lines.append(line)
    widths = [max(len(l[i]) for l in lines) for i in range(len(hdr))]
    for n, l in enumerate(lines):
        cells = []
        for i, c in enumerate(l):
            cells.append(c.ljust(widths[i]) if i < 3 else c.rjust(widths[i]))
        w("  ".join(cells).rstrip() + "\n")
        if n == 0:
            w("  ".join("-" * x for x in widths) + "\n")

    if fuse:
        w("\nFUSE daemon CPU seconds (user+sys) per row:\n")
        cl = [["workload", "state"] + [LABELS[r] for r in fuse]]
        for row in res["rows"]:
            if row["workload"] == "mount" or row["metric"] == "iops_first_s":
                continue
            cl.append([row["label"], row["state"]] + [
                "%.2f" % row["daemon_cpu_s"][r]
                if row["daemon_cpu_s"].get(r) is not None else "-" for r in fuse])
        cw = [max(len(l[i]) for l in cl) for i in range(len(cl[0]))]
        for l in cl:
            w("  ".join(c.ljust(cw[i]) if i < 2 else c.rjust(cw[i])
                        for i, c in enumerate(l)).rstrip() + "\n")

    stats = res.get("sqfs_lazy_stats") or {}
    if stats:
        w("\nsqfs-lazy-mount counters (--stats, cold + warm row on one mount):\n")
        names = [n for n in ("source_reads", "source_bytes", "meta_hits",
                             "meta_misses", "data_hits", "data_misses",
                             "frag_hits", "frag_misses")
                 if any(n in d for d in stats.values())]
        extra = sorted({n for d in stats.values() for n in d} - set(names))
        names += extra
        sl = [["workload"] + names]
        for key, label, _, _, _ in WORKLOADS:
            if key in stats:
                sl.append([key] + [str(stats[key].get(n, "-")) for n in names])
        sw = [max(len(l[i]) for l in sl) for i in range(len(names) + 1)]
        for l in sl:
            w("  ".join(c.ljust(sw[i]) if i == 0 else c.rjust(sw[i])
                        for i, c in enumerate(l)).rstrip() + "\n")

    notes = []
    if int(meta.get("repeat", "1") or 1) > 1:
        notes.append("values are medians of %s repetitions; \u00b1 is half "
                     "the min..max range" % meta["repeat"])
    for row in res["rows"]:
        tb = {r: v for r, v in row.get("tar_bytes", {}).items() if v}
        if len({tuple(v) for v in tb.values()}) > 1 or \
                any(len(v) > 1 for v in tb.values()):
            notes.append("tar byte counts differ (%s): %s" % (row["state"], tb))
        for r, n in (row.get("failures") or {}).items():
            if n:
                notes.append("%s %s %s: %d failed sample(s), see raw/" % (
                    LABELS.get(r, r), row["workload"], row["state"], n))
    ver = res.get("verify_sha256_big", {})
    if len(set(ver.values())) > 1:
        notes.append("big.bin sha256 differs between readers: %s" % ver)
    elif ver:
        notes.append("big.bin sha256 identical on %s" % ", ".join(sorted(ver)))
    loads = [m["load1"] for m in res.get("measurements", [])
             if m.get("load1") is not None and m["workload"] != "mount"]
    if loads:
        notes.append("1-min load average after the rows: %.2f .. %.2f "
                     "(start %s); the bench itself adds about 1-2" % (
                         min(loads), max(loads),
                         meta.get("loadavg_start", "?")))
    if notes:
        w("\n" + "\n".join("note: " + n for n in notes) + "\n")


def main(argv):
    if len(argv) >= 3 and argv[1] == "fio-summary":
        fio_summary(argv[2], argv[3] if len(argv) > 3 else None)
        return 0
    if len(argv) >= 3 and argv[1] == "report":
        res = build_results(argv[2])
        with open(os.path.join(argv[2], "results.json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
            f.write("\n")
        if "--json-only" not in argv:
            print_table(res)
        return 0
    if len(argv) >= 3 and argv[1] == "table":
        with open(argv[2]) as f:
            print_table(json.load(f))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
