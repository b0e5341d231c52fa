"""Every restore phase has a time bound, counted from status.phaseStartTime: just before it the
restore goes on, just after it fails (RestoreTimedOut) with the last reason seen and how to clean
up, and a restarted operator (reading the status back) decides the same. The reason a restored
cluster does not serve yet comes from its MemberStartBlocked condition, else the seed pod."""
from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from restore_operator import actions as a
from restore_operator import planning as p
from restore_operator import reasons
from restore_operator.observed import ObservedRestore, SnapshotFacts, TargetCluster
from restore_operator.observing import parse_recorded, parse_target_cluster
from restore_operator.status import (
    PHASE_REPLACING,
    PHASE_RESTORING,
    PHASE_VERIFYING,
    REPLACING_TIMEOUT_SECONDS,
    RESTORING_BASE_TIMEOUT_SECONDS,
    RESTORING_SLOWEST_BYTES_PER_SECOND,
    VERIFYING_TIMEOUT_SECONDS,
    next_status,
    phase_timeout_seconds,
    restoring_timeout_seconds,
    snapshot_to_api,
)
from tests.unit.restore_operator.etcd_restore_builders import FACTS, UID, restore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BIG = SnapshotFacts(sha256="b" * 64, size=2 * 1024**3, revision=42, total_keys=7)
BLOCKED_MESSAGE = ("member pod c-x7k2p does not start: CrashLoopBackOff: restore-snapshot exited with code 128 "
                   "(Error): Error: unknown command \"snapshot\" for \"etcdutl\"")


def raw_cluster(*, ours: bool = True, deleting: bool = False, blocked: str = "True") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "c", "namespace": "ns", "uid": "cluster-uid",
                                "annotations": {"etcd.database.coreos.com/restore-uid": UID if ours else "x"}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"size": 3, "version": "3.4.23"},
            "status": {"phase": "Creating", "readyCount": 0, "size": 1, "conditions": [
                {"type": "MemberStartBlocked", "status": blocked, "reason": "CrashLoopBackOff",
                 "message": BLOCKED_MESSAGE if blocked == "True" else "no member pod is kept from starting"}]}}


def status_in(phase: str, facts: SnapshotFacts | None) -> dict[str, Any]:
    """The status an operator wrote on entering `phase` at T0, then again (same phase) a minute later."""
    updates: dict[str, Any] = {"snapshot": snapshot_to_api(facts)} if facts is not None else {}
    if phase == PHASE_REPLACING:
        updates["clusterSpec"] = {"size": 3, "version": "3.4.23"}
    entered = next_status({"phase": "Verifying" if phase != PHASE_VERIFYING else ""}, generation=1, now=T0,
                          phase=phase, message="entered", updates=updates)
    return next_status(entered, generation=1, now=T0 + timedelta(minutes=1), phase=phase, message="still")


def seen(phase: str, seconds: float, facts: SnapshotFacts | None = FACTS, **fields: Any) -> ObservedRestore:
    """What a (possibly restarted) operator observes `seconds` after `phase` began: the recorded
    status read back from the API shape, as any new process would."""
    recorded = parse_recorded(status_in(phase, facts), generation=1)
    return replace(ObservedRestore(restore(), recorded, now=T0 + timedelta(seconds=seconds)), **fields)


CASES = [
    # (phase, snapshot recorded, what the pass sees besides, the action before the bound)
    (PHASE_VERIFYING, None, {}, a.VerifySnapshot),
    (PHASE_REPLACING, FACTS, {"cluster": parse_target_cluster(raw_cluster(ours=False, deleting=True))}, a.Wait),
    (PHASE_RESTORING, FACTS, {"cluster": parse_target_cluster(raw_cluster())}, a.Wait),
    (PHASE_RESTORING, BIG, {"cluster": parse_target_cluster(raw_cluster())}, a.Wait),
]


@pytest.mark.parametrize("phase, facts, extra, before", CASES)
def test_each_phase_goes_on_just_before_its_bound_and_fails_just_after(
        phase: str, facts: SnapshotFacts | None, extra: dict[str, Any], before: type) -> None:
    limit = phase_timeout_seconds(phase, facts.size if facts is not None else 0)
    assert limit is not None
    assert isinstance(p.plan_next_action(seen(phase, limit - 1, facts, **extra)), before)
    action = p.plan_next_action(seen(phase, limit + 1, facts, **extra))
    assert isinstance(action, a.Fail) and action.reason == reasons.RESTORE_TIMED_OUT, action
    assert f"{phase} for {limit + 1:.0f} s" in action.message and f"bound of {limit:.0f} s" in action.message
    assert "apply" in action.message  # how to retry
    if phase == PHASE_VERIFYING:  # the last thing the verification said
        assert "last seen: still" in action.message


@pytest.mark.parametrize("phase, facts, extra, before", CASES)
def test_a_restarted_operator_computes_the_same_from_the_status(
        phase: str, facts: SnapshotFacts | None, extra: dict[str, Any], before: type) -> None:
    """The restart: nothing but the status (phaseStartTime from T0, kept by the later write)."""
    limit = phase_timeout_seconds(phase, facts.size if facts is not None else 0)
    assert limit is not None
    status = status_in(phase, facts)
    assert status["phaseStartTime"] == "2026-01-01T00:00:00Z"
    for seconds, expected in ((limit - 1, before), (limit + 1, a.Fail)):
        recorded = parse_recorded(dict(status), generation=1)
        fresh = replace(ObservedRestore(restore(), recorded, now=T0 + timedelta(seconds=seconds)), **extra)
        assert isinstance(p.plan_next_action(fresh), expected)


