"""Deterministic corruption corpus: bad images derived from one good small
image.

The base image keeps its inode, directory, fragment, id, export and xattr
tables uncompressed (mksquashfs -noI -noF -noX) so a case can rewrite one
field in place; data blocks stay gzip-compressed, so damaging them is
detectable (EIO) instead of silently giving other bytes.

Every case is a function (reader, bytearray) -> None that damages the bytes
in place; CASES maps a stable name to it. The names do not depend on the
base image, so pytest can list them before the image exists.

    python3 corruptgen.py OUTDIR     # build the base, write every case
"""

import os
import random
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))

import util  # noqa: E402

BS = 4096
U16, U32, U64 = "<H", "<I", "<Q"


# --------------------------------------------------------------------------
# The base image
# --------------------------------------------------------------------------

def make_tree(root):
    """A small tree with every structure the cases touch: a 3.5-block file
    (data blocks + fragment tail), small files sharing a fragment, an
    extended file (xattr), a symlink, nested directories."""
    r = random.Random(7)
    os.makedirs(os.path.join(root, "sub", "deeper"))
    text = b"".join(b"line %05d of some text\n" % i for i in range(700))
    files = {
        "big.bin": text[:3 * BS + 1500],
        "a.txt": text[:3000],
        "sub/one": b"one\n",
        "sub/two": bytes(r.randrange(256) for _ in range(900)),
        "sub/deeper/three": text[100:2100],
        "empty": b"",
    }
    for rel, data in files.items():
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    os.symlink("a.txt", os.path.join(root, "link"))
    os.setxattr(os.path.join(root, "a.txt"), "user.note", b"hello xattr")
    os.setxattr(os.path.join(root, "sub"), "user.dir", b"d" * 40)
    return files


def make_base(workdir):
    src = os.path.join(workdir, "src")
    files = make_tree(src)
    image = os.path.join(workdir, "base.sqfs")
    util.run(["mksquashfs", src, image, "-noappend", "-quiet", "-no-progress",
              "-comp", "gzip", "-b", str(BS), "-noI", "-noF", "-noX",
              "-mkfs-time", "0", "-all-time", "0", "-all-root",
              "-processors", "1", "-nopad"])
    return image, files


# --------------------------------------------------------------------------
# Locating structures (metadata stored uncompressed)
# --------------------------------------------------------------------------

def md_abs(rd, table_start, blk, off):
    """Absolute image offset of byte `off` of the metadata stream that
    starts at block `blk` of a table (uncompressed blocks only)."""
    pos = rd.base + table_start + blk
    while True:
        hdr, = struct.unpack_from(U16, rd.data, pos)
        ln = hdr & 0x7FFF
        assert hdr & 0x8000, "metadata block at %d is compressed" % pos
        if off < ln:
            return pos + 2 + off
        off -= ln
        pos += 2 + ln


def inode_abs(rd, ref, field_off):
    return md_abs(rd, rd.sb["inode_table_start"], ref >> 16,
                  (ref & 0xFFFF) + field_off)


def entry_ref(rd, relpath):
    """Inode reference of a path (the root for "")."""
    ref = rd.sb["root_inode"]
    for comp in [c for c in os.fsencode(relpath).split(b"/") if c]:
        ents, _ = rd.dir_entries(rd.inode(ref))
        ref = dict(ents)[comp]
    return ref


def dir_listing(rd, relpath):
    """[(name, abs offset of the entry, abs offset of its header)] of a
    directory's listing."""
    dino = rd.lookup(relpath) if relpath else rd.inode(rd.sb["root_inode"])
    start = rd.sb["directory_table_start"]
    size = dino["file_size"] - 3
    out, pos = [], 0
    while pos < size:
        hdr = md_abs(rd, start, dino["start_block"], dino["offset"] + pos)
        count, = struct.unpack_from(U32, rd.data, hdr)
        pos += 12
        for _ in range(count + 1):
            e = md_abs(rd, start, dino["start_block"], dino["offset"] + pos)
            nsize, = struct.unpack_from(U16, rd.data, e + 6)
            out.append((rd.data[e + 8:e + 9 + nsize], e, hdr))
            pos += 8 + nsize + 1
    return out


