"""What /healthz reports: each loop the operator depends on (a watch, the resync) beats when it
makes progress and must beat again within its bound; checks (a worker thread that died) say
what is wrong. A stalled watch or a dead loop makes the operator unhealthy, so its liveness
probe restarts it instead of it serving stale caches while saying "ok"."""
from __future__ import annotations

import threading
from collections.abc import Callable

from kube_adapter.clock import SYSTEM_CLOCK, Clock

# A check: what is wrong ("" or None when nothing).
Check = Callable[[], str | None]


class Liveness:
    """Heartbeats with bounds, and checks; `problems()` lists what is wrong now."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._beats: dict[str, tuple[float, float]] = {}  # name -> (last beat, bound seconds)
        self._checks: dict[str, Check] = {}

    def expect(self, name: str, within_seconds: float) -> Callable[[], None]:
        """`name` must beat every `within_seconds` from now on; returns its beat."""
        with self._lock:
            self._beats[name] = (self._clock.monotonic(), within_seconds)
        return lambda: self.beat(name)

    def beat(self, name: str) -> None:
        with self._lock:
            _, bound = self._beats.get(name, (0.0, float("inf")))
            self._beats[name] = (self._clock.monotonic(), bound)

    def forget(self, name: str) -> None:
        with self._lock:
            self._beats.pop(name, None)
            self._checks.pop(name, None)

    def add_check(self, name: str, check: Check) -> None:
        with self._lock:
            self._checks[name] = check

    def problems(self) -> list[str]:
        """What is wrong now: loops silent past their bound, checks that fail."""
        now = self._clock.monotonic()
        with self._lock:
            beats = dict(self._beats)
            checks = dict(self._checks)
        found = [f"{name}: no progress for {now - last:.0f}s (bound {bound:.0f}s)"
                 for name, (last, bound) in sorted(beats.items()) if now - last > bound]
        for name, check in sorted(checks.items()):
            problem = check()
            if problem:
                found.append(f"{name}: {problem}")
        return found


# The process's own: the controllers register their loops here, /healthz reads it.
PROCESS_LIVENESS = Liveness()
