"""The corruption corpus (corruptgen.py): every bad image derived from one
good small image is mounted with sqfs-lazy-mount -f.

Each one either
  - is refused: exit status 1 within seconds, exactly one stderr line that
    names the image and says what is wrong where (a field or an offset), or
  - mounts, and then a bounded walk of the whole tree (stat, readdir,
    readlink, xattrs, full reads) finishes in bounded time with only the
    errors a damaged image may give (EIO above all; never ENOTCONN, which
    means the daemon died), the daemon is alive at the end, unmounts and
    exits with status 0.
Never a sanitizer report in the daemon's log (the ASan+UBSan build runs
this file too; LeakSanitizer checks the exit).
"""

import errno
import json
import os
import re
import struct
import subprocess
import sys
import time

import pytest

import corruptgen
import util
from timing import SCALE

MOUNT_WAIT = 15.0
WALK_TIMEOUT = 30.0
SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|ThreadSanitizer|"
                       r"runtime error:|MemorySanitizer")
# What a damaged image may legitimately produce at the syscall level.
ALLOWED = {"EIO", "ENOENT", "ENOTDIR", "ELOOP", "ENODATA", "E2BIG", "ERANGE",
           "EOPNOTSUPP", "ENOTSUP", "EINVAL", "EISDIR", "ENAMETOOLONG", "EACCES",
           "EOVERFLOW", "EFBIG", "ESTALE"}

# Walk a mounted tree with bounds (nodes, depth, bytes per file), in a
# child process so a hung syscall cannot hang the test. Prints JSON.
WALKER = r"""
import errno, json, os, stat, sys
root = sys.argv[1]
errs, nodes, read_bytes, capped = {}, 0, 0, 0
def err(e, what):
    k = errno.errorcode.get(e.errno, str(e.errno))
    errs.setdefault(k, []).append(what)
def visit(path, depth):
    global nodes, read_bytes, capped
    nodes += 1
    if nodes > 400:
        return
    try:
        st = os.lstat(path)
    except OSError as e:
        return err(e, "lstat " + path)
    try:
        for n in os.listxattr(path, follow_symlinks=False)[:20]:
            try:
                os.getxattr(path, n, follow_symlinks=False)
            except OSError as e:
                err(e, "getxattr " + path)
    except OSError as e:
        err(e, "listxattr " + path)
    if stat.S_ISLNK(st.st_mode):
        try:
            os.readlink(path)
        except OSError as e:
            err(e, "readlink " + path)
    elif stat.S_ISREG(st.st_mode):
        try:
            with open(path, "rb", buffering=0) as f:
                got = 0
                while got < (8 << 20):
                    b = f.read(1 << 16)
                    if not b:
                        break
                    got += len(b)
                else:
                    capped += 1
                read_bytes += got
                f.seek(4095)
                f.read(5000)
        except OSError as e:
            err(e, "read " + path)
    elif stat.S_ISDIR(st.st_mode) and depth < 12:
        try:
            names = os.listdir(path)
        except OSError as e:
            return err(e, "listdir " + path)
        for n in names[:300]:
            visit(os.path.join(path, n), depth + 1)
visit(root, 0)
print(json.dumps({"errors": errs, "nodes": nodes, "bytes": read_bytes,
                  "capped": capped}))
"""


# --------------------------------------------------------------------------
# The reason each case must give
# --------------------------------------------------------------------------
#
# Every case is deterministic, so each has a known outcome: refused at open
# with a specific reason, or mounted and served with specific errors. A
# refusal line must match its case's pattern below (the stable part of the
# library's message: which check, which table or field, which offset or
# value), searched in the line with the image path replaced by IMAGE.
# Offsets come from the base image's superblock and tables (`b`, a
# util.SqfsReader) and the damaged bytes (`d`), not from constants, so a
# different mksquashfs layout moves them consistently. A case not listed in
# REFUSED must mount; one listed must be refused: a validation that starts
# or stops refusing a case fails here until the table says so.

def X(v):
    """A value as the library prints it (0x%llx)."""
    return re.escape("0x%x" % v)


HEX = r"0x[0-9a-f]+"


