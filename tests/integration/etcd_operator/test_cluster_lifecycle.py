"""A cluster's life: bootstrap to Running, scale 3->5->3 without losing data, delete."""
from __future__ import annotations

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import DEFAULT_VERSION, Clusters, etcd_cluster


def test_three_member_cluster_runs_scales_and_keeps_data(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("demo", size=3))
    status = clusters.wait_running("demo", ready=3, timeout=180)

    assert status["currentVersion"] == DEFAULT_VERSION
    assert status["serviceName"] == "demo-client" and status["clientPort"] == 2379
    assert status["leader"] in status["members"]["ready"]
    assert status["observedGeneration"] == clusters.get("demo")["metadata"]["generation"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Available"] == "True" and conditions["Degraded"] == "False"
    services = {s.metadata.name: s for s in clusters.core.list_namespaced_service(clusters.namespace).items}
    assert services["demo"].spec.cluster_ip == "None"
    assert {p.port for p in services["demo"].spec.ports} == {2379, 2380}
    assert {p.port for p in services["demo-client"].spec.ports} == {2379}
    members = clusters.member_list("demo")
    assert len(members) == 3 and not any(m.get("isLearner") for m in members)
    reasons = [e.reason for e in clusters.events("demo")]
    assert "SeedMemberCreated" in reasons and reasons.count("MemberAdded") >= 2

    printed = clusters.sandbox.kubectl("-n", clusters.namespace, "get", "etcd", "demo").stdout
    header, row = printed.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "SIZE", "READY", "VERSION", "PHASE"], header
    assert row.split()[:5] == ["demo", "3", "3", DEFAULT_VERSION, "Running"], row

    for i in range(20):
        clusters.put("demo", f"key-{i}", f"value-{i}")

    clusters.patch_spec("demo", {"size": 5})
    clusters.wait_running("demo", ready=5, timeout=240)
    assert len(clusters.member_list("demo")) == 5
    clusters.patch_spec("demo", {"size": 3})
    clusters.wait_running("demo", ready=3, timeout=180)
    wait_for(lambda: len(clusters.live_pods("demo")) == 3, timeout=60, what="surplus pods deleted")
    assert len(clusters.member_list("demo")) == 3
    assert [clusters.get_value("demo", f"key-{i}") for i in range(20)] == [f"value-{i}" for i in range(20)]


def test_deleting_the_cluster_removes_its_pods_and_services(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("doomed", size=1))
    clusters.wait_running("doomed", ready=1)
    assert clusters.live_pods("doomed")
    clusters.delete("doomed")

    def nothing_left() -> bool:
        services = [s for s in clusters.core.list_namespaced_service(clusters.namespace).items
                    if s.metadata.name.startswith("doomed")]
        return not clusters.pods("doomed") and not services
    wait_for(nothing_left, timeout=90, what="pods and services garbage-collected")
