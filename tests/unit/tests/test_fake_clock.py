"""The fake clock the unit tests drive: waits end exactly when virtual time reaches them, each
woken thread runs until it waits again before time moves on, and a jump can leave waiting
threads unaware (a resumed process)."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.fake_clock import FakeClock


class Ticker:
    """A thread that records the clock each `period` until stopped (a renew or resync loop)."""

    def __init__(self, clock: FakeClock, period: float) -> None:
        self.clock = clock
        self.period = period
        self.stop = threading.Event()
        self.ticks: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.clock.wait(self.stop, self.period):
            self.ticks.append(self.clock.monotonic())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=100.0, wall_start=datetime(2024, 1, 1, tzinfo=UTC))


@pytest.fixture
def ticker(clock: FakeClock) -> Iterator[Ticker]:
    made = Ticker(clock, 1.0)
    clock.wait_until_waiting(1)
    yield made
    made.stop.set()
    made.thread.join(10)


def test_time_moves_only_when_advanced(clock: FakeClock) -> None:
    assert clock.monotonic() == 100.0 and clock.now() == datetime(2024, 1, 1, tzinfo=UTC)
    clock.advance(2.5)
    assert clock.monotonic() == 102.5
    assert clock.now() == datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=2.5)


def test_advance_stops_at_every_wait_on_the_way(clock: FakeClock, ticker: Ticker) -> None:
    clock.advance(0.5)
    assert ticker.ticks == []
    clock.advance(3.0)
    assert ticker.ticks == [101.0, 102.0, 103.0] and clock.monotonic() == 103.5
    assert clock.next_deadline() == 104.0 and clock.waiting() == 1


def test_advance_until_stops_when_the_condition_holds(clock: FakeClock, ticker: Ticker) -> None:
    assert clock.advance_until(lambda: len(ticker.ticks) == 2, within=10)
    assert clock.monotonic() == 102.0
    assert not clock.advance_until(lambda: len(ticker.ticks) == 5, within=2.5)
    assert clock.monotonic() == 104.5 and len(ticker.ticks) == 4


def test_a_jump_ends_due_waits_late_and_all_at_once(clock: FakeClock, ticker: Ticker) -> None:
    clock.jump(3.5)
    assert ticker.ticks == [103.5]  # one late tick, not three


def test_a_jump_without_waking_leaves_waiters_unaware_until_time_moves_again(clock: FakeClock, ticker: Ticker) -> None:
    clock.jump(3.5, wake=False)
    assert clock.monotonic() == 103.5 and ticker.ticks == [] and clock.waiting() == 1
    clock.advance(0)
    assert ticker.ticks == [103.5]


def test_an_event_ends_a_wait_without_time_moving(clock: FakeClock) -> None:
    event = threading.Event()
    outcome: list[bool] = []
    waiter = threading.Thread(target=lambda: outcome.append(clock.wait(event, 60)), daemon=True)
    waiter.start()
    clock.wait_until_waiting(1)
    event.set()
    waiter.join(10)
    assert outcome == [True] and clock.monotonic() == 100.0
    assert clock.wait(event, 60) is True and clock.wait(threading.Event(), 0) is False


def test_a_thread_that_does_not_come_back_fails_the_test(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import fake_clock
    monkeypatch.setattr(fake_clock, "SETTLE_TIMEOUT_SECONDS", 0.2)
    release = threading.Event()

    def stuck() -> None:
        clock.wait(threading.Event(), 1.0)
        release.wait()  # blocked on something that is not the clock

    thread = threading.Thread(target=stuck, daemon=True)
    thread.start()
    clock.wait_until_waiting(1)
    with pytest.raises(AssertionError, match="neither waited on the clock again nor ended"):
        clock.advance(1.0)
    release.set()
    thread.join(10)