def put(data, off, fmt, value):
    struct.pack_into(fmt, data, off, value)


def get(data, off, fmt):
    return struct.unpack_from(fmt, data, off)[0]


# --------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------

CASES = {}


def case(name):
    def reg(fn):
        assert name not in CASES, name
        CASES[name] = fn
        return fn
    return reg


def truncate(data, n):
    del data[n:]


# Truncated images, bytes_used unchanged (points past the end) and fixed.
for _name, _where in (("0", lambda rd: 0), ("1", lambda rd: 1),
                      ("95", lambda rd: 95), ("96", lambda rd: 96),
                      ("quarter", lambda rd: rd.sb["bytes_used"] // 4),
                      ("half", lambda rd: rd.sb["bytes_used"] // 2),
                      ("inode_table", lambda rd: rd.sb["inode_table_start"]),
                      ("dir_table", lambda rd: rd.sb["directory_table_start"]),
                      ("frag_table", lambda rd: rd.sb["fragment_table_start"]),
                      ("id_table", lambda rd: rd.sb["id_table_start"]),
                      ("last_byte", lambda rd: rd.sb["bytes_used"] - 1)):
    def _trunc(rd, data, where=_where):
        truncate(data, where(rd))
    case("truncate_at_" + _name)(_trunc)

for _name, _where in (("half", lambda rd: rd.sb["bytes_used"] // 2),
                      ("dir_table", lambda rd: rd.sb["directory_table_start"]),
                      ("last_byte", lambda rd: rd.sb["bytes_used"] - 1)):
    def _trunc_fixed(rd, data, where=_where):
        n = where(rd)
        truncate(data, n)
        put(data, util.SB_OFFSETS["bytes_used"], U64, n)
    case("truncate_fixed_bytes_used_at_" + _name)(_trunc_fixed)


# Every superblock field: all ones, its top bit flipped; table offsets
# also off by one (misaligned into the neighbouring structure).
_SB_FMT = {f: "<" + c for f, c in zip(util.SB_FIELDS, util.SB_FMT[1:])}
for _f in util.SB_FIELDS:
    _fmt = _SB_FMT[_f]
    _bits = struct.calcsize(_fmt) * 8

    def _ones(rd, data, f=_f, fmt=_fmt, bits=_bits):
        put(data, util.SB_OFFSETS[f], fmt, (1 << bits) - 1)
    case("sb_%s_all_ones" % _f)(_ones)

    def _top(rd, data, f=_f, fmt=_fmt, bits=_bits):
        off = util.SB_OFFSETS[f]
        put(data, off, fmt, get(data, off, fmt) ^ (1 << (bits - 1)))
    case("sb_%s_top_bit" % _f)(_top)

    if _f.endswith("_start") or _f == "root_inode":
        def _plus1(rd, data, f=_f, fmt=_fmt):
            off = util.SB_OFFSETS[f]
            put(data, off, fmt, get(data, off, fmt) + 1)
        case("sb_%s_plus_1" % _f)(_plus1)


def _sb_set(field, value_fn):
    def fn(rd, data):
        put(data, util.SB_OFFSETS[field], _SB_FMT[field], value_fn(rd))
    return fn


case("sb_inodes_huge")(_sb_set("inodes", lambda rd: 0x7FFFFFFF))
case("sb_fragments_huge")(_sb_set("fragments", lambda rd: 0x10000000))
case("sb_no_ids_zero")(_sb_set("no_ids", lambda rd: 0))
case("sb_flags_all")(_sb_set("flags", lambda rd: 0xFFFF))
case("sb_inode_table_at_0")(_sb_set("inode_table_start", lambda rd: 0))
case("sb_dir_table_is_inode_table")(
    _sb_set("directory_table_start", lambda rd: rd.sb["inode_table_start"]))
case("sb_root_inode_points_at_dir")(
    _sb_set("root_inode", lambda rd: entry_ref(rd, "sub")))


# Lookup tables: the u64 pointer list at the table start, the metadata
# block it points to, the entries.
def _table_ptr(rd, field):
    start = rd.sb[field]
    if field == "xattr_id_table_start":
        return start + 16
    return start


def _tables():
    return (("id", "id_table_start"), ("frag", "fragment_table_start"),
            ("export", "lookup_table_start"),
            ("xattr_id", "xattr_id_table_start"))


for _t, _field in _tables():
    def _ptr_past_end(rd, data, field=_field):
        put(data, _table_ptr(rd, field), U64, len(data) + 100)
    case("%s_table_pointer_past_end" % _t)(_ptr_past_end)

    def _ptr_zero(rd, data, field=_field):
        put(data, _table_ptr(rd, field), U64, 0)
    case("%s_table_pointer_zero" % _t)(_ptr_zero)

    def _blk_len_max(rd, data, field=_field):
        blk = get(data, _table_ptr(rd, field), U64)
        put(data, blk, U16, 0xFFFF)
    case("%s_table_block_length_max" % _t)(_blk_len_max)

    def _blk_len_zero(rd, data, field=_field):
        blk = get(data, _table_ptr(rd, field), U64)
        put(data, blk, U16, 0x8000)
    case("%s_table_block_length_zero" % _t)(_blk_len_zero)

    def _blk_claims_compressed(rd, data, field=_field):
        blk = get(data, _table_ptr(rd, field), U64)
        put(data, blk, U16, get(data, blk, U16) & 0x7FFF)
    case("%s_table_block_claims_compressed" % _t)(_blk_claims_compressed)


def _frag_entry(rd, data):
    return get(data, rd.sb["fragment_table_start"], U64) + 2


@case("frag_entry_start_past_end")
def _(rd, data):
    put(data, _frag_entry(rd, data), U64, len(data) + 4096)


@case("frag_entry_size_huge")
def _(rd, data):
    put(data, _frag_entry(rd, data) + 8, U32, 0x00FFFFFF)


@case("frag_entry_size_zero")
def _(rd, data):
    put(data, _frag_entry(rd, data) + 8, U32, 0)


@case("frag_entry_claims_compressed")
def _(rd, data):
    e = _frag_entry(rd, data) + 8
    put(data, e, U32, get(data, e, U32) & ~(1 << 24))


@case("export_entry_bogus_ref")
def _(rd, data):
    e = get(data, rd.sb["lookup_table_start"], U64) + 2
    put(data, e, U64, 0xFFFFFFFFFFFF)


def _xattr_hdr(rd):
    return rd.sb["xattr_id_table_start"]


@case("xattr_table_start_past_end")
def _(rd, data):
    put(data, _xattr_hdr(rd), U64, len(data) + 100)


@case("xattr_ids_huge")
def _(rd, data):
    put(data, _xattr_hdr(rd) + 8, U32, 0xFFFFFFFF)


@case("xattr_ids_zero")
def _(rd, data):
    put(data, _xattr_hdr(rd) + 8, U32, 0)


def _xattr_id_entry(rd, data):
    return get(data, _xattr_hdr(rd) + 16, U64) + 2


@case("xattr_id_entry_ref_bogus")
def _(rd, data):
    put(data, _xattr_id_entry(rd, data), U64, 0xFFFFFFFFFFFF)


@case("xattr_id_entry_count_huge")
def _(rd, data):
    put(data, _xattr_id_entry(rd, data) + 8, U32, 0xFFFFFFFF)


@case("xattr_id_entry_size_huge")
def _(rd, data):
    put(data, _xattr_id_entry(rd, data) + 12, U32, 0xFFFFFFFF)


@case("xattr_kv_name_size_huge")
def _(rd, data):
    # first key: type u16, name_size u16, name; in the xattr metadata
    ref = get(data, _xattr_id_entry(rd, data), U64)
    table = get(data, _xattr_hdr(rd), U64)
    pos = md_abs(rd, table - rd.base, ref >> 16, (ref & 0xFFFF) + 2)
    put(data, pos, U16, 0xFFFF)


@case("xattr_kv_value_size_huge")
def _(rd, data):
    ref = get(data, _xattr_id_entry(rd, data), U64)
    table = get(data, _xattr_hdr(rd), U64)
    k = md_abs(rd, table - rd.base, ref >> 16, ref & 0xFFFF)
    nsize = get(data, k + 2, U16)
    put(data, k + 4 + nsize, U32, 0xFFFFFFF0)


# Inodes (metadata).
def _inode_field(path, off, fmt, value_fn):
    def fn(rd, data):
        pos = inode_abs(rd, entry_ref(rd, path), off)
        put(data, pos, fmt, value_fn(get(data, pos, fmt), rd, data))
    return fn


for _v in (0, 15, 2, 3, 0xFFFF):
    case("root_inode_type_%d" % _v)(
        _inode_field("", 0, U16, lambda old, rd, d, v=_v: v))
case("root_inode_number_zero")(_inode_field("", 12, U32, lambda *a: 0))
case("root_uid_index_huge")(_inode_field("", 4, U16, lambda *a: 0xFFFF))
# basic dir (type 1) body at 16: start_block u32, nlink u32, file_size u16,
# offset u16, parent u32; the root here is an extended dir only if it has
# xattrs (it has not; "sub" has, so "sub" is type 8)
case("root_dir_start_block_huge")(
    _inode_field("", 16, U32, lambda *a: 0x7FFFFFFF))
case("root_dir_nlink_huge")(_inode_field("", 20, U32, lambda *a: 0xFFFFFFFF))
case("root_dir_size_max")(_inode_field("", 24, U16, lambda *a: 0xFFFF))
case("root_dir_size_zero")(_inode_field("", 24, U16, lambda *a: 0))
case("root_dir_offset_max")(_inode_field("", 26, U16, lambda *a: 0xFFFF))
# extended dir "sub": nlink, file_size, start_block, parent, icount, offset
case("sub_dir_size_huge")(_inode_field("sub", 20, U32, lambda *a: 0x7FFFFFFF))
case("sub_dir_parent_is_self")(
    _inode_field("sub", 28, U32,
                 lambda old, rd, d: get(d, inode_abs(rd, entry_ref(rd, "sub"),
                                                     12), U32)))
case("sub_dir_index_count_huge")(
    _inode_field("sub", 32, U16, lambda *a: 0xFFFF))
case("sub_dir_xattr_huge")(_inode_field("sub", 36, U32, lambda *a: 0x7FFFFFFF))
# basic file big.bin (type 2): start_block, fragment, frag_offset, size,
# block list
case("file_start_past_end")(
    _inode_field("big.bin", 16, U32, lambda old, rd, d: len(d) + 8192))
case("file_fragment_index_huge")(
    _inode_field("big.bin", 20, U32, lambda *a: 0x7FFFFFF0))
case("file_frag_offset_huge")(
    _inode_field("big.bin", 24, U32, lambda *a: 0xFFFFFF00))
case("file_size_huge")(_inode_field("big.bin", 28, U32, lambda *a: 0xFFFFFFFF))
case("file_block_size_huge")(
    _inode_field("big.bin", 32, U32, lambda *a: 0x00FFFFFF))
case("file_block_size_over_block")(
    _inode_field("big.bin", 32, U32, lambda old, rd, d: BS + 1))
case("file_block_claims_uncompressed")(
    _inode_field("big.bin", 36, U32, lambda old, rd, d: old | (1 << 24)))
case("file_block_zero_is_sparse")(
    _inode_field("big.bin", 36, U32, lambda *a: 0))
# extended file a.txt (type 9): start u64, size u64, sparse u64, nlink,
# fragment, frag_offset, xattr
case("extfile_size_huge")(
    _inode_field("a.txt", 24, U64, lambda *a: 1 << 62))
case("extfile_sparse_huge")(
    _inode_field("a.txt", 32, U64, lambda *a: 1 << 63))
case("extfile_xattr_index_huge")(
    _inode_field("a.txt", 52, U32, lambda *a: 0x7FFFFFFF))
case("extfile_type_to_symlink")(
    _inode_field("a.txt", 0, U16, lambda *a: 10))
# symlink (type 3): nlink u32, target size u32, target
case("symlink_size_huge")(_inode_field("link", 20, U32, lambda *a: 0xFFFFFFFF))
case("symlink_size_zero")(_inode_field("link", 20, U32, lambda *a: 0))
case("symlink_type_to_dir")(_inode_field("link", 0, U16, lambda *a: 1))


# Directory listings.
def _entry(path, name):
    def find(rd):
        for n, e, h in dir_listing(rd, path):
            if n == name:
                return e, h
        raise KeyError(name)
    return find


def _dir_field(path, name, where, off, fmt, value_fn):
    def fn(rd, data):
        e, h = _entry(path, name)(rd)
        pos = (e if where == "entry" else h) + off
        put(data, pos, fmt, value_fn(get(data, pos, fmt), rd, data))
    return fn


case("dir_header_count_huge")(
    _dir_field("", b"a.txt", "header", 0, U32, lambda *a: 0xFFFFFFFF))
case("dir_header_count_300")(
    _dir_field("", b"a.txt", "header", 0, U32, lambda *a: 300))
case("dir_header_start_huge")(
    _dir_field("", b"a.txt", "header", 4, U32, lambda *a: 0x7FFFFFFF))
case("dir_header_inode_number_huge")(
    _dir_field("", b"a.txt", "header", 8, U32, lambda *a: 0xFFFFFFF0))
case("dir_entry_offset_max")(
    _dir_field("", b"big.bin", "entry", 0, U16, lambda *a: 0xFFFF))
case("dir_entry_inode_delta_min")(
    _dir_field("", b"big.bin", "entry", 2, U16, lambda *a: 0x8000))
case("dir_entry_type_bogus")(
    _dir_field("", b"big.bin", "entry", 4, U16, lambda *a: 99))
case("dir_entry_type_says_dir")(
    _dir_field("", b"big.bin", "entry", 4, U16, lambda *a: 1))
case("dir_entry_name_size_max")(
    _dir_field("", b"big.bin", "entry", 6, U16, lambda *a: 0xFFFF))
case("dir_entry_name_with_slash")(
    _dir_field("", b"big.bin", "entry", 9, "<B", lambda *a: ord("/")))
case("dir_entry_name_dotdot")(
    _dir_field("sub", b"one", "entry", 8, "<3s", lambda *a: b"..\0"))


def _point_entry_at(path, name, target_path):
    """Make entry `name` of directory `path` refer to the directory at
    target_path: a cycle in the tree. The header's inode block is shared
    by the entries it covers, so only the offset is changed when the
    target lives in the same metadata block (it does in this image)."""
    def fn(rd, data):
        e, h = _entry(path, name)(rd)
        ref = entry_ref(rd, target_path)
        assert get(data, h + 4, U32) == ref >> 16, \
            "target inode in another metadata block"
        put(data, e, U16, ref & 0xFFFF)
    return fn


case("cycle_dir_contains_itself")(_point_entry_at("sub", b"deeper", "sub"))
case("cycle_dir_contains_parent")(_point_entry_at("sub", b"deeper", ""))
case("cycle_root_contains_root")(_point_entry_at("", b"sub", ""))
case("cycle_deep_contains_root")(
    _point_entry_at("sub/deeper", b"three", ""))


# Data blocks (gzip): damaged payload, fragment block payload.
@case("data_block_flipped")
def _(rd, data):
    off, size, compressed = rd.file_blocks("big.bin")[1]
    assert compressed
    for i in range(off + size // 2 - 8, off + size // 2 + 8):
        data[i] ^= 0xFF


@case("data_block_header_zeroed")
def _(rd, data):
    off, size, _ = rd.file_blocks("big.bin")[0]
    data[off:off + 8] = bytes(8)


@case("fragment_block_flipped_len")
def _(rd, data):
    # fragment blocks are uncompressed here: claim compressed instead
    e = _frag_entry(rd, data) + 8
    put(data, e, U32, get(data, e, U32) & 0xFFFFFF)


def build_all(base_image):
    """[(name, bytes)] of every case, in CASES order."""
    rd = util.SqfsReader(base_image)
    out = []
    for name, fn in CASES.items():
        data = bytearray(rd.data)
        fn(rd, data)
        assert bytes(data) != rd.data, "case %s changed nothing" % name
        out.append((name, bytes(data)))
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    image, _ = make_base(outdir)
    for name, data in build_all(image):
        with open(os.path.join(outdir, name + ".sqfs"), "wb") as f:
            f.write(data)
    print("%d cases in %s" % (len(CASES), outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
