"""Fixtures for the sqfs-lazy integration suite.

Environment:
  LSQ_BUILD_DIR   meson build root; the daemon is $LSQ_BUILD_DIR/sqfs-lazy-mount
  LSQ_SOURCE_DIR  source root (optional)
  LSQ_MOUNT_CMD   override the FUSE mount command (e.g. "squashfuse_ll -f")
                  to exercise the harness against another implementation
  CI              when set, missing prerequisites fail instead of skipping
"""

import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import images  # noqa: E402
import treebuilder  # noqa: E402
import util  # noqa: E402


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
            "sqfs-lazy: CI=%s (missing prerequisites %s)" % (
                os.environ.get("CI", ""),
                "fail" if os.environ.get("CI") else "skip")]


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


class ImageCache:
    """Packs images on first use; safe to call from several tests."""

    def __init__(self, workdir, tree):
        self.dir = workdir / "images"
        self.dir.mkdir(exist_ok=True)
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
