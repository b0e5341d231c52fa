"""Disk space checked up front (issue 22 item 3): a restore whose snapshot does not fit the seed's
volume (2 x the larger of the object and the decoded snapshot + the margin) fails with
InsufficientSpace before anything is deleted or created."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.etcd_restore import parse_etcd_restore
from etcd_common.seed.space import SEED_SPACE_MARGIN_BYTES
from restore_operator import actions as a
from restore_operator import reasons
from restore_operator.observed import ObservedRestore, RecordedRestore, SnapshotFacts, TargetCluster
from restore_operator.observing import parse_recorded
from restore_operator.planning import plan_next_action
from restore_operator.staging import StagingClaim, StagingPod
from restore_operator.status import snapshot_to_api
from tests.unit.restore_operator.etcd_restore_builders import all_claims, all_pods, raw_restore, s3_spec

SNAPSHOT = 300 * c.MIB  # needs 2 x 300Mi + 128Mi = 728Mi
FACTS = SnapshotFacts(sha256="a" * 64, size=SNAPSHOT, revision=42, total_keys=7)


def restore(template: dict[str, Any] | None = None) -> Any:
    return parse_etcd_restore(raw_restore(s3_spec(template=template)))


def pvc(storage: str) -> dict[str, Any]:
    return {"size": 3, "version": "3.6.16", "backendQuota": "128Mi",
            "pod": {"persistentVolumeClaimSpec": {"accessModes": ["ReadWriteOnce"],
                                                  "resources": {"requests": {"storage": storage}}}}}


def empty_dir(limit: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"size": 3, "version": "3.6.16"}
    if limit is not None:
        spec["pod"] = {"resources": {"limits": {"ephemeral-storage": limit}}}
    return spec


def existing(spec: dict[str, Any]) -> TargetCluster:
    return TargetCluster(uid="cluster-uid", restore_uid="", deleting=False, spec=spec, phase="Running", ready=3,
                         members=3)


def seen(cluster_spec: dict[str, Any] | None = None, *, template: dict[str, Any] | None = None,
         facts: SnapshotFacts = FACTS) -> ObservedRestore:
    cluster = existing(cluster_spec) if cluster_spec is not None else None
    # Staged already (staging pod Succeeded, its claims there): only the preflight stands before a delete.
    return ObservedRestore(restore(template), RecordedRestore(snapshot=facts), cluster,
                           staging_claims=all_claims(StagingClaim(owned=True)), staging_pods=all_pods(StagingPod("Succeeded", owned=True)))


@pytest.mark.parametrize(("case", "observed", "fits"), [
    ("PVC too small for 2 x the snapshot", seen(pvc("700Mi")), False),
    ("PVC just big enough", seen(pvc("728Mi")), True),
    ("PVC one MiB short", seen(pvc("727Mi")), False),
    ("emptyDir with an ephemeral-storage limit too small", seen(empty_dir("512Mi")), False),
    ("emptyDir with a big enough ephemeral-storage limit", seen(empty_dir("1Gi")), True),
    ("emptyDir without any limit: no check", seen(empty_dir(None)), True),
    ("new cluster from a template too small", seen(template=pvc("512Mi")), False),
    ("the decoded snapshot counts when it is the larger (compressed object)",
     seen(pvc("1Gi"), facts=replace(FACTS, size=100 * c.MIB, snapshot_size=500 * c.MIB, compression="Gzip")), False),
    ("the object counts when it is the larger", seen(pvc("1Gi"), facts=replace(FACTS, size=500 * c.MIB)), False),
])
def test_space_is_checked_before_anything_is_deleted_or_created(case: str, observed: ObservedRestore,
                                                                 fits: bool) -> None:
    action = plan_next_action(observed)
    if fits:
        assert isinstance(action, (a.ReplaceCluster, a.CreateCluster)), f"{case}: {action}"
        return
    assert isinstance(action, a.Fail) and action.reason == reasons.INSUFFICIENT_SPACE, f"{case}: {action}"
    assert "nothing was deleted" in action.message, action.message


def test_the_message_has_both_numbers_and_the_field() -> None:
    action = plan_next_action(seen(pvc("700Mi")))
    assert isinstance(action, a.Fail)
    assert str(SNAPSHOT) in action.message  # the snapshot
    assert "700Mi" in action.message and str(700 * c.MIB) in action.message  # the volume
    assert str(2 * SNAPSHOT + SEED_SPACE_MARGIN_BYTES) in action.message  # what it must hold
    assert "spec.pod.persistentVolumeClaimSpec.resources.requests.storage" in action.message
    assert "at least 728Mi" in action.message


def test_the_decoded_size_is_recorded_and_read_back() -> None:
    facts = replace(FACTS, snapshot_size=123456, compression="Gzip")
    written = snapshot_to_api(facts)
    assert written["snapshotSize"] == 123456
    recorded = parse_recorded({"phase": "Replacing", "snapshot": written}, generation=1)
    assert recorded.snapshot is not None and recorded.snapshot.snapshot_size == 123456
