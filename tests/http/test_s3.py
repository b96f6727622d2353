"""s3://BUCKET/KEY images against a real S3 server: versitygw (Apache-2.0)
with its posix backend, on a free port of 127.0.0.1. It checks Signature
Version 4, so a wrong secret really is refused. The binary is built once by
scripts/install-versitygw.sh into /var/cache/sqfs-lazy-tests (LSQ_VERSITYGW
names another); without it the tests skip, and fail when CI is set.

What versitygw cannot show: the expiry of a session token. It refuses a
token it did not issue (400 InvalidToken, which the mount reports), but
issuing one needs its separate IAM/STS service and lasts 15 minutes at
least. The re-read of the credentials after a refusal is tested against
versitygw by changing its secret and the credentials file under a live
mount; the expiry answer itself (400 ExpiredToken) comes from our fault
server, which checks the token but no signature (last test)."""

import concurrent.futures
import os
import shutil
import socket
import subprocess
import time
import urllib.parse

import pytest

from conftest import (check_eio, daemon, mksquashfs, read_with_timeout,
                      require, try_mount)
from servers import free_port, kernel_loop_mount, kernel_umount
from test_nginx import walk

VERSION = "v1.8.0"
ACCESS = "AKIASQFSLAZYTEST0001"
SECRET = "s3cr3t/Sqfs+Lazy/9f2c7e1b4a"
SECRET2 = "s3cr3t/Rotated+Key/0a8d3b6e55"
BUCKET = "images"
FAST = ["timeout=5", "connect_timeout=2", "retries=1"]


def versitygw_binary():
    p = os.environ.get("LSQ_VERSITYGW") or os.path.join(
        os.environ.get("LSQ_TEST_CACHE", "/var/cache/sqfs-lazy-tests"),
        "bin", "versitygw-" + VERSION, "versitygw")
    require(os.access(p, os.X_OK),
            "versitygw not built (bash scripts/install-versitygw.sh): " + p)
    return p


class S3Server:
    """versitygw posix DIR on 127.0.0.1:PORT with one root account."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "s3data")
        os.makedirs(self.dir, exist_ok=True)
        self.logpath = os.path.join(workdir, "versitygw.log")
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.proc = None
        self.secret = None

    def start(self, secret=SECRET):
        self.secret = secret
        with open(self.logpath, "ab") as log:
            self.proc = subprocess.Popen(
                [versitygw_binary(), "--access", ACCESS, "--secret", secret,
                 "--port", "127.0.0.1:%d" % self.port, "--quiet",
                 "posix", self.dir],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, "versitygw exited:\n" + \
                open(self.logpath).read()[-2000:]
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "versitygw not ready"
                time.sleep(0.05)
        return self

    def stop(self):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None

    def request(self, method, path, upload=None):
        """A signed request with curl's own SigV4; returns the status."""
        cmd = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
               "--aws-sigv4", "aws:amz:us-east-1:s3",
               "-u", "%s:%s" % (ACCESS, self.secret),
               "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
               "-X", method]
        if upload:
            cmd += ["-T", upload]
        # the secret goes through argv of this short-lived curl only
        r = subprocess.run(cmd + [self.endpoint + path], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return int(r.stdout)

    def put(self, key, path):
        assert self.request("PUT", "/%s/%s" % (BUCKET, key), path) == 200


@pytest.fixture(scope="module")
def s3(tmp_path_factory, small_image):
    require(shutil.which("curl") is not None, "curl missing")
    s = S3Server(str(tmp_path_factory.mktemp("s3")))
    try:
        s.start()
        assert s.request("PUT", "/" + BUCKET) == 200
        s.put("small.sqfs", small_image["path"])
        yield s
    finally:
        s.stop()


def creds_file(tmp_path, secret=SECRET, mode=0o600, name="credentials"):
    p = tmp_path / name
    p.write_text("# test account\n[default]\naws_access_key_id = %s\n"
                 "aws_secret_access_key = %s\n" % (ACCESS, secret))
    os.chmod(p, mode)
    return str(p)


def s3_opts(s3, tmp_path, secret=SECRET):
    return FAST + ["endpoint=" + s3.endpoint,
                   "credentials_file=" + creds_file(tmp_path, secret)]


def test_mount_reads_every_file(s3, small_image, mounts, tmp_path):
    m = mounts("s3://%s/small.sqfs" % BUCKET, s3_opts(s3, tmp_path))
    for rel, data in small_image["files"].items():
        with open(os.path.join(m.mnt, rel), "rb") as f:
            assert f.read() == data, rel
    assert os.readlink(os.path.join(m.mnt, "d", "link")) == "small.txt"


def test_environment_credentials(s3, small_image, mounts, tmp_path):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS,
               AWS_SECRET_ACCESS_KEY=SECRET, HOME=str(tmp_path))
    env.pop("AWS_SESSION_TOKEN", None)
    m = mounts("s3://%s/small.sqfs" % BUCKET,
               FAST + ["endpoint=" + s3.endpoint], env=env)
    with open(os.path.join(m.mnt, "d", "small.txt"), "rb") as f:
        assert f.read() == small_image["files"]["d/small.txt"]


