"""Probe parsing with API defaults, and single checks against real local processes and sockets."""
from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from kube_sandbox.kubelet.probes import (
    LIVENESS,
    READINESS,
    STARTUP,
    ExecCheck,
    HttpGetCheck,
    InvalidProbe,
    ProbeLoop,
    ProbeTarget,
    TcpSocketCheck,
    parse_probe,
    run_check,
)


def test_defaults_match_the_api() -> None:
    probe = parse_probe(READINESS, {"tcpSocket": {"port": 2379}})
    assert probe is not None
    assert (probe.initial_delay_seconds, probe.period_seconds, probe.timeout_seconds,
            probe.success_threshold, probe.failure_threshold) == (0, 10, 1, 1, 3)


def test_parse_handlers() -> None:
    http = parse_probe(LIVENESS, {"httpGet": {"path": "/health", "port": "client", "scheme": "https",
                                              "httpHeaders": [{"name": "X", "value": "1"}]},
                                  "successThreshold": 3, "periodSeconds": 2})
    assert http is not None and http.check == HttpGetCheck(port="client", path="/health", scheme="HTTPS",
                                                           headers=(("X", "1"),))
    assert http.success_threshold == 1  # liveness must be 1
    numeric = parse_probe(STARTUP, {"tcpSocket": {"port": "2380"}})
    assert numeric is not None and numeric.check == TcpSocketCheck(port=2380)
    exec_probe = parse_probe(READINESS, {"exec": {"command": ["true"]}, "successThreshold": 2})
    assert exec_probe is not None and exec_probe.check == ExecCheck(("true",)) and exec_probe.success_threshold == 2
    assert parse_probe(READINESS, None) is None
    with pytest.raises(InvalidProbe):
        parse_probe(READINESS, {"initialDelaySeconds": 3})


@pytest.fixture
def target(tmp_path: Path) -> ProbeTarget:
    return ProbeTarget(pod_ip="127.0.0.1", ports={"web": 0}, env={"PATH": "/usr/bin:/bin", "WORD": "hi"},
                       cwd=tmp_path)


def test_exec_check_uses_the_container_env_and_times_out(target: ProbeTarget) -> None:
    assert run_check(ExecCheck(("sh", "-c", 'test "$WORD" = hi')), target, 5).success
    failed = run_check(ExecCheck(("sh", "-c", "echo nope; exit 3")), target, 5)
    assert not failed.success and "3" in failed.message and "nope" in failed.message
    slow = run_check(ExecCheck(("sleep", "5")), target, 0.3)
    assert not slow.success and "timed out" in slow.message
    assert not run_check(ExecCheck(("/no/such/program",)), target, 1).success


@pytest.fixture
def web_server() -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200 if self.path == "/ok" else 500)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_http_and_tcp_checks(target: ProbeTarget, web_server: int) -> None:
    named = ProbeTarget(pod_ip="127.0.0.1", ports={"web": web_server}, env={}, cwd=target.cwd)
    assert run_check(HttpGetCheck(port="web", path="/ok"), named, 2).success
    assert not run_check(HttpGetCheck(port=web_server, path="/broken"), named, 2).success
    assert not run_check(HttpGetCheck(port="nosuchport"), named, 2).success
    assert run_check(TcpSocketCheck(port=web_server), named, 2).success
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    assert not run_check(TcpSocketCheck(port=closed_port), named, 1).success


def test_probe_loop_reports_only_threshold_crossings(target: ProbeTarget, tmp_path: Path) -> None:
    flag = tmp_path / "healthy"
    probe = parse_probe(READINESS, {"exec": {"command": ["test", "-f", str(flag)]}, "periodSeconds": 0.05,
                                    "failureThreshold": 2, "successThreshold": 2})
    assert probe is not None
    reports: list[tuple[str, bool]] = []
    changed = threading.Event()

    def report(kind: str, healthy: bool, message: str) -> None:
        reports.append((kind, healthy))
        changed.set()

    stop, started = threading.Event(), threading.Event()
    started.set()
    ProbeLoop(probe, target, stop, started, report, "test").start()
    try:
        flag.touch()
        assert changed.wait(10) and reports == [(READINESS, True)]
        changed.clear()
        flag.unlink()
        assert changed.wait(10) and reports == [(READINESS, True), (READINESS, False)]
    finally:
        stop.set()
