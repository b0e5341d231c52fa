"""A real Prometheus, configured with the shipped scrape config, discovery RBAC and alert rules
(deploy/prometheus/), finds the operator's pod through the API server, scrapes it, and pages
EtcdClusterQuorumLost when a quorum of a cluster's members is frozen; the alert resolves once they
are back."""
from __future__ import annotations

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.monitoring.prometheus_server import Prometheus

ETCD_CONTAINER = "etcd"
JOB = "etcd-operator"
# The rule waits `for: 1m`; discovery, scrapes and evaluation add a few seconds.
FIRE_TIMEOUT = 150
RESOLVE_TIMEOUT = 120


def test_quorum_lost_alert_fires_and_resolves(clusters: Clusters, prometheus: Prometheus) -> None:
    name = "paged"
    clusters.create(etcd_cluster(name, size=3))
    status = clusters.wait_running(name, ready=3, timeout=240)

    # Discovered through the API server with the ServiceAccount's token, and scraped.
    up = wait_for(lambda: [t for t in prometheus.targets(JOB) if t["health"] == "up"] or None,
                  timeout=60, what=f"an `up` target of job {JOB}")
    assert {t["labels"]["kubernetes_namespace"] for t in up} == {"etcd-operator"}
    labels = {"namespace": clusters.namespace, "cluster": name}
    wait_for(lambda: prometheus.query_api("/api/v1/query", query=f'etcd_operator_cluster_quorum{{cluster="{name}",'
                                          f'namespace="{clusters.namespace}"}} == 1')["result"] or None,
             timeout=60, what="the cluster's quorum gauge scraped as 1")
    assert not prometheus.alerts("EtcdClusterQuorumLost", **labels)
    # Evaluated before the first scrape, EtcdOperatorDown may be pending for a moment; once the
    # operator is scraped neither operator alert is active (and neither ever fires).
    wait_for(lambda: not prometheus.alerts("EtcdOperatorDown") and not prometheus.alerts("EtcdOperatorNoLeader"),
             timeout=30, what="no operator alert once the operator is scraped")

    frozen = sorted(m for m in (p.metadata.name for p in clusters.live_pods(name)) if m != status["leader"])
    try:
        for pod in frozen:
            clusters.sandbox.faults.freeze_container(clusters.namespace, pod, ETCD_CONTAINER)
        pending = wait_for(lambda: prometheus.alerts("EtcdClusterQuorumLost", **labels) or None,
                           timeout=60, what="EtcdClusterQuorumLost pending")
        assert pending[0]["state"] == "pending", pending  # `for: 1m`: not paged at once
        firing = wait_for(lambda: [a for a in prometheus.alerts("EtcdClusterQuorumLost", **labels)
                                   if a["state"] == "firing"] or None,
                          timeout=FIRE_TIMEOUT, what="EtcdClusterQuorumLost firing")
        assert firing[0]["labels"]["severity"] == "critical"
        assert f"{clusters.namespace}/{name}" in firing[0]["annotations"]["summary"]
    finally:
        for pod in frozen:
            clusters.sandbox.faults.thaw_container(clusters.namespace, pod, ETCD_CONTAINER)

    clusters.wait_running(name, ready=3, timeout=120)
    wait_for(lambda: not prometheus.alerts("EtcdClusterQuorumLost", **labels), timeout=RESOLVE_TIMEOUT,
             what="EtcdClusterQuorumLost resolved")
    assert not prometheus.alerts("EtcdOperatorDown") and not prometheus.alerts("EtcdOperatorNoLeader")
