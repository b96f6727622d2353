"""Shared helpers for the integration suite: environment checks, mounting
(FUSE daemon and kernel loop mounts), raw readdir, tree collection and
comparison, and a minimal SquashFS reader used to locate blocks to corrupt.
"""

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import time
import zlib

import pytest

MOUNT_TIMEOUT = 30.0
UNMOUNT_TIMEOUT = 15.0


# --------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------

def require(cond, reason):
    """Skip when a prerequisite is missing; tests/run.sh fails every skip
    unless LSQ_ALLOW_SKIPS=1 (docs/testing.md)."""
    if cond:
        return
    pytest.skip(reason)


def have_tool(name):
    return shutil.which(name) is not None


def fuse_available():
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


def kernel_squashfs_available():
    def listed():
        try:
            with open("/proc/filesystems") as f:
                return any(line.split()[-1] == "squashfs" for line in f
                           if line.strip())
        except OSError:
            return False
    if listed():
        return True
    if have_tool("modprobe"):
        subprocess.run(["modprobe", "squashfs"], capture_output=True)
    return listed()


def require_root():
    require(os.geteuid() == 0, "needs root")


def require_fuse():
    require_root()
    require(fuse_available(), "/dev/fuse not usable")
    require(have_tool("fusermount3"), "fusermount3 not installed")


def require_kernel_squashfs():
    require_root()
    require(kernel_squashfs_available(), "kernel squashfs not available")
    require(os.path.exists("/dev/loop-control"), "no loop device support")


def require_mksquashfs():
    require(have_tool("mksquashfs"), "mksquashfs not installed")


def build_dir():
    return os.environ.get("LSQ_BUILD_DIR")


def daemon_path():
    b = build_dir()
    return os.path.join(b, "sqfs-lazy-mount") if b else None


def mount_cmd_override():
    v = os.environ.get("LSQ_MOUNT_CMD")
    return shlex.split(v) if v else None


def require_daemon():
    if mount_cmd_override():
        return
    p = daemon_path()
    require(p is not None, "LSQ_BUILD_DIR is not set (and no LSQ_MOUNT_CMD)")
    require(os.access(p, os.X_OK), "daemon not built: %s" % p)


# HTTP mode (LSQ_VIA_HTTP=1): the session's nginx (servers.Nginx), set by
# the conftest fixture `http_server`; None in file mode.
HTTP = None


def via_http():
    return HTTP is not None


def image_source(path):
    """What the FUSE side mounts for a local image: the path itself, or in
    HTTP mode its URL on the session's nginx.  Kernel mounts never use
    this: they stay on the file."""
    if HTTP is None:
        return str(path)
    return HTTP.url(os.path.abspath(str(path)))


def daemon_base_cmd():
    """Command prefix for the daemon, without -f (daemon mode)."""
    ov = mount_cmd_override()
    if ov:
        return [a for a in ov if a != "-f"]
    return [daemon_path()]


def fuse_mount_cmd():
    """Command prefix used by the conformance mounts (foreground)."""
    ov = mount_cmd_override()
    if ov:
        return list(ov)
    return [daemon_path(), "-f"]


def using_override():
    return mount_cmd_override() is not None


# --------------------------------------------------------------------------
# Processes and mounts
# --------------------------------------------------------------------------

