"""The etcd operator's side alone: an EtcdCluster written with `spec.restore` by hand bootstraps
its seed from the snapshot (init containers fetch it from S3 with the secret's credentials and
restore it with etcdutl), then grows to spec.size; a snapshot that is not the one named by
sha256 never lets etcd start."""
from __future__ import annotations

import hashlib
from typing import Any

import pytest

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.restore_steps import keys_of
from tests.integration.restore_operator.snapshots import BUCKET, create_aws_secret, snapshot_to_s3, unique_key

pytestmark = pytest.mark.sandbox


def restore_source(clusters: Clusters, key: str, sha256: str, secret: str) -> dict[str, Any]:
    return {"backupStorageType": "S3", "sha256": sha256,
            "s3": {"path": f"{BUCKET}/{key}", "awsSecret": secret, "endpoint": clusters.sandbox.config.s3_endpoint,
                   "forcePathStyle": True}}


def test_spec_restore_seeds_the_cluster_then_it_grows_in_a_restricted_namespace(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("origin", 1))
    clusters.wait_running("origin", 1)
    clusters.put("origin", "seeded", "yes")
    key = unique_key("seed")
    content = snapshot_to_s3(clusters, "origin", key)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace)

    source = restore_source(clusters, key, hashlib.sha256(content).hexdigest(), secret)
    # The seed's init containers pass the `restricted` Pod Security Standard, as etcd's own container does.
    clusters.sandbox.kubectl("label", "namespace", clusters.namespace, "pod-security.kubernetes.io/enforce=restricted")
    clusters.create(etcd_cluster("seeded", 3, restore=source))
    clusters.wait_running("seeded", 3, timeout=180)

    assert keys_of(clusters, "seeded") == {"seeded": "yes"}
    # The default bump: the restored revisions start a billion above the snapshot's.
    revision = int(clusters.etcdctl("seeded", "get", "seeded", "-w", "fields").split('"Revision" : ')[1].split()[0])
    assert revision > 1_000_000_000
    # Everything below the bump reads as compacted (etcdutl --mark-compacted): a client of the old
    # cluster that asks for an old revision, or resumes a watch from one, is told to re-list instead
    # of being handed the restored history under revision numbers it has already seen.
    urls = clusters.member_urls("seeded")
    old_read = clusters.sandbox.etcdctl(urls, "get", "seeded", "--rev", "2")
    assert old_read.returncode != 0 and "required revision has been compacted" in old_read.stderr, old_read.stderr
    old_watch = clusters.sandbox.etcdctl(urls, "watch", "seeded", "--rev", "2", timeout=20)
    assert "required revision has been compacted" in old_watch.stdout + old_watch.stderr, old_watch


def test_a_snapshot_other_than_the_named_one_never_starts_etcd(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("origin", 1))
    clusters.wait_running("origin", 1)
    key = unique_key("mismatch")
    snapshot_to_s3(clusters, "origin", key)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace)

    clusters.create(etcd_cluster("refused", 1, restore=restore_source(clusters, key, "0" * 64, secret)))

    def fetch_failed() -> Any:
        for pod in clusters.live_pods("refused"):
            for status in pod.status.init_container_statuses or []:
                terminated = status.last_state.terminated or status.state.terminated
                if status.name == "restore-fetch" and terminated is not None and terminated.exit_code != 0:
                    return pod
        return None
    pod = wait_for(fetch_failed, timeout=120, what="the seed's restore-fetch init container failing")
    logs = clusters.sandbox.kubectl("-n", clusters.namespace, "logs", pod.metadata.name, "-c", "restore-fetch",
                                    "--previous", check=False).stdout
    logs += clusters.sandbox.kubectl("-n", clusters.namespace, "logs", pod.metadata.name, "-c", "restore-fetch",
                                     check=False).stdout
    assert "expected " + "0" * 64 in logs, logs
    [etcd] = [s for s in clusters.live_pods("refused")[0].status.container_statuses or [] if s.name == "etcd"]
    assert etcd.state.running is None and etcd.restart_count == 0
    assert clusters.status("refused").get("phase") != "Running"
