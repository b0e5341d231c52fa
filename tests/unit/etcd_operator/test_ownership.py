"""Names and ownership: which objects are a cluster's own, which names it cannot take, and what
the planner, the status and the executor do about it."""
from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from etcd_common.etcd.access import EtcdAccess
from etcd_operator import actions as a
from etcd_operator.acting import ActionExecutor
from etcd_operator.observed import ObservedCluster, ObservedPVC, parse_pod
from etcd_operator.ownership import (
    REASON_NAME_CONFLICT,
    REASON_SERVICE_NAME_TAKEN,
    NameProblem,
    cluster_name_conflict,
    owned_by,
    service_name_problem,
)
from etcd_operator.planning import plan_next_action
from etcd_operator.status import compute_status
from operator_runtime.cached_client import CachedClient
from tests.unit.etcd_operator.etcd_cluster_builders import UID, healthy_cluster, make_pod

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def _obj(name: str, *owner_uids: str, created: str = "2024-05-01T10:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "creationTimestamp": created,
                         "ownerReferences": [{"kind": "EtcdCluster", "name": "x", "uid": u} for u in owner_uids]}}


def test_only_objects_owned_by_the_clusters_uid_are_its_own() -> None:
    objects = [_obj("mine", UID), _obj("old-cluster", "uid-of-a-deleted-cluster"), _obj("users"), _obj("both", "a", UID)]
    assert [o["metadata"]["name"] for o in owned_by(objects, UID)] == ["mine", "both"]
    assert owned_by(objects, "") == []


def test_a_service_not_ours_is_named_with_its_owner() -> None:
    problem = service_name_problem("collide", {"collide-client": _obj("collide-client")})
    assert problem is not None and problem.reason == REASON_SERVICE_NAME_TAKEN
    assert "collide-client" in problem.message and "not owned by any object" in problem.message
    assert service_name_problem("collide", {}) is None


def test_colliding_cluster_names_refuse_only_the_newer_cluster() -> None:
    older = _obj("x", created="2024-05-01T10:00:00Z")
    newer = _obj("x-client", created="2024-05-01T10:05:00Z")
    unrelated = _obj("y", created="2024-05-01T09:00:00Z")
    problem = cluster_name_conflict(newer, [older, newer, unrelated])
    assert problem is not None and problem.reason == REASON_NAME_CONFLICT and "x-client" in problem.message
    assert cluster_name_conflict(older, [older, newer, unrelated]) is None
    # Created in the same second: the name decides, so exactly one of the two is refused.
    twin = _obj("x-client", created="2024-05-01T10:00:00Z")
    assert (cluster_name_conflict(twin, [older, twin]) is None) != (cluster_name_conflict(older, [older, twin]) is None)


def test_a_name_problem_is_refused_before_anything_is_created() -> None:
    observed = dataclasses.replace(
        healthy_cluster(0), services=frozenset(),
        name_problem=NameProblem(REASON_SERVICE_NAME_TAKEN, "Service example-client exists and is not owned"))
    action = plan_next_action(observed)
    assert isinstance(action, a.RefuseNames) and not action.has_effect
    assert action.event_reason == REASON_SERVICE_NAME_TAKEN and action.event_type == "Warning"
    status = compute_status(observed, action, now=NOW)
    assert (status["phase"], status["reason"]) == ("Failed", REASON_SERVICE_NAME_TAKEN)
    assert "example-client" in status["message"]
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", REASON_SERVICE_NAME_TAKEN)


def test_leftover_pods_and_claims_are_deleted_by_uid() -> None:
    observed = healthy_cluster(3)
    leftover = dataclasses.replace(make_pod(observed.cluster, "example-gone1", index=7), uid="pod-uid-7")
    observed = dataclasses.replace(observed, pods=(*observed.pods, leftover))
    action = plan_next_action(observed)
    assert isinstance(action, a.DeletePod) and (action.pod_name, action.pod_uid) == ("example-gone1", "pod-uid-7")
    observed = dataclasses.replace(healthy_cluster(3), pvcs=(ObservedPVC("example-gone1", "example-gone1", uid="pvc-uid"),))
    action = plan_next_action(observed)
    assert isinstance(action, a.DeletePVC) and action.pvc_uid == "pvc-uid"


def test_pod_uid_is_parsed() -> None:
    assert parse_pod({"metadata": {"name": "p", "uid": "u-1"}}).uid == "u-1"


class DeletingApi:
    def __init__(self) -> None:
        self.deleted: list[tuple[str, str | None]] = []

    def delete(self, namespace: str, name: str, *, uid_precondition: str | None = None) -> None:
        self.deleted.append((name, uid_precondition))


def test_every_delete_carries_the_uid_precondition() -> None:
    api = DeletingApi()
    executor = ActionExecutor(CachedClient(api), CachedClient(api), CachedClient(api),  # type: ignore[arg-type]
                              EtcdAccess(lambda ns, name: {}))
    observed = ObservedCluster(cluster=healthy_cluster(1).cluster)
    executor.execute(a.DeletePod("p", "orphan", "uid-p"), observed)
    executor.execute(a.DeletePVC("v", "orphan", "uid-v"), observed)
    executor.execute(a.UpgradeMember("m", "m", "outdated", "uid-m"), observed)
    assert api.deleted == [("p", "uid-p"), ("v", "uid-v"), ("m", "uid-m")]

