"""-o url_command=: the image's URL comes from a program and expires.

The fault server issues presigned URLs (fault_server.py, presign_on):
each token is good for a number of requests or seconds, then answered
with 403. The command is a small shell script that asks the server for a
URL, or fails in the way a control file says (exit status, hang, no
output, not a URL), or asks for a URL of another object. What is checked:
renewal after a refusal is invisible to readers, an expiry in the URL is
acted on before the server refuses it, a failing command costs that read
(EIO and one line with its reason) and nothing else, a renewed URL to
another object is a changed image, and the signature is never shown.
"""

import os
import subprocess
import time

from conftest import check_eio, daemon, read_with_timeout, try_mount
from test_cache import stats
from timing import SCALE, WAIT, bound, fetch_seconds

FAST = ["timeout=3", "connect_timeout=1", "retries=1"]
# src/http/url_command.c
REFUSED_HOLD_S = 1.0   # a failed run stands this long
MIN_INTERVAL_S = 1     # between renewals ahead of time

SCRIPT = r"""#!/bin/sh
# a signer for the tests: what it does comes from files next to it
dir=$(dirname "$0")
case $(cat "$dir/mode") in
fail) echo "signer: starting" >&2
      echo "signer: access to the vault denied" >&2; exit 3 ;;
hang) sleep 600 ;;
empty) exit 0 ;;
garbage) echo "not a URL but s3cret-looking"; exit 0 ;;
esac
exec curl -sf "http://127.0.0.1:$(cat "$dir/port")/_presign?path=$(cat "$dir/path")&$(cat "$dir/args")"
"""


class Signer:
    def __init__(self, tmp_path, server, path="/small.sqfs", args="uses=1000"):
        self.dir = tmp_path / "signer"
        self.dir.mkdir()
        self.script = self.dir / "sign"
        self.script.write_text(SCRIPT)
        self.script.chmod(0o755)
        (self.dir / "port").write_text(str(server.port))
        self.set(mode="ok", path=path, args=args)

    def set(self, **kw):
        for k, v in kw.items():
            (self.dir / k).write_text(v)

    def option(self):
        return "url_command=%s" % self.script


def presigning(fault_server, tmp_path, **kw):
    fault_server.presign_on()
    return Signer(tmp_path, fault_server, **kw)


def tokens(server):
    return [t for _, t in server.issued]


def assert_not_shown(m, server):
    """No issued signature in the log, /proc/mounts, --stats or argv."""
    stats = subprocess.run([daemon(), "--stats", m.mnt], capture_output=True,
                           text=True, timeout=30)
    assert stats.returncode == 0, stats.stderr
    with open("/proc/self/mountinfo") as f:
        mounts = f.read()
    with open("/proc/%d/cmdline" % m.proc.pid, "rb") as f:
        cmdline = f.read().decode(errors="replace")
    assert tokens(server)
    for t in tokens(server):
        for name, text in (("log", m.log()), ("mountinfo", mounts),
                           ("stats", stats.stdout), ("cmdline", cmdline)):
            assert t not in text, name
    # the image shows as the URL given, which names it
    assert " http://127.0.0.1:%d/small.sqfs " % server.port in mounts


def test_used_up_url_renewed_whole_tree(fault_server, small_image, mounts,
                                        tmp_path):
    """A URL good for 3 requests: the whole tree reads as the source files
    while the URL is renewed again and again behind the readers."""
    signer = presigning(fault_server, tmp_path, args="uses=3")
    m = mounts(fault_server.url("/small.sqfs"),
               FAST + ["loglevel=debug", signer.option()])
    root = small_image["tree"]
    for rel, data in small_image["files"].items():
        ok, got, _ = read_with_timeout(os.path.join(m.mnt, rel))
        assert ok and got == data, (rel, got if not ok else "differs")
    assert os.readlink(os.path.join(m.mnt, "d/link")) == \
        os.readlink(os.path.join(root, "d/link"))
    reqs = fault_server.requests()
    assert sum(r["status"] == 403 for r in reqs) >= 3, reqs
    assert len(tokens(fault_server)) >= 4
    # every refused request was followed by a good one: no failed read
    assert "failed" not in m.log(), m.log()[-3000:]
    assert_not_shown(m, fault_server)


