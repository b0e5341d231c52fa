"""The time that loops read and wait on, passed in so that tests can drive it.

Code that measures durations, stamps times or waits with a timeout asks a `Clock` instead of
`time`/`datetime`/`Event.wait`; production uses `SYSTEM_CLOCK`, tests a fake clock they move
forward themselves (virtual time: no test sleeps, none bounds wall-clock time).
"""
from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""
        ...

    def now(self) -> datetime:
        """The current time of day, timezone-aware UTC."""
        ...

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until `event` is set or `seconds` have passed; whether it is set (Event.wait)."""
        ...


class SystemClock:
    """The real clock: time.monotonic, datetime.now(UTC), Event.wait."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(seconds)


SYSTEM_CLOCK: Clock = SystemClock()
