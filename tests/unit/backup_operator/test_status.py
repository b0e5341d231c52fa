"""The status a success or a failure writes: CoreOS fields kept, a failure visible after successes."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backup_operator.observed import BackupResult
from backup_operator.observing import parse_recorded, records_attempt
from backup_operator.status import failure_status, success_status

T = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
RESULT = BackupResult(key="k_v7_x", size=100, sha256="ab", etcd_revision=7, etcd_version="3.6.16", started=T,
                      duration_seconds=1.25, endpoint="http://m:2379", retained=2)


def test_success_status_has_coreos_and_added_fields() -> None:
    status = success_status({}, 3, RESULT, T)
    assert status["succeeded"] is True and status["etcdRevision"] == 7 and status["etcdVersion"] == "3.6.16"
    assert status["lastSuccessDate"] == "2024-01-01T12:00:00Z" and status["observedGeneration"] == 3
    assert status["lastBackup"] == {"key": "k_v7_x", "size": 100, "sha256": "ab", "durationSeconds": 1.25,
                                    "time": "2024-01-01T12:00:00Z", "etcdRevision": 7, "endpoint": "http://m:2379"}
    assert status["conditions"][0]["status"] == "True" and status["backupsRetained"] == 2
    assert "Reason" not in status


def test_failure_after_success_is_visible_and_keeps_the_last_success() -> None:
    before = success_status({}, 1, RESULT, T)
    later = T + timedelta(minutes=5)
    status = failure_status(before, 1, parse_recorded(before), "S3Unreachable", "cannot reach", later, later)
    assert status["succeeded"] is False and status["lastResult"] == "S3Unreachable"
    assert status["Reason"] == "S3Unreachable: cannot reach"
    assert status["lastSuccessDate"] == before["lastSuccessDate"] and status["lastBackup"] == before["lastBackup"]
    condition = status["conditions"][0]
    assert (condition["status"], condition["reason"], condition["lastTransitionTime"]) == (
        "False", "S3Unreachable", "2024-01-01T12:05:00Z")
    assert status["consecutiveFailures"] == 1 and status["firstAttemptTime"] == "2024-01-01T12:05:00Z"


def test_failures_in_a_row_count_up_and_keep_the_first_attempt() -> None:
    first = failure_status({}, 1, parse_recorded({}), "EtcdUnreachable", "x", T, T)
    later = T + timedelta(seconds=10)
    second = failure_status(first, 1, parse_recorded(first), "EtcdUnreachable", "x", later, later)
    assert second["consecutiveFailures"] == 2 and second["firstAttemptTime"] == "2024-01-01T12:00:00Z"
    assert second["conditions"][0]["lastTransitionTime"] == "2024-01-01T12:00:00Z"


def test_parse_recorded_reads_what_was_written_and_survives_garbage() -> None:
    status = failure_status({}, 4, parse_recorded({}), "S3AccessDenied", "x", T, T)
    recorded = parse_recorded(status)
    assert (recorded.observed_generation, recorded.consecutive_failures, recorded.last_reason) == (4, 1, "S3AccessDenied")
    assert recorded.last_attempt_time == T
    assert parse_recorded({"lastAttemptTime": 5, "consecutiveFailures": "x"}).last_attempt_time is None
    assert parse_recorded(None).observed_generation == 0


T0, T1 = "2024-01-01T12:00:00Z", "2024-01-01T12:00:01Z"
SUCCESS_AT_T0 = {"succeeded": True, "lastResult": "Succeeded", "lastAttemptTime": T0}


@pytest.mark.parametrize(("current", "recorded"), [
    ({}, False),  # nothing written yet
    ({"succeeded": True, "lastResult": "Succeeded", "lastAttemptTime": "2024-01-01T11:59:59Z"}, False),  # older
    (SUCCESS_AT_T0, True),  # written (the answer to the write was lost)
    ({"succeeded": False, "lastResult": "S3Unreachable", "lastAttemptTime": T0}, False),  # another outcome
    ({"succeeded": False, "lastResult": "S3Unreachable", "lastAttemptTime": T1}, True),  # a later attempt
    ({"lastAttemptTime": "not a time"}, False),
])
def test_records_attempt(current: dict[str, Any], recorded: bool) -> None:
    assert records_attempt(current, SUCCESS_AT_T0) is recorded
