"""EtcdRestore of a TLS cluster (its TLS secrets kept), and a restore operator killed mid-restore."""
from __future__ import annotations

from pathlib import Path

import pytest

from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import DEFAULT_VERSION, Clusters, etcd_cluster
from tests.integration.etcd_operator.tls_certs import IssuedClient, coreos_static_tls, etcdctl, secret_files
from tests.integration.restore_operator.conftest import Restores
from tests.integration.restore_operator.restore_deployment import DEPLOYMENT, NAMESPACE, POD_SELECTOR
from tests.integration.restore_operator.restore_steps import RESTORE_TIMEOUT, coreos_restore_cr, keys_of
from tests.integration.restore_operator.snapshots import BUCKET, create_aws_secret, snapshot_to_s3, unique_key

pytestmark = pytest.mark.sandbox


def test_tls_cluster_restores_with_its_tls_secrets(clusters: Clusters, restores: Restores, tmp_path: Path) -> None:
    name = "secure"
    ns = clusters.namespace
    tls = coreos_static_tls(tmp_path / "pki", name, ns)
    for secret in tls.secrets():
        clusters.core.create_namespaced_secret(ns, secret)
    clusters.create(etcd_cluster(name, 3, TLS=tls.spec()))
    clusters.wait_running(name, 3, timeout=240)
    client_url = f"https://{name}-client.{ns}.svc:2379"

    flags = tls.client_flags()
    etcdctl(clusters, [client_url], flags, "put", "secret/a", "1")
    etcdctl(clusters, [client_url], flags, "put", "secret/b", "2")
    member = f"https://{clusters.live_pods(name)[0].metadata.name}.{name}.{ns}.svc:2379"
    key = unique_key("tls")
    snapshot_to_s3(clusters, name, key, member=member, flags=tls.client_flags())
    etcdctl(clusters, [client_url], flags, "put", "secret/c", "after backup")
    old_uid = clusters.get(name)["metadata"]["uid"]

    aws = create_aws_secret(clusters.sandbox, ns)
    restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", aws, clusters.sandbox.config.s3_endpoint))
    restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)

    restored = clusters.get(name)
    assert restored["metadata"]["uid"] != old_uid
    assert restored["spec"]["TLS"] == tls.spec()
    lines = etcdctl(clusters, [client_url], flags, "get", "secret/", "--prefix").splitlines()
    assert dict(zip(lines[0::2], lines[1::2])) == {"secret/a": "1", "secret/b": "2"}
    # Plain http is refused: the restored members serve TLS only.
    plain = clusters.sandbox.etcdctl([f"http://{name}-client.{ns}.svc:2379"], "get", "secret/a")
    assert plain.returncode != 0


def test_issued_tls_cluster_upgrades_and_restores_over_tls(clusters: Clusters, restores: Restores,
                                                            tmp_path: Path) -> None:
    """spec.TLS.issued end to end: a 3.5 cluster on the operator's certificates upgrades to 3.6,
    is snapshotted with the operator's client certificate and restored; the restored cluster
    keeps the CA (its clients keep working) and serves the backed-up keys over TLS only."""
    name = "issuedrestore"
    ns = clusters.namespace
    clusters.create(etcd_cluster(name, 3, version=newest_etcd_version("3.5"), TLS={"issued": {}}))
    clusters.wait_running(name, 3, timeout=240)
    client_url = f"https://{name}-client.{ns}.svc:2379"

    before = IssuedClient(clusters, name, tmp_path / "before")
    ca_before = secret_files(clusters, f"{name}-tls-ca")["ca.crt"]
    etcdctl(clusters, [client_url], before.flags(), "put", "issued/a", "1")
    clusters.patch_spec(name, {"version": DEFAULT_VERSION})
    clusters.wait_status(name, lambda s: s.get("phase") == "Running" and s.get("readyCount") == 3
                         and s.get("currentVersion") == DEFAULT_VERSION, f"upgraded to {DEFAULT_VERSION}",
                         timeout=300)
    etcdctl(clusters, [client_url], before.flags(), "put", "issued/b", "2")
    member = f"https://{clusters.live_pods(name)[0].metadata.name}.{name}.{ns}.svc:2379"
    key = unique_key("issued")
    snapshot_to_s3(clusters, name, key, member=member, flags=before.flags())
    etcdctl(clusters, [client_url], before.flags(), "put", "issued/c", "after backup")

    aws = create_aws_secret(clusters.sandbox, ns)
    restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", aws, clusters.sandbox.config.s3_endpoint))
    restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)

    restored = clusters.get(name)
    assert restored["spec"]["TLS"] == {"issued": {}}
    # The CA was kept: a client configured before the restore (the CA, a certificate it signed)
    # reads the restored cluster; and the CA Secret belongs to the restored cluster now.
    lines = etcdctl(clusters, [client_url], before.flags(), "get", "issued/", "--prefix").splitlines()
    assert dict(zip(lines[0::2], lines[1::2])) == {"issued/a": "1", "issued/b": "2"}
    assert secret_files(clusters, f"{name}-tls-ca")["ca.crt"] == ca_before
    owners = clusters.core.read_namespaced_secret(f"{name}-tls-ca", ns).metadata.owner_references or []
    assert [o.uid for o in owners] == [restored["metadata"]["uid"]], owners
    events = restores.events_once_recorded(name, {"ReplacingCluster"})
    assert any(f"its CA Secret {name}-tls-ca is kept" in str(e.message) for e in events), events
    plain = clusters.sandbox.etcdctl([f"http://{name}-client.{ns}.svc:2379"], "get", "issued/a")
    assert plain.returncode != 0, "the restored members serve TLS only"