def renew_at(issued, life):
    """When the daemon renews a URL issued at Unix time `issued` (a float)
    that carries X-Amz-Date and X-Amz-Expires=life: lsq_url_renew_at() on
    the whole seconds of X-Amz-Date, at least MIN_INTERVAL_S after the
    run that got it."""
    date = int(issued)
    margin = max(min(life // 2, 60), life // 10)
    return max(date + life - margin, date + MIN_INTERVAL_S)


def test_expiry_in_url_renews_before_refusal(fault_server, small_image,
                                             mounts, tmp_path):
    """X-Amz-Date + X-Amz-Expires: the URL is renewed once half its life
    is gone (the margin is min(60 s, half)), before the server refuses:
    the first read after that point, while the server would still take
    the old URL, comes with a new one."""
    # long enough for the mount and a first read before half of it is
    # gone, on a loaded machine and in a sanitizer build
    life = 8 * SCALE
    signer = presigning(fault_server, tmp_path, args="expires=%d" % life)
    m = mounts(fault_server.url("/small.sqfs"), FAST + [signer.option()])
    files = small_image["files"]
    ok, got, _ = read_with_timeout(os.path.join(m.mnt, "f00.bin"), WAIT)
    assert ok and got == files["f00.bin"]
    issued = tokens(fault_server)
    expires = fault_server.tokens[issued[0]][1]
    renew = renew_at(expires - life, life)
    assert time.time() < renew, \
        "mount and first read took more than half the URL's %d s" % life
    assert len(issued) == 1, ("a URL asked for before its renewal time",
                              fault_server.requests(), m.log()[-3000:])
    assert stats(m.mnt)["http_url_renewals"] == 0
    # time is what this test is about: wait for the renewal point
    time.sleep(renew - time.time() + 0.05)
    assert time.time() < expires - 1   # the old URL still works
    fault_server.clear_log()
    ok, got, _ = read_with_timeout(os.path.join(m.mnt, "f01.bin"), WAIT)
    assert ok and got == files["f01.bin"]
    issued = tokens(fault_server)
    assert len(issued) == 2, issued
    reqs = fault_server.requests()
    assert reqs and all(r["status"] == 206 for r in reqs), reqs
    assert all(issued[1] in r["target"] for r in reqs), reqs
    st = stats(m.mnt)
    assert st["http_url_renewals"] == 1 and st["http_url_failures"] == 0, st
    assert_not_shown(m, fault_server)


def test_failing_command_costs_that_read_only(fault_server, small_image,
                                              mounts, tmp_path):
    """Exit status, hang (killed after timeout=), no output, not a URL:
    EIO for the read that needed a new URL, its reason in the log, the
    mount goes on; a working command later brings reads back."""
    signer = presigning(fault_server, tmp_path)
    timeout, retries = 2, 1
    m = mounts(fault_server.url("/small.sqfs"),
               ["timeout=%d" % timeout, "connect_timeout=1",
                "retries=%d" % retries, signer.option()])
    files = small_image["files"]
    ok, got, _ = read_with_timeout(os.path.join(m.mnt, "f02.bin"))
    assert ok and got == files["f02.bin"]
    # the command runs for at most timeout= (then it is killed), and the
    # read's fetch for at most its own timeouts
    read_bound = bound(timeout + fetch_seconds(timeout, retries))
    failed_at = None

    cases = [("fail", "f03.bin", "exit status 3: signer: access to the "
              "vault denied"),
             ("hang", "f04.bin", "url_command: no answer within 2 s"),
             ("empty", "f05.bin", "url_command: printed no URL"),
             ("garbage", "f06.bin", "printed something that is not an "
              "http:// or https:// URL")]
    for i, (mode, name, reason) in enumerate(cases):
        signer.set(mode=mode)
        fault_server.revoke_tokens()
        wait_past_refusal(failed_at)
        before = len(m.log())
        ok, text, secs = read_with_timeout(os.path.join(m.mnt, name),
                                           WAIT)
        failed_at = time.monotonic()
        check_eio(ok, text)
        assert secs < read_bound, (mode, secs)
        # the command ran again for this read (not the last one's answer)
        assert stats(m.mnt)["http_url_failures"] == i + 1
        new = m.log()[before:]
        lines = [ln for ln in new.splitlines() if reason in ln]
        assert lines, (mode, new)
        assert all("HTTP 403" in ln and "failed" in ln for ln in lines), new
        assert "s3cret" not in new
        assert m.alive()
        # what was read before still reads
        ok, got, _ = read_with_timeout(os.path.join(m.mnt, "f02.bin"))
        assert ok and got == files["f02.bin"]
        assert os.listdir(os.path.join(m.mnt, "d"))

    # nothing left behind by the hang: no child, no orphaned sleep
    for how in (["-P", str(m.proc.pid)], ["-x", "-f", "sleep 600"]):
        out = subprocess.run(["pgrep", "-a"] + how, capture_output=True,
                             text=True)
        left = [ln for ln in out.stdout.splitlines()
                if "sqfs-lazy-guard" not in ln]  # conn_guard.c's child
        assert not left, left
    signer.set(mode="ok")
    wait_past_refusal(failed_at)
    ok, got, _ = read_with_timeout(os.path.join(m.mnt, "f03.bin"))
    assert ok and got == files["f03.bin"]


def wait_past_refusal(failed_at):
    """A failed run of the command answers every renewal for
    REFUSED_HOLD_S; failed_at (monotonic) is when the read that ran it
    returned, which is after the run ended."""
    if failed_at is not None:
        time.sleep(max(0.0, failed_at + REFUSED_HOLD_S + 0.05 -
                       time.monotonic()))


def test_renewed_url_of_another_object_is_a_change(fault_server, small_image,
                                                   mounts, tmp_path):
    """The new URL names an object of another size and ETag: EIO, as for
    an image changed under the mount, and for every later read."""
    fault_server.add("/other.sqfs", small_image["data"][:-4096],
                     etag='"v2"')
    signer = presigning(fault_server, tmp_path)
    m = mounts(fault_server.url("/small.sqfs"), FAST + [signer.option()])
    ok, got, _ = read_with_timeout(os.path.join(m.mnt, "f07.bin"))
    assert ok and got == small_image["files"]["f07.bin"]
    signer.set(path="/other.sqfs")
    fault_server.revoke_tokens()
    ok, text, _ = read_with_timeout(os.path.join(m.mnt, "f08.bin"))
    check_eio(ok, text)
    assert "remote image changed" in m.log(), m.log()[-3000:]
    # the right object again, the URL to the other one revoked: a daemon
    # that tried once more would be refused, renew and read f09; this one
    # fails it without asking the server
    signer.set(path="/small.sqfs")
    fault_server.revoke_tokens()
    fault_server.clear_log()
    ok, text, _ = read_with_timeout(os.path.join(m.mnt, "f09.bin"))
    check_eio(ok, text)
    assert fault_server.requests() == []


def test_command_failing_at_mount_refuses_it(fault_server, tmp_path):
    signer = presigning(fault_server, tmp_path)
    signer.set(mode="fail")
    rc, err, secs = try_mount(fault_server.url("/small.sqfs"),
                              str(tmp_path / "mnt"), None,
                              FAST + [signer.option()])
    # the command fails at once: well within one fetch's timeouts
    assert rc != 0 and secs < bound(fetch_seconds(3, 1)), secs
    assert "access to the vault denied" in err and "exit status 3" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_options_refused(fault_server, tmp_path):
    """url_command wants an http(s) IMAGE and no mirrors; words only."""
    for image, extra, what in (
            ("s3://bucket/key", [], "url_command= needs"),
            (fault_server.url("/small.sqfs"),
             ["mirror=" + fault_server.url("/small.sqfs")],
             "url_command= needs"),
            (fault_server.url("/small.sqfs"), [], "cannot run")):
        cmd = "url_command=/nonexistent/signer --flag"
        rc, err, _ = try_mount(image, str(tmp_path / "mnt"), None,
                               FAST + extra + [cmd])
        assert rc != 0 and what in err, err
