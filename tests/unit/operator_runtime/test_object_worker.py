"""The per-object worker loop: passes when woken or when due, backoff after failures, a crash
never ends the thread, pauses for errors that are not failures, and a stop ends it."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from operator_runtime.worker import ObjectWorker, retry_delay_seconds, short_error

KEY = ("ns", "obj")


class Expected(Exception):
    pass


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def start(stop: threading.Event, reconcile: Callable[[], float], **hooks: object) -> ObjectWorker:
    worker = ObjectWorker(KEY, reconcile, stop=stop, log=logging.getLogger("test.worker"), **hooks)  # type: ignore[arg-type]
    worker.start()
    return worker


def test_a_pass_runs_at_once_and_again_when_woken(stop: threading.Event) -> None:
    passes: list[float] = []
    worker = start(stop, lambda: passes.append(time.monotonic()) or 60.0)
    wait_for(lambda: len(passes) == 1)
    worker.notify()
    wait_for(lambda: len(passes) == 2)


def test_the_delay_a_pass_returns_schedules_the_next(stop: threading.Event) -> None:
    passes: list[float] = []
    start(stop, lambda: passes.append(time.monotonic()) or 0.05)
    wait_for(lambda: len(passes) >= 3)


def test_failures_back_off_and_crashes_do_not_end_the_worker(stop: threading.Event, caplog: pytest.LogCaptureFixture) -> None:
    outcomes: list[Exception | None] = []
    errors = iter([Expected("etcd unreachable"), RuntimeError("bug")])

    def reconcile() -> float:
        error = next(errors, None)
        if error is not None:
            raise error
        return 60.0

    with caplog.at_level(logging.INFO, logger="test.worker"):
        worker = start(stop, reconcile, on_pass=lambda seconds, error: outcomes.append(error),
                       expected_errors=(Expected,))
        wait_for(lambda: len(outcomes) == 3, timeout=5.0)
    assert [type(o) for o in outcomes] == [Expected, RuntimeError, type(None)]
    assert worker.alive()
    warning = next(r for r in caplog.records if "pass failed" in r.getMessage())
    assert "Expected: etcd unreachable; retrying in 0.5s" in warning.getMessage() and warning.exc_info is None
    crash = next(r for r in caplog.records if "pass crashed" in r.getMessage())
    assert crash.exc_info is not None and "retrying in 1.0s" in crash.getMessage()


def test_a_paused_error_is_not_a_failure(stop: threading.Event) -> None:
    outcomes: list[Exception | None] = []
    attempts: list[int] = []

    def reconcile() -> float:
        attempts.append(1)
        raise Expected("namespace is being deleted")

    start(stop, reconcile, on_pass=lambda seconds, error: outcomes.append(error), pause_on=lambda error: 0.01)
    wait_for(lambda: len(attempts) >= 3)
    assert outcomes == []


def test_stop_ends_the_thread(stop: threading.Event) -> None:
    worker = start(stop, lambda: 60.0)
    wait_for(worker.alive)
    worker.stop()
    worker.join(5.0)
    assert not worker.alive()


def test_the_shared_stop_ends_every_worker_at_its_next_wake_up(stop: threading.Event) -> None:
    workers = [start(stop, lambda: 60.0) for _ in range(3)]
    stop.set()
    for worker in workers:
        worker.notify()
    for worker in workers:
        worker.join(5.0)
    assert not any(worker.alive() for worker in workers)


@pytest.mark.parametrize(("failures", "seconds"), [(1, 0.5), (2, 1.0), (3, 2.0), (7, 30.0), (50, 30.0)])
def test_retry_delays_double_up_to_the_maximum(failures: int, seconds: float) -> None:
    assert retry_delay_seconds(failures) == seconds


def test_short_errors_keep_the_type_and_first_line() -> None:
    assert short_error(ValueError("first\nsecond")) == "ValueError: first"
    assert len(short_error(ValueError("x" * 1000))) == 300


def test_lag_is_reported_for_scheduled_passes_only(stop: threading.Event) -> None:
    lags: list[float] = []
    passes: list[float] = []
    worker = start(stop, lambda: passes.append(time.monotonic()) or (0.05 if len(passes) < 3 else 60.0),
                   on_lag=lags.append)
    wait_for(lambda: len(passes) == 3)
    assert len(lags) == 2 and all(0.0 <= lag < 1.0 for lag in lags), "one per pass that ran when due"
    worker.notify()  # woken early: not late against any schedule
    wait_for(lambda: len(passes) == 4)
    assert len(lags) == 2
