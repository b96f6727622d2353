"""Fixtures for the sqfs-lazy integration suite.

Environment:
  LSQ_BUILD_DIR   meson build root; the daemon is $LSQ_BUILD_DIR/sqfs-lazy-mount
  LSQ_SOURCE_DIR  source root (optional)
  LSQ_MOUNT_CMD   override the FUSE mount command (e.g. "squashfuse_ll -f")
                  to exercise the harness against another implementation
  LSQ_VIA_HTTP    when 1, nginx on 127.0.0.1 serves the images and every
                  FUSE mount uses http://127.0.0.1:PORT/<image> (kernel
                  mounts stay on the files)
A missing prerequisite skips; tests/run.sh fails every skip unless
LSQ_ALLOW_SKIPS=1 (docs/testing.md).
"""

import os
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import images  # noqa: E402
import servers  # noqa: E402
import treebuilder  # noqa: E402
import util  # noqa: E402

VIA_HTTP = os.environ.get("LSQ_VIA_HTTP", "") not in ("", "0")

# The checks of the HTTP mode itself exist only in that mode (no skips
# in file mode).
collect_ignore = [] if VIA_HTTP else ["test_http_mode.py"]
# The corruption corpus is about the image parser: one pass over local
# files is enough, the HTTP pass would double its cost for nothing new.
if VIA_HTTP:
    collect_ignore.append("test_corruption_corpus.py")


# --------------------------------------------------------------------------
# Reporting: attach daemon stderr to failing tests
# --------------------------------------------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    util.LOG_STACK[:] = [m for m in util.LOG_STACK
                         if not getattr(m, "stopped", False)]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        seen = set()
        for m in util.LOG_STACK:
            if id(m) in seen:
                continue
            seen.add(id(m))
            text = m.log()
            lines = text.splitlines()
            if len(lines) > 200:
                text = "\n".join(["... (%d lines omitted)" % (len(lines) - 200)]
                                 + lines[-200:])
            rep.sections.append(("daemon stderr: %s [%s]" % (
                m.name, " ".join(map(str, m.cmd or []))), text or "(empty)"))


def pytest_report_header(config):
    ov = util.mount_cmd_override()
    return ["sqfs-lazy: FUSE mount command: %s" %
            (" ".join(ov) if ov else util.daemon_path() or "(LSQ_BUILD_DIR "
             "unset)"),
            "sqfs-lazy: images mounted %s" % (
                "over HTTP from nginx on 127.0.0.1 (LSQ_VIA_HTTP=1)"
                if VIA_HTTP else "from local files"),
            "sqfs-lazy: a missing prerequisite skips; tests/run.sh fails "
            "skips unless LSQ_ALLOW_SKIPS=1"]


# --------------------------------------------------------------------------
# Session: work dir, tree, images
# --------------------------------------------------------------------------

@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    base = tmp_path_factory.mktemp("lsq")
    yield base
    # Belt and braces: nothing we mounted may outlive the session.
    prefix = str(base) + os.sep
    for e in reversed(util.proc_mount_entries()):
        if e["mountpoint"].startswith(prefix):
            util.force_unmount(e["mountpoint"])


@pytest.fixture(scope="session")
def tree(workdir):
    util.require_root()
    root = str(workdir / "tree")
    return treebuilder.build_tree(root, with_huge=True)


def image_dir(workdir):
    """Where the image cache writes its images (nginx's root in HTTP
    mode)."""
    d = workdir / "images"
    d.mkdir(exist_ok=True)
    return d


@pytest.fixture(scope="session", autouse=True)
def http_server(workdir):
    """LSQ_VIA_HTTP=1: one nginx for the session, serving image_dir();
    util.image_source() then turns image paths into its URLs.  Stopped
    (and util.HTTP reset) at the end of the session."""
    if not VIA_HTTP:
        yield None
        return
    util.require(not util.using_override(),
                 "LSQ_VIA_HTTP needs sqfs-lazy-mount, not LSQ_MOUNT_CMD")
    util.require_daemon()
    v = util.run([util.daemon_path(), "--version"], timeout=20)
    util.require(b"http: libcurl" in v.stdout,
                 "sqfs-lazy-mount built without HTTP support (libcurl)")
    server = servers.start_nginx(workdir / "nginx", image_dir(workdir))
    _SESSION["http"] = server
    util.HTTP = server
    try:
        yield server
    finally:
        util.HTTP = None
        server.stop()


_SESSION = {}


def pytest_terminal_summary(terminalreporter):
    server = _SESSION.get("http")
    if server is None:
        return
    per = server.summary()
    tr = terminalreporter
    tr.section("sqfs-lazy: served by nginx (access log %s)" % server.access)
    total_req = total_bytes = 0
    for name in per:    # in order of first request
        req, sent, statuses = per[name]
        total_req += req
        total_bytes += sent
        size = ""
        p = os.path.join(server.root, name)
        if os.path.exists(p):
            size = " of a %d-byte image" % os.path.getsize(p)
        tr.write_line("%-40s %6d requests %12d bytes sent%s; status %s" % (
            name, req, sent, size, " ".join(
                "%d x%d" % kv for kv in sorted(statuses.items()))))
    tr.write_line("total: %d requests, %d bytes sent" % (total_req,
                                                          total_bytes))


class ImageCache:
    """Packs images on first use; safe to call from several tests."""

    def __init__(self, workdir, tree):
        self.dir = image_dir(workdir)
        self.tree = tree
        self.built = {}
        self.lock = threading.Lock()
        self.times = {}

    def path(self, name):
        spec = images.BY_NAME[name]
        with self.lock:
            if name not in self.built:
                if spec.tool == "mksquashfs":
                    util.require_mksquashfs()
                else:
                    util.require(util.have_tool(spec.tool),
                                 "%s not installed" % spec.tool)
                out = str(self.dir / (name + ".sqfs"))
                t = time.monotonic()
                util.run(images.pack_command(spec, self.tree.root, out),
                         timeout=600)
                self.times[name] = time.monotonic() - t
                self.built[name] = out
            return self.built[name]


@pytest.fixture(scope="session")
def image_cache(workdir, tree):
    return ImageCache(workdir, tree)


# --------------------------------------------------------------------------
# Mount helpers
# --------------------------------------------------------------------------

@pytest.fixture
def mounter(workdir, request):
    m = util.Mounter(workdir / "mnt" / request.node.name.replace("/", "_")[:80])
    try:
        yield m
    finally:
        m.cleanup()


@pytest.fixture(scope="module")
def module_mounter(workdir, request):
    m = util.Mounter(workdir / "mnt" / ("mod-" + request.module.__name__))
    try:
        yield m
    finally:
        m.cleanup()
