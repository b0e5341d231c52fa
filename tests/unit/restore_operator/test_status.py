"""The EtcdRestore status a pass writes: CoreOS fields plus phase, conditions, timestamps."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from restore_operator.status import S3_UNREACHABLE_TIMEOUT_SECONDS, failing_seconds, next_status, track_error

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_conditions_keep_their_transition_time_until_their_status_changes() -> None:
    first = next_status({}, generation=1, now=T0, phase="Verifying", message="m",
                        conditions={"SnapshotVerified": ("True", "Verified", "ok")})
    later = next_status(first, generation=1, now=T0 + timedelta(minutes=1), phase="Restoring", message="m2",
                        conditions={"SnapshotVerified": ("True", "Verified", "ok"),
                                    "ClusterRestored": ("False", "Seeding", "s")})
    by_type = {c["type"]: c for c in later["conditions"]}
    assert by_type["SnapshotVerified"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert by_type["ClusterRestored"]["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert later["startTime"] == "2026-01-01T00:00:00Z" and "completionTime" not in later
    assert later["observedGeneration"] == 1 and later["succeeded"] is False


def test_terminal_phases_get_a_completion_time_and_coreos_fields() -> None:
    done = next_status({"startTime": "2026-01-01T00:00:00Z"}, generation=3, now=T0, phase="Failed",
                       message="no such object", reason="S3ObjectNotFound")
    assert done["completionTime"] == "2026-01-01T00:00:00Z"
    assert done["reason"] == "S3ObjectNotFound" and done["succeeded"] is False and done["phase"] == "Failed"


def test_s3_errors_keep_when_they_began_and_say_how_long() -> None:
    first = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
    last = track_error(None, "cannot reach the S3 server", first)
    assert last == {"message": "cannot reach the S3 server", "since": "2024-01-01T12:00:00Z",
                    "seen": "2024-01-01T12:00:00Z"}
    later = first + timedelta(seconds=S3_UNREACHABLE_TIMEOUT_SECONDS - 1)
    again = track_error(last, "server error (503)", later)
    assert again["since"] == "2024-01-01T12:00:00Z" and again["message"] == "server error (503)"
    assert failing_seconds(again, later) == S3_UNREACHABLE_TIMEOUT_SECONDS - 1
    assert failing_seconds({"since": "not a time"}, later) == 0.0


def test_an_update_of_none_removes_the_field() -> None:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    status = next_status({"lastError": {"message": "x"}}, generation=1, now=now, phase="Verifying", message="ok",
                         updates={"lastError": None})
    assert "lastError" not in status
