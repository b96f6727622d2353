#!/usr/bin/env python3
"""Seeds for fuzz_http_response and fuzz_mount_options (the input layouts
are described at the top of each target). Writes into tests/fuzz/corpus/."""
import os
import struct

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def http(probe, piece, off, want, total, etag, lm, resp):
    head = bytes([(piece - 1) << 1 | probe]) + struct.pack(">Q", off) + b"\0"
    head += struct.pack(">H", want - 1) + struct.pack(">Q", total) + b"\0" * 4
    return head + etag + b"\0" + lm + b"\0" + resp


def r206(first, last, total, extra=b"", body=None):
    n = last - first + 1
    return (b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\n"
            b"Content-Length: %d\r\n" % (first, last, total, n) + extra +
            b"\r\n" + (body if body is not None else b"x" * n))


seeds = {
    "ok": http(0, 16, 4096, 100, 1 << 20, b'"v1"', b"", r206(4096, 4195, 1 << 20, b'ETag: "v1"\r\n')),
    "etag_changed": http(0, 16, 0, 10, 100, b'"v1"', b"", r206(0, 9, 100, b'ETag: "v2"\r\n')),
    "lm": http(0, 7, 0, 10, 100, b"", b"Mon, 02 Jan 2026 00:00:00 GMT", r206(0, 9, 100, b"Last-Modified: Mon, 02 Jan 2026 00:00:00 GMT\r\n")),
    "probe_short": http(1, 64, 0, 4096, 0, b"", b"", r206(0, 99, 100, b'ETag: "a"\r\n')),
    "wrong_range": http(0, 16, 10, 10, 100, b"", b"", r206(11, 20, 100)),
    "star": http(0, 16, 0, 10, 100, b"", b"", b"HTTP/1.1 206 OK\r\nContent-Range: bytes */100\r\n\r\n"),
    "full200": http(0, 16, 0, 10, 100, b'"v1"', b"", b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\nETag: "v1"\r\n\r\n' + b"y" * 100),
    "redirect_100": http(0, 3, 0, 10, 100, b"", b"", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n" + r206(0, 9, 100)),
    "retry": http(0, 16, 0, 10, 100, b"", b"", b"HTTP/1.1 503 Busy\r\nRetry-After: Wed, 21 Oct 2037 07:28:00 GMT\r\n\r\n"),
    "retry_secs": http(0, 16, 0, 10, 100, b"", b"", b"HTTP/2 429\r\nretry-after: 5\r\n\r\n"),
    "long_body": http(0, 16, 0, 10, 100, b"", b"", r206(0, 9, 100, body=b"z" * 40)),
    "416": http(0, 16, 0, 10, 100, b"", b"", b"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */5\r\n\r\n"),
}
opts = {
    "mount": b"-f\0-o\0ro,threads=4,readahead=1M,metadata_cache=8M,timeout=5\0img.sqfs\0mnt",
    "http": b"-ocache_dir=c,cache_size=1G,offline_ok,header_file=h,cacert=ca,mirror=http://u:p@h/x?q\0http://user:pw@host/a.sqfs\0mnt",
    "bad": b"-o\0threads=0x,busy_poll=-1,decomp=zz,entry_timeout=nan,rw,dev,suid\0a\0b\0c",
    "modes": b"--stats\0mnt\0-V\0-h\0--\0-o",
    "misc": b"-d\0-s\0-ologlevel=debug,record=r,prefetch=auto,block_cache=0,noprefetch_metadata,io_uring=on,same_cpu=off,idle_poll=1,fragment_cache=3,data_cache=1k,max_connections=2,retries=3,connect_timeout=1.5,insecure,allow_other,fsname=x\0img\0..",
}
for name, data in seeds.items():
    os.makedirs(os.path.join(root, "http_response"), exist_ok=True)
    open(os.path.join(root, "http_response", name), "wb").write(data)
for name, data in opts.items():
    os.makedirs(os.path.join(root, "mount_options"), exist_ok=True)
    open(os.path.join(root, "mount_options", name), "wb").write(data)