def run(cmd, timeout=120, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError("command failed (%d): %s\nstdout: %s\nstderr: %s"
                             % (r.returncode, shlex.join(map(str, cmd)),
                                r.stdout.decode(errors="replace")[-4000:],
                                r.stderr.decode(errors="replace")[-4000:]))
    return r


def wait_until(pred, timeout, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
        interval = min(interval * 1.5, 0.2)


def proc_mount_entries():
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            out.append({"mountpoint": _unescape(parts[4]),
                        "fstype": parts[sep + 1],
                        "source": _unescape(parts[sep + 2])})
    return out


def _unescape(s):
    return (s.replace("\\040", " ").replace("\\011", "\t")
            .replace("\\012", "\n").replace("\\134", "\\"))


def is_mounted(path):
    path = os.path.realpath(path)
    return any(e["mountpoint"] == path for e in proc_mount_entries())


def pids_with_arg(arg):
    """Pids of processes whose argv contains `arg` exactly, leaving out
    children of another such process: the daemon's connection guard is a
    fork of it and shows its argv until it renames itself."""
    arg = os.fsencode(arg)
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if arg in argv:
            found[int(d)] = ppid
    return [pid for pid, ppid in found.items() if ppid not in found]


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    state = st[st.rindex(")") + 2]
    return state not in ("Z", "X")


def force_unmount(mnt):
    if not is_mounted(mnt):
        return
    subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
    if is_mounted(mnt):
        subprocess.run(["umount", "-l", mnt], capture_output=True)


# Logs of mounts that were alive during the current test; conftest attaches
# them to the report of a failing test.
LOG_STACK = []


def thread_names(pid):
    """The names (comm) of a process's threads, as a set."""
    names = set()
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                names.add(f.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    return names


SCHED_OTHER = 0


def thread_policies(pid, name):
    """{tid: (scheduling policy, allowed CPUs)} of a process's threads
    named name."""
    out = {}
    task = "/proc/%d/task" % pid
    for tid in os.listdir(task):
        try:
            with open("%s/%s/comm" % (task, tid)) as f:
                if f.read().strip() != name:
                    continue
            with open("%s/%s/stat" % (task, tid)) as f:
                # field 41 (policy), counted after the ")" that ends comm
                policy = int(f.read().rsplit(")", 1)[1].split()[38])
            out[int(tid)] = (policy, os.sched_getaffinity(int(tid)))
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
    return out


FUSE_URING_SWITCH = "/sys/module/fuse/parameters/enable_uring"
# Whoever changes enable_uring holds an exclusive flock on this file for as
# long as the change lasts, and puts the old value back before letting go:
# fuse_uring_switch() here, tests/without_fuse_uring.sh and bench/run.sh
# --fuse-uring. Nothing else may write the switch.
FUSE_URING_LOCK = "/run/lock/sqfs-lazy-fuse-uring.lock"
# How long fuse_uring_switch() waits for another holder (a whole test run
# under tests/without_fuse_uring.sh, a benchmark) before failing.
FUSE_URING_LOCK_TIMEOUT = 3600.0


def _flock_holders(path):
    """'pid (command)' of the processes holding a flock on path, from
    /proc/locks, for the message of a lock that cannot be had."""
    try:
        st = os.stat(path)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    out = []
    for ln in lines:
        f = ln.split()
        if "FLOCK" not in f or "->" in f:  # "->": a waiter
            continue
        i = f.index("FLOCK")
        try:
            major, minor, ino = f[i + 4].split(":")
            if (int(major, 16), int(minor, 16), int(ino)) != want:
                continue
        except (IndexError, ValueError):
            continue
        pid = f[i + 3]
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as c:
                cmd = c.read().replace(b"\0", b" ").decode(
                    errors="replace").strip()
        except OSError:
            cmd = "?"
        out.append("%s (%s)" % (pid, cmd[:200]))
    return out


@contextlib.contextmanager
def fuse_uring_lock(timeout=FUSE_URING_LOCK_TIMEOUT):
    """Holds the exclusive flock of FUSE_URING_LOCK while the block runs;
    fails the test, naming the holder, when it cannot be had in time."""
    fd = os.open(FUSE_URING_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                 0o644)
    try:
        deadline = time.monotonic() + timeout
        pause = 0.05
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(
                        "could not lock %s within %d s: another process "
                        "changes the fuse module's enable_uring (holders: "
                        "%s). Wait for it, or end it and check %s"
                        % (FUSE_URING_LOCK, timeout,
                           ", ".join(_flock_holders(FUSE_URING_LOCK)) or
                           "unknown", FUSE_URING_SWITCH), pytrace=False)
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
        yield
    finally:
        os.close(fd)  # lets go of the lock


@contextlib.contextmanager
def fuse_uring_switch():
    """Yields set(on) for the fuse module's enable_uring (machine-wide:
    FUSE over io_uring for mounts made while on) and puts it back; set()
    returns whether mounts made now get rings. The switch is held under
    fuse_uring_lock() throughout: no other test or benchmark changes it
    meanwhile. A kernel without FUSE over io_uring (before 6.14, or the
    switch hidden as tests/without_fuse_uring.sh does) has no switch:
    set() changes nothing and returns False, and the tests check the
    fallback, the same mount over /dev/fuse."""
    require_root()
    if not os.path.exists(FUSE_URING_SWITCH):
        yield lambda on: False
        return
    with fuse_uring_lock():
        with open(FUSE_URING_SWITCH) as f:
            old = f.read().strip()

        def set_switch(on):
            with open(FUSE_URING_SWITCH, "w") as f:
                f.write("Y" if on else "N")
            return on

        try:
            yield set_switch
        finally:
            with open(FUSE_URING_SWITCH, "w") as f:
                f.write(old)


def fuse_connection(mnt):
    """The fusectl number of the FUSE mount at mnt (its device number, as
    /sys/fs/fuse/connections names it), from mountinfo: a stat() would ask
    the daemon. None when mnt is no FUSE mount."""
    mnt = os.path.realpath(mnt)
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            if (_unescape(parts[4]) == mnt and
                    parts[sep + 1].split(".")[0] in ("fuse", "fuseblk")):
                major, minor = (int(x) for x in parts[2].split(":"))
                found = os.makedev(major, minor)  # the last is on top
    return found


FUSECTL = "/sys/fs/fuse/connections"


def abort_connection(mnt):
    """Aborts the FUSE connection of the mount at mnt through fusectl, as
    the daemon's guard would: every waiting caller gets ENOTCONN. For the
    cleanup of a test whose daemon hung. Where fusectl is not mounted, it
    is mounted for this alone in a mount namespace of its own, as the
    guard does. Returns whether it wrote."""
    dev = fuse_connection(mnt)
    if dev is None:
        return False
    abort = "%s/%d/abort" % (FUSECTL, dev)
    if os.path.isdir(os.path.dirname(abort)):
        try:
            with open(abort, "w") as f:
                f.write("1")
            return True
        except OSError:
            return False
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount -t fusectl fusectl "$1" && echo 1 > "$2"', "sh", FUSECTL,
         abort], capture_output=True, timeout=30)
    return r.returncode == 0


def daemon_stats(mnt):
    """The counters of a running mount (sqfs-lazy-mount --stats)."""
    out = subprocess.run(daemon_base_cmd() + ["--stats", mnt],
                         capture_output=True, timeout=30, check=True).stdout
    return {k: int(v) for k, v in
            (ln.split() for ln in out.decode().splitlines())}


class FuseMount:
    """One sqfs-lazy-mount (or LSQ_MOUNT_CMD) instance.

    Foreground commands (containing -f) are kept as child processes;
    otherwise the command must daemonize and the mount must be usable when
    it returns.
    """

    def __init__(self, image, mnt, log_path, opts=(), name=None):
        self.image = image
        self.mnt = mnt
        self.log_path = log_path
        self.opts = list(opts)
        self.name = name or os.path.basename(image)
        self.proc = None
        self.pid = None
        self.cmd = None
        self.exit_status = None
        self.stopped = False

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def start(self):
        os.makedirs(self.mnt, exist_ok=True)
        base = fuse_mount_cmd()
        cmd = base + [a for o in self.opts for a in ("-o", o)] + \
            [image_source(self.image), self.mnt]
        self.cmd = cmd
        LOG_STACK.append(self)
        logf = open(self.log_path, "ab")
        try:
            if "-f" in base or "-d" in base:
                self.proc = subprocess.Popen(cmd, stdout=logf, stderr=logf,
                                             stdin=subprocess.DEVNULL)
                self.pid = self.proc.pid
                deadline = time.monotonic() + MOUNT_TIMEOUT
                while not is_mounted(self.mnt):
                    if self.proc.poll() is not None:
                        raise AssertionError(
                            "daemon exited with %s before mounting: %s\n%s"
                            % (self.proc.returncode, shlex.join(cmd),
                               self.log()))
                    if time.monotonic() > deadline:
                        raise AssertionError("mount not ready after %ss: %s"
                                             % (MOUNT_TIMEOUT, shlex.join(cmd)))
                    time.sleep(0.01)
            else:
                r = subprocess.run(cmd, stdout=logf, stderr=logf,
                                   stdin=subprocess.DEVNULL,
                                   timeout=MOUNT_TIMEOUT)
                if r.returncode != 0:
                    raise AssertionError("mount command failed (%d): %s\n%s"
                                         % (r.returncode, shlex.join(cmd),
                                            self.log()))
                if not is_mounted(self.mnt):
                    raise AssertionError("command returned but %s is not "
                                         "mounted" % self.mnt)
                pids = pids_with_arg(self.mnt)
                self.pid = pids[0] if len(pids) == 1 else None
        finally:
            logf.close()
        return self

    def alive(self):
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and pid_alive(self.pid)

    def stop(self, check=True):
        """Unmount; returns a list of problems (daemon died early, did not
        exit after unmount, ...)."""
        problems = []
        self.stopped = True
        try:
            if self.proc is not None and self.proc.poll() is not None:
                problems.append("daemon had already exited with status %s"
                                % self.proc.returncode)
            if is_mounted(self.mnt):
                r = subprocess.run(["fusermount3", "-u", self.mnt],
                                   capture_output=True)
                if r.returncode != 0:
                    problems.append("fusermount3 -u failed: %s"
                                    % r.stderr.decode(errors="replace"))
                    force_unmount(self.mnt)
            if self.proc is not None:
                try:
                    self.proc.wait(UNMOUNT_TIMEOUT)
                except subprocess.TimeoutExpired:
                    problems.append("daemon did not exit after unmount")
                    self.proc.kill()
                    self.proc.wait(10)
                self.exit_status = self.proc.returncode
            elif self.pid is not None:
                if not wait_until(lambda: not pid_alive(self.pid),
                                  UNMOUNT_TIMEOUT):
                    problems.append("daemon did not exit after unmount")
                    try:
                        os.kill(self.pid, signal.SIGKILL)
                    except OSError:
                        pass
        finally:
            force_unmount(self.mnt)
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                    "ThreadSanitizer"):
            if bad in self.log():
                problems.append("sanitizer report in daemon stderr")
                break
        if check and problems:
            raise AssertionError("%s: %s\n--- daemon stderr ---\n%s"
                                 % (self.name, "; ".join(problems),
                                    self.log()[-8000:]))
        return problems


