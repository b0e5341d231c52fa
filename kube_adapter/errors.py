"""Kubernetes API failures as exceptions with meaning, and the one retry policy for them.

The client raises `ApiException` with a bare HTTP status, urllib3 errors for the network and
pydantic errors for bodies it cannot build; callers above this package only ever see the
classes below. Only `Transient` failures are retried; a 4xx is an answer, not a glitch.
"""
from __future__ import annotations

import email.utils
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

import pydantic
import tenacity
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from kube_adapter.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

RETRY_ATTEMPTS = 5
RETRY_MAX_SECONDS = 30.0
RETRY_INITIAL_WAIT_SECONDS = 0.2
RETRY_MAX_WAIT_SECONDS = 5.0


class KubeError(Exception):
    """A Kubernetes API call failed. `status` is the HTTP status (None without an answer),
    `reason` the API's machine-readable reason (e.g. "AlreadyExists")."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


class NotFound(KubeError):
    pass


class AlreadyExists(KubeError):
    pass


class Conflict(KubeError):
    """The object changed since it was read (resourceVersion or UID precondition failed)."""


class Gone(KubeError):
    """410: the resourceVersion asked for is too old; list again."""


class Unauthorized(KubeError):
    """401: our credentials were not accepted."""


class Forbidden(KubeError):
    """403: RBAC does not allow this."""


class Invalid(KubeError):
    """400/422, or a body the client could not even serialize: the request itself is wrong."""


class Transient(KubeError):
    """5xx, 429, or no answer at all: worth retrying. `retry_after_seconds` is the server's
    Retry-After, when it gave one."""

    def __init__(
        self, message: str, *, status: int | None = None, reason: str = "", retry_after_seconds: float | None = None
    ) -> None:
        super().__init__(message, status=status, reason=reason)
        self.retry_after_seconds = retry_after_seconds


def _status_details(exc: ApiException) -> tuple[str, str]:
    """(reason, message) from the Status object the apiserver sends with errors."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str) and body:
        try:
            status = json.loads(body)
        except ValueError:
            return str(exc.reason or ""), body.strip()[:500]
        if isinstance(status, dict):
            return str(status.get("reason") or exc.reason or ""), str(status.get("message") or exc.reason or "")
    return str(exc.reason or ""), str(exc.reason or "")


def _retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def translate(exc: BaseException) -> KubeError:
    """Our exception for whatever the client raised. Raise it `from exc`."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        reason, message = _status_details(exc)
        text = f"{status} {reason}: {message}" if status else f"{reason}: {message}"
        if status == 404:
            return NotFound(text, status=status, reason=reason)
        if status == 409:
            if reason == "AlreadyExists":
                return AlreadyExists(text, status=status, reason=reason)
            return Conflict(text, status=status, reason=reason)
        if status == 410:
            return Gone(text, status=status, reason=reason)
        if status == 401:
            return Unauthorized(text, status=status, reason=reason)
        if status == 403:
            return Forbidden(text, status=status, reason=reason)
        if status in (400, 422):
            return Invalid(text, status=status, reason=reason)
        if status == 429 or status >= 500 or status == 0:
            return Transient(text, status=status or None, reason=reason, retry_after_seconds=_retry_after_seconds(exc.headers))
        return KubeError(text, status=status, reason=reason)
    if isinstance(exc, pydantic.ValidationError):
        return Invalid(f"request cannot be built: {exc}")
    if isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)):
        return Transient(f"no answer from the Kubernetes API: {exc}")
    return KubeError(f"{type(exc).__name__}: {exc}")


# --- retrying transient failures


class _WaitHonouringRetryAfter(tenacity.wait.wait_base):
    """Jittered exponential backoff, or the server's Retry-After when it asked for longer."""

    def __init__(self, initial: float, maximum: float) -> None:
        self._backoff = tenacity.wait_random_exponential(multiplier=initial, max=maximum)
        self._maximum = maximum

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        backoff = float(self._backoff(retry_state))
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        if isinstance(error, Transient) and error.retry_after_seconds is not None:
            return min(max(backoff, error.retry_after_seconds), RETRY_MAX_SECONDS)
        return backoff


def _log_before_retry(retry_state: tenacity.RetryCallState) -> None:
    outcome = retry_state.outcome
    error = outcome.exception() if outcome is not None else None
    wait = retry_state.next_action.sleep if retry_state.next_action is not None else 0.0
    # call_api(fn, ...) is what tenacity wraps; name the API method, not the wrapper.
    target = retry_state.args[0] if retry_state.args and callable(retry_state.args[0]) else retry_state.fn
    name = getattr(target, "__qualname__", "kubernetes API call")
    logger.warning(
        "%s failed (attempt %d): %s; retrying in %.1fs", name, retry_state.attempt_number, error, wait
    )


RETRIES_STOPPED = threading.Event()
"""Set once this process may no longer act (its leader lease lost, see `stop_retrying`)."""


def stop_retrying() -> None:
    """From now on no transient failure is retried in this process, and a wait between two
    attempts ends at once: a replica that lost its lease must not go on writing for up to
    RETRY_MAX_SECONDS while its successor acts."""
    RETRIES_STOPPED.set()


class _StopAtDeadline(tenacity.stop.stop_base):
    """Stop once `clock` reaches `deadline`: tenacity's own stop_after_delay always reads
    time.monotonic, which a clock passed in for the waits would not move."""

    def __init__(self, clock: Clock, deadline: float) -> None:
        self._clock = clock
        self._deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self._clock.monotonic() >= self._deadline


def retry_policy(
    *,
    attempts: int = RETRY_ATTEMPTS,
    max_seconds: float = RETRY_MAX_SECONDS,
    initial_wait_seconds: float = RETRY_INITIAL_WAIT_SECONDS,
    max_wait_seconds: float = RETRY_MAX_WAIT_SECONDS,
    clock: Clock = SYSTEM_CLOCK,
    stopped: threading.Event = RETRIES_STOPPED,
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A decorator retrying `Transient` failures only, then re-raising the last one. The waits
    between attempts and the `max_seconds` stop both go by `clock` (tests pass a fake); once
    `stopped` is set (by default: `stop_retrying()`), the last failure is raised at once."""

    def sleep(seconds: float) -> None:
        clock.wait(stopped, seconds)

    def decorate(fn: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(fn)
        def retried(*args: P.args, **kwargs: P.kwargs) -> T:
            failures: list[Transient] = []

            @functools.wraps(fn)
            def attempt(*args: P.args, **kwargs: P.kwargs) -> T:
                if failures and stopped.is_set():
                    raise failures[-1]  # stopped while waiting: no further attempt
                try:
                    return fn(*args, **kwargs)
                except Transient as error:
                    failures.append(error)
                    raise

            retrying = tenacity.Retrying(
                retry=tenacity.retry_if_exception_type(Transient),
                wait=_WaitHonouringRetryAfter(initial_wait_seconds, max_wait_seconds),
                stop=(tenacity.stop_after_attempt(attempts) | _StopAtDeadline(clock, clock.monotonic() + max_seconds)
                      | tenacity.stop_when_event_set(stopped)),
                sleep=sleep,
                before_sleep=_log_before_retry,
                reraise=True,
            )
            return retrying(attempt, *args, **kwargs)

        return retried

    return decorate

