#!/usr/bin/env python3
"""TCP proxy that adds latency to every request, for bench/http.sh.

  latency_proxy.py --target HOST:PORT --delay-ms N [--port-file PATH]
                   [--rate-mbit R] [--handshake]
                   [--max-seconds S] [--parent-pid PID]

Listens on 127.0.0.1 on a free port (written to --port-file once it
listens, and printed on stdout) and forwards each connection to --target.
Every chunk travelling client -> server is held back N ms after it arrived
before it is forwarded; chunks keep their order and are not serialised
behind each other's delays (a chunk that arrives 1 ms after another leaves
1 ms after it). So each HTTP request, on a new or a kept-alive connection,
reaches the server N ms late, and the answer comes back at full speed: a
round trip costs N ms more, whatever the number of connections in flight.
Server -> client is forwarded at once, or, with --rate-mbit R, through one
link of R Mbit/s shared by every connection (a token bucket with 5 ms of
burst), as a capped WAN link. With --handshake a new connection waits one
more delay before its first byte is forwarded, as a TCP handshake over
the WAN would (without it, connecting is free: the proxy is on loopback).

The proxy stops by itself on SIGTERM or SIGINT, after --max-seconds
(default 3600), or once --parent-pid no longer exists (checked every
second). On exit it prints a one-line summary on stderr. Standard library
only.
"""

import argparse
import asyncio
import collections
import os
import signal
import socket
import sys
import time

CHUNK = 256 * 1024

stats = collections.Counter()


async def pump_delayed(reader, writer, delay):
    """client -> server: each chunk leaves `delay` s after it arrived."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def sender():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
            stats["up_bytes"] += len(data)
        if writer.can_write_eof():
            writer.write_eof()

    task = asyncio.ensure_future(sender())
    try:
        while True:
            data = await reader.read(CHUNK)
            now = loop.time()
            if not data:
                break
            stats["up_chunks"] += 1
            queue.put_nowait((now + delay, data))
    finally:
        queue.put_nowait((0, None))
        try:
            await task
        except (ConnectionError, OSError):
            pass


class Link:
    """The capped server -> client link shared by all connections."""
    BURST = 0.005

    def __init__(self, rate_bytes):
        self.rate = rate_bytes
        self.busy_until = 0.0

    async def send(self, n):
        if not self.rate:
            return
        now = asyncio.get_running_loop().time()
        self.busy_until = max(self.busy_until, now - self.BURST) + \
            n / self.rate
        if self.busy_until > now:
            await asyncio.sleep(self.busy_until - now)


link = Link(0)


async def pump(reader, writer):
    """server -> client, at once or through the capped link."""
    while True:
        data = await reader.read(CHUNK)
        if not data:
            break
        await link.send(len(data))
        writer.write(data)
        await writer.drain()
        stats["down_bytes"] += len(data)
    if writer.can_write_eof():
        writer.write_eof()


async def handle(creader, cwriter, target, delay, handshake):
    stats["connections"] += 1
    if handshake:
        await asyncio.sleep(delay)
    try:
        sreader, swriter = await asyncio.open_connection(*target)
    except OSError:
        stats["connect_failures"] += 1
        cwriter.close()
        return
    for w in (cwriter, swriter):
        sock = w.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    up = asyncio.ensure_future(pump_delayed(creader, swriter, delay))
    down = asyncio.ensure_future(pump(sreader, cwriter))
    try:
        # Either side closing (or failing) ends the connection.
        await asyncio.wait([up, down], return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        pass
    finally:
        for t in (up, down):
            t.cancel()
        for w in (swriter, cwriter):
            try:
                w.close()
            except OSError:
                pass


async def main_async(args):
    host, _, port = args.target.rpartition(":")
    target = (host or "127.0.0.1", int(port))
    delay = args.delay_ms / 1000.0
    link.rate = args.rate_mbit * 1e6 / 8
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)

    server = await asyncio.start_server(
        lambda r, w: handle(r, w, target, delay, args.handshake),
        "127.0.0.1", args.port)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    print(port, flush=True)

    deadline = loop.time() + args.max_seconds
    reason = "signal"
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
        if loop.time() >= deadline:
            reason = "max-seconds reached"
            break
        if args.parent_pid:
            try:
                os.kill(args.parent_pid, 0)
            except ProcessLookupError:
                reason = "parent gone"
                break
            except PermissionError:
                pass
    server.close()
    for t in asyncio.all_tasks():
        if t is not asyncio.current_task():
            t.cancel()
    return reason


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--delay-ms", type=float, required=True,
                    help="delay of each client -> server chunk, ms")
    ap.add_argument("--rate-mbit", type=float, default=0,
                    help="cap server -> client at this many Mbit/s, "
                    "shared by all connections (default: no cap)")
    ap.add_argument("--handshake", action="store_true",
                    help="a new connection costs one more delay")
    ap.add_argument("--port", type=int, default=0,
                    help="port to listen on (default: a free one)")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--max-seconds", type=float, default=3600,
                    help="exit after this long (default 3600)")
    ap.add_argument("--parent-pid", type=int, default=0,
                    help="exit once this process is gone")
    args = ap.parse_args()
    t0 = time.monotonic()
    reason = asyncio.run(main_async(args))
    print("latency_proxy: %g ms, %s after %.0f s: %d connections, "
          "%d request chunks, %d bytes up, %d bytes down" % (
              args.delay_ms, reason, time.monotonic() - t0,
              stats["connections"], stats["up_chunks"], stats["up_bytes"],
              stats["down_bytes"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
