"""The kubelet's HTTPS endpoint for `kubectl logs`: GET /containerLogs/{namespace}/{pod}/{container}.

The apiserver proxies log requests to the node's InternalIP and kubelet port; it is started
without a kubelet CA, so a self-signed certificate (made once with openssl) is enough.
Supports follow, previous, tailLines and limitBytes.
"""
from __future__ import annotations

import logging
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlparse

if TYPE_CHECKING:
    from kube_sandbox.kubelet.kubelet import ProcessKubelet

log = logging.getLogger(__name__)

FOLLOW_POLL_SECONDS = 0.2
CHUNK_BYTES = 64 * 1024


def ensure_serving_certificate(directory: Path, host_ip: str) -> tuple[Path, Path]:
    cert, key = directory / "kubelet.crt", directory / "kubelet.key"
    if cert.exists() and key.exists():
        return cert, key
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=kube-sandbox-kubelet",
         "-addext", f"subjectAltName=IP:{host_ip},DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


def tail_offset(path: Path, lines: int) -> int:
    """Byte offset where the last `lines` lines of `path` begin."""
    if lines <= 0:
        return path.stat().st_size
    with open(path, "rb") as f:
        f.seek(0, 2)
        end = f.tell()
        position = end
        found = 0
        while position > 0:
            step = min(CHUNK_BYTES, position)
            position -= step
            f.seek(position)
            block = f.read(step)
            if position + step == end and block.endswith(b"\n"):
                block = block[:-1]  # the final newline ends the last line, it does not start one
            for index in range(len(block) - 1, -1, -1):
                if block[index:index + 1] == b"\n":
                    found += 1
                    if found == lines:
                        return position + index + 1
        return 0


class LogServer:
    def __init__(self, kubelet: ProcessKubelet, host: str, port: int, cert_dir: Path) -> None:
        self.kubelet = kubelet
        self._stop = threading.Event()
        cert, key = ensure_serving_certificate(cert_dir, host)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                url = urlparse(self.path)
                parts = [unquote(p) for p in url.path.strip("/").split("/")]
                if parts == ["healthz"]:
                    self._text(200, "ok")
                elif len(parts) == 4 and parts[0] == "containerLogs":
                    server.serve_logs(self, parts[1], parts[2], parts[3], parse_qs(url.query))
                else:
                    self._text(404, f"not found: {url.path}\n")

            def _text(self, code: int, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("log server: " + format, *args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="kubelet-logs", daemon=True)

    def start(self) -> None:
        self._thread.start()
        log.info("container log server listening on https://%s:%d", *self._server.server_address[:2])

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def serve_logs(self, handler: BaseHTTPRequestHandler, namespace: str, pod: str, container: str,
                   query: dict[str, list[str]]) -> None:
        def flag(name: str) -> bool:
            return (query.get(name) or ["false"])[0].lower() in ("true", "1")

        def number(name: str) -> int | None:
            value = (query.get(name) or [""])[0]
            return int(value) if value.lstrip("-").isdigit() else None

        path = self.kubelet.container_log_path(namespace, pod, container, previous=flag("previous"))
        if path is None or not path.exists():
            which = "previous terminated container" if flag("previous") else "container"
            body = f'{which} "{container}" in pod "{pod}" not found\n'.encode()
            handler.send_response(404 if flag("previous") else 400)
            handler.send_header("Content-Type", "text/plain")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        tail = number("tailLines")
        limit = number("limitBytes")
        follow = flag("follow") and not flag("previous")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent = 0
        try:
            with open(path, "rb") as f:
                f.seek(tail_offset(path, tail) if tail is not None else 0)
                while not self._stop.is_set():
                    data = f.read(CHUNK_BYTES)
                    if limit is not None:
                        data = data[:max(limit - sent, 0)]
                    if data:
                        sent += len(data)
                        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        handler.wfile.flush()
                        if limit is None or sent < limit:
                            continue
                        break
                    if not follow or not self.kubelet.container_running(namespace, pod, container):
                        break
                    if self.kubelet.container_log_path(namespace, pod, container) != path:
                        break  # the container restarted; this run's log is complete
                    self._stop.wait(FOLLOW_POLL_SECONDS)
            handler.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass
