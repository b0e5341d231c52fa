"""Names and ownership: an EtcdCluster never takes over, loops on, or deletes objects that are not
its own. A Service with one of its names that it does not own, or a second cluster whose service
names collide with it, fails the cluster with a reason and one Warning event; member pods and
PVCs it does not own (owner reference UID) are never cleaned up as orphans."""
from __future__ import annotations

from typing import Any

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster


def _plain_service(name: str) -> dict[str, Any]:
    """A Service an application made, with no owner and a selector of its own."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": "someone-else"}, "ports": [{"port": 80, "targetPort": 8080}]}}


def _events(clusters: Clusters, name: str, reason: str) -> list[Any]:
    return [e for e in clusters.events(name) if e.reason == reason]


def test_service_not_ours_fails_the_cluster_once_and_recovers_when_removed(clusters: Clusters) -> None:
    clusters.core.create_namespaced_service(clusters.namespace, _plain_service("collide-client"))
    clusters.create(etcd_cluster("collide", size=1))
    # A healthy neighbour created at the same time gives the operator time to loop, if it would.
    clusters.create(etcd_cluster("calm", size=1))
    status = clusters.wait_status("collide", lambda s: s.get("phase") == "Failed", "phase Failed", timeout=60)
    assert status.get("reason") == "ServiceNameTaken", status
    assert "collide-client" in status["message"], status["message"]
    clusters.wait_running("calm", ready=1, timeout=120)
    warnings = _events(clusters, "collide", "ServiceNameTaken")
    assert len(warnings) == 1 and warnings[0].type == "Warning" and (warnings[0].count or 1) == 1, [
        (e.reason, e.count, e.message) for e in clusters.events("collide")]
    # Nothing of ours was made next to it, and the foreign Service is untouched.
    assert clusters.pods("collide") == []
    foreign = clusters.core.read_namespaced_service("collide-client", clusters.namespace)
    assert foreign.spec.selector == {"app": "someone-else"} and not foreign.metadata.owner_references
    assert not _events(clusters, "collide", "ServicesCreated") or all(
        "collide-client" not in e.message for e in _events(clusters, "collide", "ServicesCreated"))

    clusters.core.delete_namespaced_service("collide-client", clusters.namespace)
    status = clusters.wait_running("collide", ready=1, timeout=120)
    service = clusters.core.read_namespaced_service("collide-client", clusters.namespace)
    assert [ref.uid for ref in service.metadata.owner_references] == [clusters.get("collide")["metadata"]["uid"]]


def test_colliding_cluster_names_refuse_the_newer_cluster(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("x", size=1))
    clusters.wait_running("x", ready=1, timeout=120)
    clusters.put("x", "owner", "x")
    x_pods = sorted(p.metadata.uid for p in clusters.live_pods("x"))

    # `x-client` would need a peer service named `x-client`: x's client service.
    clusters.create(etcd_cluster("x-client", size=1))
    status = clusters.wait_status("x-client", lambda s: s.get("phase") == "Failed", "phase Failed", timeout=60)
    assert status.get("reason") == "NameConflict", status
    assert "x" in status["message"], status["message"]
    event = wait_for(lambda: next(iter(_events(clusters, "x-client", "NameConflict")), None),
                     timeout=30, what="a NameConflict event")
    assert event.type == "Warning", event
    assert clusters.pods("x-client") == []
    # x keeps its members and its clients keep reaching x.
    service = clusters.core.read_namespaced_service("x-client", clusters.namespace)
    # (selecting serving members only: a member is drained before it goes, see test_drain.py)
    assert service.spec.selector == {"app": "etcd", "etcd_cluster": "x", "etcd.database.coreos.com/serving": "true"}, \
        service.spec.selector
    assert clusters.wait_running("x", ready=1, timeout=10)
    assert sorted(p.metadata.uid for p in clusters.live_pods("x")) == x_pods
    assert clusters.get_value("x", "owner") == "x"
    assert len(_events(clusters, "x-client", "NameConflict")) == 1


def test_member_pods_and_claims_not_owned_are_never_cleaned_up(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("own", size=1))
    clusters.wait_running("own", ready=1, timeout=120)
    labels = {"app": "etcd", "etcd_cluster": "own", "etcd_node": "own-intruder"}
    intruder = clusters.core.create_namespaced_pod(clusters.namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "own-intruder", "labels": labels},
        "spec": {"containers": [{"name": "etcd", "image": "registry.invalid/not-etcd:1"}],
                 "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                     "seccompProfile": {"type": "RuntimeDefault"}}},
    })
    claim = clusters.core.create_namespaced_persistent_volume_claim(clusters.namespace, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "own-intruder", "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
    })
    # A resize takes longer than the orphan grace period: the operator has had every chance.
    clusters.patch_spec("own", {"size": 2})
    clusters.wait_running("own", ready=2, timeout=180)
    wait_for(lambda: len(clusters.member_list("own")) == 2, timeout=30, what="two etcd members")
    pod = clusters.core.read_namespaced_pod("own-intruder", clusters.namespace)
    assert pod.metadata.uid == intruder.metadata.uid and pod.metadata.deletion_timestamp is None
    pvc = clusters.core.read_namespaced_persistent_volume_claim("own-intruder", clusters.namespace)
    assert pvc.metadata.uid == claim.metadata.uid and pvc.metadata.deletion_timestamp is None
    status = clusters.status("own")
    assert "own-intruder" not in str(status.get("members")), status
    deleted = [e for e in clusters.events("own") if e.reason in ("PodDeleted", "PVCDeleted")]
    assert not deleted, [(e.reason, e.message) for e in deleted]

