"""The executor: its writes are visible to the next pass at once (read-your-writes), and each
action's calls go where they should."""
from __future__ import annotations

from typing import Any

from etcd_common.etcd.access import EtcdAccess
from etcd_operator import actions as a
from etcd_operator.acting import ActionExecutor
from etcd_operator.manifests import member_client_url
from etcd_operator.observed import ObservedCluster, parse_pod
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_etcd_cluster
from operator_runtime.cache import ObjectCache
from operator_runtime.cached_client import CachedClient
from tests.unit.etcd_operator.etcd_cluster_builders import (
    healthy_cluster,
    member_id,
    name,
    raw_cluster,
    replace_pod,
    unhealthy,
    with_spec,
)
from tests.unit.etcd_operator.recording_api import DeletingApi, RecordingApi, recording_executor
from tests.unit.etcd_operator.recording_etcd import EtcdCall, RecordingEtcd


def test_a_created_seed_pod_is_seen_by_the_next_pass_before_any_watch_event() -> None:
    pods, services, pvcs = ObjectCache(), ObjectCache(), ObjectCache()
    api = RecordingApi()
    executor = ActionExecutor(CachedClient(api, pods), CachedClient(api, services),  # type: ignore[arg-type]
                              CachedClient(api, pvcs), EtcdAccess(lambda ns, name: {}))  # type: ignore[arg-type]
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


def test_removing_a_member_asks_the_healthy_others_then_deletes_its_pod() -> None:
    observed = unhealthy(healthy_cluster(4, size=3), name(2))
    api, etcd = DeletingApi(), RecordingEtcd()
    recording_executor(api, etcd).execute(a.RemoveMember(name(4), member_id(4), "scale", "over size"), observed)
    cluster = observed.cluster
    assert etcd.calls == [EtcdCall("member_remove", [member_client_url(cluster, name(1)), member_client_url(cluster, name(3))],
                                   (member_id(4),))], "neither the removed member nor the unhealthy one is asked"
    assert api.deleted == [name(4)], "a removed etcd exits: its pod goes with the same action"


def test_removing_a_member_whose_pod_is_already_terminating_deletes_nothing() -> None:
    observed = replace_pod(healthy_cluster(3), name(2), deleting=True)
    api, etcd = DeletingApi(), RecordingEtcd()
    recording_executor(api, etcd).execute(a.RemoveMember(name(2), member_id(2), "replace", "pod deleted"), observed)
    assert [call.args for call in etcd.calls] == [(member_id(2),)] and api.deleted == []


def test_moving_leadership_off_an_unhealthy_leader_asks_the_leader_too() -> None:
    """etcd serves move-leader on the leader only: a stuck leader left out of the endpoints (as
    unhealthy members are for other calls) would make every handover fail with "no leader"."""
    observed = unhealthy(healthy_cluster(3, leader=1), name(1))
    api, etcd = DeletingApi(), RecordingEtcd()
    recording_executor(api, etcd).execute(a.MoveLeader(name(1), member_id(1), name(2), member_id(2), "stuck"), observed)
    cluster = observed.cluster
    assert etcd.calls == [EtcdCall("move_leader", [member_client_url(cluster, name(2)), member_client_url(cluster, name(3)),
                                                   member_client_url(cluster, name(1))], (member_id(2),))], etcd.calls
    assert api.deleted == []


class PodsApi(DeletingApi):
    """Pods that are gone once deleted (or that outlive the wait), and patches recorded as sent."""

    def __init__(self, *, pods_outlive_the_wait: bool = False) -> None:
        super().__init__()
        self.patches: list[tuple[str, Any]] = []
        self.outlive = pods_outlive_the_wait

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        from kube_adapter.errors import NotFound

        if name in self.deleted and not self.outlive:
            raise NotFound(f"pods {name!r} not found", status=404)
        return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}}

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(("merge", (name, patch)))
        return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}}

    def patch_json(self, namespace: str, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        self.patches.append(("json", (name, operations)))
        return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}}


def test_stopping_a_member_deletes_its_pod_then_removes_it_once_the_pod_is_gone() -> None:
    observed = healthy_cluster(4, size=3, pvc=True)
    api, etcd = PodsApi(), RecordingEtcd()
    recording_executor(api, etcd).execute(a.StopMember(name(4), member_id(4), name(4), "over size", "uid-x", name(4)), observed)
    [(kind, (pvc, patch))] = api.patches
    assert kind == "merge" and pvc == name(4) and "etcd.database.coreos.com/leaving-at" in patch["metadata"]["annotations"]
    assert api.deleted == [name(4)]
    assert [str(call) for call in etcd.calls] == [f"member_remove {member_id(4):x}"]
    assert member_client_url(observed.cluster, name(4)) not in etcd.calls[0].endpoints, "the stopped member is not asked"


def test_a_stopped_member_whose_pod_does_not_go_is_left_to_a_later_pass(monkeypatch: Any) -> None:
    """No member remove while its etcd may still finish its clients' requests ("raft: stopped")."""
    from etcd_operator import acting

    monkeypatch.setattr(acting, "STOP_WAIT_SECONDS", 0.3)
    monkeypatch.setattr(acting, "STOP_POLL_SECONDS", 0.05)
    observed = healthy_cluster(4, size=3)
    api, etcd = PodsApi(pods_outlive_the_wait=True), RecordingEtcd()
    recording_executor(api, etcd).execute(a.StopMember(name(4), member_id(4), name(4), "over size", "uid-" + name(4)), observed)
    assert api.deleted == [name(4)] and etcd.calls == [] and api.patches == []


def test_an_in_place_upgrade_changes_only_the_etcd_image_of_that_very_pod() -> None:
    observed = with_spec(healthy_cluster(3, version="3.5.35"), version="3.6.16")
    observed = replace_pod(observed, name(2), uid="uid-2", restart_count=4)
    api, etcd = PodsApi(), RecordingEtcd()
    action = plan_next_action(replace_pod(observed, name(2), serving=False))
    assert isinstance(action, a.UpgradeMember) and action.in_place and action.member_name == name(2), action
    recording_executor(api, etcd).execute(action, observed)
    [(json_patch, (pod, operations))] = api.patches
    assert (json_patch, pod) == ("json", name(2)), "one patch: the restart annotations and the image together"
    restarted_at = operations[3]
    assert restarted_at["path"] == "/metadata/annotations/etcd.database.coreos.com~1restarted-at"
    assert operations == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-2"},
        {"op": "test", "path": "/spec/containers/0/image", "value": "quay.io/coreos/etcd:v3.5.35"},
        {"op": "add", "path": "/metadata/annotations/etcd.version", "value": "3.6.16"},
        {"op": "add", "path": "/metadata/annotations/etcd.database.coreos.com~1restarted-at",
         "value": restarted_at["value"]},
        {"op": "add", "path": "/metadata/annotations/etcd.database.coreos.com~1restarted-from-count", "value": "4"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "quay.io/coreos/etcd:v3.6.16"},
    ]
    assert api.deleted == [] and etcd.calls == [], "the member keeps its pod, name and data"

