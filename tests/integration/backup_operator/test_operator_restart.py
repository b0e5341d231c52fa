"""The schedule lives in status, not memory: the operator killed mid-schedule and restarted takes
the next backup on time, with no backup missed or doubled beyond one interval."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backup_operator.keys import our_backups
from etcd_common.storage import s3
from kube_sandbox.testing import wait_for
from tests.integration.backup_operator.backup_deployment import (
    NAMESPACE,
    backup_operator_logs,
    running_backup_operator_pod,
)
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = [pytest.mark.sandbox, pytest.mark.alone]
INTERVAL_SECONDS = 20


def test_operator_killed_mid_schedule_neither_misses_nor_doubles(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
) -> None:
    clusters.create(etcd_cluster("scheduled", 1))
    clusters.wait_running("scheduled", 1, timeout=180)
    backups.create(etcd_backup("scheduled", {
        "etcdCluster": {"name": "scheduled"}, "storageType": "S3",
        "backupPolicy": {"backupIntervalInSecond": INTERVAL_SECONDS},
        "s3": backups.s3_spec(f"{bucket}/etcd.backup"),
    }))
    first = backups.wait_succeeded("scheduled", timeout=120)
    last_attempt = datetime.fromisoformat(first["lastAttemptTime"].replace("Z", "+00:00"))
    # Kill it in the middle of the interval.
    wait_for(lambda: datetime.now(UTC) >= last_attempt + timedelta(seconds=INTERVAL_SECONDS / 2) or None,
             timeout=INTERVAL_SECONDS, what="the middle of the interval")
    pod = running_backup_operator_pod(backups.sandbox)
    restarts = pod.status.container_statuses[0].restart_count
    backups.sandbox.faults.crash_container(NAMESPACE, pod.metadata.name, "etcd-backup-operator")
    wait_for(lambda: running_backup_operator_pod(backups.sandbox).status.container_statuses[0].restart_count > restarts
             or None, timeout=120, what="backup operator container restarted")
    wait_for(lambda: "became leader" in backup_operator_logs(backups.sandbox), timeout=120, what="leading again")

    def three_more() -> list[datetime] | None:
        times = [b.time for b in our_backups("etcd.backup", (o.key for o in storage.list(bucket)))]
        return times if len(times) >= 4 else None
    times = wait_for(three_more, timeout=INTERVAL_SECONDS * 6, what="three backups after the restart")
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(times, times[1:])]
    # Key times have one-second resolution; a restart costs seconds, never a whole interval.
    assert all(INTERVAL_SECONDS - 1 <= gap <= 2 * INTERVAL_SECONDS for gap in gaps), gaps