def _u(d, off, fmt):
    return struct.unpack_from(fmt, d, off)[0]


def _sbv(d, field):
    return _u(d, util.SB_OFFSETS[field], corruptgen._SB_FMT[field])


def _truncated(b, d):
    return (r"^IMAGE: bad superblock: image truncated: bytes used %s beyond "
            r"image size %s$" % (X(_sbv(d, "bytes_used")), X(len(d))))


def _too_short(b, d):
    return (r"^IMAGE: not a SquashFS image: %d bytes, the superblock alone "
            r"needs 96$" % len(d))


def _root_at(b):
    """The root inode reference and the offset of its metadata block."""
    ref = b.sb["root_inode"]
    return X(ref), X(b.sb["inode_table_start"] + (ref >> 16))


def _root_bad(what):
    def fn(b, d):
        ref, at = _root_at(b)
        return (r"^IMAGE: bad root inode %s in the inode table at %s: "
                r"inode %s: %s at offset %s: corrupt image$"
                % (ref, at, ref, what, at))
    return fn


def _index_past_end(table, field, count_field, extra=0):
    def fn(b, d):
        start = b.sb[field] + extra
        count = (_u(d, b.sb[field] + 8, "<I") if count_field is None
                 else _sbv(d, count_field))
        return (r"^IMAGE: bad %s: index of \d+ blocks for %d entries at %s "
                r"beyond image size %s$"
                % (table, count, X(start), X(_sbv(d, "bytes_used"))))
    return fn


def _sb_table_outside(table, field):
    def fn(b, d):
        return (r"^IMAGE: bad superblock: %s offset %s outside %s\.\.%s$"
                % (table, X(_sbv(d, field)),
                   X(b.sb["directory_table_start"]), X(b.sb["bytes_used"])))
    return fn


def _dir_not_between(b, d):
    return (r"^IMAGE: bad superblock: directory table offset %s not between "
            r"inode table %s and image size %s$"
            % (X(_sbv(d, "directory_table_start")),
               X(_sbv(d, "inode_table_start")), X(_sbv(d, "bytes_used"))))


def _inode_table_outside(b, d):
    return (r"^IMAGE: bad superblock: inode table offset %s outside "
            r"0x60\.\.%s$" % (X(_sbv(d, "inode_table_start")),
                              X(_sbv(d, "bytes_used"))))


_INDEX = {"id": ("id table", "id_table_start", 0),
          "frag": ("fragment table", "fragment_table_start", 0),
          "export": ("export table", "lookup_table_start", 0),
          "xattr_id": ("xattr id table", "xattr_id_table_start", 16)}


def _block_outside(t, block_re=None):
    """A table's index names a metadata block outside 0x60..index."""
    table, field, extra = _INDEX[t]

    def fn(b, d):
        idx = _sbv(d, field) + extra
        blk = block_re or X(_u(d, idx, "<Q"))
        return (r"^IMAGE: bad %s: block 0 at %s outside 0x60\.\.%s$"
                % (table, blk, X(idx)))
    return fn


def _id_block(detail):
    def fn(b, d):
        blk = X(_u(d, b.sb["id_table_start"], "<Q"))
        return (r"^IMAGE: bad id table: entry 0 unreadable: %s at offset %s: "
                % (detail, blk))
    return fn


