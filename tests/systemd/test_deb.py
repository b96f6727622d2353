"""The Debian packages (debian/): built with dpkg-buildpackage, checked by
lintian, then installed, used, upgraded, removed and purged in a fresh
Debian 12 minbase root booted with systemd as PID 1.

Two versions are built, once each, with `dpkg-buildpackage -us -uc -b` in
copies of the source tree under a tmp dir (the checkout is never written):
0.1.0-1 from debian/ as it is, and 0.1.0-2, the same tree with one more
debian/changelog entry. A third copy whose changelog says another upstream
version must stop the build (the version lives in meson.build only).

The container is test_container.py's: make_rootfs.sh's cached rootfs,
booted by its Container class with --volatile=overlay (nothing reaches the
cache), the .debs bind-mounted in and copied inside; nginx on the host
serves the test image (the container shares the network). The tests run
in order on that one container: install, mount(8), the unit, upgrade,
remove and purge; each checks first that the one before left the state it
needs.

/etc/sqfs-lazy: the package ships the directory and keys/, and no conffile
(every file there is the admin's: a NAME.conf makes a startable instance,
a keys/*.pem is trusted by verify=auto). Debian never deletes an admin's
files, so after remove and purge the test asserts that the files it
created there are the only things left; the admin then deletes them, and a
second install, remove and purge with /etc/sqfs-lazy untouched asserts the
directory itself is gone.

A missing tool skips through require() (tests/run.sh counts a skip as a
failure); a build or a boot that fails fails every test of the module with
one line.
"""

import email.utils
import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import require, require_mount_env, source_dir
from test_container import (BootError, Container, expect, last_line,
                            make_rootfs, mounted, read_sums)

VERSION1, VERSION2 = "0.1.0-1", "0.1.0-2"
PACKAGES = ("sqfs-lazy", "sqfs-lazy-tools")
# what the apt plan must not bring: compilers and development packages
BUILD_ONLY = re.compile(r"(-dev$|^(gcc|cpp|clang|g\+\+)(-[0-9.]+)?$|"
                        r"^build-essential$|^binutils$|^make$)")


