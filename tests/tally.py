#!/usr/bin/env python3
"""Count test results of one meson build: C tests count one each, pytest
suites count their cases (from the junit XML next to the build); a suite
that collected no test is a failure. Prints "PASSED FAILED SKIPPED"."""
import json
import os
import sys
import xml.etree.ElementTree as ET

build = sys.argv[1]
passed = failed = skipped = 0
with open(os.path.join(build, "meson-logs", "testlog.json")) as f:
    for line in f:
        r = json.loads(line)
        # names read "project:suite / test"
        name = r["name"].rsplit(" / ", 1)[-1]
        junit = os.path.join(build, "junit-%s.xml" % name)
        if os.path.exists(junit) and r["result"] in ("OK", "FAIL"):
            root = ET.parse(junit).getroot()
            suites = [root] if root.tag == "testsuite" else list(root)
            if sum(int(s.get("tests", 0)) for s in suites) == 0:
                print("%s: the suite collected no test" % name,
                      file=sys.stderr)
                failed += 1
            for s in suites:
                t, fl = int(s.get("tests", 0)), int(s.get("failures", 0))
                e, sk = int(s.get("errors", 0)), int(s.get("skipped", 0))
                passed += t - fl - e - sk
                failed += fl + e
                skipped += sk
            if r["result"] == "FAIL" and failed == 0:
                failed += 1  # pytest died before writing results
        elif r["result"] == "OK":
            passed += 1
        elif r["result"] == "SKIP":
            skipped += 1
        else:
            failed += 1
print(passed, failed, skipped)
