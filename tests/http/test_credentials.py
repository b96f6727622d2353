"""Credentials from header_file never leave the request headers: not in
the daemon's log even at debug level, not in its error lines (refused at
open, failing reads), not in /proc/PID/cmdline or /proc/PID/environ."""

import os

from conftest import read_with_timeout, try_mount

SECRET = "Bearer s3cret-token-4f9a"
FAST = ["timeout=2", "connect_timeout=1", "retries=1"]


def header_file(tmp_path, value=SECRET):
    hf = tmp_path / "headers"
    hf.write_text("Authorization: %s\n" % value)
    os.chmod(hf, 0o600)
    return str(hf)


def proc_text(pid, what):
    with open("/proc/%d/%s" % (pid, what), "rb") as f:
        return f.read().decode(errors="replace")


def test_secret_not_in_debug_log_cmdline_environ(tmp_path, mounts,
                                                 fault_server, small_image):
    fault_server.require_header = ("Authorization", SECRET)
    m = mounts(fault_server.url("/small.sqfs"),
               FAST + ["debug", "header_file=" + header_file(tmp_path)])
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, "d/small.txt"))
    assert ok and data == small_image["files"]["d/small.txt"]
    pid = m.proc.pid
    for what in ["cmdline", "environ"] + [
            "task/%s/comm" % t for t in os.listdir("/proc/%d/task" % pid)]:
        assert "s3cret" not in proc_text(pid, what), what
    # the header was sent, and the debug log is really verbose
    assert any(r["auth"] == SECRET for r in fault_server.requests())
    log = m.log()
    assert log.count("\n") > 20, log
    assert "s3cret" not in log

    # failing reads after the mount: error lines name the request, not
    # the header
    fault_server.set_fault("status", code=500)
    ok, text, _ = read_with_timeout(os.path.join(m.mnt, "f18.bin"))
    assert not ok
    fault_server.clear_fault()
    log = m.log()
    assert "500" in log, log[-3000:]
    assert "s3cret" not in log


def test_secret_not_in_refusal(tmp_path, fault_server):
    """The server refuses the credentials (403): one line, no secret."""
    fault_server.require_header = ("Authorization", "Bearer another")
    rc, err, _ = try_mount(fault_server.url("/small.sqfs"),
                           str(tmp_path / "mnt"), None,
                           FAST + ["debug",
                                   "header_file=" + header_file(tmp_path)])
    assert rc != 0 and "403" in err, err
    assert "s3cret" not in err


def test_header_file_bad_line_not_echoed(tmp_path, fault_server):
    """A malformed header_file line is refused without quoting it: it may
    hold a secret."""
    hf = tmp_path / "headers"
    hf.write_text("Authorization Bearer s3cret-no-colon\n")
    os.chmod(hf, 0o600)
    rc, err, _ = try_mount(fault_server.url("/small.sqfs"),
                           str(tmp_path / "mnt"), None,
                           FAST + ["header_file=%s" % hf])
    assert rc != 0 and "header" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert "s3cret" not in err


def test_url_credentials_hidden(tmp_path, mounts, fault_server, small_image):
    """http://user:password@host/...: libcurl sends them (Basic auth), but
    /proc/PID/cmdline, the fsname in /proc/mounts (world-readable), the
    debug log and error lines show the URL without them."""
    import base64
    auth = "Basic " + base64.b64encode(b"user:pa55word").decode()
    fault_server.require_header = ("Authorization", auth)
    url = fault_server.url("/small.sqfs").replace("http://",
                                                  "http://user:pa55word@")
    m = mounts(url, FAST + ["debug"])
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, "d/small.txt"))
    assert ok and data == small_image["files"]["d/small.txt"]
    assert any(r["auth"] == auth for r in fault_server.requests())
    cmdline = proc_text(m.proc.pid, "cmdline")
    assert "pa55word" not in cmdline and "127.0.0.1" in cmdline, cmdline
    with open("/proc/self/mountinfo") as f:
        mine = [ln for ln in f if " %s " % m.mnt in ln]
    assert mine and "pa55word" not in mine[0] and "***@" in mine[0], mine
    assert "pa55word" not in m.log()
    fault_server.require_header = ("Authorization", "Basic other")
    rc, err, _ = try_mount(url, str(tmp_path / "mnt2"), None, FAST)
    assert rc != 0 and "403" in err and "***@127.0.0.1" in err, err
    assert "pa55word" not in err
