"""Mapping client failures to our exceptions, and retrying only the transient ones."""
from __future__ import annotations

import json
import logging
import time

import pydantic
import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

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


fast_retry = retry_policy(attempts=4, initial_wait_seconds=0.001, max_wait_seconds=0.01)


def test_transient_failures_are_retried_until_success(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    @fast_retry
    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Transient("503 ServiceUnavailable")
        return "ok"

    with caplog.at_level(logging.WARNING):
        assert flaky() == "ok"
    assert len(calls) == 3
    assert sum("retrying in" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.parametrize("error", [Invalid("422"), NotFound("404"), Conflict("409"), AlreadyExists("409"), Forbidden("403")])
def test_answers_are_not_retried(error: KubeError) -> None:
    calls = []

    @fast_retry
    def refused() -> None:
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        refused()
    assert len(calls) == 1


def test_retries_stop_and_reraise_the_last_failure() -> None:
    calls = []

    @fast_retry
    def down() -> None:
        calls.append(1)
        raise Transient(f"attempt {len(calls)}")

    with pytest.raises(Transient, match="attempt 4"):
        down()
    assert len(calls) == 4


def test_retry_after_is_honoured() -> None:
    calls: list[float] = []

    @fast_retry
    def throttled() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise Transient("429", status=429, retry_after_seconds=0.3)

    throttled()
    assert calls[1] - calls[0] >= 0.3
