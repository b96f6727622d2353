"""The image matrix: how each test image is packed from the edge-case tree.

Every image except `lzma` is compared against a kernel loop mount of itself.
The kernel has no legacy-lzma decompressor, so the lzma image is compared
against the kernel mount of `gzip-twin`, packed from the same tree with the
same options (same layout and inode numbers).

`huge` says whether the > 4 GiB sparse file is included (reading its holes
makes packing slow, so only a few images carry it); `full_huge` says whether
it is compared in full or only sampled with preads.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ImageSpec:
    name: str
    tool: str                      # "mksquashfs" or "gensquashfs"
    args: tuple = ()
    block_size: int = 131072
    huge: bool = False
    full_huge: bool = False
    oracle: str = None             # image whose kernel mount is the oracle
    kernel_mountable: bool = True
    # The loop device drops a trailing partial 512-byte sector, so the
    # kernel cannot read an unpadded image whose size is not a multiple of
    # 512; its oracle is a zero-padded copy (padding is all -nopad omits).
    pad_oracle: bool = False
    tags: tuple = field(default=())


def mk(name, *args, bs=131072, **kw):
    if bs != 131072:
        args = ("-b", str(bs)) + args
    return ImageSpec(name=name, tool="mksquashfs", args=args, block_size=bs,
                     **kw)


IMAGES = [
    mk("gzip", "-comp", "gzip", huge=True, full_huge=True),
    mk("lzo", "-comp", "lzo", "-Xalgorithm", "lzo1x_999"),
    mk("lz4", "-comp", "lz4", huge=True),
    mk("xz", "-comp", "xz"),
    mk("zstd", "-comp", "zstd"),
    mk("lzma", "-comp", "lzma", oracle="gzip-twin", kernel_mountable=False),
    mk("gzip-4k", "-comp", "gzip", bs=4096, huge=True),
    mk("lz4hc-4k", "-comp", "lz4", "-Xhc", bs=4096),
    mk("lzo1x1-64k", "-comp", "lzo", "-Xalgorithm", "lzo1x_1", bs=65536),
    mk("xz-dict-256k", "-comp", "xz", "-Xdict-size", "25%", bs=262144),
    mk("zstd-1m", "-comp", "zstd", bs=1048576, huge=True, full_huge=True),
    mk("xz-bcj-1m", "-comp", "xz", "-Xbcj", "x86", bs=1048576),
    mk("gzip-nofrag", "-comp", "gzip", "-no-fragments"),
    mk("gzip-allfrag", "-comp", "gzip", "-always-use-fragments", "-tailends"),
    mk("zstd-noxattr", "-comp", "zstd", "-no-xattrs"),
    mk("gzip-noexport", "-comp", "gzip", "-no-exports"),
    mk("gzip-uncompressed", "-comp", "gzip", "-noI", "-noD", "-noF", "-noX"),
    mk("gzip-nopad", "-comp", "gzip", "-nopad", pad_oracle=True),
    mk("zstd19-tail", "-comp", "zstd", "-Xcompression-level", "19",
       "-tailends"),
    mk("gzip-win8", "-comp", "gzip", "-Xwindow-size", "8",
       "-Xcompression-level", "1"),
    mk("gzip-nodup", "-comp", "gzip", "-no-duplicates", "-no-hardlinks",
       "-no-sparse"),
    ImageSpec(name="ng-xz", tool="gensquashfs",
              args=("-k", "-x", "-e", "-c", "xz"), huge=True),
]

# Images only used as oracles (mounted by the kernel, never by FUSE).
ORACLES = {
    "gzip-twin": mk("gzip-twin", "-comp", "gzip"),
}

BY_NAME = {s.name: s for s in IMAGES}
BY_NAME.update(ORACLES)


def pack_command(spec, tree, out):
    if spec.tool == "mksquashfs":
        cmd = ["mksquashfs", tree, out, "-noappend", "-quiet", "-no-progress",
               "-processors", "2", "-mkfs-time", "1700000000"]
        cmd += list(spec.args)
        if not spec.huge:
            cmd += ["-e", "sparse/huge"]
        return cmd
    if spec.tool == "gensquashfs":
        assert spec.huge, "gensquashfs cannot exclude paths; keep huge"
        return ["gensquashfs", "--pack-dir", tree, "-q", "-f", "-j", "2",
                "-b", str(spec.block_size)] + list(spec.args) + [out]
    raise ValueError(spec.tool)
