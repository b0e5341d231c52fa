"""The issue's end-to-end story with every real part: write keys, back up with the backup
operator (EtcdBackup), write more, lose quorum (two of three emptyDir members deleted: the etcd
operator reports it and repairs nothing), then the CoreOS restore_cr.yaml brings back a Running
cluster of spec.size serving exactly the backup's keys."""
from __future__ import annotations

import pytest

from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.conftest import Restores
from tests.integration.restore_operator.restore_deployment import restore_metric
from tests.integration.restore_operator.restore_steps import RESTORE_TIMEOUT, coreos_restore_cr, keys_of
from tests.integration.restore_operator.snapshots import BUCKET, ensure_bucket, unique_key

pytestmark = pytest.mark.sandbox


def test_backup_lose_quorum_restore_serves_exactly_the_backup(
        backup_operator: Sandbox, backups: Backups, clusters: Clusters, restores: Restores) -> None:
    name = "example-etcd-cluster"
    ns = clusters.namespace
    clusters.create(etcd_cluster(name, 3))
    clusters.wait_running(name, 3, timeout=180)
    backed_up = {f"app/{index}": f"value-{index}" for index in range(10)}
    for key, value in backed_up.items():
        clusters.put(name, key, value)

    ensure_bucket(clusters.sandbox)
    path = f"{BUCKET}/{unique_key('backup')}"
    backups.create(etcd_backup("backup", {
        "etcdEndpoints": [f"http://{name}-client.{ns}.svc:2379"], "storageType": "S3",
        "s3": backups.s3_spec(path),
    }))
    backup_status = backups.wait_succeeded("backup")
    clusters.put(name, "app/after-backup", "lost with the cluster")

    # Lose quorum: two of the three members and their (emptyDir) data.
    for pod in clusters.live_pods(name)[:2]:
        clusters.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
    clusters.wait_status(name, lambda s: s.get("phase") == "Failed", "quorum lost reported", timeout=120)
    before = restore_metric(clusters.sandbox, "etcd_restore_operator_restores_total", {"result": "succeeded"}) or 0.0

    restores.create(coreos_restore_cr(name, path, "aws", clusters.sandbox.config.s3_endpoint))
    status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)

    assert status["succeeded"] is True
    assert status["snapshot"]["revision"] == backup_status["etcdRevision"]
    running = clusters.wait_running(name, 3, timeout=60)
    assert running["size"] == 3
    assert keys_of(clusters, name) == backed_up
    # Revisions went forward, not back: watchers of the old cluster never see a reused revision.
    assert status["servedRevision"] > backup_status["etcdRevision"] + 10
    wait_for(lambda: (restore_metric(clusters.sandbox, "etcd_restore_operator_restores_total",
                                     {"result": "succeeded"}) or 0.0) >= before + 1,
             timeout=30, what="restores_total{result=succeeded} counted")
