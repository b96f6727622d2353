"""HTTPS with a self-signed certificate: refused without cacert=, accepted
with it; insecure works and warns."""

import os
import sys

from conftest import read_with_timeout, try_mount
from timing import bound, fetch_seconds, run_threads

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                "integration"))
from util import thread_names  # noqa: E402


def test_self_signed_refused_without_cacert(tls_nginx, tmp_path):
    rc, err, dt = try_mount(tls_nginx.url("small.sqfs"),
                            str(tmp_path / "mnt"), None, ["retries=1"])
    assert rc != 0
    assert "certificate" in err.lower(), err
    assert len(err.strip().splitlines()) == 1, err
    # refused by each try at once (retries=1), not after a timeout
    assert dt < bound(fetch_seconds(0, 1)), dt


def image_entries(nginx):
    """nginx's log without the request for URL.profile (a mount asks for
    a startup profile beside the image on its prefetch's thread, over a
    connection of its own; there is none: 404)."""
    return [e for e in nginx.entries() if not e["uri"].endswith(".profile")]


def test_accepted_with_cacert(tls_nginx, mounts, small_image):
    tls_nginx.clear_log()
    m = mounts(tls_nginx.url("small.sqfs"), ["cacert=" + tls_nginx.cert])
    for rel in ("d/small.txt", "f00.bin"):
        ok, data, _ = read_with_timeout(os.path.join(m.mnt, rel))
        assert ok and data == small_image["files"][rel], rel
    entries = image_entries(tls_nginx)
    assert entries and all(e["status"] == 206 for e in entries), entries
    # HTTP/2 is negotiated when the server offers it
    assert all(e["proto"] == "HTTP/2.0" for e in entries), entries


def test_insecure_warns(tls_nginx, mounts, small_image):
    m = mounts(tls_nginx.url("small.sqfs"), ["insecure"])
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, "d/small.txt"))
    assert ok and data == small_image["files"]["d/small.txt"]
    assert "verification is off" in m.log()


def test_daemon_mode_keeps_tls_connection_usable(tls_nginx, small_image,
                                                 tmp_path):
    """The TLS connection of the probe is made before the fork; the
    detached child must keep using it (or reconnect) without trouble."""
    import subprocess
    from conftest import daemon, is_mounted, require_mount_env
    require_mount_env()
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    r = subprocess.run([daemon(), "-o", "cacert=" + tls_nginx.cert,
                        tls_nginx.url("small.sqfs"), mnt],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        for rel in ("f01.bin", "f02.bin", "d/small.txt"):
            ok, data, _ = read_with_timeout(os.path.join(mnt, rel))
            assert ok and data == small_image["files"][rel], rel
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
    assert not is_mounted(mnt)


def test_parallel_reads_multiplex_over_one_connection(tls_nginx, mounts,
                                                      small_image):
    """Once mounted, transfers go through one multi handle: parallel reads
    become HTTP/2 streams of one connection instead of one connection
    each."""
    m = mounts(tls_nginx.url("small.sqfs"),
               ["cacert=" + tls_nginx.cert, "max_connections=4"])
    tls_nginx.clear_log()
    names = ["f%02d.bin" % i for i in range(10, 18)]
    # every reader finished, none raised
    results = run_threads(
        lambda rel: read_with_timeout(os.path.join(m.mnt, rel)),
        [(rel,) for rel in names], timeout=120)
    for rel, (ok, data, _) in zip(names, results):
        assert ok and data == small_image["files"][rel], rel
    entries = image_entries(tls_nginx)
    assert len(entries) >= len(names), entries
    assert all(e["proto"] == "HTTP/2.0" for e in entries), entries
    assert len({e["conn"] for e in entries}) == 1, entries
    # The probe at mount saw HTTP/2, so the transfer engine runs.
    assert "sqfs-http" in thread_names(m.proc.pid)
