"""The system clock is the real one: monotonic seconds, aware UTC time, Event.wait."""
from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from kube_adapter.clock import SYSTEM_CLOCK


def test_the_system_clock_reads_the_real_clocks() -> None:
    before = time.monotonic()
    assert before <= SYSTEM_CLOCK.monotonic() <= time.monotonic()
    now = SYSTEM_CLOCK.now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert abs(now - datetime.now(UTC)) < timedelta(minutes=1)


def test_the_system_clock_waits_on_the_event() -> None:
    event = threading.Event()
    assert SYSTEM_CLOCK.wait(event, 0) is False
    event.set()
    assert SYSTEM_CLOCK.wait(event, 60) is True  # set: returns at once