class KernelMount:
    def __init__(self, image, mnt, offset=None):
        self.image = image
        self.mnt = mnt
        self.offset = offset

    def start(self):
        os.makedirs(self.mnt, exist_ok=True)
        o = "loop,ro"
        if self.offset:
            o += ",offset=%d" % self.offset
        run(["mount", "-t", "squashfs", "-o", o, self.image, self.mnt],
            timeout=60)
        return self

    def stop(self):
        if not is_mounted(self.mnt):
            return
        r = subprocess.run(["umount", self.mnt], capture_output=True)
        if r.returncode != 0 or is_mounted(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], capture_output=True)


class Mounter:
    """Creates mounts under a directory and tears them all down."""

    def __init__(self, base):
        self.base = base
        self.base.mkdir(parents=True, exist_ok=True)
        self.mounts = []

    def _dir(self, tag):
        return tempfile.mkdtemp(prefix=tag + "-", dir=str(self.base))

    def fuse(self, image, opts=(), name=None):
        require_fuse()
        require_daemon()
        mnt = self._dir("fuse")
        m = FuseMount(image, mnt, mnt + ".log", opts=opts, name=name)
        self.mounts.append(m)
        m.start()
        return m

    def kernel(self, image, offset=None):
        require_kernel_squashfs()
        mnt = self._dir("kernel")
        m = KernelMount(image, mnt, offset=offset)
        self.mounts.append(m)
        m.start()
        return m

    def cleanup(self, check=True):
        problems = []
        for m in reversed(self.mounts):
            try:
                if isinstance(m, FuseMount):
                    if not getattr(m, "stopped", False):
                        m.stopped = True
                        problems += ["%s: %s" % (m.name, p)
                                     for p in m.stop(check=False)]
                else:
                    m.stop()
            except Exception as e:  # keep cleaning the rest
                problems.append("%s: cleanup raised %r" % (m, e))
        self.mounts.clear()
        if check and problems:
            pytest.fail("mount teardown problems:\n  " +
                        "\n  ".join(problems), pytrace=False)