def test_shared_credentials_profile(s3, small_image, mounts, tmp_path):
    """~/.aws/credentials, the profile named with -o aws_profile=; the
    environment's (wrong) keys are not used when a profile is named."""
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text(
        "[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n"
        "[ci]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
        % (ACCESS, SECRET))
    env = dict(os.environ, HOME=str(tmp_path), AWS_ACCESS_KEY_ID="nobody",
               AWS_SECRET_ACCESS_KEY="wrong")
    m = mounts("s3://%s/small.sqfs" % BUCKET,
               FAST + ["endpoint=" + s3.endpoint, "aws_profile=ci"], env=env)
    with open(os.path.join(m.mnt, "d", "small.txt"), "rb") as f:
        assert f.read() == small_image["files"]["d/small.txt"]


def feature_tree(root):
    """Small tree with what a walk compares: modes, links, xattrs."""
    os.makedirs(os.path.join(root, "a", "b"))
    with open(os.path.join(root, "a", "text"), "wb") as f:
        f.write(b"squashfs over s3\n" * 5000)
    with open(os.path.join(root, "a", "b", "rand"), "wb") as f:
        f.write(os.urandom(300_000))
    open(os.path.join(root, "empty"), "wb").close()
    os.link(os.path.join(root, "a", "text"), os.path.join(root, "hard"))
    os.symlink("a/b/rand", os.path.join(root, "sym"))
    os.chmod(os.path.join(root, "a", "text"), 0o640)
    try:
        os.setxattr(os.path.join(root, "a", "text"), "user.k", b"v")
    except OSError:
        pass


@pytest.mark.parametrize("comp", ["gzip", "xz", "zstd"])
def test_same_as_kernel(s3, mounts, tmp_path, comp):
    tree = str(tmp_path / "tree")
    feature_tree(tree)
    img = str(tmp_path / ("f-%s.sqfs" % comp))
    mksquashfs(tree, img, "-comp", comp)
    s3.put("conf/%s.sqfs" % comp, img)
    kmnt = str(tmp_path / "kmnt")
    os.makedirs(kmnt)
    kernel_loop_mount(img, kmnt)
    try:
        m = mounts("s3://%s/conf/%s.sqfs" % (BUCKET, comp),
                   s3_opts(s3, tmp_path))
        k, f = walk(kmnt), walk(m.mnt)
    finally:
        kernel_umount(kmnt)
    assert sorted(k) == sorted(f)
    assert len(k) >= 7
    diffs = [(p, k[p], f[p]) for p in k if k[p] != f[p]]
    assert not diffs, diffs[:5]


def one_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_wrong_secret_refused(s3, tmp_path):
    rc, err, _ = try_mount("s3://%s/small.sqfs" % BUCKET,
                           str(tmp_path / "mnt"), None,
                           s3_opts(s3, tmp_path, secret="not-the-secret"))
    line = one_line(err)
    assert rc == 1, err
    assert "403" in line and "SignatureDoesNotMatch" in line, line
    assert "s3://%s/small.sqfs" % BUCKET in line, line
    assert "not-the-secret" not in err


def test_missing_object(s3, tmp_path):
    rc, err, _ = try_mount("s3://%s/nothing-here.sqfs" % BUCKET,
                           str(tmp_path / "mnt"), None, s3_opts(s3, tmp_path))
    line = one_line(err)
    assert rc == 1 and "404" in line and "NoSuchKey" in line, err
    assert SECRET not in err


