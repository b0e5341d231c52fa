"""Three process-kubelet nodes under the real kube-scheduler, disruption and node-lifecycle controllers."""
from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from kube_sandbox import binaries
from kube_sandbox.config import NODE_NAMES
from kube_sandbox.kubelet.ipam import node_pod_cidr
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.sandbox.sandbox_objects import (
    Obj,
    apply,
    busybox_pod,
    condition_status,
    container_status,
    get,
    is_ready,
    process_alive,
    running_and_ready,
    wait_for_object,
)

pytestmark = pytest.mark.sandbox

# The node-lifecycle controller's grace period (about 20 s) plus its monitor period and some slack.
NODE_LOST_SECONDS = 90
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def node_ready(sandbox: Sandbox, name: str) -> str | None:
    return condition_status(get(sandbox, "", "node", name), "Ready")


def deployment(name: str, replicas: int, **pod_spec: Any) -> Obj:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"terminationGracePeriodSeconds": 1, **pod_spec, "containers": [
                {"name": "main", "image": "busybox", "command": ["sh", "-c", "exec sleep 3600"]}]},
        }},
    }


def ready_pods(sandbox: Sandbox, namespace: str, selector: str, count: int) -> list[Obj] | None:
    pods = get(sandbox, namespace, "pods", selector=selector)["items"]
    ready = [p for p in pods if p["status"].get("phase") == "Running" and is_ready(p)
             and not p["metadata"].get("deletionTimestamp")]
    return ready if len(ready) == count else None


def test_three_ready_nodes_on_the_pinned_kubernetes_release(sandbox: Sandbox) -> None:
    nodes = get(sandbox, "", "nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(NODE_NAMES)
    wanted = f"v{binaries.kube_version()}"
    for node in nodes:
        assert condition_status(node, "Ready") == "True", node["status"]
        assert node["status"]["nodeInfo"]["kubeletVersion"] == wanted
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]
    printed = sandbox.kubectl("get", "nodes", "--no-headers").stdout.splitlines()
    assert len(printed) == 3 and all(line.split()[1] == "Ready" for line in printed), printed
    version = json.loads(sandbox.kubectl("version", "-o", "json").stdout)
    assert version["clientVersion"]["gitVersion"] == wanted
    assert version["serverVersion"]["gitVersion"] == wanted


def test_the_scheduler_places_pods_and_a_node_selector_pins_one(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, busybox_pod("anywhere", "exec sleep 3600"))
    placed = wait_for_object(lambda: running_and_ready(sandbox, namespace, "anywhere"), timeout=60,
                             what="pod anywhere running")
    assert placed["spec"]["nodeName"] in NODE_NAMES
    assert sandbox.node_of(namespace, "anywhere") == placed["spec"]["nodeName"]

    def scheduled_event() -> Obj | None:
        events = get(sandbox, namespace, "events")["items"]
        return next((e for e in events if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "anywhere"),
                    None)
    event = wait_for_object(scheduled_event, timeout=30, what="Scheduled event")
    assert "default-scheduler" in (event.get("reportingComponent"), (event.get("source") or {}).get("component"))

    target = NODE_NAMES[2]
    apply(sandbox, namespace, busybox_pod("pinned", "exec sleep 3600", node=target))
    pinned = wait_for_object(lambda: running_and_ready(sandbox, namespace, "pinned"), timeout=60,
                             what=f"pod pinned running on {target}")
    assert pinned["spec"]["nodeName"] == target
    pod_range = ipaddress.ip_network(node_pod_cidr(sandbox.config.pod_ip_prefix, 2))
    assert ipaddress.ip_address(pinned["status"]["podIP"]) in pod_range


def test_pod_anti_affinity_puts_one_replica_on_each_node(sandbox: Sandbox, namespace: str) -> None:
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    apply(sandbox, namespace, deployment("spread", 3, affinity=affinity))
    pods = wait_for(lambda: ready_pods(sandbox, namespace, "app=spread", 3), timeout=90, what="3 spread pods ready")
    assert pods is not None
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(NODE_NAMES)


def test_pod_disruption_budget_counts_healthy_pods(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, deployment("guarded", 3))
    apply(sandbox, namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}},
    })
    wait_for(lambda: ready_pods(sandbox, namespace, "app=guarded", 3), timeout=90, what="3 guarded pods ready")

    def budget() -> Obj | None:
        pdb = get(sandbox, namespace, "pdb", "guarded")
        status = (pdb or {}).get("status") or {}
        return status if status.get("currentHealthy") == 3 else None
    status = wait_for_object(budget, timeout=60, what="PDB sees 3 healthy pods")
    assert status["disruptionsAllowed"] == 1 and status["desiredHealthy"] == 2


@pytest.mark.alone
def test_a_stopped_node_goes_not_ready_and_comes_back(sandbox: Sandbox, namespace: str) -> None:
    """stop_node is a power cut of one node: the real node-lifecycle controller notices the missing
    heartbeats; the other nodes' pods are untouched."""
    stopped, others = NODE_NAMES[1], [NODE_NAMES[0], NODE_NAMES[2]]
    names = {node: f"on-{node}" for node in NODE_NAMES}
    for node, name in names.items():
        apply(sandbox, namespace, busybox_pod(name, "exec sleep 3600", node=node, grace=1))
    for name in names.values():
        wait_for(lambda: running_and_ready(sandbox, namespace, name), timeout=60, what=f"{name} running")
    pids = {node: sandbox.faults.pod_pid(namespace, name, "main") for node, name in names.items()}
    assert all(pids.values()), pids

    sandbox.faults.stop_node(stopped)
    try:
        victim = pids[stopped]
        assert victim is not None and not process_alive(victim)
        wait_for(lambda: node_ready(sandbox, stopped) == "Unknown", timeout=NODE_LOST_SECONDS,
                 what=f"{stopped} Ready=Unknown through the node-lifecycle controller")
        wait_for(lambda: not is_ready(get(sandbox, namespace, "pod", names[stopped])), timeout=30,
                 what=f"{names[stopped]} marked not ready")
        taints = get(sandbox, "", "node", stopped)["spec"].get("taints") or []
        assert UNREACHABLE_TAINT in {t["key"] for t in taints}, taints
        for node in others:
            assert node_ready(sandbox, node) == "True"
            assert running_and_ready(sandbox, namespace, names[node]) is not None
            assert sandbox.faults.pod_pid(namespace, names[node], "main") == pids[node]
    finally:
        sandbox.faults.start_node(stopped)
    wait_for(lambda: node_ready(sandbox, stopped) == "True", timeout=30, what=f"{stopped} Ready again")
    back = wait_for_object(lambda: running_and_ready(sandbox, namespace, names[stopped]), timeout=60,
                           what=f"{names[stopped]} running again")
    assert container_status(back)["restartCount"] == 1
    assert back["spec"]["nodeName"] == stopped
    wait_for(lambda: UNREACHABLE_TAINT not in {t["key"] for t in get(sandbox, "", "node", stopped)["spec"]
                                               .get("taints") or []},
             timeout=30, what=f"unreachable taint removed from {stopped}")
