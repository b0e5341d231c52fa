"""Many one-shot EtcdBackups created at once against one cluster: every one succeeds, and the
operator never takes more than its --max-concurrent-backups (2, as shipped) at a time: not in its
log (one process, so its lines are in the order things happened), not in its running gauge."""
from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from etcd_common.storage import s3
from tests.integration.backup_operator.backup_deployment import backup_metric, backup_operator_logs
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox

BACKUPS = 15
LIMIT = 2  # deploy/backup-operator.yaml's BACKUP_MAX_CONCURRENT_BACKUPS


def most_at_once(log: str, namespace: str) -> tuple[int, int]:
    """From the operator's log: the most backups of `namespace` under way at once, and how many
    said they waited for a slot."""
    running, most, queued = 0, 0, 0
    line = re.compile(rf"{re.escape(namespace)}/[\w.-]+: (taking a backup|backup succeeded|backup failed"
                      r"|backup crashed|due, waiting for a free backup slot)")
    for match in line.finditer(log):
        what = match.group(1)
        if what == "taking a backup":
            running += 1
            most = max(most, running)
        elif what.startswith("due, waiting"):
            queued += 1
        else:
            running -= 1
    return most, queued


def test_backups_created_at_once_all_succeed_never_more_than_the_limit_running(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
) -> None:
    clusters.create(etcd_cluster("bounded", 1))
    clusters.wait_running("bounded", 1, timeout=180)
    for i in range(40):  # 4 MB: each backup takes long enough that 15 due at once must queue
        clusters.put("bounded", f"key-{i}", "x" * 100_000)
    gauge: list[float] = []
    done = threading.Event()

    def watch_gauge() -> None:
        while not done.is_set():
            value = backup_metric(backups.sandbox, "etcd_backup_backups_running", {})
            if value is not None:
                gauge.append(value)
            done.wait(0.2)
    watcher = threading.Thread(target=watch_gauge, daemon=True)
    watcher.start()
    names = [f"at-once-{i:02d}" for i in range(BACKUPS)]
    try:
        # All at once (in parallel), so that they are due together and some must wait for a slot.
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            list(pool.map(lambda name: backups.create(etcd_backup(name, {
                "etcdCluster": {"name": "bounded"}, "storageType": "S3",
                "s3": backups.s3_spec(f"{bucket}/{name}.db")})), names))
        for name in names:
            status = backups.wait_succeeded(name, timeout=300)
            assert [c["type"] for c in status["conditions"]] == ["Succeeded"], status  # Queued removed
    finally:
        done.set()
        watcher.join(10)
    assert {o.key for o in storage.list(bucket)} >= {f"{name}.db" for name in names}
    most, queued = most_at_once(backup_operator_logs(backups.sandbox), backups.namespace)
    print(f"log: at most {most} at once, {queued} waited; gauge samples: {len(gauge)}, max {max(gauge, default=None)}")
    assert 1 <= most <= LIMIT and queued >= 1
    assert gauge and max(gauge) <= LIMIT