def test_credentials_file_readable_by_others(s3, tmp_path):
    opts = FAST + ["endpoint=" + s3.endpoint, "credentials_file=" +
                   creds_file(tmp_path, mode=0o644)]
    rc, err, _ = try_mount("s3://%s/small.sqfs" % BUCKET,
                           str(tmp_path / "mnt"), None, opts)
    line = one_line(err)
    assert rc == 1 and "readable by others" in line, err
    assert SECRET not in err


def test_session_token_refused_is_one_line(s3, tmp_path):
    """A token the server did not issue: S3 answers 400 InvalidToken."""
    p = tmp_path / "creds"
    p.write_text("[default]\naws_access_key_id = %s\naws_secret_access_key "
                 "= %s\naws_session_token = FQoGZXIvYXdzEXAMPLEtoken\n"
                 % (ACCESS, SECRET))
    os.chmod(p, 0o600)
    rc, err, _ = try_mount("s3://%s/small.sqfs" % BUCKET,
                           str(tmp_path / "mnt"), None,
                           FAST + ["endpoint=" + s3.endpoint,
                                   "credentials_file=%s" % p])
    line = one_line(err)
    assert rc == 1 and "InvalidToken" in line, err
    assert "EXAMPLEtoken" not in err and SECRET not in err


def test_object_replaced_gives_eio(s3, small_image, mounts, tmp_path):
    """The object is overwritten with bytes of the same length: the ETag
    changes, reads not served from memory fail with EIO, and no read
    returns bytes of the new object."""
    s3.put("replaced.sqfs", small_image["path"])
    m = mounts("s3://%s/replaced.sqfs" % BUCKET,
               s3_opts(s3, tmp_path) + ["readahead=0"])
    first = os.path.join(m.mnt, "f00.bin")
    ok, data, _ = read_with_timeout(first)
    assert ok and data == small_image["files"]["f00.bin"]
    other = bytearray(small_image["data"])
    for i in range(100_000, len(other)):
        other[i] ^= 0x5A
    alt = tmp_path / "other.sqfs"
    alt.write_bytes(bytes(other))
    s3.put("replaced.sqfs", str(alt))
    ok, text, _ = read_with_timeout(os.path.join(m.mnt, "f23.bin"))
    check_eio(ok, text)
    # later reads fail too (sticky), whatever they touch
    ok, text, _ = read_with_timeout(os.path.join(m.mnt, "f22.bin"))
    check_eio(ok, text)
    assert "remote image changed" in m.log(), m.log()[-2000:]


def test_secret_rotated_under_the_mount(s3, small_image, mounts, tmp_path):
    """The server's secret changes and the credentials file with it: the
    next read is refused (403), the mount reads the file again and goes
    on, without a remount."""
    cf = creds_file(tmp_path)
    m = mounts("s3://%s/small.sqfs" % BUCKET,
               FAST + ["endpoint=" + s3.endpoint, "credentials_file=" + cf,
                       "readahead=0"])
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, "f01.bin"))
    assert ok and data == small_image["files"]["f01.bin"]
    s3.stop()
    try:
        s3.start(SECRET2)
        creds_file(tmp_path, SECRET2)
        # several readers are refused at once: all go on, one re-read
        names = ["f%02d.bin" % i for i in range(2, 8)]
        with concurrent.futures.ThreadPoolExecutor(len(names)) as ex:
            got = list(ex.map(lambda n: read_with_timeout(
                os.path.join(m.mnt, n)), names))
        for n, (ok, data, _) in zip(names, got):
            assert ok, (n, data)
            assert data == small_image["files"][n], n
        assert m.log().count("credentials read again") == 1, \
            m.log()[-2000:]
        assert SECRET2 not in m.log() and SECRET not in m.log()
    finally:
        s3.stop()
        s3.start(SECRET)


def test_secret_never_shown(s3, small_image, mounts, tmp_path):
    """Not in the debug log, argv, environment, /proc/mounts or --stats;
    nor the access key."""
    m = mounts("s3://%s/small.sqfs" % BUCKET,
               s3_opts(s3, tmp_path) + ["debug"])
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, "f03.bin"))
    assert ok and data == small_image["files"]["f03.bin"]
    st = subprocess.run([daemon(), "--stats", m.mnt], capture_output=True,
                        text=True, timeout=30)
    assert st.returncode == 0 and "http_requests" in st.stdout, st
    pid = m.proc.pid
    texts = {"stats": st.stdout + st.stderr}
    for what in ("cmdline", "environ"):
        with open("/proc/%d/%s" % (pid, what), "rb") as f:
            texts[what] = f.read().decode(errors="replace")
    with open("/proc/mounts") as f:
        texts["mounts"] = f.read()
    assert "s3://%s/small.sqfs" % BUCKET in texts["mounts"]
    m.stop()
    texts["log"] = m.log()
    assert texts["log"].count("\n") > 10, texts["log"]
    for name, text in texts.items():
        assert SECRET not in text, name
        assert ACCESS not in text, name


