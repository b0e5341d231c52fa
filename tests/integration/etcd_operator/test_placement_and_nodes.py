"""Member pods on the three-node sandbox: the real scheduler spreads them with antiAffinity, they
pass the `restricted` Pod Security profile, and a cluster rides out the loss of a node."""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.client_writes import Writer
from tests.integration.etcd_operator.etcd_data import member_ids, read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import OPERATOR_NAMESPACE
from tests.integration.etcd_operator.status_history import StatusHistory, conditions
from tests.sandbox_sharing import require_alone

PREFIX = "node-loss/"


def _nodes(pods: list[Any]) -> dict[str, str]:
    """pod name -> node name."""
    return {p.metadata.name: p.spec.node_name for p in pods}


def test_anti_affinity_places_one_member_per_node(clusters: Clusters) -> None:
    name = "spread"
    clusters.create(etcd_cluster(name, size=3, pod={"antiAffinity": True}))
    clusters.wait_running(name, ready=3, timeout=180)
    placed = _nodes(clusters.live_pods(name))
    nodes = {n.metadata.name for n in clusters.core.list_node().items}
    assert len(nodes) == 3, nodes
    assert sorted(placed.values()) == sorted(nodes), f"members share a node: {placed}"
    terms = clusters.live_pods(name)[0].spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    assert terms[0].topology_key == "kubernetes.io/hostname", terms


def test_cluster_runs_in_a_namespace_that_enforces_restricted(clusters: Clusters) -> None:
    clusters.core.patch_namespace(clusters.namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})
    # The admission is real: a pod that runs as root with privilege escalation is refused here.
    with pytest.raises(ApiException) as refused:
        clusters.core.create_namespaced_pod(clusters.namespace, {
            "metadata": {"name": "rooted"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}})
    assert refused.value.status == 403 and "restricted" in refused.value.body, refused.value.body

    name = "strict"
    clusters.create(etcd_cluster(name, size=3))
    clusters.wait_running(name, ready=3, timeout=180)
    clusters.put(name, "restricted", "yes")
    assert clusters.get_value(name, "restricted") == "yes"
    for pod in clusters.live_pods(name):
        assert pod.spec.security_context.run_as_non_root is True, pod.spec.security_context
        assert pod.spec.security_context.seccomp_profile.type == "RuntimeDefault", pod.spec.security_context
    refusals = [e.message for e in clusters.events(name) if "forbidden" in (e.message or "")]
    assert not refusals, refusals


DEDICATED = {"dedicated": "etcd"}
TAINT = {"key": "dedicated", "value": "etcd", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}


@pytest.fixture
def dedicated_node(clusters: Clusters) -> Iterator[str]:
    """A node labelled `dedicated=etcd` and tainted `dedicated=etcd:NoSchedule`: only pods that
    select it and tolerate the taint run there. Label and taint are taken off after the test."""
    require_alone("tainting a node")
    node = sorted(n.metadata.name for n in clusters.core.list_node().items)[-1]

    def set_dedicated(on: bool) -> None:
        current = clusters.core.read_node(node)
        taints = [t.to_dict() for t in current.spec.taints or [] if t.key != TAINT["key"]]
        taints = [{k: v for k, v in t.items() if v is not None} for t in taints] + ([TAINT] if on else [])
        clusters.core.patch_node(node, {"metadata": {"labels": {"dedicated": "etcd" if on else None},
                                                     "resourceVersion": current.metadata.resource_version},
                                        "spec": {"taints": taints}})
    set_dedicated(True)
    try:
        yield node
    finally:
        wait_for(lambda: _try(lambda: set_dedicated(False)), timeout=30, what=f"node {node} no longer dedicated")


def _try(action: Any) -> bool:
    try:
        action()
        return True
    except ApiException as error:
        if error.status != 409:  # a concurrent node status update: read again
            raise
        return False


@pytest.mark.alone
def test_a_member_no_node_fits_is_reported_and_placed_once_the_spec_tolerates_the_taint(
        clusters: Clusters, dedicated_node: str) -> None:
    name = "dedicated"
    clusters.create(etcd_cluster(name, size=1, pod={"nodeSelector": DEDICATED}))
    # The real scheduler finds no node: the selected one is tainted. The status says so, in its words.
    status = clusters.wait_status(name, lambda s: "Unschedulable" in s.get("message", ""),
                                  "Unschedulable in the message", timeout=90)
    assert conditions(status).get("MemberStartBlocked") == ("True", "Unschedulable"), status["conditions"]
    assert "untolerated taint" in status["message"], status["message"]
    warning = wait_for(lambda: next((e for e in clusters.events(name) if e.reason == "MemberNotStarting"), None),
                       timeout=30, what="a MemberNotStarting event")
    assert warning.type == "Warning" and "Unschedulable" in warning.message, warning.message

    # Fixing the spec is enough: the pod where etcd never ran is recreated with the toleration.
    clusters.patch_spec(name, {"pod": {"nodeSelector": DEDICATED, "tolerations": [TOLERATION]}})
    clusters.wait_running(name, ready=1, timeout=120)
    [pod] = clusters.live_pods(name)
    assert pod.spec.node_name == dedicated_node
    assert any((t.key, t.operator, t.value, t.effect) == ("dedicated", "Equal", "etcd", "NoSchedule")
               for t in pod.spec.tolerations), pod.spec.tolerations
    status = clusters.wait_status(name, lambda s: conditions(s).get("MemberStartBlocked", ("",))[0] == "False",
                                  "MemberStartBlocked cleared", timeout=30)
    assert "Unschedulable" not in status["message"], status["message"]
    clusters.put(name, "placed", "yes")
    assert clusters.get_value(name, "placed") == "yes"


