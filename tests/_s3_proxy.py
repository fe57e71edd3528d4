"""An HTTP proxy on 127.0.0.1 in front of the moto S3 server that can lose responses or answer 5xx.

Every request is forwarded to moto unchanged (so moto applies it); when the
``drop`` hook says so, the proxy then closes the client's connection instead of
sending moto's answer, as a network that loses a response would. The client
(botocore, pyarrow) sees a reset connection and retries as it would in
production. When the ``fail`` hook says so, the proxy answers a 5xx
``InternalError`` instead of moto's answer, as S3 sometimes does for a request it
applied.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}


class LossyProxy:
    """Forwards to ``upstream``; ``drop(method, path)`` decides which responses are lost.

    Attributes:
        url: the proxy's endpoint URL, for ``S3Store(endpoint_url=...)``.
        dropped: ``(method, path)`` of every response lost so far.
        seen: ``(method, path, status)`` of every request forwarded.
    """

    def __init__(self, upstream: str) -> None:
        parsed = urlparse(upstream)
        self.upstream_host = parsed.hostname or "127.0.0.1"
        self.upstream_port = parsed.port or 80
        self.drop: Callable[[str, str], bool] = lambda method, path: False
        #: ``fail(method, path)``: a status (5xx) to answer instead of moto's answer, or ``None``.
        self.fail: Callable[[str, str], int | None] = lambda method, path: None
        self.failed: list[tuple[str, str, int]] = []
        self.dropped: list[tuple[str, str]] = []
        self.seen: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    raw = b""
                    while True:
                        line = self.rfile.readline()
                        raw += line
                        size = int(line.split(b";")[0].strip(), 16)
                        chunk = self.rfile.read(size + 2)
                        raw += chunk
                        if size == 0:
                            # Trailers end with an empty line.
                            while chunk not in (b"\r\n", b"\n", b""):
                                chunk = self.rfile.readline()
                                raw += chunk
                            return raw
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _forward(self) -> None:
                body = self._body()
                upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for name, value in self.headers.items():
                        upstream.putheader(name, value)
                    upstream.endheaders(body or None)
                    response = upstream.getresponse()
                    payload = response.read()
                finally:
                    upstream.close()
                with proxy._lock:
                    proxy.seen.append((self.command, self.path, response.status))
                    lose = proxy.drop(self.command, self.path)
                    if lose:
                        proxy.dropped.append((self.command, self.path))
                    failure = None if lose else proxy.fail(self.command, self.path)
                    if failure is not None:
                        proxy.failed.append((self.command, self.path, failure))
                if failure is not None:
                    # Applied upstream, but the client is told the server failed.
                    error = (
                        b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InternalError</Code>"
                        b"<Message>We encountered an internal error. Please try again.</Message></Error>"
                    )
                    self.send_response_only(failure)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(error)
                    return
                if lose:
                    # Applied upstream, answer lost: the client sees its connection reset.
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                self.send_response_only(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() in _HOP_BY_HOP or (name.lower() == "content-length" and self.command != "HEAD"):
                        continue
                    self.send_header(name, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815 - http.server's names

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="lossy-proxy", daemon=True)
        self._thread.start()

    def drop_next(self, method: str, suffix: str, count: int = 1) -> None:
        """Lose the responses of the next ``count`` ``method`` requests whose path ends with ``suffix``."""
        left = [count]

        def drop(m: str, path: str) -> bool:
            if m == method and path.split("?")[0].endswith(suffix) and left[0] > 0:
                left[0] -= 1
                return True
            return False

        self.drop = drop

    def fail_next(self, method: str, suffix: str, count: int = 1, status: int = 500) -> None:
        """Answer ``status`` (an S3 ``InternalError``) to the next ``count`` ``method`` requests whose path ends
        with ``suffix``, after moto applied them."""
        left = [count]

        def fail(m: str, path: str) -> int | None:
            if m == method and path.split("?")[0].endswith(suffix) and left[0] > 0:
                left[0] -= 1
                return status
            return None

        self.fail = fail

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
