"""A small threaded HTTP server for the crawler's tests: static folders plus scripted routes.

* ``root`` is served as a static site, the way GitHub Pages serves a Docusaurus build: ``/a/b``
  falls back to ``/a/b.html`` and ``/a/b/index.html``.
* :meth:`SiteServer.route` scripts a path (status, headers, body, delay, a body stream, or a
  function of the hit count), and wins over the folder.
* Every request is recorded (path with query, when, how many were in flight), so tests assert on
  what the crawler really fetched: hits per URL, spacing, concurrency.
* For the SSRF tests, :func:`internal_server` is a server the guard must keep the crawler from
  (on 127.0.0.2, outside :data:`LOOPBACK_ONE`), and :func:`twin_servers` puts one beside an
  allowed site on the same port.
* :func:`html`, :func:`links` and :data:`PROSE` write pages to serve.
"""

from __future__ import annotations

import contextlib
import ipaddress
import mimetypes
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True)
class Hit:
    path: str
    at: float
    in_flight: int
    dest: str = ""
    """``Sec-Fetch-Dest`` (``document``, ``script``, ... from the browser; empty from httpx)."""
    host: str = ""
    """The ``Host`` header: the name the client asked for, whatever address it connected to."""


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    stream: Callable[[], Iterator[bytes]] | None = None
    """Chunks written one by one (close-delimited unless a Content-Length header is given)."""


Script = Callable[[int], Reply]
"""n-th request to the path (1-based) → reply."""


class SiteServer:
    def __init__(
        self,
        root: Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        delay_s: float = 0.0,
    ):
        self.root = root
        self.delay_s = delay_s
        self.hits: list[Hit] = []
        self._scripts: dict[str, Script] = {}
        self._lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                with server._lock:
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                    count = 1 + sum(1 for h in server.hits if h.path == self.path)
                    dest = self.headers.get("Sec-Fetch-Dest", "")
                    host = self.headers.get("Host", "")
                    hit = Hit(self.path, time.monotonic(), server._in_flight, dest, host)
                    server.hits.append(hit)
                try:
                    reply = server._reply(self.path, count)
                    if reply.delay_s or server.delay_s:
                        time.sleep(reply.delay_s or server.delay_s)
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server._lock:
                        server._in_flight -= 1

            def _send(self, reply: Reply) -> None:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.stream is None:
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                if "Content-Length" not in reply.headers:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                for chunk in reply.stream():
                    self.wfile.write(chunk)

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # a fleet of browsers opens many connections at once

            def handle_error(self, request: object, client_address: object) -> None:
                return  # a crawler that hangs up (a killed worker, a size limit) is expected

        self._httpd = Server((host, port), Handler)
        self._httpd.daemon_threads = True
        # Polled for shutdown every 50 ms, not the default 500: a test waits that long on exit.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- set-up ----------------------------------------------------------------------------

    def route(self, path: str, reply: Reply | Script) -> None:
        self._scripts[path] = reply if callable(reply) else (lambda _n, r=reply: r)

    def page(self, path: str, html: str, **kwargs: object) -> None:
        self.route(path, Reply(body=html.encode(), **kwargs))  # type: ignore[arg-type]

    def __enter__(self) -> SiteServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    # -- what happened ---------------------------------------------------------------------

    def count(self, path: str) -> int:
        with self._lock:
            return sum(1 for h in self.hits if h.path == path)

    def times(self, path_prefix: str) -> list[float]:
        with self._lock:
            return [h.at for h in self.hits if h.path.startswith(path_prefix)]

    def paths(self) -> list[str]:
        with self._lock:
            return [h.path for h in self.hits]

    # -- serving ---------------------------------------------------------------------------

    def _reply(self, raw_path: str, count: int) -> Reply:
        script = self._scripts.get(raw_path) or self._scripts.get(urlsplit(raw_path).path)
        if script is not None:
            return script(count)
        if self.root is not None:
            path = unquote(urlsplit(raw_path).path)
            relative = path.lstrip("/")
            folder = (self.root / relative).is_dir() and not (
                self.root / f"{relative}.html"
            ).is_file()
            if not path.endswith("/") and folder:
                # Like GitHub Pages: a folder's address ends with a slash.
                return Reply(301, headers={"Location": f"{path}/"})
            found = self._file(path)
            if found is not None:
                kind = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
                if kind.startswith("text/") or kind.endswith(("xml", "javascript", "json")):
                    kind += "; charset=utf-8"
                return Reply(body=found.read_bytes(), content_type=kind)
        return Reply(404, b"<html><title>Not found</title><body>Not found</body></html>")

    def _file(self, path: str) -> Path | None:
        assert self.root is not None
        root = self.root.resolve()
        relative = path.lstrip("/")
        index = f"{relative.rstrip('/')}/index.html".lstrip("/")
        for candidate in (relative, f"{relative}.html", index):
            target = (root / candidate).resolve()
            if target.is_file() and target.is_relative_to(root):
                return target
        return None


INTERNAL_BODY = b"INTERNAL SECRET"
"""What :func:`internal_server` holds at ``/secret``: a crawl that shows it has leaked."""
LOOPBACK_ONE = ipaddress.ip_network("127.0.0.1/32")
"""The allowed site's address; 127.0.0.2 stays refused by the SSRF guard."""


def internal_server(host: str) -> SiteServer:
    """A server on ``host`` with :data:`INTERNAL_BODY` at ``/secret``, readable cross-origin."""
    server = SiteServer(host=host)
    server.route(
        "/secret",
        Reply(
            body=INTERNAL_BODY,
            content_type="text/plain",
            headers={"Access-Control-Allow-Origin": "*"},
        ),
    )
    return server


@contextlib.contextmanager
def twin_servers() -> Iterator[tuple[SiteServer, SiteServer]]:
    """The allowed site on 127.0.0.1 and the internal server on 127.0.0.2, on the same port."""
    for _ in range(20):
        with SiteServer() as site:
            try:
                internal = SiteServer(host="127.0.0.2", port=site.port)
            except OSError:  # that port is taken on 127.0.0.2: another pair
                continue
            with internal:
                yield site, internal
                return
    raise RuntimeError("no port free on both 127.0.0.1 and 127.0.0.2")


def html(title: str, body: str, head: str = "") -> str:
    """A whole page around ``body``, with ``head`` added to its head."""
    return (
        f"<!doctype html><html><head><title>{title}</title>{head}</head><body>{body}</body></html>"
    )


def links(*paths: str) -> str:
    """A list of links to ``paths``."""
    return "<ul>" + "".join(f'<li><a href="{p}">Go to {p}</a></li>' for p in paths) + "</ul>"


PROSE = " ".join(f"Step {n}: open the settings and check the VPN profile again." for n in range(8))
"""Enough text that a page holding it needs no rendering."""
