"""On ABS (Azurite), GCS (fake-gcs-server) and OSS (SeaweedFS's S3 API), through the operators in
the sandbox: a one-shot EtcdBackup whose object holds exactly the keys written, then an EtcdRestore
from it that brings the cluster back serving exactly those keys (a key written after the backup
is gone). One test body, parametrized over the stores (the `other_store` fixture)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.backup_operator.backups import Backups, etcd_backup, keys_in_snapshot
from tests.integration.backup_operator.stores import SandboxStore, download
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.conftest import GROUP, VERSION, Restores
from tests.integration.restore_operator.restore_steps import RESTORE_TIMEOUT, keys_of

pytestmark = pytest.mark.sandbox

KEYS = {f"app/{index}": f"value-{index}" for index in range(10)}


def test_one_shot_backup_then_restore_serve_exactly_the_backed_up_keys(
        other_store: tuple[SandboxStore, str], backups: Backups, clusters: Clusters, restores: Restores,
        tmp_path: Path) -> None:
    store, bucket = other_store
    name = "restored"
    clusters.create(etcd_cluster(name, 1))
    clusters.wait_running(name, 1, timeout=180)
    for key, value in KEYS.items():
        clusters.put(name, key, value)
    path = f"{bucket}/one-shot/etcd.backup"
    backups.create(etcd_backup("one-shot", {"etcdCluster": {"name": name}, **store.backup_fields(path)}))
    backed_up = backups.wait_succeeded("one-shot")
    assert backed_up["lastBackup"]["key"] == "one-shot/etcd.backup"
    snapshot = download(store, bucket, "one-shot/etcd.backup", tmp_path / "download")
    assert keys_in_snapshot(snapshot, tmp_path / "scratch") == KEYS
    clusters.put(name, "app/after-backup", "not in the backup")

    restores.create({"apiVersion": f"{GROUP}/{VERSION}", "kind": "EtcdRestore", "metadata": {"name": name},
                     "spec": {"etcdCluster": {"name": name}, **store.restore_fields(path)}})
    status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)
    assert status["succeeded"] is True
    assert status["snapshot"]["revision"] == backed_up["etcdRevision"]
    clusters.wait_running(name, 1, timeout=60)
    assert keys_of(clusters, name) == KEYS
