"""The snapshot comes from a healthy member with the highest revision; a member that does not
answer is skipped, not fatal."""
from __future__ import annotations

from pathlib import Path

import pytest

from etcd_common.storage import s3
from tests.integration.backup_operator.backup_deployment import backup_operator_logs
from tests.integration.backup_operator.backups import Backups, download, etcd_backup, keys_in_snapshot
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox


def test_frozen_member_is_skipped(backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
                                  tmp_path: Path) -> None:
    clusters.create(etcd_cluster("three", 3))
    clusters.wait_running("three", 3, timeout=240)
    clusters.put("three", "/before", "frozen")
    endpoints = sorted(clusters.member_urls("three"))
    frozen = sorted(p.metadata.name for p in clusters.live_pods("three"))[0]
    faults = backups.sandbox.faults
    faults.freeze_container(clusters.namespace, frozen, "etcd")
    try:
        backups.create(etcd_backup("skip-frozen", {
            "etcdEndpoints": endpoints, "storageType": "S3", "s3": backups.s3_spec(f"{bucket}/etcd.backup"),
        }))
        status = backups.wait_succeeded("skip-frozen", timeout=180)
    finally:
        faults.thaw_container(clusters.namespace, frozen, "etcd")
    assert frozen not in status["lastBackup"]["endpoint"], status
    logs = backup_operator_logs(backups.sandbox).splitlines()
    assert any("skip-frozen" in line and "skipping etcd member" in line and frozen in line for line in logs)
    assert keys_in_snapshot(download(storage, bucket, "etcd.backup"), tmp_path) == {"/before": "frozen"}
