"""Mapping client failures to our exceptions, and retrying only the transient ones."""
from __future__ import annotations

import inspect
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import pydantic
import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from kube_adapter import errors
from kube_adapter.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    Transient,
    Unauthorized,
    retry_policy,
    translate,
)
from tests.unit.kube_adapter.recording_clock import RecordingClock


def api_exception(status: int, reason: str = "", message: str = "", headers: dict[str, str] | None = None) -> ApiException:
    body = json.dumps({"kind": "Status", "code": status, "reason": reason, "message": message})
    error = ApiException(status=status, reason=reason, body=body)
    error.headers = headers
    return error


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Gone", Gone),
        (401, "Unauthorized", Unauthorized),
        (403, "Forbidden", Forbidden),
        (400, "BadRequest", Invalid),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", Transient),
        (500, "InternalError", Transient),
        (503, "ServiceUnavailable", Transient),
        (504, "Timeout", Transient),
        (418, "Teapot", KubeError),
    ],
)
def test_http_status_maps_to_a_class(status: int, reason: str, expected: type[KubeError]) -> None:
    error = translate(api_exception(status, reason, "pods \"x\" something"))
    assert type(error) is expected
    assert error.status == status and error.reason == reason
    assert 'pods "x" something' in str(error)


def test_retry_after_is_kept() -> None:
    error = translate(api_exception(429, "TooManyRequests", headers={"Retry-After": "3"}))
    assert isinstance(error, Transient) and error.retry_after_seconds == 3.0


def test_a_body_that_is_not_a_status_still_gives_a_message() -> None:
    error = translate(ApiException(status=502, reason="Bad Gateway", body="<html>proxy</html>"))
    assert isinstance(error, Transient) and "proxy" in str(error)


@pytest.mark.parametrize(
    "failure",
    [
        urllib3.exceptions.ProtocolError("Connection broken"),
        urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out"),  # type: ignore[arg-type]
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError("timed out"),
    ],
)
def test_no_answer_is_transient(failure: Exception) -> None:
    assert type(translate(failure)) is Transient


def test_a_body_the_client_cannot_build_is_invalid() -> None:
    class Strict(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")

    with pytest.raises(pydantic.ValidationError) as caught:
        Strict.model_validate({"unknownField": 1})
    assert type(translate(caught.value)) is Invalid


def test_anything_else_is_a_plain_kube_error_and_ours_pass_through() -> None:
    assert type(translate(ValueError("odd"))) is KubeError
    ours = NotFound("x")
    assert translate(ours) is ours


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@pytest.fixture
def retrying(recording_clock: RecordingClock) -> Decorator:
    """The production waits (0.2 s doubling, at most 5 s, jittered) on a clock that only records them."""
    return retry_policy(attempts=4, clock=recording_clock)


def test_transient_failures_are_retried_until_success(
    retrying: Decorator, recording_clock: RecordingClock, caplog: pytest.LogCaptureFixture,
) -> None:
    calls = []

    @retrying
    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Transient("503 ServiceUnavailable")
        return "ok"

    with caplog.at_level(logging.WARNING):
        assert flaky() == "ok"
    assert len(calls) == 3
    assert sum("retrying in" in r.getMessage() for r in caplog.records) == 2
    first, second = recording_clock.waits
    assert 0 <= first <= 0.2 and 0 <= second <= 0.4, "full jitter under an exponential bound from 0.2 s"


@pytest.mark.parametrize("error", [Invalid("422"), NotFound("404"), Conflict("409"), AlreadyExists("409"), Forbidden("403")])
def test_answers_are_not_retried(retrying: Decorator, recording_clock: RecordingClock, error: KubeError) -> None:
    calls = []

    @retrying
    def refused() -> None:
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        refused()
    assert len(calls) == 1
    assert recording_clock.waits == []


def test_retries_stop_and_reraise_the_last_failure(retrying: Decorator, recording_clock: RecordingClock) -> None:
    calls = []

    @retrying
    def down() -> None:
        calls.append(1)
        raise Transient(f"attempt {len(calls)}")

    with pytest.raises(Transient, match="attempt 4"):
        down()
    assert len(calls) == 4
    assert len(recording_clock.waits) == 3


def test_retry_after_is_honoured(retrying: Decorator, recording_clock: RecordingClock) -> None:
    calls: list[float] = []

    @retrying
    def throttled() -> None:
        calls.append(recording_clock.monotonic())
        if len(calls) == 1:
            raise Transient("429", status=429, retry_after_seconds=3.0)

    throttled()
    assert recording_clock.waits == [3.0], "the server asked for 3 s, longer than the backoff"
    assert calls == [1000.0, 1003.0]


def test_the_time_limit_is_measured_on_the_same_clock_as_the_waits(recording_clock: RecordingClock) -> None:
    calls = []

    @retry_policy(attempts=10, max_seconds=5.0, clock=recording_clock)
    def throttled() -> None:
        calls.append(1)
        raise Transient("429", status=429, retry_after_seconds=3.0)

    with pytest.raises(Transient):
        throttled()
    # Failed at 0 s and 3 s (under 5 s: wait again), then at 6 s: past the limit, give up.
    assert len(calls) == 3
    assert recording_clock.waits == [3.0, 3.0]


class StoppedDuringWait(RecordingClock):
    """A wait in which `stopped` gets set (the lease is lost while a retry waits)."""

    def __init__(self, stopped: threading.Event) -> None:
        super().__init__()
        self.stopped = stopped

    def wait(self, event: threading.Event, seconds: float) -> bool:
        self.stopped.set()
        return super().wait(event, seconds)


def test_no_retry_once_retries_are_stopped(recording_clock: RecordingClock) -> None:
    stopped = threading.Event()
    calls = []

    @retry_policy(attempts=5, clock=recording_clock, stopped=stopped)
    def down() -> None:
        calls.append(1)
        stopped.set()  # e.g. the lease is lost while this call is under way
        raise Transient("503")

    with pytest.raises(Transient, match="503"):
        down()
    assert len(calls) == 1 and recording_clock.waits == []


def test_a_stop_during_the_wait_makes_no_further_attempt() -> None:
    stopped = threading.Event()
    clock = StoppedDuringWait(stopped)
    calls = []

    @retry_policy(attempts=5, clock=clock, stopped=stopped)
    def down() -> None:
        calls.append(1)
        raise Transient(f"attempt {len(calls)}")

    with pytest.raises(Transient, match="attempt 1"):
        down()
    assert calls == [1], "an attempt was made after retries were stopped"


def test_stop_retrying_stops_the_default_policy(monkeypatch: pytest.MonkeyPatch, recording_clock: RecordingClock) -> None:
    """What the runtime calls when its lease is lost: it sets the event every policy watches by
    default (replaced here by a fresh one, so the process-wide event stays unset for other tests)."""
    assert inspect.signature(retry_policy).parameters["stopped"].default is errors.RETRIES_STOPPED
    monkeypatch.setattr(errors, "RETRIES_STOPPED", threading.Event())
    calls = []

    @retry_policy(attempts=5, clock=recording_clock, stopped=errors.RETRIES_STOPPED)
    def down() -> None:
        calls.append(1)
        if len(calls) == 2:
            errors.stop_retrying()
        raise Transient("503")

    with pytest.raises(Transient):
        down()
    assert len(calls) == 2
