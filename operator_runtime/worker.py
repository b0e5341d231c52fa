"""One thread per managed object: run its reconcile pass when woken, or when the delay the last
pass asked for has passed; back off after failures; never die of one.

The pass is the operator's (`reconcile() -> seconds until the next pass`, controller-runtime's
"key -> requeue after"); the loop around it (wake, stop, crash guard, backoff) is here.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kube_adapter.clock import SYSTEM_CLOCK, Clock
from operator_runtime.cache import Key

RETRY_INITIAL_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0

Logger = logging.Logger | logging.LoggerAdapter[Any]


def short_error(error: BaseException) -> str:
    """`Type: first line of the message`, at most 300 characters: for logs and status."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def retry_delay_seconds(failures: int, initial: float = RETRY_INITIAL_SECONDS, maximum: float = RETRY_MAX_SECONDS) -> float:
    """How long to wait after the `failures`-th failure in a row: doubling from `initial`."""
    return min(maximum, initial * 2.0 ** (failures - 1))


class ObjectWorker:
    """Runs `reconcile` for one object in a thread of its own until stopped.

    - `on_pass(seconds, error)` is called after every pass (error None when it succeeded).
    - `pause_on(error)` may return a delay for an error that is not a failure (say, the
      namespace is being deleted): the worker waits that long, with no backoff and no `on_pass`.
    - Failures in `expected_errors` are logged as one warning line; anything else with its
      traceback, as a crash.
    - `on_lag(seconds)`: after a pass that ran because its delay ran out (not woken), how late
      it started against that schedule (a busy machine or too many threads show here).
    - `clock`: what durations are measured and waited on (tests pass a fake).
    """

    def __init__(
        self,
        key: Key,
        reconcile: Callable[[], float],
        *,
        stop: threading.Event,
        log: Logger,
        role: str = "worker",
        on_pass: Callable[[float, Exception | None], None] = lambda seconds, error: None,
        pause_on: Callable[[Exception], float | None] = lambda error: None,
        expected_errors: tuple[type[Exception], ...] = (),
        on_lag: Callable[[float], None] = lambda seconds: None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.key = key
        self.log = log
        self._reconcile = reconcile
        self._global_stop = stop
        self._role = role
        self._on_pass = on_pass
        self._pause_on = pause_on
        self._expected_errors = expected_errors
        self._on_lag = on_lag
        self._clock = clock
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{role} {key[0]}/{key[1]}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _should_stop(self) -> bool:
        return self._stopped.is_set() or self._global_stop.is_set()

    def _run(self) -> None:
        self.log.info("%s started", self._role)
        failures = 0
        while not self._should_stop():
            self._wake.clear()
            started = self._clock.monotonic()
            try:
                delay = self._reconcile()
                failures = 0
                self._on_pass(self._clock.monotonic() - started, None)
            except Exception as e:  # one bad pass must never end the worker
                pause = self._pause_on(e)
                if pause is not None:
                    self._clock.wait(self._wake, pause)
                    continue
                failures += 1
                delay = retry_delay_seconds(failures)
                self._on_pass(self._clock.monotonic() - started, e)
                if isinstance(e, self._expected_errors):
                    self.log.warning("pass failed: %s; retrying in %.1fs", short_error(e), delay)
                else:
                    self.log.exception("pass crashed; retrying in %.1fs", delay)
            due = self._clock.monotonic() + delay
            if not self._clock.wait(self._wake, delay) and not self._should_stop():
                self._on_lag(max(0.0, self._clock.monotonic() - due))
        self.log.info("%s stopped", self._role)
