"""Periodic backups: retention keeps exactly the newest `maxBackups` across a revision that gains a
digit and never deletes foreign objects; an S3 outage is reported and the schedule goes on."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from etcd_common.storage import s3
from kube_sandbox.testing import wait_for
from tests.integration.backup_operator.backup_deployment import backup_operator_logs
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.backup_operator.backups import cluster_revision as revision
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox

FOREIGN = ("etcd.backup", "etcd.backup_notes.txt", "etcd.backup_v5_not-a-time", "etcd.backup2_v1_2020-01-01-00:00:00")


def test_retention_keeps_the_two_newest_across_a_new_digit_and_spares_foreign_objects(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
) -> None:
    clusters.create(etcd_cluster("periodic", 1))
    clusters.wait_running("periodic", 1, timeout=180)
    for key in FOREIGN:
        storage.client.put_object(Bucket=bucket, Key=key, Body=b"not a backup of ours")
    while revision(clusters, "periodic") < 8:
        clusters.put("periodic", "filler", "x")
    backups.create(etcd_backup("every-3s", {
        "etcdCluster": {"name": "periodic"}, "storageType": "S3",
        "backupPolicy": {"backupIntervalInSecond": 3, "maxBackups": 2},
        "s3": backups.s3_spec(f"{bucket}/etcd.backup"),
    }))
    taken: list[str] = []
    # Revisions 8 (or 9), 9, 10, 11: the last two cross from one digit to two.
    for target in (revision(clusters, "periodic"), 9, 10, 11):
        while revision(clusters, "periodic") < target:
            clusters.put("periodic", "filler", str(target))
        status = backups.wait_status("every-3s", lambda s: s.get("etcdRevision", 0) >= target and s.get("succeeded"),
                                     f"a backup at revision {target}", timeout=120)
        taken.append(status["lastBackup"]["key"])

    def settled() -> list[str] | None:
        ours = sorted(o.key for o in storage.list(bucket) if o.key not in FOREIGN)
        return ours if len(ours) == 2 else None
    ours = wait_for(settled, timeout=30, what="retention down to two backups")
    newest = backups.status("every-3s")["lastBackup"]["key"]
    assert newest in ours and any(key.startswith("etcd.backup_v11_") for key in ours), (ours, taken)
    assert all(int(key.split("_v")[1].split("_")[0]) >= 10 for key in ours), ours
    assert set(FOREIGN) <= {o.key for o in storage.list(bucket)}
    assert backups.status("every-3s")["backupsRetained"] == 2

    # Deleting the EtcdBackup stops the schedule and keeps what is in S3.
    backups.delete("every-3s")
    # A backup under way when it was deleted finishes; then its supervisor stops (its worker's
    # log line still says "backup runner").
    wait_for(lambda: f"{backups.namespace}/every-3s: backup runner stopped" in backup_operator_logs(backups.sandbox)
             or None, timeout=60, what="the supervisor stopped")
    before = {o.key for o in storage.list(bucket)}
    clusters.put("periodic", "after-delete", "x")
    with pytest.raises(AssertionError):
        wait_for(lambda: {o.key for o in storage.list(bucket)} != before or None, timeout=10,
                 what="no backup after deletion")
    assert {o.key for o in storage.list(bucket)} == before

    # `etcd-backup --list` (the schedule stopped) shows the path's backups, oldest first, and no foreign object.
    listing = subprocess.run(
        [sys.executable, "-m", "backup_operator.oneshot", f"--kubeconfig={backups.sandbox.config.kubeconfig}",
         f"--namespace={backups.namespace}", f"--s3-path={bucket}/etcd.backup", "--aws-secret=aws",
         f"--s3-endpoint={backups.sandbox.config.s3_endpoint}", "--force-path-style", "--etcd-cluster=periodic",
         "--list"],
        capture_output=True, text=True, timeout=60, check=True)
    listed = [json.loads(line)["object"] for line in listing.stdout.splitlines()]
    remaining = [key for key in before if key not in FOREIGN]
    assert len(remaining) == 2
    assert listed == [f"s3://{bucket}/etcd.backup"] + [f"s3://{bucket}/{key}" for key in
                                                       sorted(remaining, key=lambda k: (int(k.split("_v")[1].split("_")[0]), k))]


@pytest.mark.alone
def test_s3_outage_is_reported_and_the_schedule_continues(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
) -> None:
    clusters.create(etcd_cluster("outage", 1))
    clusters.wait_running("outage", 1, timeout=180)
    backups.create(etcd_backup("outage", {
        "etcdCluster": {"name": "outage"}, "storageType": "S3",
        "backupPolicy": {"backupIntervalInSecond": 5, "maxBackups": 10},
        "s3": backups.s3_spec(f"{bucket}/etcd.backup"),
    }))
    first = backups.wait_succeeded("outage", timeout=120)
    faults = backups.sandbox.faults
    faults.stop_s3()
    try:
        failed = backups.wait_status("outage", lambda s: s.get("lastResult") == s3.REASON_UNREACHABLE
                                     and s.get("consecutiveFailures", 0) >= 2, "two failures with S3 down",
                                     timeout=180)
        assert failed["succeeded"] is False and "S3Unreachable" in failed["Reason"]
        assert failed["lastSuccessDate"] == first["lastSuccessDate"]
        condition = next(c for c in failed["conditions"] if c["type"] == "Succeeded")
        assert (condition["status"], condition["reason"]) == ("False", s3.REASON_UNREACHABLE)
        assert backups.has_event("outage", "Warning", s3.REASON_UNREACHABLE)
    finally:
        faults.start_s3()
    recovered = backups.wait_status("outage", lambda s: s.get("succeeded") is True
                                    and s.get("lastSuccessDate") != first["lastSuccessDate"],
                                    "a backup after S3 returned", timeout=300)
    assert recovered["consecutiveFailures"] == 0
    assert storage.exists(bucket, recovered["lastBackup"]["key"])