def tree_files(src):
    """The source tree's files: git's tracked and untracked ones, without
    what .gitignore names (build dirs); a plain walk without git."""
    try:
        r = subprocess.run(["git", "-C", src, "ls-files", "-z", "--cached",
                            "--others", "--exclude-standard"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            return [n for n in r.stdout.split("\0") if n]
    except OSError:
        pass  # no git
    out = []
    for dirpath, dirs, files in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        if rel == ".":
            dirs[:] = [d for d in dirs if not d.startswith(
                ("build", "obj-", ".git"))]
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return out


def copy_tree(src, dst):
    for name in tree_files(src):
        s = os.path.join(src, name)
        if not os.path.lexists(s) or (os.path.isdir(s) and
                                      not os.path.islink(s)):
            continue  # deleted in the work tree, or a submodule
        d = os.path.join(dst, name)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy2(s, d, follow_symlinks=False)


def add_changelog_entry(tree, version, text):
    """A new top entry in debian/changelog, maintainer as the last one."""
    path = os.path.join(tree, "debian", "changelog")
    old = open(path).read()
    who = re.search(r"^ -- (.+?)  ", old, re.M).group(1)
    entry = ("sqfs-lazy (%s) unstable; urgency=medium\n\n  * %s\n\n"
             " -- %s  %s\n\n" % (version, text, who,
                                 email.utils.formatdate(usegmt=False)))
    with open(path, "w") as f:
        f.write(entry + old)


def dpkg_buildpackage(tree, log):
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=2")
    for k in ("MAKEFLAGS", "MFLAGS", "DEB_BUILD_PROFILES"):
        env.pop(k, None)
    with open(log, "wb") as f:
        return subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"],
                              cwd=tree, stdout=f, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, env=env,
                              timeout=1500).returncode


def log_tail(log, n=15):
    with open(log, errors="replace") as f:
        return "".join(f.readlines()[-n:])


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    """{version: {package: .deb path}} plus the .changes files, each
    version built once."""
    for tool in ("dpkg-buildpackage", "dh", "fakeroot", "meson"):
        require(shutil.which(tool) is not None, tool + " missing")
    work = tmp_path_factory.mktemp("deb")
    out = {}
    for version in (VERSION1, VERSION2):
        top = work / version
        tree = top / "sqfs-lazy-0.1.0"
        copy_tree(source_dir(), str(tree))
        if version != VERSION1:
            add_changelog_entry(str(tree), version,
                                "Same tree, next packaging revision.")
        log = str(top / "build.log")
        rc = dpkg_buildpackage(str(tree), log)
        if rc != 0:
            pytest.fail("dpkg-buildpackage of %s failed (status %d; log %s):"
                        "\n%s" % (version, rc, log, log_tail(log)),
                        pytrace=False)
        shutil.rmtree(tree)  # the build tree is large; the .debs stay
        found = {}
        for p in glob.glob(str(top / "*.deb")):
            name = os.path.basename(p).split("_")[0]
            found[name] = p
        changes = glob.glob(str(top / "*.changes"))
        out[version] = {"debs": found, "changes": changes, "dir": str(top)}
    return out


def deb_field(deb, field):
    return subprocess.run(["dpkg-deb", "-f", deb, field], capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()


def deb_paths(deb):
    r = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True,
                       text=True, timeout=60, check=True)
    # "drwxr-xr-x root/root 0 2026-11-27 02:00 ./usr/bin/" (links: "-> x")
    return {line.split(None, 5)[5].split(" -> ")[0].lstrip(".").rstrip("/")
            or "/" for line in r.stdout.splitlines()}


def test_packages_split(debs):
    """Four packages per version: the daemon side, the tools, and their
    automatic -dbgsym; each file in the package it belongs to; runtime
    dependencies from the libraries, plus fuse3 and the dlopen()ed
    libcurl4, never a -dev."""
    for version in (VERSION1, VERSION2):
        d = debs[version]["debs"]
        assert sorted(d) == ["sqfs-lazy", "sqfs-lazy-dbgsym",
                             "sqfs-lazy-tools", "sqfs-lazy-tools-dbgsym"], d
        for name, deb in d.items():
            assert deb_field(deb, "Version") == version, (deb, version)
    d = debs[VERSION1]["debs"]
    daemon = deb_paths(d["sqfs-lazy"])
    tools = deb_paths(d["sqfs-lazy-tools"])
    for p in ("/usr/bin/sqfs-lazy-mount", "/usr/bin/sqfs-lazy-cat",
              "/sbin/mount.sqfs-lazy",
              "/lib/systemd/system/sqfs-lazy-mount@.service",
              "/usr/share/man/man1/sqfs-lazy-mount.1.gz",
              "/usr/share/man/man8/mount.sqfs-lazy.8.gz",
              "/usr/share/doc/sqfs-lazy/examples/base.conf",
              "/usr/share/doc/sqfs-lazy/examples/fstab",
              "/usr/share/doc/sqfs-lazy/examples/srv-images.mount",
              "/etc/sqfs-lazy", "/etc/sqfs-lazy/keys"):
        assert p in daemon, p
    for p in ("/usr/bin/sqfs-lazy-pack", "/usr/bin/sqfs-lazy-sign",
              "/usr/share/man/man1/sqfs-lazy-pack.1.gz",
              "/usr/share/man/man1/sqfs-lazy-sign.1.gz"):
        assert p in tools and p not in daemon, p
    for p in ("/usr/bin/sqfs-lazy-mount", "/sbin/mount.sqfs-lazy"):
        assert p not in tools, p
    # no example unit beside the template; nothing in /etc but the dirs
    assert not [p for p in daemon if p.startswith("/lib/systemd/system/")
                and not p.endswith("@.service")
                and p != "/lib/systemd/system"], daemon
    assert {p for p in daemon | tools if p.startswith("/etc")} == {
        "/etc", "/etc/sqfs-lazy", "/etc/sqfs-lazy/keys"}
    assert deb_field(d["sqfs-lazy"], "Conffiles") == ""
    # debug symbols: the build ids of both packages' binaries
    for pkg in ("sqfs-lazy-dbgsym", "sqfs-lazy-tools-dbgsym"):
        dbg = [p for p in deb_paths(d[pkg]) if p.endswith(".debug") and
               p.startswith("/usr/lib/debug/.build-id/")]
        assert len(dbg) == 2, (pkg, dbg)  # two binaries each
    dep = deb_field(d["sqfs-lazy"], "Depends")
    names = [a.split()[0] for a in re.split(r"[,|]", dep)]
    for lib in ("libfuse3-3", "libc6", "libssl3", "fuse3", "libcurl4",
                "liburing2"):
        assert lib in names, (lib, dep)
    tdep = deb_field(d["sqfs-lazy-tools"], "Depends")
    tnames = [a.split()[0] for a in re.split(r"[,|]", tdep)]
    assert "libarchive13" in tnames and "fuse3" not in tnames, tdep
    assert "libarchive13" not in names, dep
    assert not [n for n in names + tnames if BUILD_ONLY.search(n)]


def test_version_drift_stops_build(tmp_path):
    """debian/changelog's upstream version must be meson's project
    version: a changelog saying 0.1.1 stops the build at configure."""
    for tool in ("dpkg-buildpackage", "dh", "meson"):
        require(shutil.which(tool) is not None, tool + " missing")
    tree = tmp_path / "sqfs-lazy-0.1.1"
    copy_tree(source_dir(), str(tree))
    add_changelog_entry(str(tree), "0.1.1-1", "Upstream version not in "
                        "meson.build.")
    log = str(tmp_path / "build.log")
    rc = dpkg_buildpackage(str(tree), log)
    text = open(log, errors="replace").read()
    assert rc != 0, log_tail(log)
    assert ("debian/changelog says 0.1.1, meson.build says 0.1.0"
            in text), log_tail(log)
    assert not glob.glob(str(tmp_path / "*.deb"))


def lintian(changes, *opts):
    r = subprocess.run(["lintian", "--tag-display-limit", "0"] +
                       list(opts) + [changes], capture_output=True,
                       text=True, timeout=900)
    return r, r.stdout.splitlines()


def test_lintian(debs):
    """No error and no warning, pedantic and info tags shown: each warning
    kept is overridden in debian/*.lintian-overrides under a comment line
    saying why, and 0.1.0-1 uses every override (an override that matches
    nothing is stale). 0.1.0-2 has two changelog entries, so its
    initial-upload override is rightly unused there."""
    require(shutil.which("lintian") is not None, "lintian missing")
    for version in (VERSION1, VERSION2):
        changes = debs[version]["changes"]
        assert len(changes) == 1, changes
        r, lines = lintian(changes[0], "--display-info", "--pedantic")
        bad = [l for l in lines if l.startswith(("E:", "W:")) or
               "mismatched-override" in l or
               (version == VERSION1 and "unused-override" in l)]
        assert not bad, "\n".join(bad)
        assert r.returncode == 0, (r.returncode, r.stdout[-2000:],
                                   r.stderr)
    # the overrides are in use: without them the warnings come back
    r, lines = lintian(debs[VERSION1]["changes"][0], "--no-override")
    tags = {l.split()[2] for l in lines if l.startswith("W:")}
    assert {"no-manual-page", "initial-upload-closes-no-bugs"} <= tags, lines


def apt(c, *args, timeout=300, check=True):
    return c.run("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q",
                 "-o", "Dpkg::Use-Pty=0", *args, timeout=timeout,
                 check=check)


def debs_in(version):
    """The two packages' .debs inside the container (no -dbgsym)."""
    arch = subprocess.run(["dpkg", "--print-architecture"],
                          capture_output=True, text=True,
                          timeout=30).stdout.strip()
    return ["/var/tmp/debs-%s/%s_%s_%s.deb" % (version, p, version, arch)
            for p in PACKAGES]


@pytest.fixture(scope="module")
def container(tmp_path_factory, image, debs):
    """The booted container with both versions' .debs copied in and apt's
    lists updated; nothing of ours installed yet."""
    require_mount_env()
    for tool in ("systemd-nspawn", "debootstrap", "nsenter"):
        require(shutil.which(tool) is not None, tool + " missing")
    root = make_rootfs()
    work = tmp_path_factory.mktemp("deb-container")
    os.chmod(work, 0o755)
    stage = work / "stage"
    for version in (VERSION1, VERSION2):
        d = stage / version
        d.mkdir(parents=True)
        for p in PACKAGES:
            shutil.copy(debs[version]["debs"][p], str(d))
    for dirpath, dirs, files in os.walk(stage):
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o644)
    c = Container(root, str(stage), os.path.dirname(image[0]),
                  str(work / "nspawn.log"))
    c.name = "sqfs-lazy-deb-%d" % os.getpid()
    try:
        failure = None
        try:
            c.boot()
        except BootError as e:
            failure = "the container could not boot: %s" % e
        if failure:
            pytest.fail(failure, pytrace=False)
        for version in (VERSION1, VERSION2):
            c.run("cp", "-r", "/mnt/stage/" + version,
                  "/var/tmp/debs-" + version)
        r = apt(c, "update", check=False)
        if r.returncode != 0:
            pytest.fail("apt-get update in the container failed: " +
                        last_line(r.stdout + r.stderr), pytrace=False)
        yield c
    finally:
        # a mount left by a failed test goes with the container; unmount
        # first so no daemon holds it while nspawn halts
        if c.pid1 is not None and c.proc.poll() is None:
            for mnt in ("/mnt", "/srv/deb-web"):
                try:
                    c.run("umount", "-l", mnt, check=False, timeout=30)
                except subprocess.TimeoutExpired:
                    pass
        c.stop()


