"""The man pages: built by meson from docs/man/*.scd with scdoc, rendered
by man(1) without a groff warning, and listing every option of --help."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import build_dir, daemon, require, source_dir

PAGES = ["sqfs-lazy-mount.1", "sqfs-lazy-pack.1"]


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_warnings(page):
    require(shutil.which("man") is not None, "man missing")
    p = os.path.join(build_dir(), "docs", "man", page)
    require(os.path.exists(p), "man page not built (scdoc missing?): " + p)
    r = subprocess.run(["man", "--warnings", "-l", p], capture_output=True,
                       text=True, timeout=60,
                       env=dict(os.environ, MANWIDTH="80", MANPAGER="cat",
                                PAGER="cat"))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS",
                    "EXIT STATUS", "SEE ALSO"):
        assert re.search(r"^%s$" % section, r.stdout, re.M), section


def test_mount_page_covers_every_option():
    """Every NAME= and flag of sqfs-lazy-mount --help is in the page, and
    the new sections are there."""
    help_text = subprocess.run([daemon(), "--help"], capture_output=True,
                               text=True, timeout=30).stdout
    src = open(os.path.join(source_dir(), "docs", "man",
                            "sqfs-lazy-mount.1.scd")).read()
    plain = src.replace("\\_", "_").replace("*", "")
    names = set(re.findall(r"(?<![\w.-])([a-z_]+)=", help_text))
    flags = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][a-z-]*)", help_text))
    assert "loglevel" in names and "header_file" in names
    missing = sorted(n for n in names if n + "=" not in plain)
    missing += sorted(f for f in flags if f not in plain)
    assert not missing, missing
    for section in ("FSTAB AND MOUNT(8)", "SYSTEMD", "LOGGING"):
        assert "# " + section in src