@pytest.mark.alone
def test_restore_operator_killed_mid_restore_restores_once(clusters: Clusters, restores: Restores) -> None:
    name = "interrupted"
    clusters.create(etcd_cluster(name, 3))
    clusters.wait_running(name, 3, timeout=180)
    for index in range(3):
        clusters.put(name, f"k{index}", f"v{index}")
    key = unique_key("interrupted")
    snapshot_to_s3(clusters, name, key)
    clusters.put(name, "late", "not in the backup")
    aws = create_aws_secret(clusters.sandbox, clusters.namespace)

    restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", aws, clusters.sandbox.config.s3_endpoint))
    # Kill it once it created the restored cluster, while the cluster is being seeded and grown.
    wait_for(lambda: restores.status(name).get("phase") == "Restoring", timeout=120,
             what="restored cluster created", interval=0.1)
    created_uid = clusters.get(name)["metadata"]["uid"]
    assert clusters.status(name).get("readyCount", 0) < 3, "too late: the restore had finished its work"
    clusters.sandbox.kubectl("-n", NAMESPACE, "delete", "pod", "-l", POD_SELECTOR, "--grace-period=0", "--force")
    clusters.sandbox.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=120s")

    status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)

    assert keys_of(clusters, name) == {"k0": "v0", "k1": "v1", "k2": "v2"}
    # One restore: the cluster created before the kill is the one serving (never replaced again).
    cluster = clusters.get(name)
    assert cluster["metadata"]["uid"] == created_uid
    assert status["restoredCluster"] == {"name": name, "uid": created_uid}
    events = restores.events_once_recorded(name, {"ReplacingCluster", "ClusterCreated", "RestoreSucceeded"})
    assert sum(e.count or 1 for e in events if e.reason == "ReplacingCluster") == 1
    assert sum(e.count or 1 for e in events if e.reason == "ClusterCreated") == 1
    assert sum(e.count or 1 for e in events if e.reason == "RestoreSucceeded") == 1


@pytest.mark.alone
def test_restore_operator_killed_while_replacing_recreates_the_recorded_spec(
        clusters: Clusters, restores: Restores) -> None:
    """Killed after the old cluster's delete and before the new one's create: the restarted operator
    recreates the cluster from the spec recorded in status (size 1 here, where the default is 3)."""
    name = "held"
    clusters.create(etcd_cluster(name, 1))
    clusters.wait_running(name, 1)
    clusters.put(name, "kept", "yes")
    key = unique_key("held")
    snapshot_to_s3(clusters, name, key)
    clusters.put(name, "late", "not in the backup")
    # A finalizer of the test's holds the old cluster in deletion, so the kill lands in Replacing.
    hold = "restore-test.example/hold"
    clusters.custom.patch_namespaced_custom_object(
        "etcd.database.coreos.com", "v1beta2", clusters.namespace, "etcdclusters", name,
        {"metadata": {"finalizers": [hold]}})
    aws = create_aws_secret(clusters.sandbox, clusters.namespace)
    restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", aws, clusters.sandbox.config.s3_endpoint))
    wait_for(lambda: clusters.get(name)["metadata"].get("deletionTimestamp"), timeout=120,
             what="old cluster being deleted")
    assert restores.status(name).get("phase") == "Replacing"
    assert restores.status(name).get("clusterSpec", {}).get("size") == 1

    clusters.sandbox.kubectl("-n", NAMESPACE, "delete", "pod", "-l", POD_SELECTOR, "--grace-period=0", "--force")
    clusters.custom.patch_namespaced_custom_object(
        "etcd.database.coreos.com", "v1beta2", clusters.namespace, "etcdclusters", name,
        {"metadata": {"finalizers": None}})
    clusters.sandbox.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=120s")
    status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)

    restored = clusters.get(name)
    assert restored["spec"]["size"] == 1 and clusters.status(name)["readyCount"] == 1
    assert keys_of(clusters, name) == {"kept": "yes"}
    assert status["restoredCluster"]["uid"] == restored["metadata"]["uid"]
    events = restores.events_once_recorded(name, {"ClusterCreated", "RestoreSucceeded"})
    assert sum(e.count or 1 for e in events if e.reason == "ClusterCreated") == 1
