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

A real WAN link costs the client host no CPU; for the proxy to cost it
little, the answers, most of the bytes, never pass through Python: each
connection has a thread that moves them with splice(2) through a pipe (no
copy into user space, the GIL released while it waits). Requests go
through a reader thread that timestamps them and a sender thread that
sleeps until each is due.

The proxy stops by itself on SIGTERM, SIGINT or SIGHUP, after
--max-seconds (default 3600), or once --parent-pid no longer exists
(checked every second). On exit it prints a one-line summary on stderr.
Standard library only (Linux: splice).
"""

import _thread
import argparse
import collections
import fcntl
import os
import queue
import signal
import socket
import sys
import threading
import time

# Requests are small: what one recv returns is one chunk.
UP_CHUNK = 64 * 1024
# Answers are taken from the server up to a pipe's worth at a time (each
# take acks and wakes the server: fewer takes, less CPU), then given to the
# client in pieces of at most PIECE, the link's tokens taken before each:
# the capped link's granularity (2 ms at 1 Gbit/s). Uncapped, a take goes
# out whole.
PIPE = 1024 * 1024
PIECE = 256 * 1024

stats = collections.Counter()
stats_lock = threading.Lock()   # += on a Counter is not atomic in threads


def count(key, n=1):
    with stats_lock:
        stats[key] += n


class Link:
    """The capped server -> client link shared by all connections: the time
    it is next free, advanced under a lock; each sender sleeps outside it
    until its piece has gone through the link."""
    BURST = 0.005

    def __init__(self):
        self.rate = 0
        self.busy_until = 0.0
        self.lock = threading.Lock()

    def send(self, n):
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            self.busy_until = max(self.busy_until, now - self.BURST) + \
                n / self.rate
            wait = self.busy_until - now
        if wait > 0:
            time.sleep(wait)


def spawn(f, *args):
    """A thread that no one joins (the exit does not wait for it), started
    without threading.Thread's wait for it to run: a new connection's first
    request is stamped sooner."""
    _thread.start_new_thread(f, args)


link = Link()
live = set()    # connections being forwarded, shut down at exit


class Conn:
    """One client connection: three threads (upstream reader, upstream
    sender, downstream), the last one to end closes the sockets. A side's
    EOF is forwarded as shutdown(SHUT_WR); an error on either side shuts
    both down, which wakes the threads blocked on them."""

    def __init__(self, client, target, delay, handshake):
        self.client, self.target = client, target   # (family, address)
        self.delay, self.handshake = delay, handshake
        self.dead = False
        self.threads = 3
        self.lock = threading.Lock()
        self.queue = queue.SimpleQueue()    # (due, chunk), None at EOF

    def run(self):
        count("connections")
        if self.handshake:
            time.sleep(self.delay)
        self.server = socket.socket(self.target[0])
        try:
            self.server.connect(self.target[1])
        except OSError:
            count("connect_failures")
            self.server.close()
            # read what the client sent, so that it sees a FIN, not a reset
            self.client.setblocking(False)
            try:
                while self.client.recv(UP_CHUNK):
                    pass
            except OSError:
                pass
            self.client.close()
            return
        for s in (self.client, self.server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        live.add(self)
        spawn(self.send_up)
        spawn(self.pump_down)
        self.read_up()

    def read_up(self):
        """client -> queue, each chunk stamped with the time it is due."""
        try:
            while True:
                data = self.client.recv(UP_CHUNK)
                if not data:
                    break
                self.queue.put((time.monotonic() + self.delay, data))
                count("up_chunks")
        except OSError:
            self.abort()
        finally:
            self.queue.put((0, None))
            self.done()

    def send_up(self):
        """queue -> server, each chunk once due."""
        try:
            while True:
                due, data = self.queue.get()
                if data is None:
                    self.server.shutdown(socket.SHUT_WR)
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if self.dead:
                    break
                self.server.sendall(data)
                count("up_bytes", len(data))
        except OSError:
            self.abort()
        finally:
            self.done()

    def pump_down(self):
        """server -> pipe -> client, a piece at a time through the link."""
        r, w = os.pipe()
        try:
            try:
                fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE)
            except OSError:     # over the user's pipe quota: smaller takes
                pass
            sfd, cfd = self.server.fileno(), self.client.fileno()
            piece = PIECE if link.rate else PIPE
            while True:
                n = os.splice(sfd, w, PIPE)    # what the server has sent
                if not n:
                    self.client.shutdown(socket.SHUT_WR)
                    break
                while n:
                    k = m = min(n, piece)
                    link.send(k)
                    while k:
                        k -= os.splice(r, cfd, k)
                    n -= m
                    count("down_bytes", m)
        except OSError:
            self.abort()
        finally:
            os.close(r)
            os.close(w)
            self.done()

    def abort(self):
        self.dead = True
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def done(self):
        with self.lock:
            self.threads -= 1
            if self.threads:
                return
        live.discard(self)
        self.client.close()
        self.server.close()


def accept_loop(lsock, target, delay, handshake):
    while True:
        try:
            client, _ = lsock.accept()
        except OSError:
            if lsock.fileno() < 0:
                return
            time.sleep(0.1)     # e.g. out of file descriptors: retry
            continue
        spawn(Conn(client, target, delay, handshake).run)


def serve(args):
    host, _, port = args.target.rpartition(":")
    # Resolved once: getaddrinfo at each connection (create_connection)
    # made new connections' requests later when many came at once.
    family, _, _, _, addr = socket.getaddrinfo(
        host or "127.0.0.1", int(port), type=socket.SOCK_STREAM)[0]
    target = (family, addr)
    link.rate = args.rate_mbit * 1e6 / 8
    # Blocked in every thread (they inherit the mask), taken below.
    sigs = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)

    lsock = socket.create_server(("127.0.0.1", args.port))
    port = lsock.getsockname()[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    print(port, flush=True)
    spawn(accept_loop, lsock, target, args.delay_ms / 1000.0, args.handshake)

    deadline = time.monotonic() + args.max_seconds
    reason = "signal"
    while not signal.sigtimedwait(sigs, 1.0):
        if time.monotonic() >= deadline:
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
    # Wake the threads blocked on a socket; none is joined, so even one
    # that stays blocked does not hold up the exit.
    lsock.shutdown(socket.SHUT_RDWR)
    lsock.close()
    for c in list(live):
        c.abort()
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
    reason = serve(args)
    with stats_lock:
        print("latency_proxy: %g ms, %s after %.0f s: %d connections, "
              "%d request chunks, %d bytes up, %d bytes down" % (
                  args.delay_ms, reason, time.monotonic() - t0,
                  stats["connections"], stats["up_chunks"],
                  stats["up_bytes"], stats["down_bytes"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
