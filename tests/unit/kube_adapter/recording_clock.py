"""A `kube_adapter.clock.Clock` whose waits end at once, as if the time asked had passed: each
wait moves the clock on by its seconds and is recorded, so a test reads exactly what the code
asked to wait without waiting. For code that waits and then acts on its own (retries, backoff);
`tests.support.fake_clock.FakeClock` is for threads the test steps through time itself."""
from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class RecordingClock:
    def __init__(self, start: float = 1000.0, wall_start: datetime = datetime(2024, 1, 1, tzinfo=UTC)) -> None:
        self._lock = threading.Lock()
        self._start = start
        self._wall_start = wall_start
        self._now = start
        self._waits: list[float] = []

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def now(self) -> datetime:
        return self._wall_start + timedelta(seconds=self.monotonic() - self._start)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """An event already set ends the wait with no time passing, as Event.wait does."""
        if event.is_set():
            return True
        with self._lock:
            self._waits.append(seconds)
            self._now += max(0.0, seconds)
        return event.is_set()

    @property
    def waits(self) -> list[float]:
        """The seconds of each wait that was not cut short by its event, in order."""
        with self._lock:
            return list(self._waits)
