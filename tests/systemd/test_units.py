"""systemd-analyze verify on every unit of systemd/, as built (paths of
the build's prefix substituted by the build tree's daemon, since nothing is
installed on the host). The container test verifies the installed copies
too. A broken copy must fail, so the check is known to bite."""

import os
import shutil
import subprocess

import pytest

from conftest import build_dir, daemon, require

UNITS = ["sqfs-lazy-mount@.service", "srv-images.mount"]


def verify(*paths):
    return subprocess.run(["systemd-analyze", "verify", "--man=no"] +
                          [str(p) for p in paths], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def unit_copies(tmp_path):
    require(shutil.which("systemd-analyze") is not None,
            "systemd-analyze missing")
    out = []
    for u in UNITS:
        src = os.path.join(build_dir(), "systemd", u)
        require(os.path.exists(src), "unit not built: " + src)
        text = open(src).read()
        starts = [l for l in text.splitlines()
                  if l.startswith("ExecStart=")]
        if starts:
            installed = starts[0].split("=", 1)[1].split()[0]
            assert installed.endswith("/sqfs-lazy-mount"), installed
            text = text.replace(installed, daemon())
        p = tmp_path / u
        p.write_text(text)
        out.append(p)
    return out


def test_every_unit_verifies(unit_copies):
    r = verify(*unit_copies)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", r.stderr


def test_instance_verifies(unit_copies, tmp_path):
    inst = tmp_path / "sqfs-lazy-mount@demo.service"
    inst.write_text(unit_copies[0].read_text())
    r = verify(inst)
    assert r.returncode == 0, r.stderr


def test_verify_catches_a_missing_daemon(unit_copies, tmp_path):
    bad = tmp_path / "bad" / "sqfs-lazy-mount@.service"
    bad.parent.mkdir()
    bad.write_text(unit_copies[0].read_text().replace(
        daemon(), "/nonexistent/sqfs-lazy-mount"))
    r = verify(bad)
    assert r.returncode != 0
    assert "not executable" in r.stderr
