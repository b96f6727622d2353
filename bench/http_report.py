#!/usr/bin/env python3
"""Summary of a bench/http.sh run.

  http_report.py RUN_DIR [--json-only]
      read RUN_DIR/meta.tsv and RUN_DIR/measurements.tsv, write
      RUN_DIR/results.json and print the table

  http_report.py --table RESULTS.json
      print the table again from a results.json

Rows are the ways to use the remote image (issue 3's table); columns are
the time and bytes until one small file is read from nothing, 4 KiB random
reads with 1 and 2 jobs, and 1 MiB sequential reads. The ratios compare
sqfs-lazy-mount over HTTP with each other way. Rows named READER@<N>ms ran
behind latency_proxy.py adding N ms per request; they are compared with
the same reader's direct row (the no-latency case).
"""

import json
import os
import sys

from benchlib import (bench_summary, fmt_bytes, fmt_ratio, machine_line,
                      measured_summary, num, read_meta, read_tsv, render,
                      versions_line)

READERS = [
    ("download", "curl whole image, then loop mount"),
    ("httpdirfs", "httpdirfs + squashfuse_ll"),
    ("httpfs2", "httpfs2 + squashfuse_ll"),
    ("ratarmount", "ratarmount (fsspec HTTP)"),
    ("lazy-http", "sqfs-lazy-mount over HTTP"),
    ("lazy-local", "sqfs-lazy-mount, local file (ref.)"),
]
LABEL = dict(READERS)
OURS = "lazy-http"


def split_key(key):
    """'lazy-http@20ms' -> ('lazy-http', 20); 'lazy-http' -> (.., 0)."""
    if "@" in key and key.endswith("ms"):
        r, l = key.rsplit("@", 1)
        try:
            return r, int(l[:-2])
        except ValueError:
            pass
    return key, 0


def latency_keys(rows):
    """Row keys behind the proxy, by latency then reader order."""
    order = {r: i for i, (r, _) in enumerate(READERS)}
    keys = [k for k in rows if split_key(k)[1] > 0]
    return sorted(keys, key=lambda k: (split_key(k)[1],
                                       order.get(split_key(k)[0], 99)))


def label_of(key):
    r, l = split_key(key)
    base = LABEL.get(r, r)
    return base if not l else "%s, +%d ms" % (base, l)


def build(run_dir):
    meta, image = read_meta(run_dir)
    rows = {}
    measurements = read_tsv(os.path.join(run_dir, "measurements.tsv"))
    for m in measurements:
        d = {"status": m["status"]}
        for k in ("seconds", "iops", "mib_s", "io_bytes", "http_requests",
                  "http_bytes", "clat_mean_us", "clat_p99_us",
                  "iops_first_s"):
            v = num(m.get(k))
            if v is not None:
                d[k] = v
        if m.get("raw"):
            d["raw"] = m["raw"]
        if m.get("reason"):
            d["reason"] = m["reason"]
        if d.get("http_requests"):
            d["http_bytes_per_request"] = d["http_bytes"] / d["http_requests"]
        if d.get("iops") and d.get("seconds") and "http_bytes" in d:
            ios = d["iops"] * d["seconds"]
            if ios:
                d["http_bytes_per_read"] = d["http_bytes"] / ios
        rows.setdefault(m["reader"], {})[m["workload"]] = d
    res = {"format": "sqfs-lazy-bench-http/1", "meta": meta, "image": image,
           "rows": rows, "measurements": measurements}
    res["ratios"] = ratios(rows)
    res["latency_ratios"] = latency_ratios(rows)
    res["targets"] = targets(meta, rows)
    return res


def get(rows, reader, wl, key):
    d = rows.get(reader, {}).get(wl, {})
    if d.get("status") != "ok":
        return None
    return d.get(key)


