"""Fixtures for the kube adapter tests: a scripted apiserver on loopback (see scripted_apiserver.py)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.kube_adapter.scripted_apiserver import ScriptedApiServer


@pytest.fixture
def apiserver() -> Iterator[ScriptedApiServer]:
    server = ScriptedApiServer()
    yield server
    server.close()