@pytest.fixture
def node_restorer(clusters: Clusters) -> Iterator[list[str]]:
    """Names appended here are started again after the test, whatever happened."""
    stopped: list[str] = []
    yield stopped
    for node in stopped:
        clusters.sandbox.faults.start_node(node)


def _node_ready(clusters: Clusters, node: str) -> str:
    status = clusters.core.read_node(node).status
    return next((c.status for c in status.conditions or [] if c.type == "Ready"), "Unknown")


def _stop_and_restart_node(clusters: Clusters, name: str, node: str, victim: str, writer: Writer,
                           node_restorer: list[str]) -> float:
    """Stop `node` (where `victim` runs), check what the operator reports, start it again and wait
    for the cluster to converge; returns how long the node was down."""
    wait_for(lambda: writer.progressed(5), timeout=30, what="writes before the node stops")
    node_restorer.append(node)
    clusters.sandbox.faults.stop_node(node)
    stopped_at = time.monotonic()

    # The real node-lifecycle controller notices the silent kubelet; the operator reports the member.
    # Until that controller also marks the pod NotReady, its stale Ready beside a member no peer is
    # connected to reads as MemberPartitioned (the peers' view); the report to reach is the unready member.
    wait_for(lambda: _node_ready(clusters, node) != "True", timeout=90, what=f"node {node} NotReady")
    reported = clusters.wait_status(
        name, lambda s: victim in (s.get("members") or {}).get("unready", [])
        and conditions(s).get("Degraded", ("", ""))[:2] == ("True", "MembersUnhealthy"),
        f"{victim} reported unready", timeout=90)
    assert reported["phase"] == "Running", reported  # two of three members keep quorum
    assert conditions(reported)["Available"][0] == "True", reported["conditions"]
    degraded = next(c for c in reported["conditions"] if c["type"] == "Degraded")
    assert degraded["reason"] == "MembersUnhealthy" and victim in degraded["message"], degraded
    count = len(writer.acknowledged)
    wait_for(lambda: writer.progressed(count + 10), timeout=30, what="writes while the node is down")
    down_for = time.monotonic() - stopped_at

    clusters.sandbox.faults.start_node(node)
    node_restorer.remove(node)
    wait_for(lambda: _node_ready(clusters, node) == "True", timeout=90, what=f"node {node} Ready again")
    clusters.wait_status(
        name, lambda s: s.get("phase") == "Running" and s.get("readyCount") == 3 and s.get("size") == 3
        and not (s.get("members") or {}).get("unready"), "Running 3/3 again", timeout=180)
    count = len(writer.acknowledged)
    wait_for(lambda: writer.progressed(count + 5), timeout=30, what="writes after the node is back")
    return down_for


@pytest.mark.failure_injection
@pytest.mark.alone
def test_losing_a_node_keeps_the_cluster_available_and_it_converges_when_back(
        clusters: Clusters, node_restorer: list[str]) -> None:
    name = "nodeloss"
    clusters.create(etcd_cluster(name, size=3, pod={"antiAffinity": True}))
    status = clusters.wait_running(name, ready=3, timeout=180)
    ids_before = member_ids(clusters, name)
    placed = _nodes(clusters.live_pods(name))
    # Not the operator's node: an operator on a dead node could not report anything (its pod is
    # rescheduled only after the 300 s eviction toleration). A follower's node if possible.
    operator_nodes = {p.spec.node_name for p in clusters.core.list_namespaced_pod(OPERATOR_NAMESPACE).items}
    candidates = sorted((member != status["leader"], member) for member in placed
                        if placed[member] not in operator_nodes)
    assert candidates, f"every member shares a node with the operator: {placed}, operator on {operator_nodes}"
    victim = candidates[-1][1]
    node = placed[victim]

    writer = Writer(clusters.sandbox, clusters.client_url(name), PREFIX)
    writer.start()
    history = StatusHistory(clusters, name)
    try:
        with history:
            down_for = _stop_and_restart_node(clusters, name, node, victim, writer, node_restorer)
    except AssertionError as e:
        sequence = "\n  ".join(history.distinct_summaries())
        raise AssertionError(f"{e}\nstatus sequence:\n  {sequence}") from None
    finally:
        writer.finish()

    print(f"\nnode {node} down {down_for:.1f}s; writes: {len(writer.acknowledged)} acknowledged, "
          f"{len(writer.failures)} failed")
    # The node came back with the member's data: the same member rejoined, nobody was replaced.
    assert member_ids(clusters, name) == ids_before
    stored = read_prefix(clusters.sandbox, clusters.member_urls(name), PREFIX)
    lost = sorted(k for k, v in writer.acknowledged.items() if stored.get(k) != v)
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:5]}"
