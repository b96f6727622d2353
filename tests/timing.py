"""Time in the HTTP tests.

A test waits for the event it needs (a counter of `--stats`, a request
the fault server holds, a process ending) with a generous deadline, never
for a fixed time. Where time itself is what a test checks (a timeout, an
expiry, Retry-After), its bound is worked out from the configured values
here, times SCALE: the sanitizer builds run everything about three times
slower, which is why tests/run.sh gives them --timeout-multiplier 3.
"""

import json
import os
import threading
import time

# LSQ_HTTP_BACKOFF_BASE and _MAX in src/http/http_internal.h
BACKOFF_BASE = 0.2
BACKOFF_MAX = 8.0
# slack for a loaded machine on top of a computed bound, before SCALE
SLACK = 5.0
# how long to wait for an event before calling it lost
DEADLINE = 60.0


def sanitizers():
    """The build's sanitizers ("" for none): LSQ_SANITIZE when the suite
    sets it, else the b_sanitize option of LSQ_BUILD_DIR."""
    env = os.environ.get("LSQ_SANITIZE")
    if env is None:
        env = ""
        b = os.environ.get("LSQ_BUILD_DIR")
        try:
            with open(os.path.join(b, "meson-info",
                                   "intro-buildoptions.json")) as f:
                for opt in json.load(f):
                    if opt["name"] == "b_sanitize":
                        v = opt["value"]
                        env = ",".join(v) if isinstance(v, list) else v
        except (OSError, TypeError, ValueError):
            pass
    return "" if env == "none" else env


SCALE = 3 if sanitizers() else 1
# the deadline for an event, in seconds
WAIT = DEADLINE * SCALE


def bound(seconds):
    """A bound on something that takes `seconds` here: with slack for a
    loaded machine, scaled for a sanitizer build."""
    return (seconds + SLACK) * SCALE


def fetch_seconds(timeout, retries, retry_after=0.0):
    """The longest one fetch of the daemon takes when every try ends in
    its timeout: retries + 1 tries and the longest backoff between them
    (base doubled per retry, capped; Retry-After replaces it)."""
    total = (retries + 1) * timeout
    for attempt in range(retries):
        d = min(BACKOFF_BASE * 2 ** attempt, BACKOFF_MAX)
        total += max(d, retry_after)
    return total


def wait_for(cond, what, timeout=DEADLINE):
    """Poll cond() until it returns something true and return that;
    AssertionError naming `what` after timeout * SCALE seconds."""
    deadline = time.monotonic() + timeout * SCALE
    pause = 0.01
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(pause)
        pause = min(pause * 1.5, 0.2)


def join_all(threads, timeout=DEADLINE):
    """Join threads within one deadline; assert every one finished."""
    deadline = time.monotonic() + timeout * SCALE
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, "threads still running after %s s: %s" % (
        timeout * SCALE, alive)


def run_threads(fn, args_list, timeout=DEADLINE):
    """fn(*args) in one thread per args, all started together; asserts
    that every thread finished within the deadline and raised nothing,
    and returns their results in the order of args_list."""
    results = [None] * len(args_list)
    errors = []

    def run(i, args):
        try:
            results[i] = fn(*args)
        except BaseException as e:  # noqa: B036 -- reported below
            errors.append("%r: %s: %s" % (args, type(e).__name__, e))

    threads = [threading.Thread(target=run, args=(i, a),
                                name="%s%r" % (fn.__name__, a))
               for i, a in enumerate(args_list)]
    for t in threads:
        t.start()
    join_all(threads, timeout)
    assert not errors, errors
    return results
