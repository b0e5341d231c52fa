"""Adopting clusters the CoreOS operator made: its pods are read as members and left alone, its
peer service is fixed to publish members that are not ready yet."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from etcd_common.api.versions import EtcdVersion
from etcd_operator.acting import ActionExecutor
from etcd_operator.actions import (
    CreateServices,
    NoOp,
    PublishNotReadyAddresses,
    RejectSpec,
    ReportMembersLost,
    SetServing,
    UpdateClientSelector,
)
from etcd_operator.adoption import PEER_SERVICE_PATCH, services_hiding_unready_members
from etcd_operator.manifests import build_client_service, build_peer_service
from etcd_operator.observed import ObservedCluster, parse_pod
from etcd_operator.observing import observe_cluster
from etcd_operator.planning import plan_next_action
from etcd_operator.planning.findings import outdated_reason
from etcd_operator.spec import parse_etcd_cluster
from etcd_operator.status import compute_status
from operator_runtime.cache import ObjectCache
from operator_runtime.cached_client import CachedClient
from tests.integration.etcd_operator import coreos_pods
from tests.unit.etcd_operator.etcd_cluster_builders import (
    CLUSTER,
    NAMESPACE,
    T0,
    UID,
    healthy_cluster,
    make_cluster,
    raw_cluster,
    replace_pod,
)

COREOS_CLUSTER = {**coreos_pods.coreos_cluster(CLUSTER, 3, "3.6.16"),
                  "metadata": {"name": CLUSTER, "namespace": NAMESPACE, "uid": UID}}


def _coreos_peer_service() -> dict[str, Any]:
    peer, _client = coreos_pods.coreos_services(COREOS_CLUSTER)
    return peer


@pytest.mark.parametrize("services, hiding", [
    pytest.param(coreos_pods.coreos_services(COREOS_CLUSTER), {CLUSTER}, id="coreos-services"),
    pytest.param([build_peer_service(make_cluster()), build_client_service(make_cluster())], set(), id="ours"),
    pytest.param([{**_coreos_peer_service(), "spec": {**_coreos_peer_service()["spec"], "publishNotReadyAddresses": False}}],
                 {CLUSTER}, id="explicitly-false"),
    pytest.param([{**_coreos_peer_service(), "metadata": {"name": CLUSTER, "deletionTimestamp": "2024-05-01T12:00:00Z"}}],
                 set(), id="being-deleted"),
    pytest.param([{"metadata": {"name": "other"}, "spec": {}}], set(), id="not-this-clusters"),
])
def test_peer_service_without_publish_not_ready_addresses_is_found(services: list[dict[str, Any]], hiding: set[str]) -> None:
    assert services_hiding_unready_members(CLUSTER, services) == hiding


def test_the_fix_is_what_our_peer_service_has() -> None:
    assert build_peer_service(make_cluster())["spec"]["publishNotReadyAddresses"] is PEER_SERVICE_PATCH["spec"]["publishNotReadyAddresses"]


def test_peer_service_is_fixed_after_missing_services_are_created() -> None:
    observed = dataclasses.replace(healthy_cluster(3), services_to_fix=frozenset({CLUSTER}))
    assert plan_next_action(observed) == PublishNotReadyAddresses(CLUSTER)
    missing = dataclasses.replace(observed, services=frozenset({CLUSTER}))
    assert plan_next_action(missing) == CreateServices((f"{CLUSTER}-client",))


@pytest.mark.parametrize("shell", [False, True], ids=["v0.9-argv", "older-sh-ec"])
def test_coreos_member_pods_are_read_as_members_and_not_rolled(shell: bool) -> None:
    observed = healthy_cluster(3)
    coreos = []
    for pod in observed.pods:
        raw = coreos_pods.coreos_member_pod(
            COREOS_CLUSTER, pod.member_name, version="3.6.16", state="existing", shell=shell,
            initial_cluster=[(p.member_name, coreos_pods.peer_url(CLUSTER, NAMESPACE, p.member_name)) for p in observed.pods])
        raw["status"] = {"phase": "Running", "podIP": pod.ip, "conditions": [{"type": "Ready", "status": "True"}],
                         "containerStatuses": [{"name": "etcd", "restartCount": 0, "state": {"running": {}}}]}
        coreos.append(dataclasses.replace(parse_pod(raw), created_at=pod.created_at))
    adopted = dataclasses.replace(observed, pods=tuple(coreos))
    for pod in adopted.pods:
        assert pod.pod_policy_hash is None and str(pod.etcd_version) == "3.6.16" and pod.ready
    assert all(outdated_reason(adopted, member) is None for member in adopted.members or ())
    # Its client service selects by app and cluster only: its pods are labelled serving first,
    # then the selector requires the label (so draining works); nothing is restarted or rolled.
    adopted = dataclasses.replace(adopted, client_selector_outdated=True)
    for step in range(len(coreos)):
        action = plan_next_action(adopted)
        assert action == SetServing(coreos[step].name, True, action.reason, coreos[step].uid), action
        adopted = replace_pod(adopted, coreos[step].name, serving=True)
    assert plan_next_action(adopted) == UpdateClientSelector(f"{CLUSTER}-client")
    assert isinstance(plan_next_action(dataclasses.replace(adopted, client_selector_outdated=False)), NoOp)


def test_observation_names_the_coreos_peer_service_to_fix() -> None:
    observed = observe_cluster(make_cluster(), pods=[], services=coreos_pods.coreos_services(COREOS_CLUSTER), pvcs=[],
                               etcd=None)  # type: ignore[arg-type]  # no pod: etcd is never asked
    assert observed.services == {CLUSTER, f"{CLUSTER}-client"}
    assert observed.services_to_fix == {CLUSTER}
    assert observed.client_selector_outdated, "its client service selects pods without the serving label"
    ours = observe_cluster(make_cluster(), pods=[], services=[build_peer_service(make_cluster()),
                                                              build_client_service(make_cluster())],
                           pvcs=[], etcd=None)  # type: ignore[arg-type]
    assert not ours.client_selector_outdated


class PatchingServices:
    """Stands in for the Services facade: applies a merge patch of `spec` as the API would."""

    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((namespace, name, patch))
        self.stored = {**self.stored, "spec": {**self.stored["spec"], **patch["spec"]}}
        return self.stored


def test_the_fixed_peer_service_is_seen_by_the_next_pass_before_any_watch_event() -> None:
    peer = {**_coreos_peer_service(), "metadata": {**_coreos_peer_service()["metadata"], "namespace": NAMESPACE}}
    services, cache = PatchingServices(peer), ObjectCache()
    cache.upsert(peer)
    executor = ActionExecutor(CachedClient(None), CachedClient(services, cache),  # type: ignore[arg-type]
                              CachedClient(None), None)  # type: ignore[arg-type]
    executor.execute(PublishNotReadyAddresses(CLUSTER), healthy_cluster(3))
    assert services.patches == [(NAMESPACE, CLUSTER, {"spec": {"publishNotReadyAddresses": True}})]
    cached = cache.select(NAMESPACE, {"etcd_cluster": CLUSTER})
    assert services_hiding_unready_members(CLUSTER, cached) == frozenset()
    assert cached[0]["metadata"]["annotations"] == peer["metadata"]["annotations"]  # nothing else changed


@pytest.mark.parametrize("spec_version, running", [
    ("3.4.23", ["3.3.13"] * 3),
    ("3.5.35", ["3.3.13"] * 3),
    ("3.4.23", ["3.2.13"] * 3),
    ("3.4.23", ["3.3.13", "3.4.23", "3.4.23"]),  # the CoreOS operator's upgrade to 3.4 half done
])
def test_a_coreos_cluster_on_etcd_3_2_or_3_3_is_not_touched_whatever_the_spec_says(spec_version: str, running: list[str]) -> None:
    observed = healthy_cluster(3, version=spec_version)
    pods = tuple(dataclasses.replace(pod, etcd_version=EtcdVersion.of(version), image=f"quay.io/coreos/etcd:v{version}",
                                     pod_policy_hash=None)
                 for pod, version in zip(observed.pods, running))
    observed = dataclasses.replace(observed, pods=pods)
    action = plan_next_action(observed)
    assert isinstance(action, RejectSpec), action
    assert f"members run etcd {min(running, key=EtcdVersion.of)}" in action.reason
    assert "with the CoreOS operator first" in action.reason and "restore" in action.reason
    status = compute_status(observed, action, now=T0)
    assert status["phase"] == "Failed"
    supported = next(c for c in status["conditions"] if c["type"] == "VersionSupported")
    assert (supported["status"], supported["reason"]) == ("False", "UpgradeRefused")


def test_a_coreos_cluster_on_etcd_3_4_is_run() -> None:
    observed = healthy_cluster(3, version="3.4.23")
    observed = dataclasses.replace(observed, pods=tuple(dataclasses.replace(p, pod_policy_hash=None) for p in observed.pods))
    assert isinstance(plan_next_action(observed), NoOp)


def test_a_coreos_status_counts_as_bootstrapped_so_losing_every_member_is_reported() -> None:
    status = coreos_pods.coreos_status(size=3, ready=["a", "b", "c"], version="3.5.35", service_name=f"{CLUSTER}-client")
    cluster = parse_etcd_cluster(raw_cluster({"version": "3.5.35"}, status=status))
    assert cluster.recorded.bootstrapped and cluster.recorded.phase == "Running"
    observed = ObservedCluster(cluster=cluster, services=frozenset({CLUSTER, f"{CLUSTER}-client"}))
    assert isinstance(plan_next_action(observed), ReportMembersLost)


def test_members_on_a_newer_etcd_get_the_downgrade_refusal_not_the_coreos_advice() -> None:
    observed = healthy_cluster(3, version="3.6.16")
    newer = tuple(dataclasses.replace(p, etcd_version=EtcdVersion.of("3.7.0"), image="quay.io/coreos/etcd:v3.7.0")
                  for p in observed.pods)
    action = plan_next_action(dataclasses.replace(observed, pods=newer))
    assert isinstance(action, RejectSpec) and "downgrade" in action.reason and "CoreOS" not in action.reason, action
