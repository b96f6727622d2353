"""A daemon killed with SIGKILL while a thread of it cannot leave the kernel
(#21): readers get an error at once, the daemon is gone and the mount
point unmounts.

The setup puts the page store's thread where a kill used to wedge the
mount for good: in notify_store, waiting on the lock of a page whose READ
is queued for the same daemon, held there by an origin that stalls. The
test checks that the thread really is there (D state) before it kills.
Once killed, only the connection guard (src/daemon/conn_guard.c) can end
that READ; without it the reader and the daemon stay in D state until
someone writes fusectl's abort file, which this test's cleanup does."""

import os
import signal
import subprocess
import sys

import pytest

from conftest import is_mounted
from timing import WAIT, wait_for

FUSECTL = "/sys/fs/fuse/connections"
BLOCK = 65536            # the small image's block size
FILE = "f10.bin"         # ~570 kB: 8 full blocks and a tail
# a reader that reads `len` bytes at `off` without kernel readahead, so
# exactly those pages are locked for its READ
PREAD = ("import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); "
         "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM); "
         "d=os.pread(fd, int(sys.argv[3]), int(sys.argv[2])); "
         "sys.stdout.write(d.hex())")


def connection_id(mnt):
    """The fusectl name of the FUSE mount at mnt, from mountinfo (a stat()
    of a wedged mount would hang)."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            fstype = parts[parts.index("-") + 1]
            if parts[4] == mnt and fstype.startswith("fuse"):
                major, minor = map(int, parts[2].split(":"))
                found = (major << 20) | minor
    return found


def abort_connection(conn):
    mounted_here = not is_mounted(FUSECTL)
    if mounted_here:
        subprocess.run(["mount", "-t", "fusectl", "fusectl", FUSECTL])
    try:
        with open(os.path.join(FUSECTL, str(conn), "abort"), "w") as f:
            f.write("1")
    except OSError:
        pass
    if mounted_here:
        subprocess.run(["umount", "-l", FUSECTL])


def task_states(pid):
    """{thread name: state letter} of the daemon's threads."""
    out = {}
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            out[name] = stat[stat.rindex(")") + 2]
    except OSError:
        pass
    return out


def pread_proc(path, off, n):
    return subprocess.Popen([sys.executable, "-c", PREAD, path, str(off),
                             str(n)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture(params=["fusectl", "no-fusectl"])
def fusectl(request):
    """As found, or with fusectl unmounted for the test: a root daemon then
    mounts it in a namespace of the guard's own."""
    was = is_mounted(FUSECTL)
    if request.param == "fusectl" and not was:
        subprocess.run(["mount", "-t", "fusectl", "fusectl", FUSECTL],
                       check=True)
    if request.param == "no-fusectl" and was:
        # lazily: other daemons' guards hold files in it open
        subprocess.run(["umount", "-l", FUSECTL], check=True)
    yield request.param
    now = is_mounted(FUSECTL)
    if was and not now:
        subprocess.run(["mount", "-t", "fusectl", "fusectl", FUSECTL])
    elif not was and now:
        subprocess.run(["umount", "-l", FUSECTL])


def test_sigkill_with_the_page_store_in_the_kernel(mounts, fault_server,
                                                    small_image, fusectl):
    # without takeover: the guard aborts (tests/http/test_takeover.py
    # kills with it)
    m = mounts(fault_server.url("/small.sqfs"), ["takeover=off"])
    path = os.path.join(m.mnt, FILE)
    want = small_image["files"][FILE]
    pid = m.proc.pid
    conn = connection_id(m.mnt)
    assert conn is not None
    readers = []
    try:
        # block 0 into the daemon's RAM cache, past the page cache: a
        # whole-block read leaves nothing for the page store
        r = subprocess.run(["dd", "if=" + path, "iflag=direct",
                            "bs=%d" % BLOCK, "count=1", "status=none"],
                           capture_output=True, timeout=WAIT)
        assert r.returncode == 0 and r.stdout == want[:BLOCK], r.stderr
        # from now on the origin holds every answer until the test ends
        fault_server.clear_log()
        fault_server.set_fault("hold")
        # B: the last page of block 0 and the first of block 1; its READ
        # waits for block 1, holding both pages locked
        readers.append(pread_proc(path, BLOCK - 4096, 8192))
        wait_for(lambda: fault_server.held or readers[0].poll() is not None,
                 "B's fetch")
        assert readers[0].poll() is None, readers[0].communicate()
        # A: page 0, answered from the cached block 0; the page store
        # then pushes block 0 and waits on B's locked page
        a = pread_proc(path, 0, 4096)
        out, err = a.communicate(timeout=WAIT)
        assert a.returncode == 0 and bytes.fromhex(out) == want[:4096], err
        wait_for(lambda: task_states(pid).get("sqfs-store") == "D",
                 "the page store to wait in the kernel")

        os.kill(pid, signal.SIGKILL)
        # the reader gets an error, or a short read of right bytes (the
        # store may fill a page once the abort unlocked it), never a hang;
        # and not because its answer came: the origin still holds it
        out, err = readers[0].communicate(timeout=WAIT)
        if readers[0].returncode == 0:
            got = bytes.fromhex(out)
            assert len(got) < 8192 and got == want[BLOCK - 4096:][:len(got)]
        else:
            assert ("Transport endpoint" in err or "Software caused" in err
                    or "Input/output" in err), err
        m.proc.wait(WAIT)
        assert fault_server.holding >= 1, "the origin answered"
        # a new reader fails at once too, and the mount point unmounts
        r = subprocess.run(["stat", path], capture_output=True, text=True,
                           timeout=WAIT)
        assert r.returncode != 0 and "not connected" in r.stderr, r.stderr
        r = subprocess.run(["fusermount3", "-u", m.mnt],
                           capture_output=True, text=True, timeout=WAIT)
        assert r.returncode == 0, r.stderr
        assert not is_mounted(m.mnt)
        m.proc = None  # handled here: the fixture's checks expect a stop
    finally:
        fault_server.clear_fault()
        fault_server.release()
        if m.proc is not None:
            # a wedge: free the machine, then let the fixture report
            abort_connection(conn)
            try:
                m.proc.kill()
                m.proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                pass
        for p in readers:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                pass


def unmount_and_wait(m):
    r = subprocess.run(["fusermount3", "-u", m.mnt], capture_output=True,
                       text=True, timeout=WAIT)
    assert r.returncode == 0, r.stderr
    # a daemon kept alive by a copy of its mount never ends
    try:
        rc = m.proc.wait(WAIT)
    except subprocess.TimeoutExpired:
        pytest.fail("daemon of %s still running %d s after its unmount: %s"
                    % (m.mnt, WAIT, task_states(m.proc.pid)))
    assert rc == 0, m.log()
    assert not is_mounted(m.mnt)
    m.proc = None   # stopped and checked here


def test_unmount_ends_each_daemon(mounts, fault_server, small_image,
                                  fusectl):
    """A clean unmount ends the daemon at once, also where the guard had to
    mount fusectl itself (no-fusectl): a mount namespace of the guard's
    that kept a copy of a FUSE mount would keep that connection alive
    after fusermount3 -u, and its daemon running. Two mounts, so that
    neither guard may hold the other's mount either."""
    url = fault_server.url("/small.sqfs")
    a, b = mounts(url, name="a"), mounts(url, name="b")
    want = small_image["files"]["d/small.txt"]

    def read(m):
        with open(os.path.join(m.mnt, "d/small.txt"), "rb") as f:
            return f.read()

    assert read(a) == want and read(b) == want
    unmount_and_wait(a)
    assert read(b) == want
    unmount_and_wait(b)
