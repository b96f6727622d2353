"""Command-line and daemon behaviour of sqfs-lazy-mount:

  sqfs-lazy-mount [-f] [-d] [-s] [-o opt,...] IMAGE MOUNTPOINT

Without -f it daemonizes and returns 0 only once the mount is usable; a bad
image exits 1 with one error line on stderr and mounts nothing.

With LSQ_VIA_HTTP=1 every IMAGE given to the daemon is the image's URL on
the session's nginx (util.image_source): the same checks then cover the
HTTP source, -o offset over HTTP and bad images served by nginx.
"""

import os
import re
import shutil
import signal
import struct
import subprocess
import threading
import time

import pytest

import util
from timing import SCALE

SMALL_FILES = {
    "hello.txt": b"hello, world\n",
    "multi/block.bin": bytes(range(256)) * 1200,      # 300 KiB, 3 blocks
    "multi/text.txt": b"".join(b"line %06d\n" % i for i in range(40000)),
    "empty": b"",
}


@pytest.fixture(scope="module")
def small_image(workdir):
    util.require_mksquashfs()
    d = workdir / "cli"
    if not (d / "small.sqfs").exists():
        src = d / "src"
        for rel, data in SMALL_FILES.items():
            p = src / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        util.run(["mksquashfs", str(src), str(d / "small.sqfs"), "-noappend",
                  "-quiet", "-no-progress", "-comp", "gzip"])
    return str(d / "small.sqfs")


