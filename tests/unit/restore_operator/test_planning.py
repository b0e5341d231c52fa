"""plan_next_action: the restore operator's decision, table-driven. The safety rules: nothing is
touched before the snapshot is verified; a cluster carrying this restore's uid is never deleted;
done means served."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from restore_operator import actions as a
from restore_operator import planning as p
from restore_operator import reasons
from restore_operator.observed import ObservedRestore, RecordedRestore, TargetCluster
from tests.unit.restore_operator.etcd_restore_builders import FACTS, REPLACED, all_claims, all_pods, cluster, restore


def observed(*, staged: bool = True, **fields: Any) -> ObservedRestore:
    """`staged`: the staging pods Succeeded and their claims are there (what a delete or create needs)."""
    base = ObservedRestore(restore(), RecordedRestore(snapshot=FACTS))
    if staged:
        base = replace(base, staging_claims=all_claims(), staging_pods=all_pods())
    return replace(base, **fields)


VERIFIED = RecordedRestore(snapshot=FACTS)


@pytest.mark.parametrize("case, seen, expected", [
    ("rule 1: completed stays done",
     observed(staged=False, recorded=RecordedRestore(phase="Completed", snapshot=FACTS)), a.Done),
    ("rule 1: failed for this generation stays done",
     observed(staged=False, recorded=RecordedRestore(phase="Failed", observed_generation=1)), a.Done),
    ("rule 1: failed, then the spec changed: tried again",
     observed(restore=restore(generation=2), recorded=RecordedRestore(phase="Failed", observed_generation=1)),
     a.VerifySnapshot),
    ("rule 2: unreadable spec", observed(restore=restore({"backupStorageType": "S3"})), a.Fail),
    ("rule 2: storage other than S3",
     observed(restore=restore({"etcdCluster": {"name": "c"}, "backupStorageType": "GCS", "gcs": {"path": "b/k"}})),
     a.Fail),
    ("rule 3: verify first, even with a cluster there", observed(recorded=RecordedRestore(), cluster=cluster()),
     a.VerifySnapshot),
    ("rule 4: ours, being deleted", observed(cluster=cluster(ours=True, deleting=True)), a.Wait),
    ("rule 4: ours, still growing", observed(cluster=cluster(ours=True, phase="Creating", ready=1, members=1)),
     a.Wait),
    ("rule 4: ours, running but revision not read", observed(cluster=cluster(ours=True)), a.Wait),
    ("rule 4: ours, serving an older revision", observed(cluster=cluster(ours=True), served_revision=41), a.Wait),
    ("rule 4: ours, all ready and serving", observed(cluster=cluster(ours=True), served_revision=1_000_000_042),
     a.Succeed),
    ("rule 5: someone else's cluster is replaced", observed(cluster=cluster()), a.ReplaceCluster),
    ("rule 5: being deleted already", observed(cluster=cluster(deleting=True)), a.Wait),
    ("rule 7: old pods still there", observed(recorded=REPLACED, cluster_pods=2), a.Wait),
    ("rule 8: replaced, now gone", observed(recorded=REPLACED), a.CreateCluster),
    ("rule 8: never there, no clusterSpec", observed(), a.Fail),
])
def test_plan(case: str, seen: ObservedRestore, expected: type) -> None:
    action = p.plan_next_action(seen)
    assert isinstance(action, expected), f"{case}: {action}"


def test_a_cluster_of_ours_is_never_replaced_whatever_its_state() -> None:
    for phase in ("", "Creating", "Failed", "Running"):
        for ready in (0, 1, 3):
            action = p.plan_next_action(observed(cluster=cluster(ours=True, phase=phase, ready=ready)))
            assert not isinstance(action, (a.ReplaceCluster, a.CreateCluster)), (phase, ready, action)


def test_unverified_snapshot_never_touches_a_cluster() -> None:
    for seen_cluster in (None, cluster(), cluster(ours=True), cluster(deleting=True)):
        action = p.plan_next_action(observed(recorded=RecordedRestore(), cluster=seen_cluster))
        assert isinstance(action, a.VerifySnapshot)


def test_replace_keeps_the_spec_recorded_before_the_delete() -> None:
    recorded = RecordedRestore(snapshot=FACTS, cluster_spec={"size": 5, "version": "3.5.35"})
    action = p.plan_next_action(observed(recorded=recorded, cluster=cluster()))
    assert isinstance(action, a.ReplaceCluster) and action.cluster_spec == {"size": 5, "version": "3.5.35"}


@pytest.mark.parametrize("recorded_spec, template, expected", [
    ({"size": 5, "version": "3.5.35", "restore": {"old": True}}, None, {"size": 5, "version": "3.5.35"}),
    (None, {"size": 1, "version": "3.6.16"}, {"size": 1, "version": "3.6.16"}),
    (None, {"version": "3.5.35"}, {"size": 3, "version": "3.5.35"}),
])
def test_new_cluster_spec(recorded_spec: Any, template: Any, expected: dict[str, Any]) -> None:
    spec: dict[str, Any] = {"etcdCluster": {"name": "c"}, "backupStorageType": "S3",
                            "s3": {"path": "b/k", "awsSecret": "aws"}}
    if template is not None:
        spec["clusterSpec"] = template
    recorded = RecordedRestore(snapshot=FACTS, cluster_spec=recorded_spec)
    action = p.plan_next_action(observed(restore=restore(spec), recorded=recorded))
    assert isinstance(action, a.CreateCluster) and dict(action.cluster_spec) == expected


def test_another_unfinished_restore_of_the_cluster_is_waited_for() -> None:
    action = p.plan_next_action(observed(cluster=cluster(), other_restore_in_progress="first"))
    assert isinstance(action, a.Wait) and "first" in action.message


def test_a_failing_seed_is_said_in_the_wait_message() -> None:
    action = p.plan_next_action(observed(cluster=cluster(ours=True, phase="Creating", ready=0, members=1),
                                     seed_problem="seed pod c-abcde: init container restore-fetch failed"))
    assert isinstance(action, a.Wait) and "restore-fetch failed" in action.message


@pytest.mark.parametrize("seen_cluster", [None, cluster(), cluster(deleting=True)])
def test_the_created_cluster_deleted_before_completion_fails_instead_of_restoring_twice(
        seen_cluster: TargetCluster | None) -> None:
    recorded = RecordedRestore(phase="Restoring", snapshot=FACTS, restored_cluster_uid="created-uid")
    action = p.plan_next_action(observed(recorded=recorded, cluster=seen_cluster))
    assert isinstance(action, a.Fail) and action.reason == reasons.CLUSTER_DELETED


def test_the_created_cluster_still_there_is_waited_for() -> None:
    recorded = RecordedRestore(phase="Restoring", snapshot=FACTS, restored_cluster_uid="cluster-uid")
    action = p.plan_next_action(observed(recorded=recorded, cluster=cluster(ours=True, phase="Creating", ready=1)))
    assert isinstance(action, a.Wait)
