"""A real systemd: Debian 12's systemd 252 boots as PID 1 in a container
(systemd-nspawn -b) and mounts images through our units.

The rootfs is made once by make_rootfs.sh (debootstrap, ~35-80 s) and kept
in $LSQ_ROOTFS_CACHE (default /var/cache/sqfs-lazy-test); the container
boots it with --volatile=overlay, so nothing a test does reaches the cache.
The project is installed with `meson install --destdir` into a staging tree
that is bind-mounted in and unpacked over the container's root. The host
runs no systemd or D-Bus, hence --register=no --keep-unit; the container
shares the host's network, so it reaches nginx on 127.0.0.1. Every command
in the container runs through nsenter into PID 1's namespaces, with a
timeout; the nspawn process is always stopped at the end.

A container that cannot be made or booted (no network for debootstrap;
inside a chroot systemd-nspawn -b boots to "offline") fails each test of
the module with the same one line, from one attempt: the module-scoped
fixture raises pytest.fail(..., pytrace=False), which pytest keeps for the
module's other tests.
"""

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import (CONTENT, HERE, build_dir, require, require_mount_env,
                      sha256_file)

CACHE = os.environ.get("LSQ_ROOTFS_CACHE", "/var/cache/sqfs-lazy-test")


class BootError(Exception):
    """The container could not be booted; the message is one line."""


def last_line(text, pick=None):
    """The last non-empty line of text (the last one pick() accepts, if
    any does), stripped and shortened for a one-line message."""
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    chosen = [l for l in lines if pick(l)] if pick else []
    line = (chosen or lines or [""])[-1]
    return line if len(line) <= 200 else line[:197] + "..."


