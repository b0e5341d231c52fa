"""A backup taken from a real etcd onto Azure Blob Storage (Azurite), Google Cloud Storage
(fake-gcs-server) and OSS (through its S3 API: a standalone SeaweedFS), as the backup operator
takes it from an EtcdBackup spec: periodic keys, retention (maxBackups 1) and the status reasons;
then the restore operator's verification of what was written. No Kubernetes sandbox: secrets
come from a dict, etcd is a local process."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from backup_operator.reasons import BackupFailed
from backup_operator.taking import BackupEnvironment, BackupRequest, take_backup
from etcd_common.api.etcd_backup import parse_etcd_backup
from etcd_common.etcd.access import EtcdAccess
from etcd_common.storage.locations import split_location, storage_for_location
from kube_adapter.errors import NotFound
from kube_sandbox.azurite import ACCOUNT, ACCOUNT_KEY, Azurite
from kube_sandbox.fake_gcs import FakeGcs
from kube_sandbox.s3 import StandaloneS3
from restore_operator.verifying import verify_snapshot
from tests.integration.etcdctl.etcd_processes import EtcdCluster, etcd_dir

KEYS = 200
STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-member etcd 3.6 with KEYS keys; its client URL."""
    cluster = EtcdCluster(binary=str(etcd_dir("3.6.16") / "etcd"), workdir=tmp_path_factory.mktemp("etcd"),
                          token="other-stores")
    member = cluster.start_seed()
    etcdctl = cluster.etcdctl()
    for index in range(KEYS):
        etcdctl.put(f"key{index}", f"value-{index}-" + "x" * 200)
    yield member.client_url
    cluster.stop()


def store(name: str, request: pytest.FixtureRequest) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The EtcdBackup storage fields for store `name` and the secrets they name."""
    if name == "ABS":
        azurite: Azurite = request.getfixturevalue("azurite")
        return ({"storageType": "ABS", "abs": {"path": "backups/etcd.backup", "absSecret": "azure"}},
                {"azure": {"stringData": {"storage-account": ACCOUNT, "storage-key": ACCOUNT_KEY,
                                          "endpoint": azurite.endpoint}}})
    if name == "GCS":
        fake_gcs: FakeGcs = request.getfixturevalue("fake_gcs")
        return ({"storageType": "GCS", "gcs": {"path": "backups/etcd.backup", "gcpSecret": "gcp",
                                               "endpoint": fake_gcs.endpoint}},
                {"gcp": {"stringData": {"access-token": "any-token"}}})
    s3: StandaloneS3 = request.getfixturevalue("standalone_s3")
    return ({"storageType": "OSS", "oss": {"path": "backups/etcd.backup", "ossSecret": "ali", "endpoint": s3.endpoint}},
            {"ali": {"stringData": {"accessKeyID": s3.access_key, "accessKeySecret": s3.secret_key}}})


@pytest.mark.parametrize("name", ["ABS", "GCS", "OSS"])
def test_periodic_backups_with_retention_then_verified(name: str, etcd: str, tmp_path: Path,
                                                       request: pytest.FixtureRequest) -> None:
    storage_fields, secrets = store(name, request)

    def read_secret(namespace: str, secret: str) -> dict[str, Any]:
        if secret not in secrets:
            raise NotFound(f"secret {namespace}/{secret}")
        return secrets[secret]

    def no_cluster(namespace: str, cluster: str) -> dict[str, Any]:
        raise AssertionError("the spec names endpoints, not a cluster")
    spec = parse_etcd_backup({"metadata": {"name": "b", "namespace": "ns"}, "spec": {
        **storage_fields, "etcdEndpoints": [etcd],
        "backupPolicy": {"backupIntervalInSecond": 60, "maxBackups": 1}}}).spec
    assert spec is not None
    backup = BackupRequest.from_spec("ns", "b", spec, timeout_seconds=120)
    env = BackupEnvironment(read_secret=read_secret, read_etcd_cluster=no_cluster, etcd=EtcdAccess(read_secret),
                            work_dir=str(tmp_path / "work"), s3_options={"max_attempts": 1})
    storage = storage_for_location(backup.location, "ns", read_secret)
    bucket, base_key = split_location(backup.location)
    storage.create_bucket(bucket)
    log = logging.getLogger("test")
    first = take_backup(backup, env, log, now=lambda: STARTED)
    second = take_backup(backup, env, log, now=lambda: STARTED + timedelta(minutes=1))
    assert first.key != second.key and first.key.startswith(f"{base_key}_v")
    assert second.retained == 1 and not second.retention_error
    assert [info.key for info in storage.list(bucket, base_key)] == [second.key]  # the older one deleted
    info = storage.head(bucket, second.key)
    assert info.size == second.size and (info.metadata or {}).get("sha256") == second.sha256
    assert (info.metadata or {}).get("etcd-revision") == str(second.etcd_revision)
    location = backup.location.with_path(f"{bucket}/{second.key}")
    verified = verify_snapshot(storage, location, work_dir=str(tmp_path))
    assert verified.facts.sha256 == second.sha256 and verified.facts.total_keys >= KEYS
    storage.delete_bucket(bucket)

    secrets.clear()  # the secret deleted: a reason naming the store, nothing written
    with pytest.raises(BackupFailed) as missing:
        take_backup(backup, env, log)
    assert missing.value.reason == f"{name}SecretInvalid" and "does not exist" in missing.value.message