REFUSED = {
    "truncate_at_0": _too_short,
    "truncate_at_1": _too_short,
    "truncate_at_95": _too_short,
    "truncate_at_96": _truncated,
    "truncate_at_quarter": _truncated,
    "truncate_at_half": _truncated,
    "truncate_at_inode_table": _truncated,
    "truncate_at_dir_table": _truncated,
    "truncate_at_frag_table": _truncated,
    "truncate_at_id_table": _truncated,
    "truncate_at_last_byte": _truncated,
    "truncate_fixed_bytes_used_at_half": _inode_table_outside,
    "truncate_fixed_bytes_used_at_dir_table": _dir_not_between,
    # the xattr id table's index is the last thing in the image
    "truncate_fixed_bytes_used_at_last_byte": _index_past_end(
        "xattr id table", "xattr_id_table_start", None, 16),
    "sb_magic_all_ones": lambda b, d: (
        r"^IMAGE: not a SquashFS image: bad magic 0xffffffff at offset 0$"),
    "sb_magic_top_bit": lambda b, d: (
        r"^IMAGE: not a SquashFS image: bad magic %s at offset 0$"
        % X(_sbv(d, "magic"))),
    # the inode count sizes the export table's index
    "sb_inodes_all_ones": _index_past_end("export table", "lookup_table_start",
                                          "inodes"),
    "sb_inodes_top_bit": _index_past_end("export table", "lookup_table_start",
                                         "inodes"),
    "sb_inodes_huge": _index_past_end("export table", "lookup_table_start",
                                      "inodes"),
    "sb_block_size_all_ones": lambda b, d: (
        r"^IMAGE: bad superblock: block size 4294967295 does not match "
        r"block log 12$"),
    "sb_block_size_top_bit": lambda b, d: (
        r"^IMAGE: bad superblock: block size %d does not match block log "
        r"12$" % _sbv(d, "block_size")),
    "sb_fragments_all_ones": _index_past_end(
        "fragment table", "fragment_table_start", "fragments"),
    "sb_fragments_top_bit": _index_past_end(
        "fragment table", "fragment_table_start", "fragments"),
    "sb_fragments_huge": _index_past_end(
        "fragment table", "fragment_table_start", "fragments"),
    "sb_compression_all_ones": lambda b, d: (
        r"^IMAGE: unsupported compressor unknown \(id 65535\)$"),
    "sb_compression_top_bit": lambda b, d: (
        r"^IMAGE: unsupported compressor unknown \(id %d\)$"
        % _sbv(d, "compression")),
    "sb_block_log_all_ones": lambda b, d: (
        r"^IMAGE: bad superblock: block log 65535 outside 12\.\.20$"),
    "sb_block_log_top_bit": lambda b, d: (
        r"^IMAGE: bad superblock: block log %d outside 12\.\.20$"
        % _sbv(d, "block_log")),
    # the compressor-options flag: the first data block is read as options
    "sb_flags_all_ones": lambda b, d: (
        r"^IMAGE: bad compressor options: block header %s at 0x60$" % HEX),
    "sb_flags_all": lambda b, d: (
        r"^IMAGE: bad compressor options: block header %s at 0x60$" % HEX),
    "sb_no_ids_all_ones": _index_past_end("id table", "id_table_start",
                                          "no_ids"),
    # 32769 ids need 2 index blocks: the second pointer is the next bytes
    "sb_no_ids_top_bit": lambda b, d: (
        r"^IMAGE: bad id table: block 1 at %s outside 0x60\.\.%s$"
        % (X(_u(d, b.sb["id_table_start"] + 8, "<Q")),
           X(b.sb["id_table_start"]))),
    "sb_no_ids_zero": lambda b, d: r"^IMAGE: bad superblock: id count is 0$",
    "sb_s_major_all_ones": lambda b, d: (
        r"^IMAGE: unsupported SquashFS version 65535\.0 \(only 4\.0\)$"),
    "sb_s_major_top_bit": lambda b, d: (
        r"^IMAGE: unsupported SquashFS version 32772\.0 \(only 4\.0\)$"),
    "sb_s_minor_all_ones": lambda b, d: (
        r"^IMAGE: unsupported SquashFS version 4\.65535 \(only 4\.0\)$"),
    "sb_s_minor_top_bit": lambda b, d: (
        r"^IMAGE: unsupported SquashFS version 4\.32768 \(only 4\.0\)$"),
    "sb_root_inode_all_ones": lambda b, d: (
        r"^IMAGE: bad superblock: root inode reference 0xffffffffffffffff "
        r"outside the inode table$"),
    "sb_root_inode_top_bit": lambda b, d: (
        r"^IMAGE: bad superblock: root inode reference %s outside the inode "
        r"table$" % X(_sbv(d, "root_inode"))),
    "sb_root_inode_plus_1": lambda b, d: (
        r"^IMAGE: bad root inode %s in the inode table at %s: inode %s: "
        r"unknown inode type at offset %s: corrupt image$"
        % (X(_sbv(d, "root_inode")), _root_at(b)[1],
           X(_sbv(d, "root_inode")), _root_at(b)[1])),
    "sb_bytes_used_all_ones": _truncated,
    "sb_bytes_used_top_bit": _truncated,
    "sb_id_table_start_all_ones": _sb_table_outside("id table",
                                                    "id_table_start"),
    "sb_id_table_start_top_bit": _sb_table_outside("id table",
                                                   "id_table_start"),
    # one byte on, the index pointer is read from misaligned bytes
    "sb_id_table_start_plus_1": _block_outside("id"),
    "sb_xattr_id_table_start_top_bit": _sb_table_outside(
        "xattr id table", "xattr_id_table_start"),
    "sb_xattr_id_table_start_plus_1": lambda b, d: (
        r"^IMAGE: bad xattr id table: xattr table offset %s outside "
        r"0x60\.\.%s$" % (X(_u(d, _sbv(d, "xattr_id_table_start"), "<Q")),
                          X(_sbv(d, "xattr_id_table_start")))),
    "sb_inode_table_start_all_ones": _inode_table_outside,
    "sb_inode_table_start_top_bit": _inode_table_outside,
    "sb_inode_table_at_0": _inode_table_outside,
    # the root inode is read one byte into the table: a length read from
    # the wrong bytes
    "sb_inode_table_start_plus_1": lambda b, d: (
        r"^IMAGE: bad root inode %s in the inode table at %s: metadata block "
        r"of \d+ bytes past the end of the image at offset %s: "
        % (X(b.sb["root_inode"]), X(_sbv(d, "inode_table_start")),
           X(_sbv(d, "inode_table_start")))),
    "sb_directory_table_start_all_ones": _dir_not_between,
    "sb_directory_table_start_top_bit": _dir_not_between,
    "sb_dir_table_is_inode_table": _dir_not_between,
    "sb_fragment_table_start_all_ones": _sb_table_outside(
        "fragment table", "fragment_table_start"),
    "sb_fragment_table_start_top_bit": _sb_table_outside(
        "fragment table", "fragment_table_start"),
    "sb_fragment_table_start_plus_1": _block_outside("frag"),
    "sb_lookup_table_start_top_bit": _sb_table_outside(
        "export table", "lookup_table_start"),
    "sb_lookup_table_start_plus_1": _block_outside("export"),
    # each table's index pointing past the end / at 0
    "id_table_pointer_past_end": _block_outside("id"),
    "id_table_pointer_zero": _block_outside("id", "0x0"),
    "frag_table_pointer_past_end": _block_outside("frag"),
    "frag_table_pointer_zero": _block_outside("frag", "0x0"),
    "export_table_pointer_past_end": _block_outside("export"),
    "export_table_pointer_zero": _block_outside("export", "0x0"),
    "xattr_id_table_pointer_past_end": _block_outside("xattr_id"),
    "xattr_id_table_pointer_zero": _block_outside("xattr_id", "0x0"),
    # the id table is the only lookup table read whole at open: its
    # metadata block's header, by block offset
    "id_table_block_length_max": _id_block("metadata block size 32767 "
                                           "invalid"),
    "id_table_block_length_zero": _id_block("metadata block size 0 invalid"),
    "id_table_block_claims_compressed": _id_block(r"metadata block of \d+ "
                                                  r"bytes"),
    "xattr_table_start_past_end": lambda b, d: (
        r"^IMAGE: bad xattr id table: xattr table offset %s outside "
        r"0x60\.\.%s$" % (X(_u(d, b.sb["xattr_id_table_start"], "<Q")),
                          X(b.sb["xattr_id_table_start"]))),
    "xattr_ids_huge": _index_past_end("xattr id table", "xattr_id_table_start",
                                      None, 16),
    # the root inode itself
    "root_inode_type_0": _root_bad("unknown inode type"),
    "root_inode_type_15": _root_bad("unknown inode type"),
    "root_inode_type_65535": _root_bad("unknown inode type"),
    # type 2 reads the directory's fields as a file's: the fragment index
    "root_inode_type_2": _root_bad("fragment reference out of range"),
    "root_inode_type_3": lambda b, d: (
        r"^IMAGE: bad root inode %s: not a directory$" % _root_at(b)[0]),
    "root_inode_number_zero": _root_bad("inode number out of range"),
    "root_uid_index_huge": _root_bad("id index beyond the id table"),
    "root_dir_size_zero": _root_bad("directory size below 3"),
}
assert set(REFUSED) <= set(corruptgen.CASES), \
    set(REFUSED) - set(corruptgen.CASES)