@pytest.fixture
def mnt(tmp_path):
    util.require_fuse()
    util.require_daemon()
    m = tmp_path / "mnt"
    m.mkdir()
    m = str(m)
    try:
        yield m
    finally:
        for pid in util.pids_with_arg(m):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        util.force_unmount(m)
        for pid in util.pids_with_arg(m):
            if not util.wait_until(lambda: not util.pid_alive(pid), 5):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def daemon(*args, timeout=60):
    cmd = util.daemon_base_cmd() + list(args)
    return subprocess.run(cmd, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def check_contents(root):
    for rel, data in SMALL_FILES.items():
        with open(os.path.join(root, rel), "rb") as f:
            got = f.read()
        assert got == data, "%s differs" % rel


def find_daemon(mnt):
    pids = util.pids_with_arg(mnt)
    assert len(pids) == 1, "expected one daemon process for %s, found %r" % (
        mnt, pids)
    return pids[0]


def wait_gone(mnt, pid):
    assert util.wait_until(lambda: not util.is_mounted(mnt), 15), \
        "%s still mounted" % mnt
    assert util.wait_until(lambda: not util.pid_alive(pid), 15), \
        "daemon %d still running after unmount" % pid


def cpu_seconds(pid):
    """User plus system CPU time of a process so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stats_request(mnt):
    """One request that always reaches the daemon: the kernel caches no
    xattrs, and the stats xattr is answered from memory."""
    return os.getxattr(mnt, "user.sqfs-lazy.stats")


# --------------------------------------------------------------------------

@pytest.mark.parametrize("opt", ["--help", "--version"])
def test_help_version(opt):
    util.require_daemon()
    r = daemon(opt, timeout=20)
    out = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 0, "%s exited %d: %s" % (opt, r.returncode, out)
    assert out.strip(), "%s printed nothing" % opt
    if opt == "--version" and not util.using_override():
        src = os.environ.get("LSQ_SOURCE_DIR") or os.path.join(
            os.path.dirname(__file__), "..", "..")
        with open(os.path.join(src, "meson.build")) as f:
            m = re.search(r"version:\s*'([^']+)'", f.read())
        assert m, "no version: in %s/meson.build" % src
        assert m.group(1) in out, \
            "--version does not show %s: %r" % (m.group(1), out)


def test_daemon_mode_usable_on_return(small_image, mnt):
    for _ in range(3):
        r = daemon(util.image_source(small_image), mnt)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        # No waiting: the mount must be usable the moment the command returns.
        assert util.is_mounted(mnt)
        check_contents(mnt)
        pid = find_daemon(mnt)
        r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        assert r.returncode == 0, r.stderr
        wait_gone(mnt, pid)


def test_sigterm_daemon(small_image, mnt):
    r = daemon(util.image_source(small_image), mnt)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    check_contents(mnt)
    pid = find_daemon(mnt)
    os.kill(pid, signal.SIGTERM)
    wait_gone(mnt, pid)


# libfuse's loops: multi-threaded (the default) and single-threaded (-s).
LOOPS = {"threads": [], "single": ["-s"]}


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "fusermount3"])
def test_foreground_unmount(small_image, mnt, how, loop, tmp_path):
    cmd = util.daemon_base_cmd() + ["-f"] + LOOPS[loop] + [
        util.image_source(small_image), mnt]
    log = open(tmp_path / "stderr", "wb")
    p = subprocess.Popen(cmd, stdout=log, stderr=log,
                         stdin=subprocess.DEVNULL)
    try:
        assert util.wait_until(lambda: util.is_mounted(mnt) or
                               p.poll() is not None, 30)
        assert p.poll() is None, (tmp_path / "stderr").read_text()
        check_contents(mnt)
        if how == "fusermount3":
            subprocess.run(["fusermount3", "-u", mnt], check=True)
        else:
            p.send_signal(getattr(signal, how))
        rc = p.wait(15)
        assert rc == 0, "exit status %d after %s: %s" % (
            rc, how, (tmp_path / "stderr").read_text())
        assert not util.is_mounted(mnt)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()


def test_offset(small_image, mnt, tmp_path, module_mounter):
    """An image embedded after N junk bytes, mounted with -o offset=N, is
    the same as the image itself (compared with the kernel mount)."""
    n = 1000003
    emb = tmp_path / "embedded.img"
    with open(emb, "wb") as out, open(small_image, "rb") as src:
        out.write(os.urandom(n))
        shutil.copyfileobj(src, out)
        out.write(b"trailing junk" * 100)
    r = daemon("-o", "offset=%d" % n, util.image_source(emb), mnt)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    try:
        check_contents(mnt)
        k = module_mounter.kernel(small_image)
        kt, ft = util.collect_tree(k.mnt), util.collect_tree(mnt)
        util.compare_names(kt, ft).check()
        util.compare_stat(kt, ft).check()
    finally:
        pid = find_daemon(mnt)
        subprocess.run(["fusermount3", "-u", mnt])
        wait_gone(mnt, pid)
    # The wrong offset is a bad image.
    r = daemon("-o", "offset=%d" % (n - 1), util.image_source(emb), mnt)
    line = one_error_line(r)
    with open(emb, "rb") as f:
        f.seek(n - 1)
        magic = struct.unpack("<I", f.read(4))[0]
    # the offset in the message counts from -o offset
    assert line.endswith(": not a SquashFS image: bad magic %#x at offset 0"
                         % magic), line
    assert not util.is_mounted(mnt)


# --------------------------------------------------------------------------
# Bad images
# --------------------------------------------------------------------------

def _patch(data, field, value):
    off = util.SB_OFFSETS[field]
    fmt = "<" + util.SB_FMT[1 + util.SB_FIELDS.index(field)]
    b = bytearray(data)
    struct.pack_into(fmt, b, off, value)
    return bytes(b)


def _sb(data, field):
    fmt = "<" + util.SB_FMT[1 + util.SB_FIELDS.index(field)]
    return struct.unpack_from(fmt, data, util.SB_OFFSETS[field])[0]


def _empty_reason(d):
    # over HTTP the size comes with the first answer, before any read
    if util.via_http():
        return re.escape("empty (0 bytes), not a SquashFS image")
    return re.escape("not a SquashFS image: 0 bytes, the superblock alone "
                     "needs 96")


def _truncated(used, size):
    return re.escape("bad superblock: image truncated: bytes used %#x "
                     "beyond image size %#x" % (used, size))


# name: (builder(data) -> bad image, reason(data) -> regex the whole error
# line must match after "IMAGE: "). data is the good image; each reason
# names this case's fault and its values, so that a wrong diagnosis fails.
BAD_IMAGES = {
    "not_squashfs": (
        lambda d: b"this is not a squashfs image\n" * 4000,
        lambda d: re.escape("not a SquashFS image: bad magic 0x73696874 "
                            "at offset 0")),
    "empty_file": (lambda d: b"", _empty_reason),
    "tiny_file": (
        lambda d: d[:50],
        lambda d: re.escape("not a SquashFS image: 50 bytes, the superblock "
                            "alone needs 96")),
    "cut_after_superblock": (
        lambda d: d[:96],
        lambda d: _truncated(_sb(d, "bytes_used"), 96)),
    "cut_at_half": (
        lambda d: d[:len(d) // 2],
        lambda d: _truncated(_sb(d, "bytes_used"), len(d) // 2)),
    "bytes_used_beyond_file": (
        lambda d: _patch(d, "bytes_used", len(d) + 65536),
        lambda d: _truncated(len(d) + 65536, len(d))),
    "inode_table_beyond": (
        lambda d: _patch(d, "inode_table_start", len(d) + 4096),
        lambda d: re.escape("bad superblock: inode table offset %#x outside "
                            "0x60..%#x" % (len(d) + 4096,
                                           _sb(d, "bytes_used")))),
    "directory_table_beyond": (
        lambda d: _patch(d, "directory_table_start", 1 << 40),
        lambda d: re.escape("bad superblock: directory table offset "
                            "0x10000000000 not between inode table %#x and "
                            "image size %#x" % (_sb(d, "inode_table_start"),
                                                _sb(d, "bytes_used")))),
    "id_table_beyond": (
        lambda d: _patch(d, "id_table_start", 1 << 40),
        lambda d: re.escape("bad superblock: id table offset 0x10000000000 "
                            "outside ") + "0x[0-9a-f]+" +
        re.escape("..%#x" % _sb(d, "bytes_used"))),
    "block_log_mismatch": (
        lambda d: _patch(d, "block_log", 12),
        lambda d: re.escape("bad superblock: block size %d does not match "
                            "block log 12" % _sb(d, "block_size"))),
    "block_size_not_pow2": (
        lambda d: _patch(_patch(d, "block_size", 100000), "block_log", 17),
        lambda d: re.escape("bad superblock: block size 100000 does not "
                            "match block log 17")),
    "version_3": (
        lambda d: _patch(d, "s_major", 3),
        lambda d: re.escape("unsupported SquashFS version 3.0 (only 4.0)")),
    "unknown_compressor": (
        lambda d: _patch(d, "compression", 99),
        lambda d: re.escape("unsupported compressor unknown (id 99)")),
    "zero_inodes": (
        lambda d: _patch(d, "inodes", 0),
        lambda d: re.escape("bad superblock: inode count is 0")),
}


@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
@pytest.mark.parametrize("fg", [False, True], ids=["daemon", "foreground"])
def test_bad_image_rejected(small_image, mnt, tmp_path, case, fg):
    build, reason = BAD_IMAGES[case]
    with open(small_image, "rb") as f:
        data = f.read()
    pattern = reason(data)
    bad = tmp_path / (case + ".sqfs")
    bad.write_bytes(build(data))
    src = util.image_source(bad)
    cmd = util.daemon_base_cmd() + (["-f"] if fg else []) + [src, mnt]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    # Poll: a daemon that wrongly accepts the image would stay up (-f) or
    # leave a mount behind; neither may cost us a long timeout.
    util.wait_until(lambda: p.poll() is not None or util.is_mounted(mnt),
                    20)
    mounted = util.is_mounted(mnt)
    if mounted:
        subprocess.run(["fusermount3", "-u", "-z", mnt])
    if p.poll() is None:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
    out, err = p.communicate()
    took = time.monotonic() - t0
    err = err.decode(errors="replace")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    # The line names the image, then the reason (the image's file name is
    # the case's name: the reason is matched without it).
    what = lines[0].replace(src, "IMAGE") if lines else ""
    named = what.split(": IMAGE: ", 1)
    try:
        assert not mounted, "the bad image was mounted (stderr %r)" % err
        assert p.returncode == 1, "exit status %d (want 1), stderr %r" % (
            p.returncode, err)
        assert len(lines) == 1, "want exactly one error line, got %r" % err
        assert len(named) == 2, "the error line does not name the image " \
            "%s: %r" % (src, lines[0])
        assert re.fullmatch(pattern, named[1]), \
            "the error line does not name this case's fault (/%s/): %r" % (
                pattern, lines[0])
        # no hang: a refusal takes a probe and a few table reads
        assert took < 20 * SCALE, "the refusal took %.1f s" % took
    finally:
        mounted = util.is_mounted(mnt)
        left = [q for q in util.pids_with_arg(mnt) if util.pid_alive(q)]
    assert not mounted, "a bad image left %s mounted" % mnt
    assert not left, "a bad image left daemon processes %r" % left
    assert os.listdir(mnt) == []


def one_error_line(r):
    """The only line of a refusing command's stderr (exit status 1)."""
    err = r.stderr.decode(errors="replace")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert r.returncode == 1, "exit status %d (want 1): %r" % (r.returncode,
                                                               err)
    assert len(lines) == 1, "want exactly one error line, got %r" % err
    return lines[0]


def test_nonexistent_image(mnt, tmp_path):
    """A missing file; over HTTP a URL that nginx answers with 404."""
    src = util.image_source(tmp_path / "no_such.sqfs")
    r = daemon(src, mnt, timeout=30)
    line = one_error_line(r)
    reason = "HTTP 404" if util.via_http() else "No such file or directory"
    assert line.endswith(": %s: %s" % (src, reason)), line
    assert not util.is_mounted(mnt)
    assert not util.pids_with_arg(mnt)


def test_nonexistent_mountpoint(small_image, tmp_path):
    util.require_daemon()
    missing = str(tmp_path / "no_such_dir")
    r = daemon(util.image_source(small_image), missing, timeout=30)
    line = one_error_line(r)
    assert line.endswith(": bad mount point '%s': No such file or directory"
                         % missing), line
    assert not util.is_mounted(missing)
    assert not util.pids_with_arg(missing)


def test_missing_arguments():
    util.require_daemon()
    r = daemon(timeout=20)
    line = one_error_line(r)
    assert line.endswith(": missing IMAGE and MOUNTPOINT (see --help)"), line


def test_idle_mount_burns_no_cpu(small_image, mnt):
    """Between requests the daemon sleeps: after a burst of requests, an
    idle mount uses next to no CPU, and requests 20 ms apart cost little
    more than their answers (a reader that spun for the next request would
    burn a CPU while waiting)."""
    r = daemon(util.image_source(small_image), mnt)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    pid = find_daemon(mnt)

    for _ in range(200):    # a burst (its speed is not the subject)
        assert b"source_reads" in stats_request(mnt)

    time.sleep(0.2)
    before = cpu_seconds(pid)
    time.sleep(2.0)
    idle = cpu_seconds(pid) - before
    assert idle < 0.1, "idle mount used %.2f s of CPU in 2 s" % idle

    before = cpu_seconds(pid)
    for _ in range(100):
        stats_request(mnt)
        time.sleep(0.02)
    sparse = cpu_seconds(pid) - before
    # a reader spinning between them would burn about 2 s; answers cost
    # some 1 ms each, three times that in a sanitizer build (0.20 s was
    # seen there against a bound of 0.2)
    assert sparse < 0.2 * SCALE, \
        "100 requests 20 ms apart cost %.2f s of daemon CPU" % sparse
    check_contents(mnt)


def test_retired_loop_options_are_refused(small_image, mnt):
    """busy_poll and idle_poll tuned a request loop of ours that is gone,
    same_cpu the ring threads' SCHED_IDLE answers (docs/decisions.md,
    2026-11-25). They are refused before anything is mounted, with one
    line that says what replaced them, and --help no longer lists them."""
    for name in ("busy_poll=5000", "idle_poll", "same_cpu=on"):
        r = daemon("-o", name, util.image_source(small_image), mnt)
        err = r.stderr.decode(errors="replace").strip()
        assert r.returncode != 0, err
        lines = err.splitlines()
        assert len(lines) == 1, err
        short = name.split("=")[0]
        assert ("-o %s was removed: " % short) in lines[0], err
        assert lines[0].endswith("; drop it"), err
        assert not os.path.ismount(mnt)
    out = subprocess.run(util.daemon_base_cmd() + ["--help"],
                         capture_output=True, text=True, check=True).stdout
    for name in ("busy_poll", "idle_poll", "same_cpu"):
        assert name not in out


def help_option_names(text):
    """Option names that --help lists in every section after "Options:"
    (the -o options of ours, of HTTP images, of libfuse and of mount(8))."""
    names = set()
    listing = False
    for line in text.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            listing = line != "Options:"
            continue
        m = re.match(r"^  ([a-z_]\S*)( {2,}|,| |$)", line)
        if not listing or not m:
            continue
        first, gap = m.groups()
        if gap == " " and not re.search(r"[=\[,]", first):
            continue  # prose ("and other generic options ...")
        tokens = [first]
        rest = line.strip().split()[1:]
        while tokens[-1].endswith(",") and rest:
            tokens.append(rest.pop(0))
        for t in tokens:
            n = re.match(r"([a-z_]+)(?![a-z_-])", t)  # not "x-*"
            if n:
                names.add(n.group(1))
    return names


def man_option_names(scd):
    """Option names the man page defines under MOUNT OPTIONS (each
    definition line starts with "*name", several separated by ", ")."""
    scd = scd.replace("\\_", "_")
    start = scd.index("# MOUNT OPTIONS")
    sec = scd[start:scd.index("\n# ", start + 1)]
    names = set()
    for line in sec.splitlines():
        if line.startswith("*"):
            for item in line.split(", "):
                n = re.match(r"\*([a-z_]+)(?=[=*\[])", item)
                if n:
                    names.add(n.group(1))
    return names


def test_help_and_man_page_list_the_same_options():
    """--help and docs/man/sqfs-lazy-mount.1.scd name the same -o options,
    so neither falls behind when an option is added. The man page may
    also spell out a "no" form of an option --help shows with [=on|off]."""
    util.require_daemon()
    out = subprocess.run(util.daemon_base_cmd() + ["--help"],
                         capture_output=True, text=True, check=True).stdout
    src = os.environ.get("LSQ_SOURCE_DIR") or os.path.join(
        os.path.dirname(__file__), "..", "..")
    with open(os.path.join(src, "docs", "man",
                           "sqfs-lazy-mount.1.scd")) as f:
        man = man_option_names(f.read())
    helped = help_option_names(out)
    assert len(helped) > 40 and "io_uring" in helped, sorted(helped)
    assert helped - man == set(), "in --help, not in the man page"
    assert {n for n in man - helped
            if not (n.startswith("no") and n[2:] in helped)} == set(), \
        "in the man page, not in --help"


def worker_threads(pid):
    """{tid: (policy, allowed CPUs)} of the daemon's request threads."""
    return util.thread_policies(pid, "sqfs-worker")


def test_dev_fuse_workers_stay_plain(small_image, mnt):
    """Over /dev/fuse, requests are answered by libfuse's workers, named
    sqfs-worker (ps, top -H, gdb), as plain SCHED_OTHER threads free to
    run on any CPU: a run of quick requests from one CPU binds no worker
    there and lowers no worker's policy, and a worker that moved to
    another CPU for a decompression (src/fuse/spread.c) is free again
    once it is done."""
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, "needs two CPUs"
    old = os.sched_getaffinity(0)
    r = daemon("-o", "io_uring=off", util.image_source(small_image), mnt)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    pid = find_daemon(mnt)
    try:
        os.sched_setaffinity(0, {cpus[-1]})
        for _ in range(2000):
            stats_request(mnt)
        failures = []

        def reader():
            try:
                check_contents(mnt)
            except (AssertionError, OSError) as e:
                failures.append(e)

        for _ in range(3):  # two readers decompressing at once
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3")
            readers = [threading.Thread(target=reader, daemon=True)
                       for _ in range(2)]
            for t in readers:
                t.start()
            for t in readers:
                t.join(120)
            assert not any(t.is_alive() for t in readers), \
                "a reader still runs after 120 s"
        assert not failures, failures
        threads = worker_threads(pid)
        check_contents(mnt)
    finally:
        os.sched_setaffinity(0, old)
    assert threads and all(policy == util.SCHED_OTHER and
                           cpus == set(old)
                           for policy, cpus in threads.values()), threads
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    wait_gone(mnt, pid)
