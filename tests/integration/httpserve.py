"""HTTP mode of the integration suite (LSQ_VIA_HTTP=1).

A real nginx on 127.0.0.1 (free port) serves the image cache directory;
every FUSE mount of an image then uses http://127.0.0.1:PORT/<name> instead
of the path, while kernel mounts stay on the file.  Images that live
elsewhere (a test's tmp_path, tests/fixtures) are published under
`pub/` of the served directory by a symlink, so the same URL scheme covers
them.

Same approach as tests/http/conftest.py: nginx in the foreground
(`daemon off; master_process off;`), a config of our own in a temporary
directory, an access log with $bytes_sent and $http_range.
"""

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse


def enabled():
    return os.environ.get("LSQ_VIA_HTTP", "") not in ("", "0")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_binary():
    for p in ("/usr/sbin/nginx", "/usr/bin/nginx"):
        if os.access(p, os.X_OK):
            return p
    return shutil.which("nginx")


LOG_FORMAT = ("'$request_method $status $bytes_sent \"$http_range\" "
              "\"$request_uri\" $connection'")


class Nginx:
    """nginx serving `root` on 127.0.0.1:port; `confdir` holds the config,
    the logs and the pid file."""

    def __init__(self, confdir, root):
        self.dir = str(confdir)
        self.root = str(root)
        self.port = None
        self.access = os.path.join(self.dir, "access.log")
        self.error = os.path.join(self.dir, "error.log")
        self.proc = None
        self._pub_lock = threading.Lock()
        self._published = {}

    def start(self, attempts=5):
        nginx = nginx_binary()
        if not nginx:
            raise RuntimeError("nginx not installed")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        os.makedirs(os.path.join(self.root, "pub"), exist_ok=True)
        last = ""
        # free_port() can race with another process taking the port before
        # nginx binds it: retry with a fresh port.
        for _ in range(attempts):
            self.port = free_port()
            conf = os.path.join(self.dir, "nginx.conf")
            with open(conf, "w") as f:
                f.write("""daemon off;
master_process off;
worker_processes 1;
pid %(dir)s/nginx.pid;
error_log %(error)s;
events { worker_connections 512; }
http {
  log_format ranges %(fmt)s;
  access_log %(access)s ranges;
  default_type application/octet-stream;
  client_body_temp_path %(dir)s/tmp; proxy_temp_path %(dir)s/tmp;
  fastcgi_temp_path %(dir)s/tmp; uwsgi_temp_path %(dir)s/tmp;
  scgi_temp_path %(dir)s/tmp;
  keepalive_requests 100000;
  server { listen 127.0.0.1:%(port)d; root %(root)s; }
}
""" % {"dir": self.dir, "error": self.error, "access": self.access,
       "fmt": LOG_FORMAT, "port": self.port, "root": self.root})
            self.proc = subprocess.Popen(
                [nginx, "-c", conf, "-p", self.dir + "/"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port),
                                             0.2).close()
                    return self
                except OSError:
                    time.sleep(0.05)
            if self.proc.poll() is None:
                self.stop()
            last = self.proc.stderr.read().decode(errors="replace")
        raise RuntimeError("nginx did not start: %s" % last)

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stderr:
            self.proc.stderr.close()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # ------------------------------------------------------------------

    def url(self, path):
        """URL of a local image path.  A file directly in the served
        directory is http://127.0.0.1:PORT/<file name>; any other path
        (existing or not: a missing one gives 404) is published as a
        symlink pub/<n>-<file name>."""
        path = os.path.abspath(str(path))
        if os.path.dirname(path) == os.path.abspath(self.root):
            rel = os.path.basename(path)
        else:
            with self._pub_lock:
                rel = self._published.get(path)
                if rel is None:
                    rel = "pub/%d-%s" % (len(self._published),
                                         os.path.basename(path))
                    os.symlink(path, os.path.join(self.root, rel))
                    self._published[path] = rel
        return "http://127.0.0.1:%d/%s" % (self.port,
                                           urllib.parse.quote(rel))

    def entries(self):
        """Access log entries: dicts with method, status, bytes, range,
        uri, conn."""
        out = []
        try:
            with open(self.access) as f:
                lines = f.readlines()
        except OSError:
            return out
        for line in lines:
            parts = line.split('"')
            if len(parts) < 5:
                continue
            head = parts[0].split()
            out.append({"method": head[0], "status": int(head[1]),
                        "bytes": int(head[2]), "range": parts[1],
                        "uri": parts[3], "conn": int(parts[4].split()[0])})
        return out

    def summary(self):
        """Per served file: (requests, bytes sent, statuses)."""
        per = {}
        for e in self.entries():
            name = urllib.parse.unquote(e["uri"].lstrip("/"))
            r = per.setdefault(name, [0, 0, {}])
            r[0] += 1
            r[1] += e["bytes"]
            r[2][e["status"]] = r[2].get(e["status"], 0) + 1
        return per