EXPIRED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ExpiredToken'
           b'</Code><Message>The provided token has expired.</Message>'
           b'</Error>')


def test_expired_token_renewed_from_file(fault_server, small_image, mounts,
                                         tmp_path):
    """S3's answer to an expired session token is 400 ExpiredToken: while
    the file still holds the old token, the read fails (EIO); once the file
    holds a new one, the next read takes it up, without a remount. Every
    request carries UNSIGNED-PAYLOAD and the token, both signed. The fault
    server checks the token, not the signature (versitygw does that in the
    tests above)."""
    fault_server.add("/%s/img.sqfs" % BUCKET, small_image["data"])
    fault_server.require_header = ("x-amz-security-token", "token-one")
    fault_server.refusal = (400, EXPIRED)
    p = tmp_path / "creds"

    def write(token):
        p.write_text("[default]\naws_access_key_id = %s\n"
                     "aws_secret_access_key = %s\naws_session_token = %s\n"
                     % (ACCESS, SECRET, token))
        os.chmod(p, 0o600)

    write("token-one")
    m = mounts("s3://%s/img.sqfs" % BUCKET,
               FAST + ["endpoint=http://127.0.0.1:%d" % fault_server.port,
                       "region=eu-central-1", "readahead=0",
                       "credentials_file=%s" % p])
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, "f04.bin"))
    assert ok and data == small_image["files"]["f04.bin"]
    # the token expires; the file is not renewed yet
    fault_server.require_header = ("x-amz-security-token", "token-two")
    ok, text, _ = read_with_timeout(os.path.join(m.mnt, "f05.bin"))
    check_eio(ok, text)
    assert "ExpiredToken" in m.log(), m.log()[-2000:]
    # renewed where we found it
    write("token-two")
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, "f06.bin"))
    assert ok and data == small_image["files"]["f06.bin"]
    assert "credentials read again" in m.log(), m.log()[-2000:]
    reqs = fault_server.requests()
    assert reqs and all(r["amz_sha256"] == "UNSIGNED-PAYLOAD" for r in reqs)
    assert reqs[-1]["amz_token"] == "token-two"
    for r in reqs:
        auth = r["auth"] or ""
        assert auth.startswith("AWS4-HMAC-SHA256 Credential=%s/" % ACCESS), \
            auth
        assert "/eu-central-1/s3/aws4_request" in auth, auth
        signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
        assert "x-amz-content-sha256" in signed, auth
        assert "x-amz-security-token" in signed, auth
    log = m.log()
    assert SECRET not in log and "token-one" not in log and \
        "token-two" not in log


def test_wrong_region_refused(s3, tmp_path):
    """The region is part of the signature: signed for another region than
    the server's, the mount is refused with one line."""
    rc, err, _ = try_mount("s3://%s/small.sqfs" % BUCKET,
                           str(tmp_path / "mnt"), None,
                           s3_opts(s3, tmp_path) + ["region=eu-west-3"])
    line = one_line(err)
    assert rc == 1 and "s3://%s/small.sqfs: HTTP 4" % BUCKET in line, err
    assert SECRET not in err


def test_key_with_space_and_plus(s3, small_image, mounts, tmp_path):
    """Keys are percent-encoded in the path (and signed so); / stays."""
    key = "sub dir/a+b=c.sqfs"
    s3.put(urllib.parse.quote(key), small_image["path"])
    m = mounts("s3://%s/%s" % (BUCKET, key), s3_opts(s3, tmp_path))
    with open(os.path.join(m.mnt, "d", "small.txt"), "rb") as f:
        assert f.read() == small_image["files"]["d/small.txt"]
    with open("/proc/mounts") as f:
        assert "s3://%s/sub" % BUCKET in f.read()


