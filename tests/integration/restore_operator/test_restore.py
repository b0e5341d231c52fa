"""EtcdRestore end to end: real etcd made by the etcd operator, real S3 (SeaweedFS), both
operators deployed as pods from this checkout."""
from __future__ import annotations

import pytest

from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.conftest import Restores
from tests.integration.restore_operator.restore_steps import EXAMPLE_CLUSTER, RESTORE_TIMEOUT, coreos_restore_cr, keys_of
from tests.integration.restore_operator.snapshots import (
    BUCKET,
    create_aws_secret,
    ensure_bucket,
    put_object,
    snapshot_to_s3,
    unique_key,
)

pytestmark = pytest.mark.sandbox


def test_restore_replaces_a_cluster_with_the_backups_keys(clusters: Clusters, restores: Restores) -> None:
    name = EXAMPLE_CLUSTER
    clusters.create(etcd_cluster(name, 3))
    clusters.wait_running(name, 3, timeout=180)
    for index in range(5):
        clusters.put(name, f"backed-up/{index}", f"value-{index}")
    key = unique_key("lost")
    snapshot_to_s3(clusters, name, key)
    clusters.put(name, "after-backup", "must-not-come-back")
    old_uid = clusters.get(name)["metadata"]["uid"]
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)

    restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", secret))
    status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)

    assert status["succeeded"] is True
    assert status["snapshot"]["revision"] >= 5 and len(status["snapshot"]["sha256"]) == 64
    assert status["servedRevision"] >= status["snapshot"]["revision"]
    restored = clusters.get(name)
    assert restored["metadata"]["uid"] != old_uid
    assert restored["status"]["phase"] == "Running" and restored["status"]["readyCount"] == 3
    assert keys_of(clusters, name) == {f"backed-up/{i}": f"value-{i}" for i in range(5)}
    restores.events_once_recorded(name, {"SnapshotVerified", "ReplacingCluster", "ClusterCreated", "RestoreSucceeded"})


def test_restore_into_a_new_name(clusters: Clusters, restores: Restores) -> None:
    source = "source"
    clusters.create(etcd_cluster(source, 1))
    clusters.wait_running(source, 1, timeout=120)
    clusters.put(source, "greeting", "hello")
    key = unique_key("new-name")
    snapshot_to_s3(clusters, source, key)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    body = coreos_restore_cr("copy", f"{BUCKET}/{key}", secret)
    body["spec"]["clusterSpec"] = {"size": 2}

    restores.create(body)
    restores.wait_phase("copy", "Completed", timeout=RESTORE_TIMEOUT)

    assert clusters.status("copy")["readyCount"] == 2
    assert clusters.get_value("copy", "greeting") == "hello"
    assert clusters.get_value(source, "greeting") == "hello"


@pytest.mark.parametrize("problem", ["garbage", "truncated", "missing", "wrong-credentials"])
def test_bad_snapshot_fails_and_leaves_the_cluster_serving(clusters: Clusters, restores: Restores,
                                                           problem: str) -> None:
    name = "kept"
    clusters.create(etcd_cluster(name, 1))
    clusters.wait_running(name, 1, timeout=120)
    clusters.put(name, "still", "here")
    uid = clusters.get(name)["metadata"]["uid"]
    key = unique_key(problem)
    # The bucket exists in every case ("missing" is the object, not the bucket), whichever test ran first.
    ensure_bucket(clusters.sandbox)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    if problem == "garbage":
        put_object(clusters.sandbox, key, b"this is not an etcd snapshot\n" * 1000)
    elif problem == "truncated":
        content = snapshot_to_s3(clusters, name, key)
        put_object(clusters.sandbox, key, content[: len(content) // 2])
    elif problem == "wrong-credentials":
        snapshot_to_s3(clusters, name, key)
        secret = create_aws_secret(clusters.sandbox, clusters.namespace, "wrong-aws", secret_key="not-the-secret",
                                   server_in_config=True)
    body = coreos_restore_cr(name, f"{BUCKET}/{key}", secret)

    restores.create(body)
    status = restores.wait_phase(name, "Failed", timeout=120)

    expected = {"garbage": "SnapshotInvalid", "truncated": "SnapshotInvalid", "missing": "S3ObjectNotFound",
                "wrong-credentials": "S3AccessDenied"}[problem]
    assert status["reason"] == expected, status
    assert status["succeeded"] is False and "snapshot" not in status
    events = restores.events_once_recorded(name, {"RestoreFailed"})
    assert all(e.type == "Warning" for e in events if e.reason == "RestoreFailed"), events
    cluster = clusters.get(name)
    assert cluster["metadata"]["uid"] == uid and cluster["metadata"].get("deletionTimestamp") is None
    assert clusters.get_value(name, "still") == "here"
    assert wait_for(lambda: clusters.status(name).get("phase") == "Running", timeout=30, what="still Running")


def test_restored_cluster_deleted_mid_restore_fails_and_is_not_restored_again(
        clusters: Clusters, restores: Restores) -> None:
    clusters.create(etcd_cluster("src", 1))
    clusters.wait_running("src", 1)
    key = unique_key("deleted")
    snapshot_to_s3(clusters, "src", key)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    body = coreos_restore_cr("victim", f"{BUCKET}/{key}", secret)
    body["spec"]["clusterSpec"] = {"size": 3}
    restores.create(body)
    wait_for(lambda: restores.status("victim").get("restoredCluster", {}).get("uid"), timeout=120,
             what="restored cluster created", interval=0.2)
    clusters.delete("victim")

    status = restores.wait_phase("victim", "Failed", timeout=120)

    assert status["reason"] == "RestoredClusterDeleted", status
    wait_for(lambda: not clusters.pods("victim"), timeout=120, what="the deleted cluster's pods gone")
    names = [item["metadata"]["name"] for item in clusters.custom.list_namespaced_custom_object(
        "etcd.database.coreos.com", "v1beta2", clusters.namespace, "etcdclusters")["items"]]
    assert "victim" not in names


def test_restore_into_an_etcd_35_cluster_on_persistent_volumes(clusters: Clusters, restores: Restores) -> None:
    """etcdutl 3.5 restores the seed (with --bump-revision/--mark-compacted) onto the seed's PVC."""
    version = newest_etcd_version("3.5")
    pvc = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    clusters.create(etcd_cluster("old", 1, version=version))
    clusters.wait_running("old", 1)
    clusters.put("old", "from", "3.5")
    key = unique_key("v35")
    snapshot_to_s3(clusters, "old", key)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    body = coreos_restore_cr("onpvc", f"{BUCKET}/{key}", secret)
    body["spec"]["clusterSpec"] = {"size": 2, "version": version, "pod": {"persistentVolumeClaimSpec": pvc}}

    restores.create(body)
    status = restores.wait_phase("onpvc", "Completed", timeout=RESTORE_TIMEOUT)

    assert status["servedRevision"] > 1_000_000_000
    assert clusters.get_value("onpvc", "from") == "3.5"
    assert clusters.status("onpvc")["currentVersion"] == version
    claims = clusters.core.list_namespaced_persistent_volume_claim(
        clusters.namespace, label_selector="etcd_cluster=onpvc").items
    assert len(claims) == 2