def status(c, pkg):
    """dpkg's status abbreviation ("ii ", "rc ", "pn ") and version of
    pkg, ("", "") when dpkg has never heard of it."""
    r = c.run("dpkg-query", "-W", "-f", "${db:Status-Abbrev}|${Version}",
              pkg, check=False)
    if r.returncode != 0:
        return "", ""
    abbrev, _, version = r.stdout.partition("|")
    return abbrev, version


def need(c, version):
    """Both packages installed at version, as the earlier test left them."""
    for p in PACKAGES:
        assert status(c, p) == ("ii ", version), (
            "%s is not installed at %s (an earlier test failed?): %r" % (
                p, version, status(c, p)))


def plan(c, debs_paths):
    """Package names apt would install for these .debs."""
    r = apt(c, "install", "-s", *debs_paths)
    return [l.split()[1] for l in r.stdout.splitlines()
            if l.startswith("Inst ")]


def our_units(c):
    r = c.run("systemctl", "list-units", "--all", "--plain", "--no-legend",
              "sqfs-lazy*")
    return [l.split()[0] for l in r.stdout.splitlines() if l.strip()]


def test_install(container):
    """apt installs the two .debs with runtime libraries only; no unit is
    enabled or started; the daemon prints the packaged version."""
    c = container
    assert status(c, "sqfs-lazy")[0] in ("", "pn ", "un ")
    want = plan(c, debs_in(VERSION1))
    assert set(PACKAGES) <= set(want), want
    bad = [p for p in want if BUILD_ONLY.search(p)]
    assert not bad, "the plan brings build tools: %s (plan: %s)" % (bad, want)
    # the minbase root has fuse3 and libcurl4 already: the rest are libraries
    other = [p for p in want if p not in PACKAGES and not p.startswith("lib")]
    assert not other, "not a runtime library: %s (plan: %s)" % (other, want)
    apt(c, "install", "-y", *debs_in(VERSION1))
    need(c, VERSION1)
    out = c.run("sqfs-lazy-mount", "--version").stdout.splitlines()[0]
    assert out == "sqfs-lazy-mount 0.1.0", out
    c.run("test", "-x", "/sbin/mount.sqfs-lazy")
    c.run("test", "-x", "/usr/bin/sqfs-lazy-pack")
    c.run("test", "-d", "/etc/sqfs-lazy/keys")
    c.run("test", "-s", "/usr/share/doc/sqfs-lazy/examples/base.conf")
    c.run("test", "-e", "/usr/share/man/man8/mount.sqfs-lazy.8.gz")
    # nothing enabled, nothing started: there is no default instance
    assert our_units(c) == [], our_units(c)
    wants = c.run("sh", "-c", "ls /etc/systemd/system/*.wants/ "
                  "2>/dev/null || true").stdout
    assert "sqfs-lazy" not in wants, wants
    r = c.run("systemd-analyze", "verify", "--man=no",
              "/lib/systemd/system/sqfs-lazy-mount@.service", check=False)
    assert r.returncode == 0, r.stderr


