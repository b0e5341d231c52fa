"""The process kubelet's nodes: each has its own address range; pods run only where they are bound."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from kube_sandbox.kubelet import KubeletSettings, ProcessKubelet
from kube_sandbox.kubelet.kubelet import UnknownNode

NAMES = ("sandbox-node-1", "sandbox-node-2", "sandbox-node-3")


@pytest.fixture
def kubelet(tmp_path: Path) -> ProcessKubelet:
    settings = KubeletSettings(node_names=NAMES, state_dir=tmp_path, hosts_file=tmp_path / "hosts",
                               apiserver_port=6443, ca_cert=tmp_path / "ca.crt", venv_bin_dir=tmp_path,
                               pod_ip_prefix="127.5")
    return ProcessKubelet(k8s.ApiClient(), settings)  # not started: no thread, no connection


def pod(node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": "p", "namespace": "ns", "uid": f"uid-{node}"}, "spec": spec}


def test_every_node_has_its_own_pod_addresses(kubelet: ProcessKubelet) -> None:
    assert list(kubelet.nodes) == list(NAMES)
    first = [node.services.ipam.allocate("x") for node in kubelet.nodes.values()]
    assert first == ["127.5.1.1", "127.5.64.1", "127.5.128.1"]


@pytest.mark.parametrize("node", [None, "", "some-other-node"])
def test_pods_not_bound_to_our_nodes_are_left_alone(kubelet: ProcessKubelet, node: str | None) -> None:
    kubelet._on_pod_event("ADDED", pod(node))
    assert kubelet._workers == {}
    assert kubelet._pods  # still known, for DNS


def test_node_faults_name_a_node_of_this_kubelet(kubelet: ProcessKubelet) -> None:
    with pytest.raises(UnknownNode, match="sandbox-node-4"):
        kubelet.stop_node("sandbox-node-4")
    kubelet.stop_node("sandbox-node-2")
    assert kubelet.node_is_down("sandbox-node-2") and not kubelet.node_is_down("sandbox-node-1")
    kubelet.start_node("sandbox-node-2")
    assert not kubelet.node_is_down("sandbox-node-2")
