#!/usr/bin/env python3
"""The verdict of a test run: what meson ran in each build directory, plus
the stages tests/run.sh records itself (a build that did not compile, the
demo).

    tally.py [--stages FILE] BUILD...

A C test counts once; a pytest suite counts its cases, read from the junit
XML its command names (--junitxml=). Each suite is judged on its own counts:
a suite that meson reports FAIL, TIMEOUT or ERROR is a failure even when its
XML (if any) shows none; a pytest suite that wrote no XML or collected no
test is a failure.

Skips (pytest skips and xfails, C tests that exit 77) are failures unless
the environment has LSQ_ALLOW_SKIPS=1; either way each one is listed with
its reason. Prints the failures, the skips, then one line

    N passed, N failed, N skipped (allowed by LSQ_ALLOW_SKIPS=1)
    N passed, N failed (N of them skips; LSQ_ALLOW_SKIPS=1 allows skips)

and exits 1 when anything failed.

--stages FILE: tab-separated lines that tests/run.sh writes,
    pass  NAME
    fail  NAME  REASON
    meson BUILD EXIT_STATUS     (a build whose `meson test` ran)
A build given with a non-zero meson exit status but no failure of its own
in the logs counts one failure.

Run the doctests with `python3 -m doctest tests/tally.py`.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

# meson's results that count as passes; everything else that is not SKIP
# (FAIL, TIMEOUT, ERROR, INTERRUPT, UNEXPECTEDPASS) is a failure
MESON_PASS = ("OK", "EXPECTEDFAIL")


class Tally:
    def __init__(self):
        self.passed = 0
        self.failures = []  # (where, why)
        self.skips = []     # (where, why)

    def fail(self, where, why):
        self.failures.append((where, why))

    def skip(self, where, why):
        self.skips.append((where, why))


def one_line(text, limit=300):
    """The text's first non-empty line, shortened.

    >>> one_line("\\n  versitygw not found\\nmore")
    'versitygw not found'
    >>> one_line(None)
    ''
    """
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[:limit - 3] + "..."
    return ""


def c_skip_reason(r):
    """Why a C test exited 77: its last line starting with "SKIP: " (see
    tests/harness/check.h), else its last output line.

    >>> c_skip_reason({"stdout": "a\\nSKIP: LZO not built\\n", "stderr": ""})
    'LZO not built'
    >>> c_skip_reason({"stdout": "", "stderr": "x\\nlast words\\n"})
    'last words'
    >>> c_skip_reason({"stdout": ""})
    'exit status 77, no output'
    """
    lines = [l.strip() for l in ((r.get("stdout") or "") + "\n" +
                                 (r.get("stderr") or "")).splitlines()
             if l.strip()]
    for line in reversed(lines):
        if line.startswith("SKIP: "):
            return line[len("SKIP: "):]
    return lines[-1] if lines else "exit status 77, no output"


def junit_path(r):
    """The junit XML a test's command writes, or None (a C test).

    >>> junit_path({"command": ["pytest", "-q", "--junitxml=/b/junit-x.xml"]})
    '/b/junit-x.xml'
    >>> junit_path({"command": ["/b/test_codec"]}) is None
    True
    """
    for arg in r.get("command") or []:
        if arg.startswith("--junitxml="):
            return arg[len("--junitxml="):]
    return None


def case_name(case):
    cls, name = case.get("classname", ""), case.get("name", "?")
    if cls:
        # tests.http.test_s3 -> tests/http/test_s3.py
        return cls.replace(".", "/") + ".py::" + name
    return name


def add_junit(t, where, path):
    """Add one pytest suite's cases; returns (failed, ran) of this suite."""
    root = ET.parse(path).getroot()
    failed = ran = 0
    for case in root.iter("testcase"):
        ran += 1
        name = "%s: %s" % (where, case_name(case))
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            failed += 1
            t.fail(name, one_line(bad.get("message")) or bad.tag)
        elif skipped is not None:
            t.skip(name, one_line(skipped.get("message")) or
                   skipped.get("type", "skipped"))
        else:
            t.passed += 1
    # a session-level error (collection, conftest) may have no testcase
    for s in ([root] if root.tag == "testsuite" else root.iter("testsuite")):
        errors = int(s.get("errors", 0))
        recorded = sum(1 for c in s.iter("testcase")
                       if c.find("error") is not None)
        if errors > recorded:
            failed += errors - recorded
            t.fail(where, "%d error(s) outside any test case"
                   % (errors - recorded))
    return failed, ran


