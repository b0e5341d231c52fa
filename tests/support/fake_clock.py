"""A `kube_adapter.clock.Clock` for unit tests: virtual time that moves only when the test (or a
simulated slow request) moves it, so timing is asserted exactly and no test sleeps.

Threads under test wait with `clock.wait(event, seconds)`; the test sees who waits
(`wait_until_waiting`) and moves time with `advance` (step by step: each wait that ends on the
way lets its thread run until it waits on the clock again or ends, before time moves on) or
`jump` (all at once, as when a frozen process resumes). Real time is used only to notice an
event being set and, as a failure bound, for threads that never come back.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# Real seconds: how often a waiting thread looks at its event (an Event has no callback).
EVENT_POLL_SECONDS = 0.002
# Real seconds: how long a thread may take to wait on the clock again before the test fails.
SETTLE_TIMEOUT_SECONDS = 20.0


@dataclass(eq=False)
class _Waiter:
    thread: threading.Thread
    event: threading.Event
    deadline: float


class FakeClock:
    def __init__(self, start: float = 1000.0, wall_start: datetime = datetime(2024, 1, 1, tzinfo=UTC)) -> None:
        self._cond = threading.Condition()
        self._start = start
        self._wall_start = wall_start
        self._now = start
        # Waits ending at or before this have ended; behind `_now` only after `jump(wake=False)`.
        self._woken_to = start
        self._waiters: list[_Waiter] = []

    # --- the Clock protocol

    def monotonic(self) -> float:
        with self._cond:
            return self._now

    def now(self) -> datetime:
        return self._wall_start + timedelta(seconds=self.monotonic() - self._start)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        with self._cond:
            if event.is_set() or seconds <= 0:
                return event.is_set()
            waiter = _Waiter(threading.current_thread(), event, self._now + seconds)
            self._waiters.append(waiter)
            self._cond.notify_all()
            try:
                while not event.is_set() and self._woken_to < waiter.deadline:
                    self._cond.wait(EVENT_POLL_SECONDS)
                return event.is_set()
            finally:
                self._waiters.remove(waiter)
                self._cond.notify_all()

    # --- for the test

    def waiting(self) -> int:
        """How many threads wait on this clock (for a time still ahead, on an event not set)."""
        with self._cond:
            return len(self._pending())

    def next_deadline(self) -> float | None:
        """When the earliest wait ends (a monotonic() value); None when nobody waits."""
        with self._cond:
            return min((w.deadline for w in self._pending()), default=None)

    def wait_until_waiting(self, count: int = 1, timeout: float = SETTLE_TIMEOUT_SECONDS) -> None:
        """Block (real time, bounded) until at least `count` threads wait on this clock."""
        with self._cond:
            if not self._poll_until(lambda: len(self._pending()) >= count, timeout):
                raise AssertionError(f"{len(self._pending())} threads wait on the clock, expected {count} "
                                     f"(after {timeout}s)")

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, stopping at the end of each wait on the way until its
        thread waits on the clock again or ends."""
        self.advance_until(lambda: False, seconds)

    def advance_until(self, condition: Callable[[], bool], within: float) -> bool:
        """`advance` step by step until `condition()` holds (asked before moving and after every
        step), for at most `within` seconds; whether it holds."""
        with self._cond:
            limit = self._now + within
        while not condition():
            with self._cond:
                step_to = min((w.deadline for w in self._pending() if w.deadline <= limit), default=None)
                woken = self._move_to(limit if step_to is None else step_to)
            self._settle(woken)
            if step_to is None:
                return condition()
        return True

    def jump(self, seconds: float, *, wake: bool = True) -> None:
        """Move time forward by `seconds` at once, as a paused process sees it when it resumes.
        Waits that end on the way end now (all together, late); with `wake=False` they are not
        told yet (the threads have not run yet), until the next `advance` or `jump`."""
        with self._cond:
            target = self._now + seconds
            if not wake:
                self._now = max(self._now, target)
                return
            woken = self._move_to(target)
        self._settle(woken)

    # --- inside

    def _poll_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """With the lock held: wait (real time) until `predicate()`, looking again on every change
        of the waiters and every poll period (events being set and threads ending notify nobody)."""
        give_up_at = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() >= give_up_at:
                return False
            self._cond.wait(EVENT_POLL_SECONDS)
        return True

    def _pending(self) -> list[_Waiter]:
        return [w for w in self._waiters if w.deadline > self._woken_to and not w.event.is_set()]

    def _move_to(self, moment: float) -> set[threading.Thread]:
        """Set the time (never back) and end the waits due; the threads woken (bar this one)."""
        self._now = max(self._now, moment)
        woken = {w.thread for w in self._pending() if w.deadline <= self._now}
        self._woken_to = self._now
        self._cond.notify_all()
        woken.discard(threading.current_thread())
        return woken

    def _settle(self, woken: set[threading.Thread]) -> None:
        """Block (real time, bounded) until each of `woken` waits on the clock again or has ended."""
        def settled() -> bool:
            busy = woken - {w.thread for w in self._pending()}
            return all(not thread.is_alive() for thread in busy)

        with self._cond:
            if not self._poll_until(settled, SETTLE_TIMEOUT_SECONDS):
                busy = sorted(t.name for t in woken - {w.thread for w in self._pending()} if t.is_alive())
                raise AssertionError(f"threads {busy} neither waited on the clock again nor ended "
                                     f"within {SETTLE_TIMEOUT_SECONDS}s")
