"""/healthz over real HTTP reports the operator's loops: 503 naming a stalled watch or a dead
worker thread, 200 once they make progress again; a process that is stopping is unhealthy."""
from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from operator_runtime import running
from operator_runtime.flags import RuntimeSettings
from operator_runtime.http_endpoints import health_answer, serve
from operator_runtime.liveness import PROCESS_LIVENESS, Liveness
from tests.support.fake_clock import FakeClock


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_healthz_names_what_stalled_and_recovers_when_it_moves_again() -> None:
    clock = FakeClock()
    liveness = Liveness(clock)
    beat = liveness.expect("watch etcdclusters", 300.0)
    dead: list[str] = []
    liveness.add_check("workers", lambda: f"worker thread died: {dead[0]}" if dead else None)
    server = serve(0, "127.0.0.1", CollectorRegistry(), liveness.problems)
    try:
        assert get(f"{server.url}/healthz") == (200, "ok\n")
        clock.advance(301.0)
        status, body = get(f"{server.url}/healthz")
        assert status == 503 and "watch etcdclusters: no progress for 301s (bound 300s)" in body
        beat()
        assert get(f"{server.url}/healthz") == (200, "ok\n")
        dead.append("ns/c1")
        status, body = get(f"{server.url}/healthz")
        assert status == 503 and "workers: worker thread died: ns/c1" in body
    finally:
        server.shutdown()


def test_an_operators_healthz_reports_its_controllers_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_operator serves the process's liveness (what the controllers register), not "not stopped"."""
    served: list[Any] = []

    class Endpoints:
        url = "http://127.0.0.1:0"

        def shutdown(self) -> None:
            pass

    def serve_fake(port: int, host: str, registry: Any, healthy: Any, **kwargs: Any) -> Endpoints:
        served.append(healthy)
        return Endpoints()
    monkeypatch.setattr(running, "serve", serve_fake)
    monkeypatch.setattr(running, "load_api_client", lambda kubeconfig: object())
    monkeypatch.setattr(running, "configure_logging", lambda fmt, level: None)
    monkeypatch.setattr(running, "_stop_on_signals", lambda stop, log: None)
    seen: list[Any] = []

    class Controller:
        def run(self) -> None:
            (healthy,) = served
            seen.append(health_answer(healthy))
            PROCESS_LIVENESS.expect("watch widgets", -1.0)  # a watch already past its bound
            try:
                seen.append(health_answer(healthy))
            finally:
                PROCESS_LIVENESS.forget("watch widgets")

    settings = RuntimeSettings(kubeconfig=None, http_address="127.0.0.1", http_port=0, leader_elect=False,
                               lease_namespace="ns", lease_name="x", identity="me", log_format="text", log_level="INFO")
    assert running.run_operator(settings, name="test-operator", registry=CollectorRegistry(),
                                make_controller=lambda api, stop, may_act: Controller()) == 0
    assert seen[0] == (True, [])
    assert seen[1][0] is False and seen[1][1][0].startswith("watch widgets: no progress for")
