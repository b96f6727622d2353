"""A small HTTP/1.1 range server with scripted faults (standard library only).

Runs as a thread inside the pytest process. It serves byte strings by path
with keep-alive, HEAD, Range (single ranges, suffix ranges), ETag, Last-Modified and
If-Range, and applies the fault set in `server.fault` to the GET requests
that match it:

    server.set_fault("status", code=503, retry_after=1, count=2)
    server.set_fault("delay", seconds=5)          # before the body
    server.set_fault("hold")                      # before the body, until
                                                  # server.release()
    server.set_fault("latency", seconds=0.02)     # before the answer
    server.set_fault("reset")                     # RST after half the body
    server.set_fault("short")                     # half the body, then close
    server.set_fault("ignore_range")              # 200 with the whole body
    server.set_fault("wrong_range")               # another range than asked
    server.set_fault("slow", chunk=16384, pause=0.02)  # body in slow pieces
    server.set_fault("tamper", at=[4096, 70000])  # flip those bytes
    server.set_fault("other_etag")                # another ETag, as if
                                                  # the object changed
    server.set_fault("mix", seed=1, latency=0.03,      # soak: a random
                     p={"status": 0.03, "reset": 0.02})  # fault per request
    server.clear_fault()

"mix" draws one of the kinds above per request with the probabilities in
`p` (the rest of the time no fault), and delays every answer by a uniform
0..`latency` seconds; other keyword arguments go to the drawn fault.

`count` limits how many requests get the fault (None: all). Requests whose
range starts below `min_offset` are left alone, so a mount can be set up
before a fault is armed, and so are those starting at or past
`max_offset` (when given: the metadata at the end of an image), and,
with `min_length`, those asking for fewer bytes than that (a background
fetch's large ranges slowed or failed, a reader's small ones not), and,
unless `suffix=True` (or `"only"`: suffix ranges alone), suffix ranges
(`bytes=-N`: the image's tail a mount asks for beside its probe,
http_warmup.c). Every request is recorded in
`server.log`. A GET whose If-None-Match names the object's ETag is
answered 304 without a body, as nginx does.

"hold" sends the headers and holds the body until `server.release()` (or
`stop()`; at most `seconds`, 300 by default), so that a test knows a
request is in flight for as long as it wants: `server.wait_held(n)` waits
until n requests were held and returns their Range headers, in order;
`server.holding` counts the requests held now.

Presigned URLs (`server.presign_on()`): objects are then served only to
requests whose query carries a token this server issued, which is good
for `uses` requests and/or `expires` seconds, then answered with 403 (as
S3 answers an expired presigned URL). `GET /_presign?path=P&uses=N&expires=S`
issues one and answers with the URL on one line; with `expires` the URL
carries X-Amz-Date and X-Amz-Expires as an S3 presigned URL does. Issued
tokens are listed in `server.issued`; `revoke_tokens()` ends them all.

`require_header = (name, value)` refuses requests without that header with
`refusal` (status, body): 403 by default; the s3 tests answer as S3 does to
an expired session token.
"""

import email.utils
import http.server
import socket
import socketserver
import struct
import threading
import time


