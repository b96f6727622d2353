"""mount(8) with an fstab line of our types, as `mount -T TESTFSTAB MNT`.

mount(8) looks for helpers in /sbin only, and mount.fuse3 finds programs
only on the shell's default PATH (mount(8) drops PATH). So that nothing is
installed on the machine, each case runs in a private mount namespace in
which an overlay on /usr/sbin adds mount.sqfs-lazy (pointing at the build's
daemon) and sqfs-lazy-mount; the mount, the reads and the umount all happen
in there.
"""

import os
import shutil
import subprocess

import pytest

from conftest import (CONTENT, build_dir, daemon, require, require_mount_env,
                      sha256_file)

SCRIPT = r"""
set -u
ov=$1 fstab=$2 mnt=$3
mount -t overlay overlay \
	-o lowerdir=/usr/sbin,upperdir=$ov/upper,workdir=$ov/work /usr/sbin || exit 90
trap 'umount -l "$mnt" 2>/dev/null' EXIT
timeout 60 mount -T "$fstab" "$mnt" || { echo "mount failed: $?"; exit 91; }
daemon=$(pgrep -f "^[^ ]*sqfs-lazy-mount .*$mnt")
echo "DAEMON $daemon"
echo "TYPE $(findmnt -n -o FSTYPE "$mnt")"
echo "OPTS $(findmnt -n -o OPTIONS "$mnt")"
cd "$mnt" && sha256sum hello.txt sub/data.bin && cd / || exit 92
timeout 30 umount "$mnt" || { echo "umount failed: $?"; exit 93; }
findmnt "$mnt" >/dev/null && { echo "still mounted"; exit 94; }
# the daemon ends with the unmount
for i in $(seq 300); do
	kill -0 "$daemon" 2>/dev/null || { echo DAEMON_GONE; break; }
	sleep 0.05
done
exit 0
"""


def helper_source():
    p = os.path.join(build_dir(), "src", "mount_helper", "mount.sqfs-lazy")
    require(os.path.exists(p), "helper not built: %s" % p)
    return p


@pytest.fixture
def overlay(tmp_path):
    """upper/ for /usr/sbin: our helper (daemon path: the build's) and
    sqfs-lazy-mount for mount.fuse3."""
    require_mount_env()
    require(shutil.which("unshare") is not None, "unshare missing")
    require(os.path.exists("/sbin/mount.fuse3"), "mount.fuse3 missing")
    ov = tmp_path / "ov"
    (ov / "upper").mkdir(parents=True)
    (ov / "work").mkdir()
    text = open(helper_source()).read()
    installed = text.split("daemon='", 1)[1].split("'", 1)[0]
    helper = ov / "upper" / "mount.sqfs-lazy"
    helper.write_text(text.replace("daemon='%s'" % installed,
                                   "daemon='%s'" % daemon()))
    helper.chmod(0o755)
    os.symlink(daemon(), ov / "upper" / "sqfs-lazy-mount")
    return ov


def run_fstab(tmp_path, overlay, source, fstype, options):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text("# test fstab\n%s %s %s %s 0 0\n"
                     % (source, mnt, fstype, options))
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh",
                        "-c", SCRIPT, "sh", str(overlay), str(fstab),
                        str(mnt)], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert any(l.startswith("DAEMON ") and l[7:].isdigit() for l in lines), \
        r.stdout
    assert "DAEMON_GONE" in lines, r.stdout
    return dict((l.split()[1], l.split()[0]) for l in lines
                if len(l.split()) == 2 and len(l.split()[0]) == 64), \
        next(l[5:] for l in lines if l.startswith("TYPE ")), \
        next(l[5:] for l in lines if l.startswith("OPTS "))


def expect(tree):
    return {name: sha256_file(os.path.join(tree, name)) for name in CONTENT}


# the options an fstab line for a network image typically carries
MOUNT_ONLY = "ro,_netdev,nofail,x-systemd.automount,x-systemd.mount-timeout=30,defaults"


def test_fstab_our_helper_local(tmp_path, overlay, image):
    img, tree = image
    sums, fstype, opts = run_fstab(tmp_path, overlay, img, "sqfs-lazy",
                                   MOUNT_ONLY + ",loglevel=warning")
    assert sums == expect(tree)
    assert fstype == "fuse.sqfs-lazy"
    # the daemon's defaults hold through our helper
    assert "nodev" in opts.split(",") and "nosuid" in opts.split(",")


def test_fstab_our_helper_url(tmp_path, overlay, image, nginx):
    img, tree = image
    sums, fstype, _ = run_fstab(tmp_path, overlay, nginx.url(img),
                                "sqfs-lazy", MOUNT_ONLY + ",max_connections=2")
    assert sums == expect(tree)
    assert fstype == "fuse.sqfs-lazy"
    assert any(e["status"] == 206 for e in nginx.entries())


def test_fstab_our_helper_url_command(tmp_path, overlay, image, nginx):
    """-o url_command= with a space, written \\040 in fstab, reaches the
    daemon as one option: every request goes to the URL the command
    prints, none to IMAGE, which only names the image."""
    img, tree = image
    cmd = "/bin/echo\\040" + nginx.url(img)
    sums, _, _ = run_fstab(tmp_path, overlay,
                           "http://placeholder.invalid/base.sqfs",
                           "sqfs-lazy", MOUNT_ONLY + ",url_command=" + cmd)
    assert sums == expect(tree)
    assert any(e["status"] == 206 for e in nginx.entries())


def test_fstab_mount_fuse3_local(tmp_path, overlay, image):
    img, tree = image
    sums, fstype, opts = run_fstab(tmp_path, overlay, img,
                                   "fuse.sqfs-lazy-mount",
                                   MOUNT_ONLY + ",nodev,nosuid")
    assert sums == expect(tree)
    assert fstype == "fuse.sqfs-lazy"
    assert "nodev" in opts.split(",")


def test_fstab_mount_fuse3_url(tmp_path, overlay, image, nginx):
    img, tree = image
    sums, _, _ = run_fstab(tmp_path, overlay, nginx.url(img),
                           "fuse.sqfs-lazy-mount",
                           MOUNT_ONLY + ",nodev,nosuid,readahead=0")
    assert sums == expect(tree)


def test_fstab_bad_option_fails_cleanly(tmp_path, overlay, image):
    """A bad option of ours: mount(8) fails, nothing stays mounted."""
    img, _ = image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text("%s %s sqfs-lazy ro,loglevel=chatty 0 0\n" % (img, mnt))
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh",
                        "-c", SCRIPT, "sh", str(overlay), str(fstab),
                        str(mnt)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 91, (r.stdout, r.stderr)
    assert "invalid value 'chatty' for -o loglevel" in r.stderr
