"""A JSON endpoint on loopback for tests that stand in for a cloud's token service (the OAuth
and Entra stubs): an HTTP or HTTPS server on 127.0.0.1, a free port, answering each request with
what a function of (method, path, body) returns."""
from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Answer = tuple[int, dict[str, Any]]  # HTTP status, JSON document
Responder = Callable[[str, str, str], Answer]  # (method, path, body) -> answer


@contextmanager
def json_endpoint(name: str, respond: Responder, *, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """Serves until the block ends; yields its base URL. `tls`: (certificate, key) files, for an
    https:// endpoint."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._answer(*respond("GET", self.path, ""))

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
            self._answer(*respond("POST", self.path, body))

        def _answer(self, code: int, document: dict[str, Any]) -> None:
            data = json.dumps(document).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
