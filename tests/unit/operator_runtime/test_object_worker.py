"""The per-object worker loop: passes when woken or when due, backoff after failures, a crash
never ends the thread, pauses for errors that are not failures, and a stop ends it. On a fake
clock: every delay is virtual time the test moves, so schedules are checked exactly."""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator

import pytest

from operator_runtime.worker import ObjectWorker, retry_delay_seconds, short_error
from tests.support.fake_clock import FakeClock

KEY = ("ns", "obj")
START = 1000.0


class Expected(Exception):
    pass


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=START)


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def start(stop: threading.Event, clock: FakeClock, reconcile: Callable[[], float], **hooks: object) -> ObjectWorker:
    worker = ObjectWorker(KEY, reconcile, stop=stop, log=logging.getLogger("test.worker"), clock=clock, **hooks)  # type: ignore[arg-type]
    worker.start()
    return worker


class Passes:
    """A reconcile that records the (virtual) time of each pass and returns the next delay."""

    def __init__(self, clock: FakeClock, delays: Callable[[int], float]) -> None:
        self.clock = clock
        self.delays = delays
        self.at: list[float] = []
        self.ran: queue.Queue[float] = queue.Queue()

    def __call__(self) -> float:
        self.at.append(self.clock.monotonic())
        self.ran.put(self.at[-1])
        return self.delays(len(self.at))

    def next(self, timeout: float = 10.0) -> float:
        """Wait (real time, bounded) for the next pass; when it ran."""
        try:
            return self.ran.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no pass within {timeout}s; passes at {self.at}")


def test_a_pass_runs_at_once_and_again_when_woken(stop: threading.Event, clock: FakeClock) -> None:
    passes = Passes(clock, lambda n: 60.0)
    worker = start(stop, clock, passes)
    assert passes.next() == START
    clock.wait_until_waiting(1)
    assert passes.at == [START]
    worker.notify()
    assert passes.next() == START, "woken: runs at once, not when due"
    clock.wait_until_waiting(1)
    assert passes.at == [START, START]


def test_the_delay_a_pass_returns_schedules_the_next(stop: threading.Event, clock: FakeClock) -> None:
    passes = Passes(clock, lambda n: 0.05)
    start(stop, clock, passes)
    passes.next()
    clock.wait_until_waiting(1)
    clock.advance(0.049)
    assert passes.at == [START], "ran before its delay was up"
    clock.advance(0.0515)  # to START + 0.1005: the passes due at +0.05 and +0.1 run
    assert passes.at == pytest.approx([START, START + 0.05, START + 0.1])


def test_failures_back_off_and_crashes_do_not_end_the_worker(
    stop: threading.Event, clock: FakeClock, caplog: pytest.LogCaptureFixture,
) -> None:
    outcomes: list[tuple[float, type[Exception] | None]] = []
    errors = iter([Expected("etcd unreachable"), RuntimeError("bug")])

    def reconcile() -> float:
        error = next(errors, None)
        if error is not None:
            raise error
        return 60.0

    with caplog.at_level(logging.INFO, logger="test.worker"):
        worker = start(stop, clock, reconcile, expected_errors=(Expected,),
                       on_pass=lambda seconds, error: outcomes.append((clock.monotonic(), type(error) if error else None)))
        clock.wait_until_waiting(1)
        assert outcomes == [(START, Expected)]
        clock.advance(0.499)
        assert len(outcomes) == 1, "retried before the first backoff (0.5s) was up"
        clock.advance(0.001)
        assert [kind for _, kind in outcomes] == [Expected, RuntimeError]
        assert outcomes[1][0] == pytest.approx(START + 0.5)
        clock.advance(0.999)
        assert len(outcomes) == 2, "retried before the second backoff (1.0s) was up"
        clock.advance(0.001)
        assert [kind for _, kind in outcomes] == [Expected, RuntimeError, None]
        assert outcomes[2][0] == pytest.approx(START + 1.5)
        clock.advance(59.0)
        assert len(outcomes) == 3, "after a success, the pass's own delay (60s) applies again"
    assert worker.alive()
    warning = next(r for r in caplog.records if "pass failed" in r.getMessage())
    assert "Expected: etcd unreachable; retrying in 0.5s" in warning.getMessage() and warning.exc_info is None
    crash = next(r for r in caplog.records if "pass crashed" in r.getMessage())
    assert crash.exc_info is not None and "retrying in 1.0s" in crash.getMessage()


def test_a_paused_error_is_not_a_failure(stop: threading.Event, clock: FakeClock) -> None:
    outcomes: list[Exception | None] = []
    attempts: list[float] = []

    def reconcile() -> float:
        attempts.append(clock.monotonic())
        raise Expected("namespace is being deleted")

    start(stop, clock, reconcile, on_pass=lambda seconds, error: outcomes.append(error), pause_on=lambda error: 0.01)
    clock.wait_until_waiting(1)
    clock.advance(0.02)
    # Every 0.01s (the pause), not backing off (0.5s, 1.0s, ...), and no pass reported.
    assert attempts == pytest.approx([START, START + 0.01, START + 0.02])
    assert outcomes == []


def test_stop_ends_the_thread(stop: threading.Event, clock: FakeClock) -> None:
    worker = start(stop, clock, lambda: 60.0)
    clock.wait_until_waiting(1)
    assert worker.alive()
    worker.stop()
    worker.join(10.0)
    assert not worker.alive()


def test_the_shared_stop_ends_every_worker_at_its_next_wake_up(stop: threading.Event, clock: FakeClock) -> None:
    workers = [start(stop, clock, lambda: 60.0) for _ in range(3)]
    clock.wait_until_waiting(3)
    stop.set()
    for worker in workers:
        worker.notify()
    for worker in workers:
        worker.join(10.0)
    assert not any(worker.alive() for worker in workers)


@pytest.mark.parametrize(("failures", "seconds"), [(1, 0.5), (2, 1.0), (3, 2.0), (7, 30.0), (50, 30.0)])
def test_retry_delays_double_up_to_the_maximum(failures: int, seconds: float) -> None:
    assert retry_delay_seconds(failures) == seconds


def test_short_errors_keep_the_type_and_first_line() -> None:
    assert short_error(ValueError("first\nsecond")) == "ValueError: first"
    assert len(short_error(ValueError("x" * 1000))) == 300


def test_lag_is_reported_for_scheduled_passes_only(stop: threading.Event, clock: FakeClock) -> None:
    lags: list[float] = []
    passes = Passes(clock, lambda n: 0.05 if n < 3 else 60.0)
    worker = start(stop, clock, passes, on_lag=lags.append)
    passes.next()
    clock.wait_until_waiting(1)
    clock.jump(0.05 + 0.3)  # a busy machine: the second pass starts 0.3s late
    clock.advance(0.05)  # the third starts on time
    assert len(passes.at) == 3
    assert lags == [pytest.approx(0.3), 0.0], "one per pass that ran when due, with how late it ran"
    worker.notify()  # woken early: not late against any schedule
    passes.next()
    clock.wait_until_waiting(1)
    assert len(passes.at) == 4 and len(lags) == 2
