"""The CoreOS example manifests, with only their placeholders filled, back up a 3-member cluster;
the object restores with `etcdutl snapshot restore` into a scratch etcd serving exactly the keys
written before the backup. The manifests name no S3 server: the awsSecret's config file does
(`endpoint_url`, `s3` `addressing_style = path`), as for any S3-compatible server."""
from __future__ import annotations

from pathlib import Path

import pytest

from etcd_common.storage import s3
from kube_sandbox.config import CHECKOUT_DIR
from tests.integration.backup_operator.backup_deployment import backup_metric
from tests.integration.backup_operator.backups import Backups, download, keys_in_snapshot
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox
# An awsSecret whose config file names the sandbox's S3 server.
SERVER_NAMING_SECRET = "aws-with-endpoint"


@pytest.fixture
def example_secret(backups: Backups) -> str:
    backups.create_aws_secret(SERVER_NAMING_SECRET, server_in_config=True)
    return SERVER_NAMING_SECRET


def filled(example: str, *, endpoints: str, path: str, secret: str) -> str:
    text = (CHECKOUT_DIR / "examples" / example).read_text()
    for placeholder, value in (("<etcd-cluster-endpoints>", f'"{endpoints}"'), ("<full-s3-path>", path),
                               ("<aws-secret>", secret)):
        assert placeholder in text, f"{example} has no placeholder {placeholder}"
        text = text.replace(placeholder, value)
    return text


def test_coreos_one_shot_example_backs_up_and_restores(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str, example_secret: str, tmp_path: Path,
) -> None:
    clusters.create(etcd_cluster("example-etcd-cluster", 3))
    clusters.wait_running("example-etcd-cluster", 3, timeout=240)
    written = {f"/registry/key-{i}": f"value-{i}" for i in range(20)}
    for key, value in written.items():
        clusters.put("example-etcd-cluster", key, value)

    manifest = filled("backup_cr.yaml", endpoints=clusters.client_url("example-etcd-cluster"),
                      path=f"{bucket}/etcd.backup", secret=example_secret)
    backups.apply_yaml(manifest)
    status = backups.wait_succeeded("example-etcd-cluster-backup", timeout=240)
    clusters.put("example-etcd-cluster", "/registry/after-backup", "not in the snapshot")

    assert status["lastBackup"]["key"] == "etcd.backup"
    assert status["etcdRevision"] >= len(written) + 1
    assert status["etcdVersion"].startswith("3.")
    assert status["observedGeneration"] == 1 and status.get("Reason") in (None, "")
    condition = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert condition["status"] == "True"
    info = storage.head(bucket, "etcd.backup")
    assert info.size == status["lastBackup"]["size"]
    assert info.metadata and info.metadata["sha256"] == status["lastBackup"]["sha256"]
    assert backups.has_event("example-etcd-cluster-backup", "Normal", "BackupSucceeded")
    labels = {"namespace": backups.namespace, "backup": "example-etcd-cluster-backup"}
    assert backup_metric(backups.sandbox, "etcd_backup_backups_total", {**labels, "result": "succeeded"}) == 1
    assert backup_metric(backups.sandbox, "etcd_backup_last_size_bytes", labels) == info.size
    assert (backup_metric(backups.sandbox, "etcd_backup_last_success_timestamp_seconds", labels) or 0) > 0

    restored = keys_in_snapshot(download(storage, bucket, "etcd.backup"), tmp_path)
    assert restored == written


def test_coreos_periodic_example_applies_and_writes_the_coreos_key_scheme(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str, example_secret: str,
) -> None:
    clusters.create(etcd_cluster("periodic", 1))
    clusters.wait_running("periodic", 1, timeout=180)
    clusters.put("periodic", "k", "v")
    manifest = filled("periodic_backup_cr.yaml", endpoints=clusters.client_url("periodic"),
                      path=f"{bucket}/etcd.backup", secret=example_secret)
    backups.apply_yaml(manifest)
    # The first periodic backup is taken at once, not after one interval (125 s here).
    status = backups.wait_succeeded("example-etcd-cluster-periodic-backup", timeout=90)
    key = status["lastBackup"]["key"]
    assert key.startswith(f"etcd.backup_v{status['etcdRevision']}_"), key
    assert [o.key for o in storage.list(bucket)] == [key]
