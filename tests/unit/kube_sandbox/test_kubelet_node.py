"""Node registration and heartbeats: labels and pod CIDR, Lease renewal, status only when due."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

import pytest

from kube_sandbox.kubelet.kube_api import Conflict, KubeApi, NotFound
from kube_sandbox.kubelet.node import LEASE_RENEW_SECONDS, NodeAgent, ready_condition_status
from kube_sandbox.kubelet.settings import KubeletSettings
from tests.unit.kube_sandbox.scripted_kube_api import ScriptedKubeApi

NODES = "/api/v1/nodes"
NODE_2 = "/api/v1/nodes/sandbox-node-2"
STATUS_2 = "/api/v1/nodes/sandbox-node-2/status"
LEASE_2 = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/sandbox-node-2"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def settings(tmp_path: Path) -> KubeletSettings:
    return KubeletSettings(
        node_names=("sandbox-node-1", "sandbox-node-2", "sandbox-node-3"), state_dir=tmp_path,
        hosts_file=tmp_path / "hosts", apiserver_port=6443, ca_cert=tmp_path / "ca.crt", venv_bin_dir=tmp_path,
        pod_ip_prefix="127.5", kubelet_port=10250, kubelet_version="v1.37.2")


def node_with_ready(status: str) -> dict[str, Any]:
    return {"metadata": {"name": "sandbox-node-2", "uid": "u2"},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": status}]}}


@pytest.fixture
def api() -> ScriptedKubeApi:
    return ScriptedKubeApi(answers={
        ("POST", NODES): lambda body: {**(body or {}), "metadata": {**(body or {})["metadata"], "uid": "u2"}},
        ("PATCH", STATUS_2): lambda body: {"metadata": {"name": "sandbox-node-2"}, **(body or {})},
    })


@pytest.fixture
def agent(api: ScriptedKubeApi, tmp_path: Path) -> NodeAgent:
    return NodeAgent(cast(KubeApi, api), settings(tmp_path), "sandbox-node-2", 1, threading.Event(),
                     threading.Event())


def test_the_node_object_carries_labels_and_its_pod_cidr(agent: NodeAgent) -> None:
    node = agent.node_object()
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "sandbox-node-2"
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["topology.kubernetes.io/zone"] == "sandbox-2"
    assert node["spec"] == {"podCIDR": "127.5.64.0/18", "podCIDRs": ["127.5.64.0/18"]}


def test_the_status_lets_the_scheduler_place_pods(agent: NodeAgent) -> None:
    status = agent.node_status()
    assert status["allocatable"]["pods"] and status["allocatable"]["cpu"] and status["allocatable"]["memory"]
    assert ready_condition_status({"status": status}) == "True"
    assert {"type": "InternalIP", "address": "127.0.0.1"} in status["addresses"]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    assert status["nodeInfo"]["kubeletVersion"] == "v1.37.2"


def test_first_beat_registers_reports_status_and_creates_the_lease(agent: NodeAgent, api: ScriptedKubeApi) -> None:
    api.answers[("PATCH", LEASE_2)] = NotFound(404, "NotFound", "no lease")
    assert agent.beat() == LEASE_RENEW_SECONDS
    assert [(c.method, c.path) for c in api.calls] == [
        ("POST", NODES), ("PATCH", STATUS_2), ("PATCH", LEASE_2), ("POST", LEASES)]
    lease = api.calls[-1].body or {}
    assert lease["spec"]["holderIdentity"] == "sandbox-node-2"
    assert lease["metadata"]["ownerReferences"][0]["uid"] == "u2"
    assert agent.registered.is_set()


def test_an_existing_node_is_taken_over_without_touching_its_spec(agent: NodeAgent, api: ScriptedKubeApi) -> None:
    api.answers[("POST", NODES)] = Conflict(409, "AlreadyExists", "exists")
    api.answers[("PATCH", NODE_2)] = {"metadata": {"name": "sandbox-node-2", "uid": "u2"}}
    agent.beat()
    takeover = api.calls_to("PATCH", NODE_2)[0].body or {}
    assert set(takeover) == {"metadata"}


def test_later_beats_only_renew_the_lease(agent: NodeAgent, api: ScriptedKubeApi) -> None:
    agent.beat()
    api.calls.clear()
    for _ in range(5):
        agent.beat()
    assert {(c.method, c.path) for c in api.calls} == {("PATCH", LEASE_2)}
    assert all(c.content_type == "application/merge-patch+json" for c in api.calls)


def test_status_is_sent_again_when_the_api_shows_the_node_not_ready(agent: NodeAgent, api: ScriptedKubeApi) -> None:
    agent.beat()
    agent.observe(node_with_ready("True"))
    api.calls.clear()
    agent.beat()
    assert not api.calls_to("PATCH", STATUS_2)
    agent.observe(node_with_ready("Unknown"))  # what the node-lifecycle controller writes
    agent.beat()
    assert len(api.calls_to("PATCH", STATUS_2)) == 1
    api.calls.clear()
    agent.beat()
    assert not api.calls_to("PATCH", STATUS_2)


def test_a_deleted_node_registers_again(agent: NodeAgent, api: ScriptedKubeApi) -> None:
    agent.beat()
    agent.observe(None)
    api.calls.clear()
    agent.beat()
    assert api.calls_to("POST", NODES)


def test_a_stopped_node_sends_nothing(agent: NodeAgent, api: ScriptedKubeApi) -> None:
    agent.beat()
    api.calls.clear()
    agent.down.set()
    agent.observe(node_with_ready("Unknown"))
    for _ in range(3):
        agent.beat()
    assert api.calls == []
    agent.down.clear()
    agent.beat()
    assert api.calls_to("PATCH", STATUS_2) and api.calls_to("PATCH", LEASE_2)
