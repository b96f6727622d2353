"""The sd_notify protocol without systemd: we play the service manager.

A unix datagram socket is bound (a path, and an abstract @name), its name
goes in NOTIFY_SOCKET, and sqfs-lazy-mount -f must send READY=1 only once
the mount point answers through the mount, then STOPPING=1 and a clean exit
after SIGTERM, with the mount gone.
"""

import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import (check_tree, daemon, is_mounted, require_mount_env,
                      unmount, wait_for)


def parse(msg):
    return dict(line.split("=", 1) for line in msg.decode().split("\n")
                if "=" in line)


def run_notified(tmp_path, image, sock_name, bind_to, stop="SIGTERM"):
    require_mount_env()
    img, tree = image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    before = os.stat(mnt).st_dev
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(bind_to)
    sock.settimeout(30)
    env = dict(os.environ, NOTIFY_SOCKET=sock_name)
    log = open(tmp_path / "stderr", "wb")
    p = subprocess.Popen([daemon(), "-f", img, str(mnt)], env=env,
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        msg = sock.recv(4096)
        # what "ready" promises: the mount point is the mount, and answers
        st = os.stat(mnt)
        assert st.st_dev != before
        assert is_mounted(str(mnt))
        state = parse(msg)
        assert state.get("READY") == "1", msg
        assert str(mnt) in state.get("STATUS", ""), msg
        assert img in state["STATUS"]
        check_tree(str(mnt), tree)

        if stop == "SIGTERM":
            p.send_signal(signal.SIGTERM)
        else:
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True,
                           timeout=30)
        msg = sock.recv(4096)
        assert parse(msg).get("STOPPING") == "1", msg
        assert p.wait(30) == 0, (tmp_path / "stderr").read_text()
        assert not is_mounted(str(mnt))
        assert os.stat(mnt).st_dev == before
        # nothing after STOPPING
        sock.settimeout(0.2)
        with pytest.raises(socket.timeout):
            sock.recv(4096)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        unmount(str(mnt))
        sock.close()
        log.close()


def test_ready_and_stopping_path_socket(tmp_path, image):
    path = str(tmp_path / "notify.sock")
    run_notified(tmp_path, image, path, path)


def test_stopping_after_unmount(tmp_path, image):
    path = str(tmp_path / "notify.sock")
    run_notified(tmp_path, image, path, path, stop="unmount")


def test_ready_and_stopping_abstract_socket(tmp_path, image):
    name = "sqfs-lazy-test-%d-%d" % (os.getpid(), time.monotonic_ns())
    run_notified(tmp_path, image, "@" + name, "\0" + name)


def test_ready_waits_for_the_mount(tmp_path, image):
    """READY=1 comes after the mount exists and answers: at the moment it
    arrives the daemon's request loop must be serving (a stat through the
    mount returns at once), never before the mount."""
    require_mount_env()
    img, _ = image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    before = os.stat(mnt).st_dev
    path = str(tmp_path / "n.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    env = dict(os.environ, NOTIFY_SOCKET=path)
    p = subprocess.Popen([daemon(), "-f", img, str(mnt)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        got = None
        seen_unmounted = False
        deadline = time.monotonic() + 30
        while got is None and time.monotonic() < deadline:
            # poll the mount point and the socket alternately: READY must
            # never arrive while the mount point is still the directory
            mounted_now = os.stat(mnt).st_dev != before
            try:
                got = sock.recv(4096)
            except BlockingIOError:
                if not mounted_now:
                    seen_unmounted = True
                time.sleep(0.001)
                continue
            assert mounted_now or os.stat(mnt).st_dev != before
        assert got is not None, "no READY=1 in 30 s"
        assert parse(got).get("READY") == "1"
        assert os.stat(mnt).st_dev != before
        assert p.poll() is None
        # informative: the poll saw the window before the mount (usual)
        print("saw the unmounted window:", seen_unmounted)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            assert p.wait(30) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(10)
            unmount(str(mnt))
            sock.close()


def test_no_notify_socket_no_thread(tmp_path, image):
    """Without NOTIFY_SOCKET nothing is sent and the mount works as ever;
    a NOTIFY_SOCKET nobody listens on is not fatal either."""
    require_mount_env()
    img, tree = image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = dict(os.environ,
               NOTIFY_SOCKET=str(tmp_path / "nobody-listens.sock"))
    p = subprocess.Popen([daemon(), "-f", img, str(mnt)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: is_mounted(str(mnt)) or p.poll() is not None, 30,
                 "the mount")
        check_tree(str(mnt), tree)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 0
        assert b"cannot notify" in err  # one warning line, not a failure
        assert len(err.decode().strip().splitlines()) <= 3, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        unmount(str(mnt))
