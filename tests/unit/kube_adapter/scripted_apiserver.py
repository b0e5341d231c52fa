"""A scripted HTTP server on loopback standing in for the apiserver, so the adapters are tested
through the real `kubernetes` client (URLs, query parameters, bodies, status codes, chunked
watch streams) with no cluster. Each test scripts the answers it needs and reads back the
requests it got."""
from __future__ import annotations

import json
import queue
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes.client import ApiClient, Configuration


@dataclass(frozen=True)
class Reply:
    """A plain JSON answer."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Stream:
    """A watch answer: these events, one JSON line each, then `end`: "close" (the server ends
    the stream, as at timeoutSeconds), "hold" (stay open until the test stops the server or
    the client hangs up) or "drop" (cut the connection mid-stream)."""

    events: list[dict[str, Any]]
    end: str = "close"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") in ("true", "True", "1")


class ScriptedApiServer:
    def __init__(self) -> None:
        self._scripts: dict[tuple[str, str, bool], deque[Reply | Stream]] = defaultdict(deque)
        self._fallbacks: dict[tuple[str, str, bool], Callable[[Request], Reply | Stream]] = {}
        self.requests: queue.Queue[Request] = queue.Queue()
        self.seen: list[Request] = []
        # Watch requests whose held stream the client closed (see Stream "hold").
        self.hang_ups: queue.Queue[Request] = queue.Queue()
        self.closing = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes: without this, Nagle's algorithm
                # holds the body until the client's delayed ACK (about 40 ms per answer).
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                request = Request(
                    method=self.command,
                    path=url.path,
                    query={k: v[-1] for k, v in parse_qs(url.query).items()},
                    body=json.loads(raw) if raw else None,
                    headers={k: v for k, v in self.headers.items()},
                )
                with server._lock:
                    server.seen.append(request)
                server.requests.put(request)
                answer = server._answer_for(request)
                if isinstance(answer, Reply):
                    self._reply(answer)
                else:
                    self._stream(request, answer)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def _reply(self, reply: Reply) -> None:
                payload = json.dumps(reply.body).encode() if reply.body is not None else b""
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up waiting (a test of request timeouts)
                    self.close_connection = True

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _stream(self, request: Request, stream: Stream) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for event in stream.events:
                        self._chunk(json.dumps(event).encode() + b"\n")
                    if stream.end == "drop":
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    if stream.end == "hold" and not self._hold_open():
                        server.hang_ups.put(request)
                        self.close_connection = True
                        return
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:
                    self.close_connection = True

            def _hold_open(self) -> bool:
                """Until the test ends (True) or the client hangs up (False: its socket reads EOF).
                The short timeout is this server thread looking at `closing` now and then."""
                self.connection.settimeout(0.05)
                while not server.closing.is_set():
                    try:
                        if self.connection.recv(1, socket.MSG_PEEK) == b"":
                            return False
                    except TimeoutError:
                        continue
                    except OSError:
                        return False
                return True

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, name="scripted-apiserver", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_port}"

    def api_client(self) -> ApiClient:
        configuration = Configuration()
        configuration.host = self.url
        configuration.retries = False
        return ApiClient(configuration)

    def script(self, method: str, path: str, *answers: Reply | Stream, watch: bool = False) -> None:
        """Answer the next requests to (method, path[, watch]) with `answers`, in order."""
        self._scripts[(method, path, watch)].extend(answers)

    def fallback(self, method: str, path: str, answer: Callable[[Request], Reply | Stream], *, watch: bool = False) -> None:
        """How to answer (method, path) once its script has run out."""
        self._fallbacks[(method, path, watch)] = answer

    def _answer_for(self, request: Request) -> Reply | Stream:
        key = (request.method, request.path, request.is_watch)
        with self._lock:
            if self._scripts[key]:
                return self._scripts[key].popleft()
        if key in self._fallbacks:
            return self._fallbacks[key](request)
        if request.is_watch:
            return Stream([], end="hold")
        return Reply(404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": f"unscripted {key}"})

    def next_request(self, timeout: float = 5.0, *, matching: Callable[[Request], bool] = lambda r: True) -> Request:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no matching request within {timeout}s; seen: {[(r.method, r.path, r.query) for r in self.seen]}")
            try:
                request = self.requests.get(timeout=remaining)
            except queue.Empty:
                continue
            if matching(request):
                return request

    def next_hang_up(self, timeout: float = 5.0) -> Request:
        """The next watch request whose held stream the client closed."""
        try:
            return self.hang_ups.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the client closed no held watch stream within {timeout}s")

    def close(self) -> None:
        self.closing.set()
        self._http.shutdown()
        self._http.server_close()


def status_body(code: int, reason: str, message: str = "") -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message or reason}

