"""Every cluster has a policy/v1 PodDisruptionBudget, owned by its EtcdCluster, that never lets a
voluntary disruption (a drain, an eviction) take away quorum; it follows resizes."""
from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster


def _budget(clusters: Clusters, name: str) -> Any:
    try:
        return k8s.PolicyV1Api(clusters.sandbox.api_client()).read_namespaced_pod_disruption_budget(name, clusters.namespace)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def _evict(clusters: Clusters, pod: str) -> None:
    clusters.core.create_namespaced_pod_eviction(pod, clusters.namespace, k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=pod, namespace=clusters.namespace)))


def test_disruption_budget_keeps_quorum_and_follows_resizes(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("pdb", size=3))
    clusters.wait_running("pdb", ready=3, timeout=180)
    uid = clusters.get("pdb")["metadata"]["uid"]
    budget = wait_for(lambda: _budget(clusters, "pdb"), timeout=60, what="PodDisruptionBudget pdb")
    assert budget.spec.min_available == 2 and budget.spec.max_unavailable is None, budget.spec
    assert budget.spec.selector.match_labels == {"app": "etcd", "etcd_cluster": "pdb"}
    assert [(ref.kind, ref.uid, ref.controller) for ref in budget.metadata.owner_references] == [("EtcdCluster", uid, True)]
    wait_for(lambda: (b := _budget(clusters, "pdb")) is not None and b.status is not None
             and b.status.current_healthy == 3 and b.status.disruptions_allowed == 1,
             timeout=60, what="the disruption controller to allow one disruption")

    first, second = sorted(p.metadata.name for p in clusters.live_pods("pdb"))[:2]
    _evict(clusters, first)  # one member may go: two of three keep quorum
    with pytest.raises(ApiException) as refused:
        _evict(clusters, second)
    assert refused.value.status == 429, refused.value
    assert second in {p.metadata.name for p in clusters.live_pods("pdb")}

    clusters.wait_running("pdb", ready=3, timeout=180)  # the evicted member was replaced
    clusters.patch_spec("pdb", {"size": 5})
    wait_for(lambda: _budget(clusters, "pdb").spec.min_available == 3, timeout=60, what="minAvailable 3 for size 5")
    clusters.wait_running("pdb", ready=5, timeout=300)
    clusters.patch_spec("pdb", {"size": 1})
    clusters.wait_running("pdb", ready=1, timeout=300)
    wait_for(lambda: _budget(clusters, "pdb").spec.min_available == 1, timeout=60, what="minAvailable 1 for size 1")