def ratios(rows):
    """sqfs-lazy-mount over HTTP against each other reader: how many times
    faster (time), what share of the bytes, IOPS and MiB/s ratios."""
    out = {}
    for r, _ in READERS:
        if r == OURS or r not in rows:
            continue
        o = {}
        a, b = get(rows, OURS, "small", "seconds"), get(rows, r, "small",
                                                         "seconds")
        if a and b:
            o["small_speedup"] = b / a
        a, b = get(rows, OURS, "small", "http_bytes"), get(rows, r, "small",
                                                            "http_bytes")
        if a is not None and b:
            o["small_bytes_share"] = a / b
        for name, wl, key in (("rand1_first_s", "rand1", "iops_first_s"),
                              ("rand1", "rand1", "iops"),
                              ("rand2_first_s", "rand2", "iops_first_s"),
                              ("rand2", "rand2", "iops"),
                              ("seq", "seq", "mib_s")):
            a, b = get(rows, OURS, wl, key), get(rows, r, wl, key)
            if a is not None and b:
                o[name] = a / b
        for wl in ("rand1", "rand2"):
            a = get(rows, OURS, wl, "http_bytes_per_read")
            b = get(rows, r, wl, "http_bytes_per_read")
            if a is not None and b:
                o[wl + "_bytes_per_read_share"] = a / b
        out[r] = o
    return out


LAT_FIELDS = (("small_time", "small", "seconds"),
              ("small_bytes", "small", "http_bytes"),
              ("small_requests", "small", "http_requests"),
              ("rand1_first_s", "rand1", "iops_first_s"),
              ("rand1", "rand1", "iops"),
              ("rand2_first_s", "rand2", "iops_first_s"),
              ("rand2", "rand2", "iops"),
              ("seq", "seq", "mib_s"))


def latency_ratios(rows):
    """Each row behind the proxy / the same reader's direct row: for time
    how many times as long, for IOPS and MiB/s the share kept."""
    out = {}
    for k in latency_keys(rows):
        r, _ = split_key(k)
        o = {}
        for name, wl, key in LAT_FIELDS:
            a, b = get(rows, k, wl, key), get(rows, r, wl, key)
            if a is not None and b:
                o[name] = a / b
        out[k] = o
    return out


def targets(meta, rows):
    """Issue 3's targets, checked where this run measures them."""
    t = []
    secs = get(rows, OURS, "small", "seconds")
    if secs is not None:
        t.append({"what": "one small file from nothing in under 0.2 s",
                  "value": secs, "ok": secs < 0.2})
    sent = get(rows, OURS, "small", "http_bytes")
    reqs = get(rows, OURS, "small", "http_requests")
    meta_b = num(meta.get("metadata_bytes"))
    bs = num(meta.get("block_size"))
    if sent is not None and meta_b is not None and bs:
        budget = 65536 + meta_b + bs + 1024 * (reqs or 0)
        t.append({"what": "bytes for it at most head (64 KiB) + metadata "
                          "(%d) + one block (%d) + 1 KiB headers/request"
                          % (meta_b, bs),
                  "value": sent, "budget": budget, "ok": sent <= budget})
    a, b = get(rows, OURS, "seq", "mib_s"), get(rows, "lazy-local", "seq",
                                                 "mib_s")
    if a is not None and b:
        t.append({"what": "1 MiB sequential reads at least 80% of the "
                          "local-file mount's", "value": a / b,
                  "ok": a / b >= 0.8})
    for wl in ("rand1", "rand2"):
        per = rows.get(OURS, {}).get(wl, {}).get("http_bytes_per_request")
        if per is not None and bs:
            t.append({"what": "%s: bytes per request (one per cold 4 KiB "
                              "read) at most one block (%d) + 1 KiB"
                              % (wl, bs),
                      "value": per, "ok": per <= bs + 1024})
    for wl in ("rand1", "rand2"):
        for key, what in (("iops", "run average"),
                          ("iops_first_s", "1st second")):
            a, b = get(rows, OURS, wl, key), get(rows, "ratarmount", wl, key)
            if a is not None and b:
                t.append({"what": "%s: IOPS (%s) at least 10x ratarmount's"
                                  % (wl, what), "value": a / b,
                          "ok": a / b >= 10, "ratio": True})
        b = get(rows, "ratarmount", wl, "http_bytes_per_read")
        a = get(rows, OURS, wl, "http_bytes_per_read")
        if a is not None and b:
            t.append({"what": "%s: bytes per 4 KiB read (all reads of the "
                              "run) at most 1/100 of ratarmount's (%s vs %s)"
                              % (wl, fmt_bytes(a), fmt_bytes(b)),
                      "value": a / b, "ok": a / b <= 0.01, "ratio": True})
        # Stricter: ours per cold read (each request is one cold read)
        # against ratarmount's per read.
        a = get(rows, OURS, wl, "http_bytes_per_request")
        if a is not None and b:
            t.append({"what": "%s: bytes per cold read (ours per request) at "
                              "most 1/100 of ratarmount's per read (%s vs %s)"
                              % (wl, fmt_bytes(a), fmt_bytes(b)),
                      "value": a / b, "ok": a / b <= 0.01, "ratio": True})
    return t


