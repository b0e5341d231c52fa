"""The EtcdRestore status a pass writes: CoreOS fields plus phase, conditions, timestamps."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from restore_operator.status import next_status

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
