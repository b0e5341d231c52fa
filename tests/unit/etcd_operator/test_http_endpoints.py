"""/metrics and /healthz over real HTTP on loopback."""
from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from etcd_operator.metrics import OperatorMetrics
from operator_runtime.http_endpoints import HttpEndpoints, serve


class Health:
    def __init__(self) -> None:
        self.state: bool | Exception = True

    def __call__(self) -> bool:
        if isinstance(self.state, Exception):
            raise self.state
        return self.state


@pytest.fixture
def health() -> Health:
    return Health()


@pytest.fixture
def metrics() -> OperatorMetrics:
    return OperatorMetrics()


@pytest.fixture
def endpoints(metrics: OperatorMetrics, health: Health) -> Iterator[HttpEndpoints]:
    server = serve(0, "127.0.0.1", metrics.registry, health)
    yield server
    server.shutdown()


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def test_metrics_are_served_in_prometheus_text(endpoints: HttpEndpoints, metrics: OperatorMetrics) -> None:
    metrics.clusters_managed.set(4)
    status, content_type, body = get(f"{endpoints.url}/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert "etcd_operator_clusters_managed 4.0" in body
    assert 'etcd_operator_errors_total{reason="quorum_lost"} 0.0' in body


def test_healthz_follows_the_health_check(endpoints: HttpEndpoints, health: Health) -> None:
    assert get(f"{endpoints.url}/healthz")[::2] == (200, "ok\n")
    health.state = False
    assert get(f"{endpoints.url}/healthz")[0] == 503
    health.state = RuntimeError("supervisor table locked")
    assert get(f"{endpoints.url}/healthz")[0] == 503


def test_other_paths_are_not_found(endpoints: HttpEndpoints) -> None:
    assert get(f"{endpoints.url}/")[0] == 404


def test_shutdown_frees_the_port(metrics: OperatorMetrics, health: Health) -> None:
    server = serve(0, "127.0.0.1", metrics.registry, health)
    port = server.port
    server.shutdown()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
