"""Hosts-file DNS: records for pods and services, and in-place rewriting."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kube_sandbox.kubelet.dns import MARKER, HostsFile, pod_record, render_hosts, service_record, write_in_place


def pod(name: str, ip: str, *, ready: bool = True, labels: dict[str, str] | None = None, phase: str = "Running",
        hostname: str = "", subdomain: str = "", namespace: str = "ns", deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {"app": "etcd"}}
    if deleting:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {
        "metadata": metadata,
        "spec": {"hostname": hostname, "subdomain": subdomain},
        "status": {"phase": phase, "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def service(name: str, *, headless: bool = False, publish: bool = False, selector: dict[str, str] | None = None,
            namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": "None" if headless else "127.96.0.10", "publishNotReadyAddresses": publish,
                     "selector": selector if selector is not None else {"app": "etcd"}}}


def names_for(content: str, ip: str) -> set[str]:
    generated = content.split(MARKER, 1)[1]
    return {n for line in generated.splitlines() if line.startswith(ip + "\t") for n in line.split()[1:]}


def render(pods: list[dict[str, Any]], services: list[dict[str, Any]], current: str = "") -> str:
    pod_records = [record for p in pods if (record := pod_record(p))]
    service_records = [svc for s in services if (svc := service_record(s))]
    return render_hosts(current, pod_records, service_records, "cluster.local")


def test_pod_names_by_hostname_subdomain_and_dashed_ip() -> None:
    content = render([pod("etcd-0", "127.1.0.1", hostname="etcd-0", subdomain="etcd")], [])
    assert names_for(content, "127.1.0.1") == {
        "etcd-0.etcd.ns.svc", "etcd-0.etcd.ns.svc.cluster.local", "127-1-0-1.ns.pod", "127-1-0-1.ns.pod.cluster.local"}
    assert "localhost" in content.split(MARKER)[0]


def test_normal_services_list_only_ready_pods() -> None:
    pods = [pod("a", "127.1.0.1"), pod("b", "127.1.0.2", ready=False), pod("c", "127.1.0.3", labels={"app": "x"}),
            pod("d", "127.1.0.4", namespace="other")]
    content = render(pods, [service("client")])
    assert "client.ns.svc" in names_for(content, "127.1.0.1")
    assert "client.ns.svc.cluster.local" in names_for(content, "127.1.0.1")
    for ip in ("127.1.0.2", "127.1.0.3", "127.1.0.4"):
        assert "client.ns.svc" not in names_for(content, ip)


def test_headless_and_publish_not_ready_services_list_unready_pods() -> None:
    pods = [pod("a", "127.1.0.1", ready=False), pod("b", "127.1.0.2", ready=False, deleting=True)]
    content = render(pods, [service("peers", headless=True), service("all", publish=True)])
    assert {"peers.ns.svc", "all.ns.svc"} <= names_for(content, "127.1.0.1")
    assert "peers.ns.svc" not in names_for(content, "127.1.0.2")  # terminating
    assert "all.ns.svc" in names_for(content, "127.1.0.2")


def test_finished_pods_and_selectorless_services_have_no_records() -> None:
    content = render([pod("done", "127.1.0.1", phase="Succeeded")], [service("manual", selector={})])
    assert content.split(MARKER, 1)[1].strip() == ""


def test_static_part_is_kept_and_regenerated_part_replaced() -> None:
    first = render([pod("a", "127.1.0.1")], [], current="10.9.9.9\tbuildhost\n")
    second = render([pod("b", "127.1.0.2")], [], current=first)
    assert second.startswith("127.0.0.1\tlocalhost") and "10.9.9.9\tbuildhost" in second
    assert "127.1.0.1" not in second and "127.1.0.2" in second
    assert second.count(MARKER) == 1


def test_hosts_file_is_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("127.0.0.1\tlocalhost\n" + "x" * 5000)
    inode = os.stat(path).st_ino
    hosts = HostsFile(path, "cluster.local")
    assert hosts.update([pod("a", "127.1.0.1")], [])
    assert not hosts.update([pod("a", "127.1.0.1")], [])  # unchanged content is not rewritten
    assert os.stat(path).st_ino == inode
    assert "127-1-0-1.ns.pod" in path.read_text()
    assert not write_in_place(path, path.read_text())