def test_bad_region_refused(tmp_path):
    rc, err, _ = try_mount("s3://%s/x.sqfs" % BUCKET, str(tmp_path / "mnt"),
                           None, ["region=us-east-1.evil.example/x"])
    assert rc == 1 and "not a region name" in one_line(err), err


def s3_on_fault_server(fault_server, small_image, mounts, p):
    """A mount of the fault server as an S3 endpoint, credentials from p;
    the server accepts any token, so every refusal would be ours to see."""
    fault_server.add("/%s/img.sqfs" % BUCKET, small_image["data"])
    return mounts("s3://%s/img.sqfs" % BUCKET,
                  FAST + ["endpoint=http://127.0.0.1:%d" % fault_server.port,
                          "readahead=0", "credentials_file=%s" % p])


def write_creds(p, token, extra=""):
    p.write_text("[default]\naws_access_key_id = %s\n"
                 "aws_secret_access_key = %s\naws_session_token = %s\n%s"
                 % (ACCESS, SECRET, token, extra))
    os.chmod(p, 0o600)


def assert_taken_up(reqs, token):
    """Requests signed while one thread reads the file again may still
    carry the old token (valid yet: that is the point); the last ones
    carry the new one, and none was refused."""
    assert reqs and all(r["status"] == 206 for r in reqs), reqs
    assert reqs[-1]["amz_token"] == token, reqs


def read_ok(m, small_image, name):
    ok, data, _ = read_with_timeout(os.path.join(m.mnt, name))
    assert ok and data == small_image["files"][name], name


def test_rotated_file_used_before_refusal(fault_server, small_image, mounts,
                                          tmp_path):
    """A rotator rewrites the credentials file (in place, or a new file
    renamed over it): the next request a second later signs with the new
    keys, before any server refused the old ones."""
    p = tmp_path / "creds"
    write_creds(p, "token-one")
    m = s3_on_fault_server(fault_server, small_image, mounts, p)
    read_ok(m, small_image, "f10.bin")
    for token, name in (("token-two", "f11.bin"), ("token-three", "f12.bin")):
        if token == "token-two":
            write_creds(p, token)
        else:
            tmp = tmp_path / "creds.new"
            write_creds(tmp, token)
            os.rename(tmp, p)
        time.sleep(1.1)
        fault_server.clear_log()
        read_ok(m, small_image, name)
        assert_taken_up(fault_server.requests(), token)
    assert m.log().count("the credentials file changed; using the "
                         "credentials read again") == 2, m.log()[-2000:]
    assert "token-" not in m.log()


def test_expiry_in_file_read_ahead(fault_server, small_image, mounts,
                                   tmp_path):
    """x_security_token_expires less than 5 minutes away: the file is read
    again (once a second) although it looks unchanged, so new keys that a
    rotator slipped in are used before the old ones expire. The test keeps
    inode, size and mtime equal, so only the expiry can be the reason."""
    p = tmp_path / "creds"
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 200))
    write_creds(p, "token-one", "x_security_token_expires = %s\n" % soon)
    m = s3_on_fault_server(fault_server, small_image, mounts, p)
    read_ok(m, small_image, "f13.bin")
    st = os.stat(p)
    write_creds(p, "token-two", "x_security_token_expires = %s\n" % soon)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = os.stat(p)
    assert (st2.st_ino, st2.st_size, st2.st_mtime_ns) == \
        (st.st_ino, st.st_size, st.st_mtime_ns)
    time.sleep(1.1)
    fault_server.clear_log()
    read_ok(m, small_image, "f14.bin")
    assert_taken_up(fault_server.requests(), "token-two")
    assert "the credentials expire soon; using the credentials read again" \
        in m.log(), m.log()[-2000:]


def test_sif_over_s3(s3, mounts, tmp_path):
    """A SIF file as an S3 object: its primary partition found from the
    header and descriptors, read through signed requests, the same as the
    kernel's mount of the partition."""
    from test_sif import partitions, same_as_kernel, sif
    tree = str(tmp_path / "tree")
    feature_tree(tree)
    img = str(tmp_path / "part.sqfs")
    mksquashfs(tree, img, "-comp", "zstd")
    path = sif(tmp_path, "s3.sif", [(img, 2)])
    s3.put("sif/s3.sif", path)
    (_, off, _, _, _), = partitions(path)
    m = mounts("s3://%s/sif/s3.sif" % BUCKET, s3_opts(s3, tmp_path))
    same_as_kernel(path, off, m.mnt, tmp_path)