# Cases served with errors: the per-read line the daemon logs (image, what,
# block offset), the paths that must give EIO, and every other file must
# read its original bytes.
def _data_block(i, what="of %d bytes at offset %s: decompression failed"):
    def fn(b, d):
        off, size, _ = b.file_blocks("big.bin")[i]
        return r"^sqfs-lazy-mount: IMAGE: data block %s$" % (
            what % (size, X(off)))
    return fn


def _frag_block(b, d):
    off, size, _ = b.fragment(b.lookup("a.txt")["fragment"])
    return (r"^sqfs-lazy-mount: IMAGE: data block of %d bytes at offset %s: "
            r"decompression failed$" % (size, X(off)))


def _frag_table_block(detail):
    def fn(b, d):
        blk = X(_u(d, b.sb["fragment_table_start"], "<Q"))
        return (r"^sqfs-lazy-mount: IMAGE: %s at offset %s: " % (detail, blk))
    return fn


_FRAG_USERS = ["a.txt", "sub/one", "sub/two", "sub/deeper/three"]
SERVED = {
    "data_block_flipped": (_data_block(1), ["big.bin"]),
    "data_block_header_zeroed": (_data_block(0), ["big.bin"]),
    "file_start_past_end": (lambda b, d: (
        r"^sqfs-lazy-mount: IMAGE: data block of %d bytes past the end of "
        r"the image at offset %s: " % (b.file_blocks("big.bin")[0][1],
                                       X(len(d) + 8192))), ["big.bin"]),
    "fragment_block_flipped_len": (_frag_block, ["a.txt"]),
    "frag_entry_start_past_end": (lambda b, d: (
        r"^sqfs-lazy-mount: IMAGE: data block of %d bytes past the end of "
        r"the image at offset %s: "
        % (b.fragment(b.lookup("a.txt")["fragment"])[1], X(len(d) + 4096))),
        ["a.txt"]),
    "frag_table_block_length_max": (
        _frag_table_block("metadata block size 32767 invalid"), _FRAG_USERS),
    "frag_table_block_length_zero": (
        _frag_table_block("metadata block size 0 invalid"), _FRAG_USERS),
    "frag_table_block_claims_compressed": (
        _frag_table_block(r"metadata block of \d+ bytes"), _FRAG_USERS),
}
assert not set(SERVED) & set(REFUSED)