def test_the_bounds_are_named_and_restoring_scales_with_the_snapshot_size() -> None:
    assert phase_timeout_seconds(PHASE_VERIFYING, 0) == VERIFYING_TIMEOUT_SECONDS
    assert phase_timeout_seconds(PHASE_REPLACING, 0) == REPLACING_TIMEOUT_SECONDS
    assert restoring_timeout_seconds(0) == RESTORING_BASE_TIMEOUT_SECONDS
    assert restoring_timeout_seconds(BIG.size) == (RESTORING_BASE_TIMEOUT_SECONDS
                                                   + BIG.size / RESTORING_SLOWEST_BYTES_PER_SECOND)
    assert phase_timeout_seconds("Completed", 0) is None and phase_timeout_seconds("Failed", 0) is None
    # A 2 GiB snapshot may take longer than a small one's whole bound without failing.
    small_limit = restoring_timeout_seconds(FACTS.size)
    cluster = parse_target_cluster(raw_cluster())
    assert isinstance(p.plan_next_action(seen(PHASE_RESTORING, small_limit + 60, BIG, cluster=cluster)), a.Wait)


def test_no_bound_without_a_phase_start_or_in_another_phase_than_recorded() -> None:
    cluster = parse_target_cluster(raw_cluster())
    late = seen(PHASE_RESTORING, 10 * VERIFYING_TIMEOUT_SECONDS, cluster=cluster)
    unknown_start = replace(late, recorded=replace(late.recorded, phase_started=None))
    assert isinstance(p.plan_next_action(unknown_start), a.Wait)
    assert isinstance(p.plan_next_action(replace(late, now=None)), a.Wait)
    # Recorded Verifying (the snapshot just verified), the pass waits in Replacing: that phase has not begun.
    replacing = seen(PHASE_VERIFYING, 10 * VERIFYING_TIMEOUT_SECONDS,
                     cluster=parse_target_cluster(raw_cluster(ours=False, deleting=True)))
    replacing = replace(replacing, recorded=replace(replacing.recorded, snapshot=FACTS))
    action = p.plan_next_action(replacing)
    assert isinstance(action, a.Wait) and action.phase_name == PHASE_REPLACING


def test_the_phase_start_is_kept_within_a_phase_and_reset_on_entering_another() -> None:
    first = next_status({}, generation=1, now=T0, phase=PHASE_VERIFYING, message="m")
    same = next_status(first, generation=1, now=T0 + timedelta(minutes=5), phase=PHASE_VERIFYING, message="m2")
    other = next_status(same, generation=1, now=T0 + timedelta(minutes=7), phase=PHASE_RESTORING, message="m3")
    assert first["phaseStartTime"] == same["phaseStartTime"] == "2026-01-01T00:00:00Z"
    assert other["phaseStartTime"] == "2026-01-01T00:07:00Z"
    # A status written before phaseStartTime existed gets one (the bound counts from then).
    legacy = next_status({"phase": PHASE_RESTORING}, generation=1, now=T0, phase=PHASE_RESTORING, message="m")
    assert legacy["phaseStartTime"] == "2026-01-01T00:00:00Z"


def test_the_reason_while_restoring_is_the_clusters_member_start_blocked_condition() -> None:
    cluster = parse_target_cluster(raw_cluster())
    assert (cluster.start_blocked_reason, cluster.start_blocked) == ("CrashLoopBackOff", BLOCKED_MESSAGE)
    action = p.plan_next_action(seen(PHASE_RESTORING, 30, cluster=cluster, seed_problem="seed pod c-x7k2p: other"))
    assert isinstance(action, a.Wait) and action.reason == "CrashLoopBackOff"
    assert action.message == f"waiting for the restored cluster: phase Creating, 0/3 members ready; {BLOCKED_MESSAGE}"


def test_the_timeout_message_carries_the_last_reason_and_leaves_the_cluster() -> None:
    cluster = parse_target_cluster(raw_cluster())
    action = p.plan_next_action(seen(PHASE_RESTORING, restoring_timeout_seconds(FACTS.size) + 1, cluster=cluster))
    assert isinstance(action, a.Fail)
    assert f"last seen: waiting for the restored cluster: phase Creating, 0/3 members ready; {BLOCKED_MESSAGE}" \
        in action.message
    assert "left as it is" in action.message and "delete the EtcdCluster c and this EtcdRestore" in action.message


@pytest.mark.parametrize("blocked, seed_problem, reason, said", [
    ("False", "seed pod c-x Init:CrashLoopBackOff: restore-snapshot exited 128 (18 restarts)", "SeedFailing",
     "restore-snapshot exited 128"),
    ("False", "", "Waiting", ""),
    ("Unknown", "", "Waiting", ""),
])
def test_without_a_blocked_condition_the_seed_pod_says_why(blocked: str, seed_problem: str, reason: str,
                                                           said: str) -> None:
    cluster: TargetCluster = parse_target_cluster(raw_cluster(blocked=blocked))
    assert cluster.start_blocked == ""
    action = p.plan_next_action(seen(PHASE_RESTORING, 30, cluster=cluster, seed_problem=seed_problem))
    assert isinstance(action, a.Wait) and action.reason == reason and said in action.message
    assert "no member pod is kept from starting" not in action.message