# --------------------------------------------------------------------------
# Raw readdir
# --------------------------------------------------------------------------

_SYS_GETDENTS64 = {"x86_64": 217, "aarch64": 61, "riscv64": 61,
                   "ppc64le": 202, "ppc64": 202, "s390x": 220,
                   "loongarch64": 61}.get(platform.machine())
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def getdents(path, bufsize=32768, seek_to=None):
    """Raw getdents64: list of (name, d_ino, d_type, d_off), including '.'
    and '..'.  If seek_to is given, lseek the directory there first."""
    if _SYS_GETDENTS64 is None:
        pytest.skip("getdents64 syscall number unknown on this arch")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    out = []
    try:
        if seek_to is not None:
            os.lseek(fd, seek_to, os.SEEK_SET)
        buf = ctypes.create_string_buffer(bufsize)
        while True:
            n = _libc.syscall(ctypes.c_long(_SYS_GETDENTS64), ctypes.c_int(fd),
                              buf, ctypes.c_uint(bufsize))
            if n < 0:
                e = ctypes.get_errno()
                raise OSError(e, "getdents64: " + os.strerror(e), path)
            if n == 0:
                break
            raw = buf.raw[:n]
            pos = 0
            while pos < n:
                d_ino, d_off, reclen, d_type = struct.unpack_from("<QqHB",
                                                                  raw, pos)
                name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0]
                out.append((name, d_ino, d_type, d_off))
                pos += reclen
    finally:
        os.close(fd)
    return out


# --------------------------------------------------------------------------
# Tree collection and comparison
# --------------------------------------------------------------------------

STAT_FIELDS = ("type", "st_mode", "st_ino", "st_uid", "st_gid", "st_size",
               "st_mtime_ns", "st_atime_ns", "st_ctime_ns", "st_nlink",
               "st_rdev", "st_blocks")


