"""Periodic EtcdBackups with retention on ABS (Azurite), GCS (fake-gcs-server) and OSS (SeaweedFS's
S3 API), through the backup operator in the sandbox; and each store's outage: reported with its
reason, retried, and the backup taken once the store is back. One test body per behaviour,
parametrized over the stores (the `other_store` fixture)."""
from __future__ import annotations

from pathlib import Path

import pytest

from kube_sandbox.testing import wait_for
from tests.integration.backup_operator.backups import Backups, etcd_backup, keys_in_snapshot
from tests.integration.backup_operator.stores import SandboxStore, download
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox

KEYS = {f"app/{index}": f"value-{index}" for index in range(10)}
BASE_KEY = "periodic/etcd.backup"


def cluster_with_keys(clusters: Clusters, name: str) -> None:
    clusters.create(etcd_cluster(name, 1))
    clusters.wait_running(name, 1, timeout=180)
    for key, value in KEYS.items():
        clusters.put(name, key, value)


def taken_at(key: str) -> str:
    """The time in a periodic backup's key `<path>_v<revision>_<UTC time>` (sorts as the time does)."""
    return key.rsplit("_", 1)[1]


def test_periodic_backups_keep_the_newest_two_each_holding_exactly_the_keys(
        other_store: tuple[SandboxStore, str], backups: Backups, clusters: Clusters, tmp_path: Path) -> None:
    store, bucket = other_store
    cluster_with_keys(clusters, "periodic")
    backups.create(etcd_backup("every-3s", {
        "etcdCluster": {"name": "periodic"}, **store.backup_fields(f"{bucket}/{BASE_KEY}"),
        "backupPolicy": {"backupIntervalInSecond": 3, "maxBackups": 2},
    }))
    seen: list[str] = []

    def four_taken() -> bool:
        status = backups.status("every-3s")
        key = (status.get("lastBackup") or {}).get("key")
        assert status.get("succeeded") is not False, status
        if key and key not in seen:
            seen.append(key)
        return len(seen) >= 4
    wait_for(four_taken, timeout=180, what=f"four periodic backups on {store.storage_type}")
    backups.delete("every-3s")  # the schedule stops: what retention left stays

    def retained() -> list[str] | None:
        keys = sorted((o.key for o in store.storage().list(bucket, BASE_KEY)), key=taken_at)
        return keys if len(keys) == 2 else None
    kept = wait_for(retained, timeout=60, what="retention down to two backups")
    assert all(key.startswith(f"{BASE_KEY}_v") for key in kept), kept
    # The newest two of all taken (the ones seen, and any taken after the last look).
    assert seen[-1] in kept and all(taken_at(key) < taken_at(kept[0]) for key in seen if key not in kept), (seen, kept)
    snapshot = download(store, bucket, kept[-1], tmp_path / "download")
    assert keys_in_snapshot(snapshot, tmp_path / "scratch") == KEYS


@pytest.mark.alone
def test_a_store_outage_is_reported_retried_and_the_backup_taken_once_it_returns(
        other_store: tuple[SandboxStore, str], backups: Backups, clusters: Clusters, tmp_path: Path) -> None:
    store, bucket = other_store
    reason = f"{store.storage_type}Unreachable"
    cluster_with_keys(clusters, "outage")
    faults = backups.sandbox.faults
    faults.stop_store(store.server)
    try:
        backups.create(etcd_backup("outage", {"etcdCluster": {"name": "outage"},
                                              **store.backup_fields(f"{bucket}/etcd.backup")}))
        failed = backups.wait_status("outage", lambda s: s.get("lastResult") == reason
                                     and s.get("consecutiveFailures", 0) >= 2,
                                     f"two failures with {store.server} down", timeout=240)
        assert failed["succeeded"] is False and reason in failed["Reason"], failed
        assert backups.has_event("outage", "Warning", reason)
    finally:
        faults.start_store(store.server)
    done = backups.wait_succeeded("outage", timeout=300)
    key = done["lastBackup"]["key"]
    assert key == "etcd.backup" and store.storage().exists(bucket, key)
    assert keys_in_snapshot(download(store, bucket, key, tmp_path / "download"), tmp_path / "scratch") == KEYS
