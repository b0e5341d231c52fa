"""A backup taken from a real etcd onto Azure Blob Storage (Azurite), Google Cloud Storage
(fake-gcs-server), OSS (through its S3 API: a standalone SeaweedFS) and S3 (the same server;
periodic backups only), as the backup operator takes it from an EtcdBackup spec: periodic keys,
retention (maxBackups 1) and the status reasons; then the restore operator's verification of
what was written (also compressed and encrypted, and decoded as the restore's verification and
the seed's fetch do). No Kubernetes sandbox: secrets
come from a dict, etcd is a local process."""
from __future__ import annotations

import base64
import hashlib
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
from etcd_common.seed import program
from etcd_common.storage import codec
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
    if name == "S3":
        credentials = f"[default]\naws_access_key_id = {s3.access_key}\naws_secret_access_key = {s3.secret_key}\n"
        return ({"storageType": "S3", "s3": {"path": "backups/etcd.backup", "awsSecret": "aws", "endpoint": s3.endpoint,
                                             "forcePathStyle": True}},
                {"aws": {"stringData": {"credentials": credentials}}})
    return ({"storageType": "OSS", "oss": {"path": "backups/etcd.backup", "ossSecret": "ali", "endpoint": s3.endpoint}},
            {"ali": {"stringData": {"accessKeyID": s3.access_key, "accessKeySecret": s3.secret_key}}})


# S3 here too: a standalone SeaweedFS, like OSS's (the sandbox's S3 is the operator tests' store).
@pytest.mark.parametrize("name", ["ABS", "GCS", "OSS", "S3"])
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


@pytest.mark.parametrize("name", ["ABS", "GCS", "OSS"])
def test_a_compressed_encrypted_backup_is_verified_and_fetched_by_decoding_it(
        name: str, etcd: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """spec.compression Gzip + spec.encryption: the object is neither the snapshot nor readable
    without the key; the restore's verification and the seed's fetch decode it with the key, a
    missing or wrong key is refused with its reason, and the decoded snapshot is etcd's."""
    storage_fields, secrets = store(name, request)
    key = bytes(range(32))
    secrets["backup-key"] = {"stringData": {"key": base64.b64encode(key).decode()}}
    secrets["other-key"] = {"stringData": {"key": base64.b64encode(bytes(32)).decode()}}

    def read_secret(namespace: str, secret: str) -> dict[str, Any]:
        if secret not in secrets:
            raise NotFound(f"secret {namespace}/{secret}")
        return secrets[secret]

    def no_cluster(namespace: str, cluster: str) -> dict[str, Any]:
        raise AssertionError("the spec names endpoints, not a cluster")
    spec = parse_etcd_backup({"metadata": {"name": "b", "namespace": "ns"}, "spec": {
        **storage_fields, "etcdEndpoints": [etcd], "compression": "Gzip", "encryption": {"secretName": "backup-key"},
        "backupPolicy": {"backupIntervalInSecond": 60, "maxBackups": 1}}}).spec
    assert spec is not None
    backup = BackupRequest.from_spec("ns", "b", spec, timeout_seconds=120)
    env = BackupEnvironment(read_secret=read_secret, read_etcd_cluster=no_cluster, etcd=EtcdAccess(read_secret),
                            work_dir=str(tmp_path / "work"), s3_options={"max_attempts": 1})
    storage = storage_for_location(backup.location, "ns", read_secret)
    bucket, base_key = split_location(backup.location)
    storage.create_bucket(bucket)
    try:
        result = take_backup(backup, env, logging.getLogger("test"), now=lambda: STARTED)
        assert result.key.startswith(f"{base_key}_v") and result.key_id == codec.key_id(key)
        info = storage.head(bucket, result.key)
        metadata = info.metadata or {}
        assert (metadata.get("compression"), metadata.get("encryption")) == ("gzip", "aes-256-gcm")
        assert metadata.get("encryption-key-id") == codec.key_id(key) and metadata.get("sha256") == result.sha256
        raw = tmp_path / "object"
        storage.download_file(bucket, result.key, str(raw))
        assert raw.read_bytes().startswith(codec.MAGIC) and info.size == result.size

        location = backup.location.with_path(f"{bucket}/{result.key}")
        verified = verify_snapshot(storage, location, work_dir=str(tmp_path), encryption_key=key)
        facts = verified.facts
        assert facts.sha256 == result.sha256 and facts.total_keys >= KEYS and facts.size == info.size
        assert (facts.compression, facts.key_id) == ("Gzip", codec.key_id(key))
        with pytest.raises(codec.KeyMissing):
            verify_snapshot(storage, location, work_dir=str(tmp_path))
        with pytest.raises(codec.KeyWrong):
            verify_snapshot(storage, location, work_dir=str(tmp_path), encryption_key=bytes(32))
        assert not list(tmp_path.glob("etcd-restore-*"))  # every trial copy removed

        # The seed's fetch step, with the store's secret and the key mounted as files.
        secret_dir, key_file = tmp_path / "secret", tmp_path / "key"
        secret_dir.mkdir()
        for field, value in secrets[location.secret]["stringData"].items():
            (secret_dir / field).write_text(value)
        key_file.write_text(secrets["backup-key"]["stringData"]["key"])
        staging = tmp_path / "staging"
        fetched = program.fetch(location, secret_dir=str(secret_dir), sha256=result.sha256, staging_dir=str(staging),
                                snapshot=str(staging / "snapshot.db"), etag=facts.etag,
                                encryption_key_file=str(key_file))
        assert fetched == info.size
        assert hashlib.sha256((staging / "snapshot.db").read_bytes()).hexdigest() == result.sha256
        with pytest.raises(codec.KeyMissing):
            program.fetch(location, secret_dir=str(secret_dir), sha256=result.sha256, staging_dir=str(staging),
                          snapshot=str(staging / "snapshot.db"))
        assert list(staging.iterdir()) == []
    finally:
        for listed in storage.list(bucket):
            storage.delete(bucket, listed.key)
        storage.delete_bucket(bucket)
