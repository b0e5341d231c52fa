"""Fixtures for the kube adapter tests: a scripted apiserver on loopback (see scripted_apiserver.py)
and a clock whose waits end at once and are recorded (see recording_clock.py)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.kube_adapter.recording_clock import RecordingClock
from tests.unit.kube_adapter.scripted_apiserver import ScriptedApiServer


@pytest.fixture
def apiserver() -> Iterator[ScriptedApiServer]:
    server = ScriptedApiServer()
    yield server
    server.close()


@pytest.fixture
def recording_clock() -> RecordingClock:
    return RecordingClock()