@pytest.fixture(scope="module")
def corpus(workdir):
    util.require_fuse()
    util.require_daemon()
    util.require_mksquashfs()
    d = workdir / "corpus"
    d.mkdir(exist_ok=True)
    image, files = corruptgen.make_base(str(d))
    return dict(corruptgen.build_all(image)), str(d), image, files


def start(image, mnt, log):
    os.makedirs(mnt, exist_ok=True)
    cmd = util.fuse_mount_cmd() + [image, mnt]
    with open(log, "wb") as lf:
        p = subprocess.Popen(cmd, stdout=lf, stderr=lf,
                             stdin=subprocess.DEVNULL)
    util.wait_until(lambda: p.poll() is not None or util.is_mounted(mnt),
                    MOUNT_WAIT)
    return p


def read_log(log):
    with open(log, "rb") as f:
        return f.read().decode(errors="replace")


def stop(p, mnt):
    """Unmount and wait; returns the exit status (None if it had to be
    killed)."""
    if util.is_mounted(mnt):
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        if util.is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", mnt],
                           capture_output=True)
    try:
        return p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


def test_base_image_is_good(corpus, tmp_path):
    """The base mounts and walks without a single error: every failure in
    the cases below comes from the damage."""
    _, d, image, _ = corpus
    mnt = str(tmp_path / "mnt")
    log = str(tmp_path / "log")
    p = start(image, mnt, log)
    try:
        assert util.is_mounted(mnt), read_log(log)
        r = subprocess.run([sys.executable, "-c", WALKER, mnt],
                           capture_output=True, timeout=WALK_TIMEOUT)
        res = json.loads(r.stdout)
        assert res["errors"] == {} and res["nodes"] == 10, res
    finally:
        rc = stop(p, mnt)
    assert rc == 0