class Fault:
    def __init__(self, kind, count=None, min_offset=1, max_offset=None,
                 min_length=None, suffix=False, **kw):
        self.kind = kind
        self.suffix = suffix
        self.count = count
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.min_length = min_length
        self.kw = kw
        self.hits = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "faultserver/1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def setup(self):
        super().setup()
        with self.server.owner.lock:
            self.server.owner.conns.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.owner.lock:
                self.server.owner.conns.discard(self.connection)

    def _obj(self):
        srv = self.server.owner
        with srv.lock:
            path = self.path
            if "://" in path:  # absolute form: we are used as a proxy
                path = "/" + path.split("://", 1)[1].partition("/")[2]
            return srv.objects.get(path.split("?")[0])

    def _take_fault(self, start, length=None, suffix=False):
        srv = self.server.owner
        with srv.lock:
            f = srv.fault
            if f is None or start < f.min_offset or suffix > bool(f.suffix) \
                    or (f.suffix == "only" and not suffix):
                return None
            if f.max_offset is not None and start >= f.max_offset:
                return None
            if f.min_length is not None and (length is None or
                                             length < f.min_length):
                return None
            if f.count is not None and f.hits >= f.count:
                return None
            f.hits += 1
            if f.kind != "mix":
                return f
            if srv.rng is None or srv.rng_seed != f.kw.get("seed", 1):
                import random
                srv.rng_seed = f.kw.get("seed", 1)
                srv.rng = random.Random(srv.rng_seed)
            lat = srv.rng.uniform(0, f.kw.get("latency", 0))
            x = srv.rng.random()
            kind = None
            for k, pk in sorted(f.kw.get("p", {}).items()):
                if x < pk:
                    kind = k
                    break
                x -= pk
            srv.mix_counts[kind or "none"] = \
                srv.mix_counts.get(kind or "none", 0) + 1
        if lat:
            time.sleep(lat)
        if kind is None:
            return None
        return Fault(kind, **{k: v for k, v in f.kw.items()
                              if k not in ("p", "seed", "latency")})

    def _record(self, status, rng, nbytes):
        srv = self.server.owner
        with srv.lock:
            srv.log.append({"method": self.command, "range": rng,
                            "if_range": self.headers.get("If-Range"),
                            "if_none_match": self.headers.get(
                                "If-None-Match"),
                            "ua": self.headers.get("User-Agent"),
                            "status": status, "bytes": nbytes,
                            "auth": self.headers.get("Authorization"),
                            "amz_token": self.headers.get(
                                "x-amz-security-token"),
                            "amz_sha256": self.headers.get(
                                "x-amz-content-sha256"),
                            "target": self.path})

    def _simple(self, code, headers=(), body=b""):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._record(code, self.headers.get("Range"), len(body))

    def do_HEAD(self):
        self.do_GET()

    def _presign(self):
        """Issue a token; the answer is the signed URL."""
        import secrets
        import urllib.parse
        srv = self.server.owner
        q = dict(urllib.parse.parse_qsl(self.path.partition("?")[2]))
        token = "tok" + secrets.token_hex(12)
        now = time.time()
        uses = int(q["uses"]) if "uses" in q else None
        life = int(q["expires"]) if "expires" in q else None
        url = "http://127.0.0.1:%d%s?" % (srv.port, q.get("path", "/"))
        if life is not None:
            url += "X-Amz-Date=%s&X-Amz-Expires=%d&" % (
                time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)), life)
        url += "X-Amz-Signature=" + token
        with srv.lock:
            srv.tokens[token] = [uses, now + life if life else None]
            srv.issued.append((time.monotonic(), token))
        body = (url + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _token_ok(self):
        import urllib.parse
        srv = self.server.owner
        q = dict(urllib.parse.parse_qsl(self.path.partition("?")[2]))
        with srv.lock:
            t = srv.tokens.get(q.get("X-Amz-Signature"))
            if t is None or (t[1] is not None and time.time() >= t[1]) or \
                    (t[0] is not None and t[0] <= 0):
                return False
            if t[0] is not None:
                t[0] -= 1
            return True

    def do_GET(self):
        srv = self.server.owner
        if self.path.startswith("/_presign"):
            return self._presign()
        if srv.tokens is not None and not self._token_ok():
            return self._simple(403, body=b"<Error><Code>AccessDenied"
                                b"</Code></Error>\n")
        need = srv.require_header
        if need and self.headers.get(need[0]) != need[1]:
            code, body = srv.refusal
            return self._simple(code, body=body)
        obj = self._obj()
        if obj is None:
            return self._simple(404, body=b"not found\n")
        data, etag, mtime = obj
        size = len(data)
        rng = self.headers.get("Range")
        start, end = 0, size - 1
        partial = suffix = False
        if self.command == "GET" and etag is not None and \
                self.headers.get("If-None-Match") == etag:
            return self._simple(304, [("ETag", etag)])
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            suffix = not a
            try:
                if a:
                    start = int(a)
                    end = min(int(b), size - 1) if b else size - 1
                else:  # the last b bytes
                    start, end = max(0, size - int(b)), size - 1
                partial = True
            except ValueError:
                partial = False
            if partial and start >= size:
                return self._simple(416, [("Content-Range",
                                           "bytes */%d" % size)])
        if_range = self.headers.get("If-Range")
        if partial and if_range is not None and if_range != etag and \
                if_range != email.utils.formatdate(mtime, usegmt=True):
            partial = False
            start, end = 0, size - 1

        fault = self._take_fault(start, end - start + 1, suffix) \
            if self.command == "GET" else None
        kind = fault.kind if fault else None
        if kind == "latency":  # a round trip: nothing arrives before it
            time.sleep(fault.kw.get("seconds", 0.02))
        if kind == "status":
            hdrs = []
            if fault.kw.get("retry_after") is not None:
                hdrs.append(("Retry-After", str(fault.kw["retry_after"])))
            return self._simple(fault.kw.get("code", 500), hdrs,
                                b"injected\n")
        if kind == "ignore_range":
            partial = False
            start, end = 0, size - 1
        if kind == "other_etag":
            etag = '"other"'
        if kind == "wrong_range" and partial:
            shift = min(512, start)
            start, end = start - shift, end - shift

        body = data[start:end + 1]
        if kind == "tamper":  # a lying cache or mirror: wrong bytes, 206
            body = bytearray(body)
            for at in fault.kw.get("at", ()):
                if start <= at <= end:
                    body[at - start] ^= 0xFF
            body = bytes(body)
        self.send_response(206 if partial else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        if etag is not None:
            self.send_header("ETag", etag)
        self.send_header("Last-Modified",
                         email.utils.formatdate(mtime, usegmt=True))
        if partial:
            self.send_header("Content-Range",
                             "bytes %d-%d/%d" % (start, end, size))
        self.send_header("Content-Length", str(len(body)))
        # record before the headers leave: a client may act on them (and
        # the test read the log) before this thread runs again
        self._record(206 if partial else 200, rng, len(body))
        self.end_headers()
        if self.command == "HEAD":
            return
        if kind == "delay":
            time.sleep(fault.kw.get("seconds", 5))
        if kind == "hold":
            with srv.lock:
                gate = srv.gate
                srv.held.append(rng)
                srv.holding += 1
                srv.held_cv.notify_all()
            try:
                gate.wait(fault.kw.get("seconds", 300))
            finally:
                with srv.lock:
                    srv.holding -= 1
                    srv.held_cv.notify_all()
        if kind == "slow":
            step = fault.kw.get("chunk", 16384)
            try:
                for i in range(0, len(body), step):
                    self.wfile.write(body[i:i + step])
                    self.wfile.flush()
                    time.sleep(fault.kw.get("pause", 0.02))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            return
        if kind in ("reset", "short"):
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            if kind == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class _TCPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # clients that go away (timeouts, aborted bodies) are expected
        import sys
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class FaultServer:
    def __init__(self, port=0):
        self.lock = threading.Lock()
        self.objects = {}
        self.fault = None
        self.log = []
        self.require_header = None
        self.refusal = (403, b"forbidden\n")  # answer without that header
        self.rng = None            # "mix" faults: seeded draws
        self.rng_seed = None
        self.mix_counts = {}       # "mix" faults: requests per drawn kind
        self.windows = []          # [kind, start, end or None], monotonic
        self.conns = set()
        self.tokens = None         # presigned URLs: token -> [uses, until]
        self.issued = []           # (monotonic time, token) per URL issued
        self.held = []             # "hold": Range of each request held
        self.holding = 0           # "hold": requests held now
        self.held_cv = threading.Condition(self.lock)
        self.gate = threading.Event()  # "hold": set by release()
        self.port = port
        self.httpd = None
        self.thread = None

    def add(self, path, data, etag='"v1"', mtime=1_700_000_000):
        with self.lock:
            self.objects[path] = (data, etag, mtime)

    def presign_on(self):
        with self.lock:
            self.tokens = {}

    def revoke_tokens(self):
        with self.lock:
            for t in self.tokens.values():
                t[0] = 0

    def set_fault(self, kind, **kw):
        with self.lock:
            now = time.monotonic()
            if self.windows and self.windows[-1][2] is None:
                self.windows[-1][2] = now
            self.fault = Fault(kind, **kw)
            self.windows.append([kind, now, None])
            return self.fault

    def clear_fault(self):
        with self.lock:
            if self.windows and self.windows[-1][2] is None:
                self.windows[-1][2] = time.monotonic()
            self.fault = None

    def release(self):
        """Let every request held by "hold" go on; later ones are held
        again while a "hold" fault is set."""
        with self.lock:
            self.gate.set()
            self.gate = threading.Event()
            self.held_cv.notify_all()

    def wait_held(self, n=1, timeout=60):
        """Wait until n requests were held ("hold"); their Range headers.
        AssertionError after timeout seconds."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.held) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        "%d request(s) held after %s s, not %d; log: %r"
                        % (len(self.held), timeout, n, self.log[-20:]))
                self.held_cv.wait(left)
            return list(self.held)

    def clear_log(self):
        with self.lock:
            self.log = []

    def requests(self):
        with self.lock:
            return list(self.log)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def start(self):
        self.httpd = _TCPServer(("127.0.0.1", self.port), Handler)
        self.httpd.owner = self
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self):
        """Stop listening and drop every open connection."""
        if self.httpd is None:
            return
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.httpd = None
