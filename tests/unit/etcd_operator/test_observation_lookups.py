"""The observation is complete when `observe_cluster` returns: what its checks look up by name (a
colliding cluster, a Service or PodDisruptionBudget that is not ours, FailedMount events, the
client service's EndpointSlices) is in it, asked only when the check needs it."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd.access import EtcdAccess
from etcd_operator.manifests import build_disruption_budget, build_service
from etcd_operator.observed import ObservedCluster, ObservedDisruptionBudget
from etcd_operator.observing import MOUNT_CHECK_AFTER_SECONDS, observe_cluster
from etcd_operator.ownership import (
    REASON_DISRUPTION_BUDGET_NAME_TAKEN,
    REASON_NAME_CONFLICT,
    REASON_SERVICE_NAME_TAKEN,
)
from etcd_operator.spec import parse_etcd_cluster
from kube_adapter.errors import Transient
from tests.unit.etcd_operator.etcd_cluster_builders import CLUSTER, T0, make_cluster, raw_cluster

NOW = T0 + timedelta(minutes=1)


class FakeLookups:
    """Every question recorded; answers from what the test put in."""

    def __init__(self, *, neighbours: Sequence[dict[str, Any]] = (), services: Mapping[str, dict[str, Any]] = {},
                 budgets: Mapping[str, dict[str, Any]] = {}, mount_events: Sequence[dict[str, Any]] = (),
                 slices: Sequence[dict[str, Any]] | Exception = ()) -> None:
        self._neighbours, self._services, self._budgets = list(neighbours), dict(services), dict(budgets)
        self._mount_events, self._slices = list(mount_events), slices
        self.asked: list[tuple[str, str]] = []

    def neighbours(self, namespace: str) -> list[dict[str, Any]]:
        return self._neighbours

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.asked.append(("service", name))
        return self._services.get(name)

    def disruption_budget(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.asked.append(("budget", name))
        return self._budgets.get(name)

    def failed_mount_events(self, namespace: str, pod_uid: str) -> list[dict[str, Any]]:
        self.asked.append(("events", pod_uid))
        return self._mount_events

    def endpoint_slices(self, namespace: str, service: str) -> list[dict[str, Any]]:
        self.asked.append(("slices", service))
        if isinstance(self._slices, Exception):
            raise self._slices
        return list(self._slices)


def _observe(lookups: FakeLookups, *, cluster: EtcdCluster | None = None, services: Sequence[dict[str, Any]] = (),
             pods: Sequence[dict[str, Any]] = (), budgets: Sequence[dict[str, Any]] = ()) -> ObservedCluster:
    return observe_cluster(cluster or make_cluster(), pods=list(pods), services=list(services), pvcs=[],
                           budgets=list(budgets), etcd=EtcdAccess(lambda ns, name: {}), lookups=lookups, now=NOW,
                           connectable=lambda urls: set())


def _ours(cluster: EtcdCluster) -> list[dict[str, Any]]:
    return [build_service(cluster, CLUSTER), build_service(cluster, f"{CLUSTER}-client")]


def _pod(name: str, *, age_seconds: float, waiting: str | None = "ContainerCreating",
         serving: bool = True) -> dict[str, Any]:
    labels = {c.LABEL_APP: c.LABEL_APP_VALUE, c.LABEL_CLUSTER: CLUSTER, c.LABEL_MEMBER: name}
    if serving:
        labels[c.LABEL_SERVING] = c.LABEL_SERVING_VALUE
    created = (NOW - timedelta(seconds=age_seconds)).isoformat().replace("+00:00", "Z")
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels,
                         "creationTimestamp": created},
            "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.6.16"}]},
            "status": {"phase": "Pending" if waiting else "Running",
                       "containerStatuses": [{"name": "etcd", "state": state}]}}


def test_a_running_cluster_asks_nothing_beyond_its_own_objects() -> None:
    cluster = make_cluster()
    lookups = FakeLookups(neighbours=[raw_cluster()])
    budget = build_disruption_budget(cluster, 2)
    observed = _observe(lookups, cluster=cluster, services=_ours(cluster),
                        pods=[_pod(f"{CLUSTER}-a", age_seconds=60, waiting=None)], budgets=[budget])
    assert lookups.asked == []
    assert observed.name_problem is None and observed.mount_failures == {} and observed.client_endpoints is None
    assert observed.disruption_budget == ObservedDisruptionBudget(budget["metadata"]["name"], 2, "")


def test_a_missing_service_is_asked_about_by_name_and_one_not_ours_is_a_name_problem() -> None:
    foreign = {"metadata": {"name": f"{CLUSTER}-client", "namespace": "default", "uid": "svc-uid"}}
    lookups = FakeLookups(neighbours=[raw_cluster()], services={f"{CLUSTER}-client": foreign})
    observed = _observe(lookups)
    assert ("service", CLUSTER) in lookups.asked and ("service", f"{CLUSTER}-client") in lookups.asked
    assert observed.name_problem is not None and observed.name_problem.reason == REASON_SERVICE_NAME_TAKEN


def test_a_service_being_deleted_is_no_name_problem() -> None:
    going = {"metadata": {"name": f"{CLUSTER}-client", "namespace": "default",
                          "deletionTimestamp": "2024-05-01T12:00:00Z"}}
    lookups = FakeLookups(neighbours=[raw_cluster()], services={f"{CLUSTER}-client": going})
    assert _observe(lookups).name_problem is None


def test_an_older_cluster_sharing_a_service_name_is_a_name_conflict() -> None:
    """Clusters x and x-client both need the Service x-client: the newer one is refused."""
    older = raw_cluster()
    older["metadata"]["creationTimestamp"] = "2024-05-01T11:00:00Z"
    newer = raw_cluster(cluster_name=f"{CLUSTER}-client")
    newer["metadata"]["creationTimestamp"] = "2024-05-01T12:00:00Z"
    lookups = FakeLookups(neighbours=[older, newer])
    observed = _observe(lookups, cluster=parse_etcd_cluster(newer))
    assert observed.name_problem is not None and observed.name_problem.reason == REASON_NAME_CONFLICT
    assert lookups.asked == [], "a conflict needs no further lookup"
    assert _observe(FakeLookups(neighbours=[older, newer]), cluster=parse_etcd_cluster(older),
                    services=_ours(parse_etcd_cluster(older))).name_problem is None


def test_a_budget_of_that_name_not_ours_is_asked_about_only_while_we_have_none() -> None:
    cluster = make_cluster()
    theirs = {"metadata": {"name": f"{CLUSTER}", "namespace": "default", "uid": "pdb-uid"}}
    budget_name = build_disruption_budget(cluster, 2)["metadata"]["name"]
    lookups = FakeLookups(neighbours=[raw_cluster()], budgets={budget_name: theirs})
    observed = _observe(lookups, cluster=cluster, services=_ours(cluster))
    assert lookups.asked == [("budget", budget_name)]
    assert observed.name_problem is not None and observed.name_problem.reason == REASON_DISRUPTION_BUDGET_NAME_TAKEN
    lookups = FakeLookups(neighbours=[raw_cluster()], budgets={budget_name: theirs})
    _observe(lookups, cluster=cluster, services=_ours(cluster), budgets=[build_disruption_budget(cluster, 2)])
    assert lookups.asked == []


def test_failed_mounts_are_asked_for_pods_setting_up_volumes_past_the_grace() -> None:
    events = [{"message": "old"}, {"message": 'MountVolume.SetUp failed for volume "tls" : secret "t" not found'}]
    lookups = FakeLookups(neighbours=[raw_cluster()], mount_events=events)
    young = _pod(f"{CLUSTER}-young", age_seconds=MOUNT_CHECK_AFTER_SECONDS - 1)
    stuck = _pod(f"{CLUSTER}-stuck", age_seconds=MOUNT_CHECK_AFTER_SECONDS + 1)
    pulling = _pod(f"{CLUSTER}-pull", age_seconds=60, waiting="ErrImagePull")
    observed = _observe(lookups, services=_ours(make_cluster()), pods=[young, stuck, pulling])
    assert [q for q in lookups.asked if q[0] == "events"] == [("events", f"uid-{CLUSTER}-stuck")]
    assert observed.mount_failures == {f"{CLUSTER}-stuck": events[-1]["message"]}


def test_client_endpoints_are_looked_up_only_while_a_pod_is_drained() -> None:
    slices = [{"endpoints": [{"targetRef": {"kind": "Pod", "name": f"{CLUSTER}-a"}, "conditions": {"ready": True}}]}]
    serving = _pod(f"{CLUSTER}-a", age_seconds=60, waiting=None)
    drained = _pod(f"{CLUSTER}-b", age_seconds=60, waiting=None, serving=False)
    lookups = FakeLookups(neighbours=[raw_cluster()], slices=slices)
    assert _observe(lookups, services=_ours(make_cluster()), pods=[serving]).client_endpoints is None
    observed = _observe(lookups, services=_ours(make_cluster()), pods=[serving, drained])
    assert [q for q in lookups.asked if q[0] == "slices"] == [("slices", f"{CLUSTER}-client")]
    assert observed.client_endpoints == frozenset({f"{CLUSTER}-a"})


def test_no_endpoint_slice_at_all_is_unknown_not_empty() -> None:
    """A Service with a selector has EndpointSlices wherever a controller makes them; none at all
    (the sandbox runs no such controller) says nothing of where clients go: the planner then goes
    by the pods' readiness."""
    drained = _pod(f"{CLUSTER}-b", age_seconds=60, waiting=None, serving=False)
    lookups = FakeLookups(neighbours=[raw_cluster()], slices=[])
    assert _observe(lookups, services=_ours(make_cluster()), pods=[drained]).client_endpoints is None


def test_a_failed_endpoint_slice_lookup_is_not_looked_up() -> None:
    drained = _pod(f"{CLUSTER}-b", age_seconds=60, waiting=None, serving=False)
    lookups = FakeLookups(neighbours=[raw_cluster()], slices=Transient("503 Service Unavailable"))
    assert _observe(lookups, services=_ours(make_cluster()), pods=[drained]).client_endpoints is None


def test_the_ip_family_is_read_from_the_services() -> None:
    cluster = make_cluster()
    services = _ours(cluster)
    for service in services:
        service["spec"]["ipFamilies"] = ["IPv6"]
    assert _observe(FakeLookups(neighbours=[raw_cluster()]), services=services).ip_family == "IPv6"