def test_mount_type(container, image, nginx):
    """mount -t sqfs-lazy URL /mnt: the packaged helper in /sbin starts the
    packaged daemon; the files read back as in the source tree."""
    c = container
    need(c, VERSION1)
    url = nginx.url(image[0])
    c.run("mount", "-t", "sqfs-lazy", url, "/mnt", "-o", "ro", timeout=120)
    try:
        assert mounted(c, "/mnt") == "fuse.sqfs-lazy"
        assert read_sums(c, "/mnt") == expect(image)
    finally:
        r = c.run("umount", "/mnt", check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    assert mounted(c, "/mnt") == ""


def write_conf(c, name, url, mnt):
    c.write("/etc/sqfs-lazy/%s.conf" % name,
            "IMAGE=%s\nMOUNTPOINT=%s\nOPTIONS=loglevel=info\n" % (url, mnt))


def start_unit(c, name, mnt, image):
    unit = "sqfs-lazy-mount@%s.service" % name
    c.run("systemctl", "start", unit, timeout=120)
    assert mounted(c, mnt) == "fuse.sqfs-lazy"
    assert read_sums(c, mnt) == expect(image)
    return unit


def stop_unit(c, unit, mnt):
    c.run("systemctl", "stop", unit, timeout=120)
    assert mounted(c, mnt) == ""
    show = c.run("systemctl", "show", "-p", "Result,ExecMainStatus",
                 unit).stdout
    assert "Result=success" in show and "ExecMainStatus=0" in show, show


def test_unit(container, image, nginx):
    """/etc/sqfs-lazy/NAME.conf + systemctl start sqfs-lazy-mount@NAME:
    the packaged template mounts, answers, and stops cleanly."""
    c = container
    need(c, VERSION1)
    mnt = "/srv/deb-web"
    write_conf(c, "web", nginx.url(image[0]), mnt)
    unit = start_unit(c, "web", mnt, image)
    try:
        st = c.run("systemctl", "show", "-p", "StatusText", "--value",
                   unit).stdout
        assert st.startswith("serving ") and mnt in st, st
        frag = c.run("systemctl", "show", "-p", "FragmentPath", "--value",
                     unit).stdout.strip()
        assert frag == "/lib/systemd/system/sqfs-lazy-mount@.service", frag
    finally:
        stop_unit(c, unit, mnt)


def pubkey():
    """An Ed25519 public key in PEM, as an admin would put in keys/."""
    require(shutil.which("openssl") is not None, "openssl missing")
    priv = subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519"],
                          capture_output=True, check=True, timeout=30).stdout
    return subprocess.run(["openssl", "pkey", "-pubout"], input=priv,
                          capture_output=True, check=True,
                          timeout=30).stdout.decode()


