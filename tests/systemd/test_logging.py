"""Logging: -o loglevel= filters, one line per event on stderr with -f,
and no credential in any message or in /proc/mounts. (Background mode logs
to syslog; the container test reads those lines back from the journal.)"""

import os
import signal
import subprocess
import urllib.parse

from conftest import (check_tree, daemon, is_mounted, require_mount_env,
                      unmount, wait_for)


def run_fg(tmp_path, source, opts, work=None):
    """Mount in the foreground, run work(mnt), SIGTERM; (rc, stderr)."""
    require_mount_env()
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)
    p = subprocess.Popen([daemon(), "-f", "-o", opts, source, str(mnt)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: is_mounted(str(mnt)) or p.poll() is not None, 30,
                 "the mount")
        if p.poll() is None:
            if work:
                work(str(mnt))
            p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        return p.returncode, err.decode(errors="replace")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        unmount(str(mnt))


def test_default_level_shows_warnings(tmp_path, image):
    rc, err = run_fg(tmp_path, image[0], "rw")
    assert rc == 0
    assert "ignoring -o rw" in err
    assert "serving requests" not in err  # a debug line


def test_loglevel_error_hides_warnings(tmp_path, image):
    rc, err = run_fg(tmp_path, image[0], "rw,loglevel=error")
    assert rc == 0
    assert err == "", err


def test_loglevel_debug(tmp_path, image):
    rc, err = run_fg(tmp_path, image[0], "loglevel=debug",
                     lambda m: check_tree(m, image[1]))
    assert rc == 0
    lines = err.splitlines()
    assert any(l.endswith(": serving requests") for l in lines), err
    assert any(l.endswith(": unmounting") for l in lines), err
    # one line per event, each with the program's prefix
    assert all(l.startswith("sqfs-lazy-mount: ") for l in lines), err


def test_bad_loglevel(tmp_path, image):
    require_mount_env()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([daemon(), "-f", "-o", "loglevel=loud", image[0],
                        str(mnt)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "sqfs-lazy-mount: invalid value 'loud' for -o loglevel (expected "
        "error, warning, info or debug)"]
    assert not is_mounted(str(mnt))


def test_no_credentials_in_messages(tmp_path, image, nginx):
    """A URL's password and query, and header_file values, appear nowhere:
    not in errors, not at debug level, not in /proc/mounts."""
    url = urllib.parse.urlsplit(nginx.url(image[0]))
    secret_url = "http://bob:hunter2pw@%s%s?token=qwertysecret" % (
        url.netloc, url.path)
    hdr = tmp_path / "headers"
    hdr.write_text("Authorization: Bearer zzTOKENzz\n")
    os.chmod(hdr, 0o600)
    seen = {}

    def work(mnt):
        check_tree(mnt, image[1])
        with open("/proc/self/mounts") as f:
            seen["mounts"] = [l for l in f if mnt in l]
    rc, err = run_fg(tmp_path, secret_url,
                     "loglevel=debug,header_file=%s" % hdr, work)
    assert rc == 0, err
    assert seen["mounts"], "not mounted"
    shown = "".join(seen["mounts"]) + err
    for secret in ("hunter2pw", "qwertysecret", "zzTOKENzz"):
        assert secret not in shown, shown
    assert "***@" in "".join(seen["mounts"])

    # an error names the URL, still without them
    missing = secret_url.replace(".sqfs?", "-missing.sqfs?")
    rc, err = run_fg(tmp_path, missing, "header_file=%s" % hdr)
    assert rc == 1
    assert len(err.strip().splitlines()) == 1, err
    assert "404" in err and "***@" in err and "?***" in err, err
    for secret in ("hunter2pw", "qwertysecret", "zzTOKENzz"):
        assert secret not in err, err
