"""Deleting an EtcdCluster leaves it to the garbage collector: with foreground propagation the
cluster object stays (with a deletionTimestamp) while its pods and services go, and the operator
must neither recreate them nor report the members as lost."""
from __future__ import annotations

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import GROUP, PLURAL, VERSION, Clusters, etcd_cluster


def _gone(clusters: Clusters, name: str) -> bool:
    try:
        clusters.get(name)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


@pytest.mark.parametrize("propagation", ["Foreground", "Background"])
def test_deleted_cluster_is_left_to_the_garbage_collector(clusters: Clusters, propagation: str) -> None:
    name = f"gone-{propagation.lower()}"
    clusters.create(etcd_cluster(name, size=2))
    clusters.wait_running(name, ready=2, timeout=180)
    before = {(e.reason, e.count) for e in clusters.events(name)}
    assert any(reason == "ServicesCreated" for reason, _ in before), before

    k8s.CustomObjectsApi(clusters.sandbox.api_client()).delete_namespaced_custom_object(
        GROUP, VERSION, clusters.namespace, PLURAL, name, body={"propagationPolicy": propagation})
    wait_for(lambda: _gone(clusters, name), timeout=120, what=f"{name} deleted")
    wait_for(lambda: not clusters.pods(name), timeout=120, what=f"{name}'s pods gone")
    selector = f"app=etcd,etcd_cluster={name}"
    wait_for(lambda: not clusters.core.list_namespaced_service(clusters.namespace, label_selector=selector).items,
             timeout=60, what=f"{name}'s services gone")

    events = clusters.events(name)
    lost = [(e.reason, e.message) for e in events if e.reason in ("MembersLost", "QuorumLost")]
    assert not lost, lost
    recreated = [(e.reason, e.count, e.message) for e in events
                 if e.reason in ("ServicesCreated", "SeedMemberCreated", "MemberAdded", "MemberPodCreated",
                                 "MemberRemoved") and (e.reason, e.count) not in before]
    assert not recreated, recreated