def test_upgrade(container, image, nginx):
    """0.1.0-1 -> 0.1.0-2 with apt: the admin's changes in /etc/sqfs-lazy
    (an edited NAME.conf, a key added to keys/) are kept, and a running
    instance is neither stopped nor restarted by the upgrade."""
    c = container
    need(c, VERSION1)
    mnt = "/srv/deb-web"
    write_conf(c, "web", nginx.url(image[0]), mnt)
    conf = c.run("cat", "/etc/sqfs-lazy/web.conf").stdout + \
        "# edited by the admin before the upgrade\n"
    c.write("/etc/sqfs-lazy/web.conf", conf)
    unit = start_unit(c, "web", mnt, image)
    try:
        pid = c.run("systemctl", "show", "-p", "MainPID", "--value",
                    unit).stdout.strip()
        assert pid not in ("", "0"), pid
        key = pubkey()
        c.write("/etc/sqfs-lazy/keys/admin.pem", key)
        want = plan(c, debs_in(VERSION2))
        assert sorted(want) == sorted(PACKAGES), want
        apt(c, "install", "-y", *debs_in(VERSION2))
        need(c, VERSION2)
        s = c.run("dpkg", "-s", "sqfs-lazy").stdout
        assert "\nVersion: %s\n" % VERSION2 in s, s
        assert c.run("cat", "/etc/sqfs-lazy/web.conf").stdout == conf
        assert c.run("cat", "/etc/sqfs-lazy/keys/admin.pem").stdout == key
        assert c.run("systemctl", "show", "-p", "MainPID", "--value",
                     unit).stdout.strip() == pid
        assert c.run("systemctl", "is-active", unit,
                     check=False).stdout.strip() == "active"
        assert read_sums(c, mnt) == expect(image)
    finally:
        stop_unit(c, unit, mnt)


def listed(c):
    """Every path the two packages install (dpkg -L), installed first."""
    r = c.run("dpkg", "-L", *PACKAGES)
    return sorted({l for l in r.stdout.splitlines()
                   if l.startswith("/") and l != "/."})


