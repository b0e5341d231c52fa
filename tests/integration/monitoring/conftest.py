"""The operator deployed from this checkout (the etcd operator tests' fixtures) and a real
Prometheus configured with deploy/prometheus/."""
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube_sandbox.testing import Sandbox
from tests.integration.etcd_operator.conftest import clusters, operator  # noqa: F401  (pytest fixtures)
from tests.integration.monitoring.prometheus_server import Prometheus, start_prometheus


@pytest.fixture
def prometheus(operator: Sandbox, tmp_path: Path) -> Iterator[Prometheus]:  # noqa: F811  (the fixture imported above)
    server = start_prometheus(operator, tmp_path)
    try:
        yield server
    finally:
        server.stop()
        print(f"\nprometheus log tail:\n{server.log.read_text()[-1500:]}")