def cell(rows, r, wl, key, spec):
    d = rows.get(r, {}).get(wl)
    if d is None:
        return "-"
    if d.get("status") != "ok":
        return "FAIL"
    v = d.get(key)
    return "-" if v is None else spec % v


def table(res):
    meta, image, rows = res["meta"], res["image"], res["rows"]
    lines = [machine_line(meta),
             versions_line(meta, [
                 ("fio_version", "fio"), ("nginx_version", "nginx"),
                 ("squashfuse_version", "squashfuse"),
                 ("httpdirfs_version", "httpdirfs"),
                 ("httpfs2_version", "httpfs2"),
                 ("ratarmount_version", "ratarmount"),
                 ("sqfs_lazy_version", "sqfs-lazy-mount")]),
             "measured build: %s" % measured_summary(meta),
             "bench commit %s; command: %s" % (bench_summary(meta),
                                               meta.get("command", "?"))]
    src = num(image.get("source_bytes"))
    img = num(image.get("image_bytes"))
    lines.append("image: %s, %s blocks, %s -> %s; metadata region %s; "
                 "served by nginx %s on 127.0.0.1" % (
                     image.get("compressor", "?"),
                     image.get("block_size", "?"), fmt_bytes(src),
                     fmt_bytes(img),
                     fmt_bytes(num(meta.get("metadata_bytes"))),
                     meta.get("nginx_version", "?")))
    lines.append("small file: %s (%s bytes); every row starts from a fresh "
                 "mount with the page cache dropped; fio random %s s, "
                 "sequential pass capped at %s s" % (
                     meta.get("small_path"), meta.get("small_size"),
                     meta.get("fio_runtime_s"), meta.get("seq_cap_s")))
    lines.append("")
    rt = meta.get("fio_runtime_s", "?")
    head = ["way to use the remote image", "small file: time",
            "bytes moved", "requests", "rand 4k 1 job", "",
            "rand 4k 2 jobs", "", "bytes/request", "seq 1M"]
    units = ["", "s", "", "", "IOPS 1st s", "%s s avg" % rt, "IOPS 1st s",
             "%s s avg" % rt, "", "MiB/s"]
    body = []
    keys = [r for r, _ in READERS if r in rows] + latency_keys(rows)
    for r in keys:
        label = label_of(r)
        sm = rows[r].get("small", {})
        per = rows[r].get("rand1", {}).get("http_bytes_per_request")
        body.append([
            label,
            cell(rows, r, "small", "seconds", "%.3f"),
            "-" if r == "lazy-local" else (
                fmt_bytes(sm.get("http_bytes")) if sm.get("status") == "ok"
                else "FAIL"),
            "-" if r == "lazy-local" else cell(rows, r, "small",
                                              "http_requests", "%d"),
            cell(rows, r, "rand1", "iops_first_s", "%.0f"),
            cell(rows, r, "rand1", "iops", "%.0f"),
            cell(rows, r, "rand2", "iops_first_s", "%.0f"),
            cell(rows, r, "rand2", "iops", "%.0f"),
            "-" if split_key(r)[0] in ("lazy-local", "download") or per is None
            else fmt_bytes(per),
            cell(rows, r, "seq", "mib_s", "%.1f"),
        ])
    lines += render([head, units] + body, header_rows=2)
    lines.append("")
    lines.append("sqfs-lazy-mount over HTTP compared with each way "
                 "(time: how many times faster; bytes: its share; IOPS and "
                 "MiB/s: ours / theirs):")
    rh = ["vs", "small file time", "small file bytes", "rand 1 job 1st s",
          "rand 1 job avg", "rand 2 jobs 1st s", "rand 2 jobs avg",
          "seq 1M", "bytes/read 1 job", "bytes/read 2 jobs"]
    rb = []
    for r, label in READERS:
        o = res["ratios"].get(r)
        if o is None:
            continue
        rb.append([label] + [fmt_ratio(o.get(n)) for n in (
            "small_speedup", "small_bytes_share", "rand1_first_s", "rand1",
            "rand2_first_s", "rand2", "seq", "rand1_bytes_per_read_share",
            "rand2_bytes_per_read_share")])
    lines += render([rh] + rb)
    lr = res.get("latency_ratios") or {}
    if lr:
        lines.append("")
        lines.append("behind the latency proxy, ratio to the same way without "
                     "it (time and bytes: how many times as much; IOPS and "
                     "MiB/s: the share kept):")
        lh = ["way", "small file time", "bytes", "requests",
              "rand 1 job 1st s", "rand 1 job avg", "rand 2 jobs 1st s",
              "rand 2 jobs avg", "seq 1M"]
        lb = []
        for k, o in lr.items():
            lb.append([label_of(k)] + [fmt_ratio(o.get(n)) for n in (
                "small_time", "small_bytes", "small_requests",
                "rand1_first_s", "rand1", "rand2_first_s", "rand2", "seq")])
        lines += render([lh] + lb)
    failed = [(k, wl, d["reason"]) for k, r in rows.items()
              for wl, d in r.items() if d.get("status") != "ok" and
              d.get("reason")]
    if failed:
        lines.append("")
        lines.append("failed rows:")
        for k, wl, why in failed:
            lines.append("  %s, %s: %s" % (label_of(k), wl, why))
    if res["targets"]:
        lines.append("")
        lines.append("issue 3 targets:")
        for t in res["targets"]:
            v = t["value"]
            if t.get("ratio"):
                vs = fmt_ratio(v)
            else:
                vs = ("%.3f" % v) if isinstance(v, float) and v < 10 else \
                    "%d" % v
            lines.append("  [%s] %s: %s%s" % (
                "ok" if t["ok"] else "MISSED", t["what"], vs,
                " (budget %d)" % t["budget"] if "budget" in t else ""))
    lines.append("")
    lines.append("note: bytes are nginx's $bytes_sent (headers included) "
                 "from its access log; 'bytes/request' is of the 1-job random "
                 "run, where each request is one cold 4 KiB read")
    lines.append("note: 'bytes/read' is nginx's bytes over the reads fio "
                 "made (IOPS x seconds), page-cache hits included; in the "
                 "ratio table it is ours / theirs")
    if lr:
        lines.append("note: '+N ms' rows ran through bench/latency_proxy.py, "
                     "which holds every chunk going to nginx N ms (so each "
                     "request, on a new or kept-alive connection, pays N ms)")
    lines.append("note: '1st s' is the first second of the cold run (fio's "
                 "IOPS log), the truly cold figure; the %s s average also "
                 "counts reads served by the page cache once earlier misses "
                 "filled it (whole blocks), so it mostly says how soon the "
                 "big file was covered" % rt)
    lines.append("note: 1-min load average at start %s; the machine may be "
                 "shared, treat differences under 1.5x as noise" %
                 meta.get("loadavg_start", "?"))
    return "\n".join(lines)


def main(argv):
    if len(argv) >= 2 and argv[0] == "--table":
        with open(argv[1]) as f:
            print(table(json.load(f)))
        return 0
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    run_dir = argv[0]
    res = build(run_dir)
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    if "--json-only" not in argv:
        print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