def leftovers(c, paths):
    """The listed paths that still exist and that no installed package
    owns: our files, or our directories."""
    r = c.run("sh", "-c", 'for p; do [ -e "$p" ] || [ -L "$p" ] && '
              'echo "$p"; done; true', "sh", *paths)
    left = r.stdout.split()
    if not left:
        return []
    r = c.run("dpkg-query", "-S", *left, check=False)
    owned = set()
    for line in r.stdout.splitlines():
        pkgs, _, path = line.partition(": ")
        if not set(p.strip() for p in pkgs.split(",")) & set(PACKAGES):
            owned.add(path.strip())
    return [p for p in left if p not in owned]


def named_ours(c):
    """Paths on the root file system named after us, anywhere (a file a
    maintainer script made is in no dpkg -L); /var/tmp holds the .debs."""
    r = c.run("find", "/", "-xdev", "-name", "*sqfs-lazy*", "-not",
              "-path", "/var/tmp/*", timeout=120)
    return sorted(r.stdout.split())


def ours_in_dpkg_l(c):
    out = c.run("dpkg", "-l").stdout
    return [l for l in out.splitlines() if re.search(r"\ssqfs-lazy", l)]


def remove_purge(c):
    apt(c, "remove", "-y", *PACKAGES)
    for p in PACKAGES:
        assert status(c, p)[0][:2] in ("rc", "pn", "un", ""), status(c, p)
    apt(c, "purge", "-y", *PACKAGES)


def test_remove_and_purge(container, image, nginx):
    """apt-get remove stops a running instance and removes everything but
    the admin's files; purge leaves nothing of ours: dpkg -l does not list
    the packages, no file or directory they listed remains (directories
    other packages own excepted), and the admin's files in /etc/sqfs-lazy
    are the only thing there, and nothing else named after us is left on
    the root file system (find). With no admin file, /etc/sqfs-lazy goes
    too and nothing named after us remains anywhere."""
    c = container
    need(c, VERSION2)
    named = named_ours(c)
    assert "/usr/bin/sqfs-lazy-mount" in named, named
    paths = listed(c)
    assert "/etc/sqfs-lazy/keys" in paths and "/sbin/mount.sqfs-lazy" in paths
    mnt = "/srv/deb-web"
    c.run("test", "-f", "/etc/sqfs-lazy/web.conf")
    c.run("test", "-f", "/etc/sqfs-lazy/keys/admin.pem")
    unit = start_unit(c, "web", mnt, image)
    conf = c.run("cat", "/etc/sqfs-lazy/web.conf").stdout
    remove_purge(c)
    # prerm stopped the instance; its mount went with it
    assert c.run("systemctl", "is-active", unit,
                 check=False).stdout.strip() != "active"
    assert mounted(c, mnt) == ""
    assert ours_in_dpkg_l(c) == [], ours_in_dpkg_l(c)
    # Debian keeps the admin's files: exactly them, in our directories
    mine = {"/etc/sqfs-lazy", "/etc/sqfs-lazy/keys",
            "/etc/sqfs-lazy/web.conf", "/etc/sqfs-lazy/keys/admin.pem"}
    left = leftovers(c, paths)
    assert set(left) <= {"/etc/sqfs-lazy", "/etc/sqfs-lazy/keys"}, left
    found = set(c.run("find", "/etc/sqfs-lazy").stdout.split())
    assert found == mine, found
    assert named_ours(c) == ["/etc/sqfs-lazy"], named_ours(c)
    assert c.run("cat", "/etc/sqfs-lazy/web.conf").stdout == conf
    # the admin deletes their files; a clean install, remove and purge
    # then leaves no trace at all
    c.run("rm", "/etc/sqfs-lazy/web.conf", "/etc/sqfs-lazy/keys/admin.pem")
    apt(c, "install", "-y", *debs_in(VERSION2))
    need(c, VERSION2)
    assert listed(c) == paths
    remove_purge(c)
    assert ours_in_dpkg_l(c) == [], ours_in_dpkg_l(c)
    assert leftovers(c, paths) == []
    assert named_ours(c) == [], named_ours(c)
    c.run("test", "!", "-e", "/etc/sqfs-lazy")
    c.run("test", "!", "-e", "/sbin/mount.sqfs-lazy")
    c.run("test", "!", "-e", "/lib/systemd/system/sqfs-lazy-mount@.service")