def check_served(name, base, data, files, mnt, walk, log):
    """A damaged image served with errors: its line, its EIO paths, and
    every other file's bytes (the source tree mksquashfs packed, which
    test_base_image_is_good reads back in full)."""
    pattern, damaged = SERVED[name]
    want = pattern(base, data)
    assert re.search(want, log, re.M), \
        "no per-read line %r in the daemon's log:\n%s" % (want, log[-3000:])
    eio = walk["errors"].get("EIO", [])
    for rel in damaged:
        assert "read " + os.path.join(mnt, rel) in eio, \
            "%s did not give EIO: %r" % (rel, walk["errors"])
    bad = []
    for rel, want_bytes in files.items():
        if rel in damaged:
            continue
        try:
            with open(os.path.join(mnt, rel), "rb") as f:
                if f.read() != want_bytes:
                    bad.append(rel + ": wrong bytes")
        except OSError as e:
            bad.append("%s: %s" % (rel, e))
    assert not bad, "intact files affected: %r" % bad


@pytest.mark.parametrize("name", list(corruptgen.CASES))
def test_corrupt_image(corpus, tmp_path, name):
    cases, _, base_image, files = corpus
    base = util.SqfsReader(base_image)
    image = str(tmp_path / (name + ".sqfs"))
    with open(image, "wb") as f:
        f.write(cases[name])
    mnt = str(tmp_path / "mnt")
    log = str(tmp_path / "log")
    t0 = time.monotonic()
    p = start(image, mnt, log)
    walk = None
    try:
        if p.poll() is not None:
            took = time.monotonic() - t0
            text = read_log(log)
            lines = [ln for ln in text.splitlines() if ln.strip()]
            assert not SANITIZER.search(text), text
            assert p.returncode == 1, \
                "exit status %s (want 1): %r" % (p.returncode, text)
            assert len(lines) == 1, "want one error line, got %r" % text
            what = re.sub(r"^sqfs-lazy-mount: ", "",
                          lines[0].replace(image, "IMAGE"))
            assert what.startswith("IMAGE: "), \
                "the line does not name the image: %r" % lines[0]
            assert name in REFUSED, \
                "refused, but this case should mount: %r" % lines[0]
            want = REFUSED[name](base, cases[name])
            assert re.search(want, what), \
                "wrong reason:\n  got  %r\n  want %r" % (what, want)
            assert took < 10 * SCALE, "refusal took %.1f s" % took
            return
        assert name not in REFUSED, "mounted, but this case must be " \
            "refused with %r" % REFUSED[name](base, cases[name])
        assert util.is_mounted(mnt), "neither mounted nor exited:\n" + \
            read_log(log)
        try:
            r = subprocess.run([sys.executable, "-c", WALKER, mnt],
                               capture_output=True, timeout=WALK_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail("walking the mounted damaged image hung (> %ds)"
                        % WALK_TIMEOUT)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        walk = json.loads(r.stdout)
        bad = {k: v for k, v in walk["errors"].items() if k not in ALLOWED}
        assert not bad, "unexpected errors: %r" % bad
        assert p.poll() is None, "daemon died (status %s):\n%s" % (
            p.returncode, read_log(log)[-3000:])
        if name in SERVED:
            check_served(name, base, cases[name], files, mnt, walk,
                         read_log(log).replace(image, "IMAGE"))
        assert time.monotonic() - t0 < 60
    finally:
        rc = stop(p, mnt)
        text = read_log(log)
        assert not util.is_mounted(mnt)
    assert not SANITIZER.search(text), text[-5000:]
    assert rc == 0, "daemon exit status %s after unmount:\n%s" % (
        rc, text[-3000:])
