"""Retention by the time a backup was taken: a cluster deleted and recreated under its name starts
again at a low revision, and its new backups are the ones kept (issue 23's measured case: ordering
by revision deleted each new backup right after its upload while status said Succeeded)."""
from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from backup_operator.keys import our_backups
from etcd_common.storage import s3
from kube_sandbox.testing import wait_for
from tests.integration.backup_operator.backups import Backups, cluster_revision, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox

BASE_KEY = "etcd.backup"
OLD_REVISION = 40


def cluster_gone(clusters: Clusters, name: str) -> bool:
    try:
        clusters.get(name)
    except ApiException as error:
        if error.status == 404:
            return not clusters.pods(name)
        raise
    return False


def test_a_cluster_recreated_under_its_name_keeps_its_new_backups(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
) -> None:
    clusters.create(etcd_cluster("rewind", 1))
    clusters.wait_running("rewind", 1, timeout=180)
    while cluster_revision(clusters, "rewind") < OLD_REVISION:
        clusters.put("rewind", "filler", "x")
    backups.create(etcd_backup("rewind", {
        "etcdCluster": {"name": "rewind"}, "storageType": "S3",
        "backupPolicy": {"backupIntervalInSecond": 3, "maxBackups": 2},
        "s3": backups.s3_spec(f"{bucket}/{BASE_KEY}"),
    }))

    def old_backups() -> list[str] | None:
        ours = our_backups(BASE_KEY, (o.key for o in storage.list(bucket)))
        return [p.key for p in ours] if len(ours) == 2 and all(p.revision >= OLD_REVISION for p in ours) else None
    before = wait_for(old_backups, timeout=120, what="two backups of the old cluster")

    clusters.delete("rewind")
    wait_for(lambda: cluster_gone(clusters, "rewind"), timeout=120, what="the old cluster and its pods gone")
    clusters.create(etcd_cluster("rewind", 1))
    clusters.wait_running("rewind", 1, timeout=180)
    assert cluster_revision(clusters, "rewind") < OLD_REVISION

    def new_backups_kept() -> list[tuple[int, str]] | None:
        ours = our_backups(BASE_KEY, (o.key for o in storage.list(bucket)))
        status = backups.status("rewind")
        newest_recorded = (status.get("lastBackup") or {}).get("key")
        fresh = [p for p in ours if p.revision < OLD_REVISION]
        done = len(ours) == 2 and len(fresh) == 2 and status.get("succeeded") and newest_recorded == ours[-1].key
        return [(p.revision, p.key) for p in ours] if done else None
    kept = wait_for(new_backups_kept, timeout=120,
                    what=f"the two newest backups are the new cluster's (the old ones were {before})")
    assert before is not None and kept is not None
    assert not set(before) & {key for _, key in kept}, (before, kept)
    assert backups.status("rewind")["backupsRetained"] == 2