def _err(e):
    return "%s(%s)" % (type(e).__name__, errno.errorcode.get(e.errno, e.errno))


def file_type(mode):
    for name, t in (("dir", stat.S_ISDIR), ("reg", stat.S_ISREG),
                    ("lnk", stat.S_ISLNK), ("chr", stat.S_ISCHR),
                    ("blk", stat.S_ISBLK), ("fifo", stat.S_ISFIFO),
                    ("sock", stat.S_ISSOCK)):
        if t(mode):
            return name
    return "?"


class Rec:
    __slots__ = ("path", "stat", "stat_err", "link", "xattrs", "xattr_names",
                 "listing", "dents", "scandir", "errors")

    def __init__(self, path):
        self.path = path
        self.stat = {}
        self.stat_err = None
        self.link = None
        self.xattrs = {}
        self.xattr_names = None
        self.listing = None
        self.dents = None
        self.scandir = None
        self.errors = {}


def collect_tree(root, xattrs=True):
    """Walk root (bytes paths, no symlink following) and record everything
    the comparisons need.  Errors are recorded, not raised."""
    root = os.fsencode(root)
    recs = {}
    walk_errors = []

    def record(rel):
        full = os.path.join(root, rel) if rel else root
        r = Rec(rel or b".")
        recs[r.path] = r
        try:
            st = os.lstat(full)
        except OSError as e:
            r.stat_err = _err(e)
            return r
        r.stat = {"type": file_type(st.st_mode)}
        for f in STAT_FIELDS[1:]:
            r.stat[f] = getattr(st, f)
        r.stat["st_blksize"] = st.st_blksize
        if stat.S_ISLNK(st.st_mode):
            try:
                r.link = os.readlink(full)
            except OSError as e:
                r.errors["readlink"] = _err(e)
        if xattrs:
            try:
                names = os.listxattr(full, follow_symlinks=False)
                r.xattr_names = names
                for n in names:
                    try:
                        r.xattrs[n] = os.getxattr(full, n,
                                                  follow_symlinks=False)
                    except OSError as e:
                        r.xattrs[n] = _err(e)
            except OSError as e:
                r.errors["listxattr"] = _err(e)
        if stat.S_ISDIR(st.st_mode):
            try:
                r.listing = os.listdir(full)
            except OSError as e:
                r.errors["listdir"] = _err(e)
            try:
                with os.scandir(full) as it:
                    r.scandir = sorted(e.name for e in it)
            except OSError as e:
                r.errors["scandir"] = _err(e)
            try:
                r.dents = [(n, ino, t) for n, ino, t, _ in getdents(full)]
            except OSError as e:
                r.errors["getdents"] = _err(e)
        return r

    record(b"")
    for dirpath, dirnames, filenames in os.walk(
            root, followlinks=False, onerror=walk_errors.append):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = b"" if rel_dir == b"." else rel_dir
        for n in dirnames + filenames:
            record(os.path.join(rel_dir, n) if rel_dir else n)
    for e in walk_errors:
        rel = os.path.relpath(os.fsencode(e.filename), root)
        recs.setdefault(rel, Rec(rel)).errors["walk"] = _err(e)
    return recs


def show(path):
    return path.decode(errors="backslashreplace") if isinstance(path, bytes) \
        else path


