"""The supervisor's pass around the planner, with the API faked at our adapter boundary: what it
executes, which events it records and when it writes status."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.etcd_operator.etcd_cluster_builders import UID, raw_cluster

from etcd_common.etcd_access import EtcdAccess
from etcd_operator import actions as a
from etcd_operator.manifests import build_service
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.observed import ObservedCluster
from etcd_operator.spec import parse_etcd_cluster
from etcd_operator.supervisor import ClusterSupervisor, SupervisorContext
from kube_adapter.errors import NotFound
from operator_runtime.cache import ObjectCache


class FakeServices:
    def __init__(self, existing: dict[str, dict[str, Any]] | None = None) -> None:
        self.existing = existing or {}

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        if name not in self.existing:
            raise NotFound(f"services {name!r} not found")
        return self.existing[name]


class FakeExecutor:
    def __init__(self, services: FakeServices) -> None:
        self.services = services
        self.pdbs = FakeServices()
        self.executed: list[a.Action] = []

    def execute(self, action: a.Action, observed: ObservedCluster) -> None:
        self.executed.append(action)


class FakeClusterApi:
    def __init__(self, cache: ObjectCache) -> None:
        self.cache = cache
        self.patches: list[dict[str, Any]] = []

    def patch_status(self, namespace: str, name: str, status: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.patches.append(status)
        current = self.cache.get((namespace, name)) or {}
        merged = {**current, "status": {**(current.get("status") or {}), **status}}
        return merged


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str]] = []

    def record(self, involved: dict[str, Any], type: str, reason: str, message: str) -> None:
        self.recorded.append((type, reason))


def _supervisor(raw: dict[str, Any], *, services: dict[str, dict[str, Any]] | None = None,
                objects: list[dict[str, Any]] | None = None) -> tuple[ClusterSupervisor, FakeExecutor, FakeEvents]:
    clusters, pods, service_cache, pvcs, pdbs = ObjectCache(), ObjectCache(), ObjectCache(), ObjectCache(), ObjectCache()
    for cache in (clusters, pods, service_cache, pvcs, pdbs):
        cache.mark_synced()
    clusters.upsert(raw)
    for obj in objects or ():
        service_cache.upsert(obj)
    executor = FakeExecutor(FakeServices(services))
    events = FakeEvents()
    context = SupervisorContext(
        clusters=clusters, pods=pods, services=service_cache, pvcs=pvcs,
        cluster_api=FakeClusterApi(clusters),  # type: ignore[arg-type]
        executor=executor,  # type: ignore[arg-type]
        etcd=EtcdAccess(lambda ns, name: {}),
        events=events,  # type: ignore[arg-type]
        metrics=OperatorMetrics(CollectorRegistry()),
        resync_seconds=10.0,
        stop=threading.Event(),
        pdbs=pdbs,
    )
    return ClusterSupervisor(("default", raw["metadata"]["name"]), context), executor, events


@pytest.mark.parametrize("deleted_with", ["Foreground", "Background"])
def test_a_cluster_being_deleted_is_left_to_the_garbage_collector(deleted_with: str) -> None:
    """Its pods went first (foreground propagation): no MembersLost, nothing recreated."""
    raw = raw_cluster(status={"bootstrapped": True, "phase": "Running"})
    raw["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    if deleted_with == "Foreground":
        raw["metadata"]["finalizers"] = ["foregroundDeletion"]
    supervisor, executor, events = _supervisor(raw)
    for _ in range(3):
        supervisor.reconcile_once()
    assert executor.executed == [] and events.recorded == []


def test_a_report_is_one_event_however_many_passes_see_it() -> None:
    raw = raw_cluster({"version": "9.9.9"}, status={})
    supervisor, executor, events = _supervisor(raw)
    for _ in range(5):
        delay = supervisor.reconcile_once()
    assert events.recorded == [("Warning", "InvalidSpec")] and executor.executed == []
    assert delay == 10.0


def test_a_foreign_client_service_fails_the_cluster_with_one_event_and_no_create() -> None:
    raw = raw_cluster(status={})
    foreign = {"metadata": {"name": "example-client", "namespace": "default", "uid": "svc-uid"}}
    supervisor, executor, events = _supervisor(raw, services={"example-client": foreign})
    delays = [supervisor.reconcile_once() for _ in range(5)]
    assert executor.executed == [] and events.recorded == [("Warning", "ServiceNameTaken")]
    assert delays == [10.0] * 5
    status = supervisor.context.clusters.get(("default", "example"))["status"]  # type: ignore[index]
    assert (status["phase"], status["reason"]) == ("Failed", "ServiceNameTaken")


def test_services_of_ours_are_not_looked_up() -> None:
    raw = raw_cluster(status={})
    cluster = parse_etcd_cluster(raw)
    ours = [build_service(cluster, "example"), build_service(cluster, "example-client")]
    supervisor, executor, events = _supervisor(raw, objects=ours)
    supervisor.reconcile_once()
    assert [type(action) for action in executor.executed] == [a.SetDisruptionBudget, a.CreateSeedMember]


def _seed_pod(waiting: str | None) -> dict[str, Any]:
    state = {"waiting": {"reason": waiting, "message": "image not found"}} if waiting else {"running": {}}
    return {
        "metadata": {"name": "example-abcde", "namespace": "default", "uid": "pod-uid",
                     "labels": {"app": "etcd", "etcd_cluster": "example", "etcd_node": "example-abcde"},
                     "ownerReferences": [{"kind": "EtcdCluster", "name": "example", "uid": UID}]},
        "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.6.16"}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "etcd", "state": state}]},
    }


def test_a_member_that_does_not_start_is_one_warning_per_incident() -> None:
    raw = raw_cluster(status={})
    cluster = parse_etcd_cluster(raw)
    services = [build_service(cluster, "example"), build_service(cluster, "example-client")]
    supervisor, executor, events = _supervisor(raw, objects=services)
    pods = supervisor.context.pods
    for waiting in ("ErrImagePull", "ErrImagePull", "ImagePullBackOff", "ImagePullBackOff"):
        pods.upsert(_seed_pod(waiting))
        supervisor.reconcile_once()
    assert [r for r in events.recorded if r[1] == "MemberNotStarting"] == [("Warning", "MemberNotStarting")]
    status = supervisor.context.clusters.get(("default", "example"))["status"]  # type: ignore[index]
    blocked = next(c for c in status["conditions"] if c["type"] == "MemberStartBlocked")
    assert (blocked["status"], blocked["reason"]) == ("True", "ImagePullBackOff")
    pods.upsert(_seed_pod(None))  # pulled after all
    supervisor.reconcile_once()
    status = supervisor.context.clusters.get(("default", "example"))["status"]  # type: ignore[index]
    blocked = next(c for c in status["conditions"] if c["type"] == "MemberStartBlocked")
    assert blocked["status"] == "False"
    pods.upsert(_seed_pod("ImagePullBackOff"))  # and lost again: a new incident
    supervisor.reconcile_once()
    assert len([r for r in events.recorded if r[1] == "MemberNotStarting"]) == 2
