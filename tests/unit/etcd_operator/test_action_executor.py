"""The executor makes its writes visible to the next pass at once (read-your-writes)."""
from __future__ import annotations

from typing import Any

from etcd_cluster_builders import raw_cluster

from etcd_operator import actions as a
from etcd_operator.acting import ActionExecutor
from etcd_operator.cache import ObjectCache
from etcd_operator.etcd_access import EtcdAccess
from etcd_operator.observed import ObservedCluster, parse_pod
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_etcd_cluster


class RecordingApi:
    """Stands in for the Pods/Services/PVCs facades: accepts a create and returns what the API would."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        stored = {**body, "metadata": {**body["metadata"], "namespace": namespace, "uid": f"uid-{len(self.created)}",
                                       "creationTimestamp": "2026-01-01T00:00:00Z"}}
        self.created.append(stored)
        return stored


def test_a_created_seed_pod_is_seen_by_the_next_pass_before_any_watch_event() -> None:
    pods, services, pvcs = ObjectCache(), ObjectCache(), ObjectCache()
    api = RecordingApi()
    executor = ActionExecutor(api, api, api, EtcdAccess(lambda ns, name: {}),  # type: ignore[arg-type]
                              pod_cache=pods, service_cache=services, pvc_cache=pvcs)
    cluster = parse_etcd_cluster(raw_cluster({"size": 3}, status={}))  # brand new: never bootstrapped
    services_present = frozenset({cluster.name, f"{cluster.name}-client"})
    first = plan_next_action(ObservedCluster(cluster=cluster, services=services_present))
    assert isinstance(first, a.CreateSeedMember)

    executor.execute(first, ObservedCluster(cluster=cluster, services=services_present))

    cached = pods.select(cluster.namespace, {"etcd_cluster": cluster.name})
    assert [p["metadata"]["name"] for p in cached] == [first.member_name]
    second = plan_next_action(ObservedCluster(cluster=cluster, services=services_present,
                                              pods=tuple(parse_pod(p) for p in cached)))
    assert not isinstance(second, a.CreateSeedMember), second