class Diffs:
    """Accumulates differences; renders a summary plus the first N lines."""

    def __init__(self, what):
        self.what = what
        self.items = []

    def add(self, path, field, kernel, fuse):
        self.items.append((show(path), field, kernel, fuse))

    def __bool__(self):
        return bool(self.items)

    def render(self, limit=80):
        by_field = {}
        for item in self.items:
            by_field.setdefault(item[1], []).append(item)
        lines = ["%d %s difference(s) (kernel vs fuse); by field: %s"
                 % (len(self.items), self.what,
                    ", ".join("%s=%d" % (f, len(v))
                              for f, v in sorted(by_field.items())))]
        per_field = max(5, min(25, limit // max(1, len(by_field))))
        for fld, items in sorted(by_field.items()):
            lines.append(" [%s]" % fld)
            for p, f, k, u in items[:per_field]:
                if f in ("st_mode", "type") and isinstance(k, int) and \
                        isinstance(u, int):
                    ks, us = oct(k), oct(u)
                else:
                    ks, us = repr(k), repr(u)
                if len(ks) > 200:
                    ks = ks[:200] + "..."
                if len(us) > 200:
                    us = us[:200] + "..."
                lines.append("  %s: %s: kernel=%s fuse=%s" % (p, f, ks, us))
            if len(items) > per_field:
                lines.append("  ... %d more %s" % (len(items) - per_field,
                                                   fld))
        return "\n".join(lines)

    def check(self):
        if self.items:
            raise AssertionError(self.render())


def compare_names(k, f):
    d = Diffs("path set")
    for p in sorted(set(k) - set(f)):
        d.add(p, "missing in fuse", "present", None)
    for p in sorted(set(f) - set(k)):
        d.add(p, "extra in fuse", None, "present")
    for p in sorted(set(k) & set(f)):
        for src, rec in (("kernel", k[p]), ("fuse", f[p])):
            for op, e in rec.errors.items():
                if op in ("walk",):
                    d.add(p, "%s error (%s)" % (op, src), None, e)
    return d


def compare_stat(k, f, fields=STAT_FIELDS):
    d = Diffs("stat")
    for p in sorted(set(k) & set(f)):
        a, b = k[p], f[p]
        if a.stat_err or b.stat_err:
            if a.stat_err != b.stat_err:
                d.add(p, "lstat", a.stat_err, b.stat_err)
            continue
        for fld in fields:
            if a.stat.get(fld) != b.stat.get(fld):
                d.add(p, fld, a.stat.get(fld), b.stat.get(fld))
    return d


def compare_links(k, f):
    d = Diffs("readlink")
    for p in sorted(set(k) & set(f)):
        a, b = k[p], f[p]
        if a.link != b.link or a.errors.get("readlink") != \
                b.errors.get("readlink"):
            d.add(p, "readlink", a.link or a.errors.get("readlink"),
                  b.link or b.errors.get("readlink"))
    return d


def compare_xattrs(k, f):
    d = Diffs("xattr")
    for p in sorted(set(k) & set(f)):
        a, b = k[p], f[p]
        if a.errors.get("listxattr") != b.errors.get("listxattr"):
            d.add(p, "listxattr error", a.errors.get("listxattr"),
                  b.errors.get("listxattr"))
            continue
        an, bn = sorted(a.xattr_names or []), sorted(b.xattr_names or [])
        if an != bn:
            d.add(p, "listxattr", an, bn)
        if len(set(b.xattr_names or [])) != len(b.xattr_names or []):
            d.add(p, "listxattr duplicates", a.xattr_names, b.xattr_names)
        for n in sorted(set(an) & set(bn)):
            if a.xattrs.get(n) != b.xattrs.get(n):
                d.add(p, "getxattr " + n, a.xattrs.get(n), b.xattrs.get(n))
    return d


def compare_readdir(k, f):
    d = Diffs("readdir")
    for p in sorted(set(k) & set(f)):
        a, b = k[p], f[p]
        if a.stat.get("type") != "dir":
            continue
        for op in ("listdir", "scandir", "getdents"):
            if a.errors.get(op) != b.errors.get(op):
                d.add(p, op + " error", a.errors.get(op), b.errors.get(op))
        if b.dents is not None:
            names = [n for n, _, _ in b.dents]
            for special in (b".", b".."):
                if names.count(special) != 1:
                    d.add(p, "getdents has %r %d times" % (special,
                                                           names.count(special)),
                          1, names.count(special))
            if len(set(names)) != len(names):
                d.add(p, "getdents duplicate names", None,
                      sorted(n for n in set(names) if names.count(n) > 1))
            plain = sorted(n for n in names if n not in (b".", b".."))
            if b.listing is not None and \
                    plain != sorted(os.fsencode(x) for x in b.listing):
                d.add(p, "fuse getdents vs listdir", None, None)
            if b.scandir is not None and \
                    plain != sorted(os.fsencode(x) for x in b.scandir):
                d.add(p, "fuse getdents vs scandir", None, None)
        if a.listing != b.listing:
            if a.listing is not None and b.listing is not None and \
                    sorted(a.listing) == sorted(b.listing):
                d.add(p, "readdir order", a.listing[:8], b.listing[:8])
            else:
                d.add(p, "readdir names",
                      sorted(set(a.listing or []) - set(b.listing or [])),
                      sorted(set(b.listing or []) - set(a.listing or [])))
        if a.dents is not None and b.dents is not None:
            ka = {n: (i, t) for n, i, t in a.dents}
            kb = {n: (i, t) for n, i, t in b.dents}
            for n in sorted(set(ka) & set(kb)):
                q = n if p == b"." else os.path.join(p, n)
                if ka[n][1] != kb[n][1]:
                    d.add(q, "d_type", ka[n][1], kb[n][1])
                if ka[n][0] != kb[n][0]:
                    d.add(q, "d_ino", ka[n][0], kb[n][0])
            if [n for n, _, _ in a.dents[:2]] != [n for n, _, _ in b.dents[:2]]:
                d.add(p, "first two getdents entries",
                      [n for n, _, _ in a.dents[:2]],
                      [n for n, _, _ in b.dents[:2]])
    return d


def read_all_compare(kpath, fpath, chunk=1 << 20):
    """Compare two files' full contents; return None or a description."""
    with open(kpath, "rb", buffering=0) as a, open(fpath, "rb",
                                                   buffering=0) as b:
        off = 0
        while True:
            x = a.read(chunk)
            y = b.read(chunk)
            if x != y:
                i = next((j for j in range(min(len(x), len(y)))
                          if x[j] != y[j]), min(len(x), len(y)))
                return ("first difference at offset %d (kernel chunk %d "
                        "bytes, fuse chunk %d bytes)" % (off + i, len(x),
                                                         len(y)))
            if not x:
                return None
            off += len(x)


def edge_reads(size, bs, sample_blocks=True):
    """(offset, length) pairs around block edges, plus EOF reads."""
    out = set()
    nblocks = (size + bs - 1) // bs
    ks = set(range(1, nblocks + 1))
    if sample_blocks and nblocks > 8:
        ks = {1, 2, 3, nblocks // 2, nblocks // 2 + 1, nblocks - 1, nblocks}
    for k in ks:
        e = k * bs
        for off in (e - 1, e - 7, e + 3, e - bs // 2):
            for ln in (1, 4097, 2 * bs, 3):
                if 0 <= off:
                    out.add((off, ln))
    for off, ln in ((0, 1), (0, size + 10), (size, 1), (size, 4096),
                    (size + 1, 1), (size + 3 * bs, 100),
                    (max(0, size - 1), 1), (max(0, size - 1), 4096)):
        out.add((off, ln))
    return sorted(out)


def pread_compare(kpath, fpath, pairs, direct=False):
    """Compare preads; returns list of mismatch descriptions."""
    bad = []
    kfd = os.open(kpath, os.O_RDONLY)
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    ffd = os.open(fpath, flags)
    try:
        if not direct:
            try:
                os.posix_fadvise(ffd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
        for off, ln in pairs:
            x = os.pread(kfd, ln, off)
            try:
                y = os.pread(ffd, ln, off)
            except OSError as e:
                bad.append("pread(off=%d, len=%d): fuse raised %s"
                           % (off, ln, _err(e)))
                continue
            if x != y:
                bad.append("pread(off=%d, len=%d): kernel %d bytes, fuse %d "
                           "bytes, %s" % (off, ln, len(x), len(y),
                                          "same prefix" if x[:len(y)] == y
                                          else "content differs"))
    finally:
        os.close(kfd)
        os.close(ffd)
    return bad


# --------------------------------------------------------------------------
# Minimal SquashFS 4.0 reader (gzip / xz / lzma / uncompressed only)
# --------------------------------------------------------------------------

SB_FMT = "<IIIIIHHHHHHQQQQQQQQ"
SB_FIELDS = ("magic", "inodes", "mkfs_time", "block_size", "fragments",
             "compression", "block_log", "flags", "no_ids", "s_major",
             "s_minor", "root_inode", "bytes_used", "id_table_start",
             "xattr_id_table_start", "inode_table_start",
             "directory_table_start", "fragment_table_start",
             "lookup_table_start")
SB_OFFSETS = {}
_o = 0
for _n, _c in zip(SB_FIELDS, SB_FMT[1:]):
    SB_OFFSETS[_n] = _o
    _o += struct.calcsize("<" + _c)
del _o, _n, _c

SQUASHFS_MAGIC = 0x73717368
COMP_GZIP, COMP_LZMA, COMP_LZO, COMP_XZ, COMP_LZ4, COMP_ZSTD = range(1, 7)


class SqfsReader:
    """Just enough of SquashFS to find where a file's blocks and a
    directory's listing live in the image."""

    def __init__(self, path, offset=0):
        with open(path, "rb") as f:
            self.data = f.read()
        self.base = offset
        vals = struct.unpack_from(SB_FMT, self.data, offset)
        self.sb = dict(zip(SB_FIELDS, vals))
        if self.sb["magic"] != SQUASHFS_MAGIC:
            raise ValueError("not a squashfs image")

    def decompress(self, raw):
        c = self.sb["compression"]
        if c == COMP_GZIP:
            return zlib.decompress(raw)
        if c in (COMP_XZ, COMP_LZMA):
            import lzma
            return lzma.decompress(raw, format=lzma.FORMAT_XZ
                                   if c == COMP_XZ else lzma.FORMAT_ALONE)
        raise NotImplementedError("compressor %d" % c)

    def metablock(self, pos):
        """(payload, compressed?, header_pos, next_pos) of the metadata
        block whose header is at absolute image offset pos."""
        hdr, = struct.unpack_from("<H", self.data, pos)
        ln = hdr & 0x7FFF
        raw = self.data[pos + 2:pos + 2 + ln]
        compressed = not (hdr & 0x8000)
        payload = self.decompress(raw) if compressed else raw
        return payload, compressed, pos, pos + 2 + ln

    def md_read(self, table_start, block, offset, length):
        """Read `length` bytes of a metadata stream; returns (bytes, list of
        absolute header offsets of the blocks touched)."""
        pos = self.base + table_start + block
        out = b""
        touched = []
        while len(out) < offset + length:
            payload, _, hpos, pos = self.metablock(pos)
            touched.append(hpos)
            out += payload
        return out[offset:offset + length], touched

    def inode(self, ref):
        blk, off = ref >> 16, ref & 0xFFFF
        start = self.sb["inode_table_start"]
        hdr, _ = self.md_read(start, blk, off, 16)
        itype, mode, uid, gid, mtime, ino = struct.unpack("<HHHHII", hdr)
        ino_d = {"type": itype, "mode": mode, "inode_number": ino}
        bs = self.sb["block_size"]
        if itype == 1:      # basic dir
            body, _ = self.md_read(start, blk, off + 16, 16)
            sb_, nlink, fsize, doff, parent = struct.unpack("<IIHHI", body)
            ino_d.update(start_block=sb_, file_size=fsize, offset=doff)
        elif itype == 8:    # extended dir
            body, _ = self.md_read(start, blk, off + 16, 24)
            nlink, fsize, sb_, parent, icount, doff, xattr = \
                struct.unpack("<IIIIHHI", body)
            ino_d.update(start_block=sb_, file_size=fsize, offset=doff)
        elif itype in (2, 9):
            if itype == 2:
                body, _ = self.md_read(start, blk, off + 16, 16)
                sb_, frag, foff, fsize = struct.unpack("<IIII", body)
                hl = 32
            else:
                body, _ = self.md_read(start, blk, off + 16, 40)
                sb_, fsize, sparse, nlink, frag, foff, xattr = \
                    struct.unpack("<QQQIIII", body)
                hl = 56
            if frag == 0xFFFFFFFF:
                n = (fsize + bs - 1) // bs
            else:
                n = fsize // bs
            sizes, _ = self.md_read(start, blk, off + hl, 4 * n)
            ino_d.update(start_block=sb_, file_size=fsize, fragment=frag,
                         frag_offset=foff,
                         block_sizes=list(struct.unpack("<%dI" % n, sizes)))
        return ino_d

    def dir_entries(self, dino):
        """List of (name, inode_ref) of a directory inode; also returns the
        absolute header offsets of the metadata blocks of its listing."""
        size = dino["file_size"] - 3
        if size <= 0:
            return [], []
        raw, touched = self.md_read(self.sb["directory_table_start"],
                                    dino["start_block"], dino["offset"], size)
        pos = 0
        out = []
        while pos < len(raw):
            count, sblk, base = struct.unpack_from("<III", raw, pos)
            pos += 12
            for _ in range(count + 1):
                eoff, _ino_delta, _t, nsize = struct.unpack_from("<HhHH",
                                                                 raw, pos)
                name = raw[pos + 8:pos + 8 + nsize + 1]
                pos += 8 + nsize + 1
                out.append((name, (sblk << 16) | eoff))
        return out, touched

    def lookup(self, relpath):
        ino = self.inode(self.sb["root_inode"])
        for comp in os.fsencode(relpath).split(b"/"):
            if not comp:
                continue
            ents, _ = self.dir_entries(ino)
            ref = dict(ents)[comp]
            ino = self.inode(ref)
        return ino

    def fragment(self, index):
        """(absolute offset, stored size, compressed?) of fragment block
        `index`."""
        ptr, = struct.unpack_from(
            "<Q", self.data,
            self.base + self.sb["fragment_table_start"] + (index // 512) * 8)
        raw, _ = self.md_read(ptr, 0, (index % 512) * 16, 16)
        start, word, _unused = struct.unpack("<QII", raw)
        return (self.base + start, word & 0xFFFFFF, not (word & (1 << 24)))

    def file_blocks(self, relpath):
        """[(absolute offset, stored size, compressed?)] of the data blocks
        of a regular file (sparse blocks omitted)."""
        ino = self.lookup(relpath)
        pos = self.base + ino["start_block"]
        out = []
        for word in ino["block_sizes"]:
            size = word & 0xFFFFFF
            if size:
                out.append((pos, size, not (word & (1 << 24))))
            pos += size
        return out
