"""An operator's HTTP side: /metrics for Prometheus and /healthz for the liveness probe,
served from a daemon thread so it answers even while every supervisor is busy. /healthz answers
503 with what is wrong (a stalled watch, a dead worker thread: `operator_runtime.liveness`) or
while stopping; 200 "ok" otherwise."""
from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

logger = logging.getLogger(__name__)

# /healthz asks this: True/False, or the problems found now (none: healthy).
Health = Callable[[], bool | Sequence[str]]


def health_answer(healthy: Health) -> tuple[bool, list[str]]:
    """Whether healthy, and what is wrong (a health callable that raises is unhealthy)."""
    try:
        answer = healthy()
    except Exception as error:
        logger.exception("health check raised")
        return False, [f"health check raised {type(error).__name__}"]
    if isinstance(answer, bool):
        return answer, [] if answer else ["unhealthy"]
    problems = [str(p) for p in answer]
    return not problems, problems


class _IPv6HTTPServer(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def server_class_for(host: str) -> type[ThreadingHTTPServer]:
    """An IPv6 address (`::`, `fd00::1`) needs an IPv6 socket; `::` on a dual-stack host also
    accepts IPv4 (unless the host sets IPV6_V6ONLY)."""
    return _IPv6HTTPServer if ":" in host else ThreadingHTTPServer


def url_for(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class HttpEndpoints:
    """A running /metrics + /healthz server; `port` is the bound port (useful with port 0)."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry, healthy: Health,
                 *, server_name: str = "operator") -> None:
        handler = _handler_class(registry, healthy, server_name)
        self._server = server_class_for(host)((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="http-endpoints", daemon=True
        )
        self._thread.start()
        logger.info("serving /metrics and /healthz on %s", url_for(host, self.port))

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return url_for(self.host, self.port)

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler_class(
    registry: CollectorRegistry, healthy: Health, server_name: str
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = server_name

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s - %s", self.address_string(), format % args)

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok, problems = health_answer(healthy)
                if ok:
                    self._send(200, b"ok\n", "text/plain; charset=utf-8")
                else:
                    logger.warning("/healthz: unhealthy: %s", "; ".join(problems))
                    body = "unhealthy\n" + "".join(f"{p}\n" for p in problems)
                    self._send(503, body.encode(), "text/plain; charset=utf-8")
            else:
                self._send(404, b"not found: try /metrics or /healthz\n", "text/plain; charset=utf-8")

        do_HEAD = do_GET

    return Handler


def serve(
    port: int, host: str, registry: CollectorRegistry, healthy: Health, *, server_name: str = "operator"
) -> HttpEndpoints:
    """Start serving /metrics (from `registry`) and /healthz (200 "ok" while `healthy()` is True
    or lists no problem, else 503 with the problems) on host:port in a daemon thread, answering as
    `server_name`. Call `.shutdown()` to stop."""
    return HttpEndpoints(host, port, registry, healthy, server_name=server_name)