class Container:
    def __init__(self, root, stage, imgdir, log):
        self.root, self.stage, self.imgdir = root, stage, imgdir
        self.logpath = log
        self.name = "sqfs-lazy-test-%d" % os.getpid()
        self.proc = None
        self.pid1 = None

    def boot(self):
        self.log = open(self.logpath, "wb")
        self.proc = subprocess.Popen(
            ["systemd-nspawn", "-b", "-D", self.root, "-M", self.name,
             "--volatile=overlay", "--register=no", "--keep-unit",
             "--console=pipe", "--bind=/dev/fuse",
             "--bind-ro=%s:/mnt/stage" % self.stage,
             "--bind-ro=%s:/srv/img" % self.imgdir],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            start_new_session=True)
        deadline = time.monotonic() + 60
        while self.pid1 is None:
            if self.proc.poll() is not None:
                raise BootError("systemd-nspawn exited with status %d: %s" % (
                    self.proc.returncode, self.log_hint()))
            if time.monotonic() > deadline:
                raise BootError("no systemd process in the container after "
                                "60 s: " + self.log_hint())
            self.pid1 = self.find_pid1()
            time.sleep(0.05)
        # systemctl fails until PID 1 listens on its private socket
        while True:
            try:
                r = self.run("systemctl", "is-system-running", "--wait",
                             timeout=90, check=False)
            except subprocess.TimeoutExpired:
                raise BootError("systemctl is-system-running --wait did not "
                                "answer in 90 s: " + self.log_hint())
            if r.stdout.strip() or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        state = r.stdout.strip()
        failed = self.run("systemctl", "--failed", "--plain",
                          "--no-legend", check=False).stdout
        # "degraded": a unit of the base system failed to start, which
        # depends on the machine, not on us; ours are not started yet
        if state not in ("running", "degraded"):
            why = last_line(r.stderr)
            raise BootError("its systemd is %r, not running%s: %s%s" % (
                state or "silent",
                " (systemctl cannot reach PID 1, as when the host is a "
                "chroot)" if state == "offline" else "",
                why + "; " if why else "", self.log_hint()))
        if "sqfs" in failed:
            raise BootError("a sqfs-lazy unit failed at boot: " +
                            last_line(failed, lambda l: "sqfs" in l))
        self.boot_state = (state, failed)

    def log_hint(self):
        """The boot log's last error-looking line and where the log is."""
        line = last_line(self.boot_log(), lambda l: any(
            w in l.lower() for w in ("fail", "error", "cannot", "refus")))
        return "%sboot log: %s" % (line + "; " if line else "", self.logpath)

    def find_pid1(self):
        """The container's init: the process named systemd below nspawn."""
        todo = [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:
                with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            for k in kids:
                try:
                    with open("/proc/%d/comm" % k) as f:
                        if f.read().strip() == "systemd":
                            return k
                except OSError:
                    pass
            todo += kids
        return None

    def run(self, *cmd, timeout=60, check=True):
        r = subprocess.run(["nsenter", "-t", str(self.pid1), "-a", "--"] +
                           list(cmd), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if check:
            assert r.returncode == 0, (cmd, r.returncode, r.stdout,
                                       r.stderr)
        return r

    def write(self, path, text):
        r = subprocess.run(["nsenter", "-t", str(self.pid1), "-a", "--",
                            "sh", "-c", 'cat > "$1"', "sh", path],
                           input=text, capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr

    def boot_log(self):
        self.log.flush()
        with open(self.logpath, "rb") as f:
            return f.read()[-4000:].decode(errors="replace")

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            # one SIGTERM asks nspawn to halt the container in order
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.log.close()
        # nspawn's (empty) mount propagation directory outlives it
        try:
            os.rmdir("/run/systemd/nspawn/propagate/" + self.name)
        except OSError:
            pass


def libraries(binary):
    """Absolute paths of the shared libraries binary loads."""
    r = subprocess.run(["ldd", binary], capture_output=True, text=True,
                       timeout=30)
    out = []
    for line in r.stdout.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                out.append(p)
                break
    return out


def stage_install(stage, root):
    """meson install into stage, plus any library the build links that the
    rootfs lacks (libasan and libubsan of a sanitizer build)."""
    r = subprocess.run(["meson", "install", "-C", build_dir(), "--no-rebuild",
                        "--quiet", "--destdir", str(stage)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for dirpath, _, files in os.walk(stage):
        for f in files:
            p = os.path.join(dirpath, f)
            if not os.access(p, os.X_OK) or os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                if fh.read(4) != b"\x7fELF":
                    continue
            for lib in libraries(p):
                real = os.path.realpath(lib)
                if os.path.exists(root + lib) or os.path.exists(root + real):
                    continue
                dest = str(stage) + lib
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copy2(real, dest)


def make_rootfs():
    """The cached minbase rootfs (make_rootfs.sh, made once); failing to
    make it fails the test with one line."""
    try:
        r = subprocess.run(["bash", os.path.join(HERE, "make_rootfs.sh"),
                            CACHE], capture_output=True, text=True,
                           timeout=900)
    except subprocess.TimeoutExpired:
        pytest.fail("the container's rootfs could not be made: "
                    "make_rootfs.sh took over 900 s", pytrace=False)
    if r.returncode != 0:
        pytest.fail("the container's rootfs could not be made: "
                    "make_rootfs.sh: " + last_line(r.stderr), pytrace=False)
    return r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def container(tmp_path_factory, image):
    """The booted container, once per module. Failing to make or boot it
    fails every test of the module with one line and no traceback (pytest
    re-raises a module fixture's failure without running it again)."""
    require_mount_env()
    for tool in ("systemd-nspawn", "debootstrap", "nsenter", "meson"):
        require(shutil.which(tool) is not None, tool + " missing")
    root = make_rootfs()
    work = tmp_path_factory.mktemp("container")
    os.chmod(work, 0o755)
    stage = work / "stage"
    stage_install(stage, root)
    c = Container(root, str(stage), os.path.dirname(image[0]),
                  str(work / "nspawn.log"))
    try:
        failure = None
        try:
            c.boot()
        except BootError as e:
            failure = "the container could not boot: %s" % e
        if failure:
            # outside the except clause: no chained exception is shown
            pytest.fail(failure, pytrace=False)
        # the project, unpacked over the root; /sbin stays a symlink
        c.run("sh", "-c", "tar -C /mnt/stage -cf - . | "
              "tar -C / --keep-directory-symlink -xf -")
        c.run("systemctl", "daemon-reload")
        yield c
    finally:
        c.stop()


def read_sums(c, mnt):
    r = c.run("sha256sum", *[mnt + "/" + n for n in CONTENT], timeout=60)
    return {line.split()[1][len(mnt) + 1:]: line.split()[0]
            for line in r.stdout.splitlines()}


def expect(image):
    return {n: sha256_file(os.path.join(image[1], n)) for n in CONTENT}


def mounted(c, mnt):
    return c.run("findmnt", "-n", "-o", "FSTYPE", mnt,
                 check=False).stdout.strip()


def installed_paths():
    """Where `meson install` puts each built file, by file name."""
    r = subprocess.run(["meson", "introspect", build_dir(), "--installed"],
                       capture_output=True, text=True, timeout=60, check=True)
    return {os.path.basename(k): v for k, v in json.loads(r.stdout).items()}


def example(c, name):
    """An installed example's text; examples are docs, never live units."""
    path = installed_paths()[name]
    assert "/doc/sqfs-lazy/examples/" in path, path
    return c.run("cat", path).stdout


def test_installed_units_verify(container):
    c = container
    paths = installed_paths()
    service = paths["sqfs-lazy-mount@.service"]
    assert service == "/lib/systemd/system/sqfs-lazy-mount@.service"
    # the example unit is installed as documentation, not beside the template
    c.run("test", "!", "-e", "/lib/systemd/system/srv-images.mount")
    for name in ("srv-images.mount", "fstab", "base.conf"):
        c.run("test", "-s", paths[name])
    r = c.run("systemd-analyze", "verify", "--man=no", service,
              paths["srv-images.mount"], check=False)
    assert r.returncode == 0, r.stderr
    # where mount(8) looks for helpers
    c.run("test", "-x", "/sbin/mount.sqfs-lazy")


def test_example_mount_unit(container, image, nginx):
    """The installed example unit, What= pointed at nginx on the host."""
    c = container
    unit = example(c, "srv-images.mount")
    what = next(l for l in unit.splitlines() if l.startswith("What="))
    unit = unit.replace(what, "What=" + nginx.url(image[0]))
    # the example logs warnings only; the SIGUSR1 counters are info
    assert "loglevel=warning" in unit
    unit = unit.replace("loglevel=warning", "loglevel=info")
    c.write("/etc/systemd/system/srv-images.mount", unit)
    c.run("systemctl", "daemon-reload")
    c.run("systemctl", "start", "srv-images.mount", timeout=120)
    try:
        # mounted means answering: the helper returned only then
        assert mounted(c, "/srv/images") == "fuse.sqfs-lazy"
        assert read_sums(c, "/srv/images") == expect(image)
        # background daemon: its log lines reach the journal via syslog
        c.run("systemctl", "kill", "--signal=SIGUSR1", "srv-images.mount")
        deadline = time.monotonic() + 20
        while True:
            j = c.run("journalctl", "-q", "-o", "cat",
                      "SYSLOG_IDENTIFIER=sqfs-lazy-mount").stdout
            if "stats:" in j:
                break
            assert time.monotonic() < deadline, (
                j, c.run("journalctl", "-q", "-n", "40", "--no-pager").stdout,
                c.run("systemctl", "status", "srv-images.mount",
                      check=False).stdout)
            time.sleep(0.2)
    finally:
        c.run("systemctl", "stop", "srv-images.mount", timeout=120)
    assert mounted(c, "/srv/images") == ""
    assert c.run("systemctl", "is-active", "srv-images.mount",
                 check=False).stdout.strip() == "inactive"


def test_fstab_lines(container, image, nginx):
    """The installed example fstab lines (both types), their sources pointed
    at nginx and at a file; systemd-fstab-generator makes the units."""
    c = container
    lines = [l.split() for l in example(c, "fstab").splitlines()
             if l.strip() and not l.startswith("#")]
    assert [l[2] for l in lines] == ["sqfs-lazy", "fuse.sqfs-lazy-mount"]
    sources = [nginx.url(image[0]), "/srv/img/" + os.path.basename(image[0])]
    fstab = c.run("cat", "/etc/fstab", check=False).stdout
    for line, source in zip(lines, sources):
        # noauto: started below, not at daemon-reload
        fstab += "%s %s %s %s,noauto,x-systemd.mount-timeout=60 0 0\n" % (
            source, line[1], line[2], line[3])
    c.write("/etc/fstab", fstab)
    c.run("systemctl", "daemon-reload")
    for line in lines:
        mnt = line[1]
        unit = c.run("systemd-escape", "-p", "--suffix=mount",
                     mnt).stdout.strip()
        c.run("systemctl", "start", unit, timeout=120)
        try:
            assert mounted(c, mnt) == "fuse.sqfs-lazy"
            assert read_sums(c, mnt) == expect(image)
        finally:
            c.run("systemctl", "stop", unit, timeout=120)
        assert mounted(c, mnt) == ""


def test_notify_service(container, image, nginx):
    """sqfs-lazy-mount@NAME.service: Type=notify, so start returns after
    READY=1, when the mount already answers; stop is clean."""
    c = container
    c.run("mkdir", "-p", "/etc/sqfs-lazy")
    for name, img in (("web", nginx.url(image[0])),
                      ("local", "/srv/img/" + os.path.basename(image[0]))):
        mnt = "/srv/svc-" + name
        # the installed example settings, IMAGE and MOUNTPOINT replaced
        conf = [l for l in example(c, "base.conf").splitlines()
                if not l.startswith(("IMAGE=", "MOUNTPOINT="))]
        assert "OPTIONS=max_connections=8,loglevel=info" in conf, conf
        c.write("/etc/sqfs-lazy/%s.conf" % name, "\n".join(
            conf + ["IMAGE=" + img, "MOUNTPOINT=" + mnt]) + "\n")
        unit = "sqfs-lazy-mount@%s.service" % name
        c.run("systemctl", "start", unit, timeout=120)
        try:
            assert mounted(c, mnt) == "fuse.sqfs-lazy"
            assert read_sums(c, mnt) == expect(image)
            status = c.run("systemctl", "show", "-p", "StatusText",
                           "--value", unit).stdout
            assert status.startswith("serving ") and mnt in status, status
        finally:
            c.run("systemctl", "stop", unit, timeout=120)
        assert mounted(c, mnt) == ""
        show = c.run("systemctl", "show", "-p", "Result,ExecMainStatus",
                     unit).stdout
        assert "Result=success" in show and "ExecMainStatus=0" in show, show
        # foreground: stderr lines in the journal, one per event
        j = c.run("journalctl", "-q", "-o", "cat", "-u", unit).stdout
        assert "%s: mounted" % mnt in j and "%s: unmounting" % mnt in j, j


def service_stats(c, mnt):
    """--stats of the mount, from inside the container."""
    r = c.run("sqfs-lazy-mount", "--stats", mnt, timeout=30)
    return {k: int(v) for k, v in (l.split() for l in r.stdout.splitlines())}


def unit_show(c, unit, *props):
    r = c.run("systemctl", "show", "-p", ",".join(props), unit)
    return dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)


def wait_serving(c, mnt, old_pid):
    """Wait until a daemon other than old_pid serves mnt; its stats."""
    deadline = time.monotonic() + 60
    while True:
        r = c.run("sqfs-lazy-mount", "--stats", mnt, timeout=30, check=False)
        if r.returncode == 0:
            s = {k: int(v) for k, v in
                 (l.split() for l in r.stdout.splitlines())}
            if s["daemon_pid"] != old_pid:
                return s
        assert time.monotonic() < deadline, (
            r.stderr, c.run("journalctl", "-q", "-n", "40",
                            "--no-pager").stdout)
        time.sleep(0.1)


def test_takeover_service(container, image, nginx):
    """OPTIONS=takeover in sqfs-lazy-mount@NAME.service: the unit's main
    process is a keeper, the daemon its child, so a kill -9 of the daemon
    is a takeover, not the end of the unit; `systemctl reload` is a live
    upgrade; stop is clean and leaves no process."""
    c = container
    mnt = "/srv/svc-tk"
    unit = "sqfs-lazy-mount@tk.service"
    c.run("mkdir", "-p", "/etc/sqfs-lazy")
    c.write("/etc/sqfs-lazy/tk.conf",
            "IMAGE=%s\nMOUNTPOINT=%s\nOPTIONS=takeover,loglevel=info\n" % (
                nginx.url(image[0]), mnt))
    c.run("systemctl", "start", unit, timeout=120)
    try:
        assert read_sums(c, mnt) == expect(image)
        first = service_stats(c, mnt)
        main = int(unit_show(c, unit, "MainPID")["MainPID"])
        # the main process is the keeper, not the daemon
        assert main not in (0, first["daemon_pid"]), (main, first)
        assert c.run("cat", "/proc/%d/comm" % main).stdout.strip() == \
            "sqfs-lazy-keep"

        assert first["takeover_ready"] == 1, first

        c.run("sh", "-c", "kill -9 %d" % first["daemon_pid"])
        after_kill = wait_serving(c, mnt, first["daemon_pid"])
        assert after_kill["takeovers_crash"] == 1, after_kill
        show = unit_show(c, unit, "ActiveState", "MainPID")
        assert show == {"ActiveState": "active", "MainPID": str(main)}, show
        assert mounted(c, mnt) == "fuse.sqfs-lazy"
        assert read_sums(c, mnt) == expect(image)

        c.run("systemctl", "reload", unit, timeout=120)
        upgraded = wait_serving(c, mnt, after_kill["daemon_pid"])
        assert upgraded["takeovers_upgrade"] == 1, upgraded
        assert upgraded["takeovers"] == 2, upgraded
        show = unit_show(c, unit, "ActiveState")
        assert show["ActiveState"] == "active", show
        assert read_sums(c, mnt) == expect(image)
        j = c.run("journalctl", "-q", "-o", "cat", "-u", unit).stdout
        assert "after its daemon died" in j and "(upgrade)" in j, j
    finally:
        c.run("systemctl", "stop", unit, timeout=120)
    assert mounted(c, mnt) == ""
    show = unit_show(c, unit, "Result", "ExecMainStatus")
    assert show == {"Result": "success", "ExecMainStatus": "0"}, show
    # the guard and every daemon gone (minbase has no pgrep)
    left = c.run("sh", "-c", "cat /proc/[0-9]*/comm", check=False).stdout
    assert "sqfs-lazy" not in left, left


def test_reload_without_takeover(container, image, nginx):
    """A reload of a unit with OPTIONS=takeover=off fails with one line
    and leaves the mount served by the same daemon."""
    c = container
    mnt = "/srv/svc-notk"
    unit = "sqfs-lazy-mount@notk.service"
    c.run("mkdir", "-p", "/etc/sqfs-lazy")
    c.write("/etc/sqfs-lazy/notk.conf",
            "IMAGE=%s\nMOUNTPOINT=%s\nOPTIONS=takeover=off\n" % (
                nginx.url(image[0]), mnt))
    c.run("systemctl", "start", unit, timeout=120)
    try:
        before = service_stats(c, mnt)["daemon_pid"]
        r = c.run("systemctl", "reload", unit, timeout=120, check=False)
        assert r.returncode != 0
        j = c.run("journalctl", "-q", "-o", "cat", "-u", unit).stdout
        assert "takeover" in j, j
        assert service_stats(c, mnt)["daemon_pid"] == before
        assert unit_show(c, unit, "ActiveState")["ActiveState"] == "active"
        assert read_sums(c, mnt) == expect(image)
    finally:
        c.run("systemctl", "stop", unit, timeout=120)
    assert mounted(c, mnt) == ""