def add_build(t, build, meson_status=None):
    """Add one build's meson results (meson-logs/testlog.json)."""
    log = os.path.join(build, "meson-logs", "testlog.json")
    start_failures = len(t.failures)
    try:
        with open(log) as f:
            results = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        t.fail(build, "no readable meson test log: %s" % e)
        return
    if not results:
        t.fail(build, "meson ran no test")
    for r in results:
        # names read "project:suite / test"
        name = r["name"].rsplit(" / ", 1)[-1]
        where = "%s: %s" % (build, name)
        result = r["result"]
        junit = junit_path(r)
        if result == "SKIP":
            t.skip(where, c_skip_reason(r) if junit is None else
                   "meson skipped the whole suite")
            continue
        if junit is None:
            if result in MESON_PASS:
                t.passed += 1
            else:
                t.fail(where, "%s (exit status %s)"
                       % (result, r.get("returncode")))
            continue
        # a pytest suite: its own counts, never the running total
        if not os.path.exists(junit):
            t.fail(where, "%s and no junit XML (%s)" % (result, junit))
            continue
        if os.path.getmtime(junit) < r.get("starttime", 0):
            t.fail(where, "%s and a junit XML older than the run (%s)"
                   % (result, junit))
            continue
        try:
            failed, ran = add_junit(t, where, junit)
        except ET.ParseError as e:
            t.fail(where, "%s, unreadable junit XML: %s" % (result, e))
            continue
        if ran == 0:
            t.fail(where, "the suite collected no test")
        elif result not in MESON_PASS and failed == 0:
            # died (TIMEOUT, ERROR, a crash) before recording a failure
            t.fail(where, "%s (exit status %s) but its junit XML records "
                   "no failure" % (result, r.get("returncode")))
    if meson_status not in (None, 0) and len(t.failures) == start_failures:
        t.fail(build, "meson test exited %d with no failing test logged"
               % meson_status)


def read_stages(t, path):
    """Lines of --stages; returns the builds whose meson test ran."""
    builds = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            kind = parts[0]
            if kind == "pass":
                t.passed += 1
            elif kind == "fail":
                t.fail(parts[1], parts[2] if len(parts) > 2 else "failed")
            elif kind == "meson":
                builds.append((parts[1], int(parts[2])))
            elif line.strip():
                t.fail(path, "unknown line: %r" % line)
    return builds


def skips_allowed(env=os.environ):
    """
    >>> skips_allowed({})
    False
    >>> skips_allowed({"LSQ_ALLOW_SKIPS": "1"})
    True
    >>> skips_allowed({"LSQ_ALLOW_SKIPS": "0"})
    False
    """
    v = env.get("LSQ_ALLOW_SKIPS", "")
    if v not in ("", "0", "1"):
        print("LSQ_ALLOW_SKIPS=%s is not 1: skips fail" % v, file=sys.stderr)
    return v == "1"


def summary(t, allow, out=None):
    """Print the lists and the verdict line; returns the exit status.

    >>> t = Tally(); t.passed = 3; t.skip("b: http: t.py::s3", "no versitygw")
    >>> summary(t, True)
    skipped (allowed by LSQ_ALLOW_SKIPS=1):
      b: http: t.py::s3: no versitygw
    3 passed, 0 failed, 1 skipped (allowed by LSQ_ALLOW_SKIPS=1)
    0
    >>> t.fail("b: unit: codec", "FAIL (exit status 1)")
    >>> summary(t, False)
    failed:
      b: unit: codec: FAIL (exit status 1)
    skipped (a skip is a failure; LSQ_ALLOW_SKIPS=1 allows skips):
      b: http: t.py::s3: no versitygw
    3 passed, 2 failed (1 of them skipped; LSQ_ALLOW_SKIPS=1 allows skips)
    1
    """
    out = out or sys.stdout
    if t.failures:
        print("failed:", file=out)
        for where, why in t.failures:
            print("  %s: %s" % (where, why), file=out)
    if t.skips:
        print("skipped (%s):" % ("allowed by LSQ_ALLOW_SKIPS=1" if allow else
                                 "a skip is a failure; "
                                 "LSQ_ALLOW_SKIPS=1 allows skips"), file=out)
        for where, why in t.skips:
            print("  %s: %s" % (where, why), file=out)
    if allow:
        failed = len(t.failures)
        print("%d passed, %d failed, %d skipped%s" % (
            t.passed, failed, len(t.skips),
            " (allowed by LSQ_ALLOW_SKIPS=1)" if t.skips else ""), file=out)
    else:
        failed = len(t.failures) + len(t.skips)
        print("%d passed, %d failed%s" % (
            t.passed, failed,
            " (%d of them skipped; LSQ_ALLOW_SKIPS=1 allows skips)"
            % len(t.skips) if t.skips else ""), file=out)
    return 1 if failed else 0


def main(argv):
    t = Tally()
    builds = []
    args = argv[1:]
    while args and args[0].startswith("--"):
        if args[0] == "--stages" and len(args) > 1:
            builds += read_stages(t, args[1])
            args = args[2:]
        else:
            print(__doc__, file=sys.stderr)
            return 2
    builds += [(b, None) for b in args]
    if not builds and not t.passed and not t.failures:
        print(__doc__, file=sys.stderr)
        return 2
    for build, status in builds:
        add_build(t, build, status)
    return summary(t, skips_allowed())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
