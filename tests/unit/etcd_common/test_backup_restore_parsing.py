"""EtcdBackup and EtcdRestore parsed from manifests: the CoreOS example manifests' shapes parse
unchanged into the v1beta2 meaning; missing fields and wrong types give a parse error naming the
field (as spec_error on the whole object, so the operator can report it)."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from etcd_common.api.etcd_backup import (
    BackupPolicy,
    BackupStatus,
    InvalidBackupSpec,
    parse_backup_spec,
    parse_backup_status,
    parse_etcd_backup,
)
from etcd_common.api.etcd_restore import InvalidRestoreSpec, RestoreStatus, parse_etcd_restore, parse_restore_spec
from etcd_common.api.fields import SpecError
from etcd_common.api.storage_locations import EncryptionKeyRef, OtherLocation, S3Location

# The shapes of CoreOS's example/etcd-backup-operator/backup_cr.yaml, periodic_backup_cr.yaml and
# example/etcd-restore-operator/restore_cr.yaml, with their placeholders filled in.
ONE_SHOT_BACKUP = """
apiVersion: "etcd.database.coreos.com/v1beta2"
kind: "EtcdBackup"
metadata:
  name: example-etcd-cluster-backup
  namespace: default
  uid: 1b2c
  generation: 1
spec:
  etcdEndpoints: ["http://example-etcd-cluster-client:2379"]
  storageType: S3
  s3:
    path: mybucket/etcd.backup
    awsSecret: aws
"""

PERIODIC_BACKUP = """
apiVersion: "etcd.database.coreos.com/v1beta2"
kind: "EtcdBackup"
metadata:
  name: example-etcd-cluster-periodic-backup
spec:
  etcdEndpoints: ["http://example-etcd-cluster-client:2379"]
  storageType: S3
  backupPolicy:
    backupIntervalInSecond: 125
    maxBackups: 4
  s3:
    path: mybucket/etcd.backup
    awsSecret: aws
"""

RESTORE = """
apiVersion: "etcd.database.coreos.com/v1beta2"
kind: "EtcdRestore"
metadata:
  name: example-etcd-cluster
spec:
  etcdCluster:
    name: example-etcd-cluster
  backupStorageType: S3
  s3:
    path: mybucket/etcd.backup
    awsSecret: aws
"""


def manifest(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def test_one_shot_backup_example() -> None:
    backup = parse_etcd_backup(manifest(ONE_SHOT_BACKUP))
    assert (backup.name, backup.namespace, backup.uid, backup.generation) == (
        "example-etcd-cluster-backup", "default", "1b2c", 1)
    assert backup.spec_error is None and backup.spec is not None
    assert backup.spec.etcd_endpoints == ("http://example-etcd-cluster-client:2379",)
    assert backup.spec.storage_type == "S3"
    assert backup.spec.storage.s3 == S3Location(path="mybucket/etcd.backup", aws_secret="aws")
    assert (backup.spec.storage.s3.bucket, backup.spec.storage.s3.key) == ("mybucket", "etcd.backup")
    assert backup.spec.policy == BackupPolicy() and not backup.spec.policy.periodic
    assert backup.spec.client_tls_secret == ""
    assert backup.status == BackupStatus()


def test_periodic_backup_example() -> None:
    backup = parse_etcd_backup(manifest(PERIODIC_BACKUP))
    assert backup.spec is not None
    assert backup.spec.policy == BackupPolicy(timeout_seconds=0, backup_interval_seconds=125, max_backups=4)
    assert backup.spec.policy.periodic
    assert backup.namespace == "default" and backup.generation == 0


def test_restore_example() -> None:
    restore = parse_etcd_restore(manifest(RESTORE))
    assert restore.spec_error is None and restore.spec is not None
    assert restore.spec.etcd_cluster_name == "example-etcd-cluster"
    assert restore.spec.storage_type == "S3"
    assert restore.spec.storage.s3 == S3Location(path="mybucket/etcd.backup", aws_secret="aws")
    assert restore.status == RestoreStatus()


def test_every_backup_field_by_its_coreos_name() -> None:
    spec = parse_backup_spec({
        "etcdEndpoints": ["https://a:2379", "https://b:2379"],
        "storageType": "S3",
        "backupPolicy": {"timeoutInSecond": 30, "backupIntervalInSecond": 60, "maxBackups": 2},
        "s3": {"path": "b/k", "awsSecret": "creds", "endpoint": "http://127.0.0.1:9000", "forcePathStyle": True},
        "clientTLSSecret": "etcd-client-tls",
    })
    assert spec.etcd_endpoints == ("https://a:2379", "https://b:2379")
    assert spec.policy == BackupPolicy(timeout_seconds=30, backup_interval_seconds=60, max_backups=2)
    assert spec.storage.s3 == S3Location(path="b/k", aws_secret="creds", endpoint="http://127.0.0.1:9000",
                                         force_path_style=True)
    assert spec.client_tls_secret == "etcd-client-tls"


@pytest.mark.parametrize(("storage_type", "section", "expected"), [
    ("ABS", {"abs": {"path": "container/etcd.backup", "absSecret": "azure"}},
     OtherLocation(path="container/etcd.backup", secret="azure")),
    ("GCS", {"gcs": {"path": "bucket/etcd.backup", "gcpSecret": "gcp"}},
     OtherLocation(path="bucket/etcd.backup", secret="gcp")),
    ("GCS", {"gcs": {"path": "bucket/etcd.backup"}}, OtherLocation(path="bucket/etcd.backup")),
    ("OSS", {"oss": {"path": "bucket/etcd.backup", "ossSecret": "ali", "endpoint": "http://oss.example"}},
     OtherLocation(path="bucket/etcd.backup", secret="ali", endpoint="http://oss.example")),
])
def test_other_storage_sections_are_read_for_coreos_manifests(
        storage_type: str, section: dict[str, Any], expected: OtherLocation) -> None:
    backup = parse_backup_spec({"storageType": storage_type, **section})
    restore = parse_restore_spec({"etcdCluster": {"name": "c"}, "backupStorageType": storage_type, **section})
    assert backup.storage.other == expected and backup.storage.s3 is None
    assert restore.storage.other == expected


S3 = {"path": "b/k", "awsSecret": "aws"}

INVALID_BACKUP_SPECS: list[tuple[str, Any, str]] = [
    ("no spec", None, "spec is required"),
    ("spec not an object", ["S3"], "spec must be an object, got list"),
    ("no storageType", {"s3": S3}, "spec.storageType is required"),
    ("empty storageType", {"storageType": "", "s3": S3}, "spec.storageType is required"),
    ("unknown storageType", {"storageType": "PersistentVolume", "s3": S3},
     "spec.storageType 'PersistentVolume' is not one of S3, ABS, GCS, OSS"),
    ("storageType in lower case", {"storageType": "s3", "s3": S3}, "spec.storageType 's3' is not one of"),
    ("storageType not a string", {"storageType": 3}, "spec.storageType must be a string, got integer 3"),
    ("storage section missing", {"storageType": "S3"}, "spec.storageType is S3 but spec.s3 is missing"),
    ("section of another type", {"storageType": "S3", "abs": {"path": "c/k"}}, "spec.s3 is missing"),
    ("s3 not an object", {"storageType": "S3", "s3": "b/k"}, "spec.s3 must be an object, got string"),
    ("s3 without path", {"storageType": "S3", "s3": {"awsSecret": "aws"}}, "spec.s3.path is required"),
    ("s3 path not a string", {"storageType": "S3", "s3": {"path": ["b", "k"]}},
     "spec.s3.path must be a string, got list"),
    ("forcePathStyle as a string", {"storageType": "S3", "s3": {**S3, "forcePathStyle": "true"}},
     "spec.s3.forcePathStyle must be true or false, got string 'true'"),
    ("etcdEndpoints as one string", {"storageType": "S3", "s3": S3, "etcdEndpoints": "http://a:2379"},
     "spec.etcdEndpoints must be a list of strings"),
    ("etcdEndpoints with a number", {"storageType": "S3", "s3": S3, "etcdEndpoints": [2379]},
     "spec.etcdEndpoints must be a list of strings"),
    ("backupPolicy not an object", {"storageType": "S3", "s3": S3, "backupPolicy": 60},
     "spec.backupPolicy must be an object, got integer"),
    ("interval as a string", {"storageType": "S3", "s3": S3, "backupPolicy": {"backupIntervalInSecond": "60"}},
     "spec.backupPolicy.backupIntervalInSecond must be an integer, got string '60'"),
    ("negative maxBackups", {"storageType": "S3", "s3": S3, "backupPolicy": {"maxBackups": -1}},
     "spec.backupPolicy.maxBackups must be at least 0, got -1"),
    ("timeout as a boolean", {"storageType": "S3", "s3": S3, "backupPolicy": {"timeoutInSecond": True}},
     "spec.backupPolicy.timeoutInSecond must be an integer, got boolean True"),
    ("clientTLSSecret not a string", {"storageType": "S3", "s3": S3, "clientTLSSecret": {"name": "x"}},
     "spec.clientTLSSecret must be a string, got object"),
    ("compression unknown", {"storageType": "S3", "s3": S3, "compression": "Zstd"},
     "spec.compression 'Zstd' is not one of None, Gzip"),
    ("compression lower case", {"storageType": "S3", "s3": S3, "compression": "gzip"},
     "spec.compression 'gzip' is not one of None, Gzip"),
    ("encryption without secretName", {"storageType": "S3", "s3": S3, "encryption": {"secretKey": "k"}},
     "spec.encryption.secretName is required"),
    ("encryption as a name", {"storageType": "S3", "s3": S3, "encryption": "backup-key"},
     "spec.encryption must be an object, got string"),
]


@pytest.mark.parametrize(("raw", "reason"), [(raw, reason) for _, raw, reason in INVALID_BACKUP_SPECS],
                         ids=[case for case, _, _ in INVALID_BACKUP_SPECS])
def test_invalid_backup_specs(raw: Any, reason: str) -> None:
    with pytest.raises(InvalidBackupSpec) as raised:
        parse_backup_spec(raw)
    assert reason in raised.value.reason
    assert isinstance(raised.value, SpecError)
    backup = parse_etcd_backup({"metadata": {"name": "b"}, "spec": raw})
    assert backup.spec is None and backup.spec_error == raised.value.reason


INVALID_RESTORE_SPECS: list[tuple[str, Any, str]] = [
    ("no spec", None, "spec is required"),
    ("no etcdCluster", {"backupStorageType": "S3", "s3": S3}, "spec.etcdCluster is required"),
    ("etcdCluster as a name", {"etcdCluster": "c", "backupStorageType": "S3", "s3": S3},
     "spec.etcdCluster must be an object, got string"),
    ("etcdCluster without name", {"etcdCluster": {}, "backupStorageType": "S3", "s3": S3},
     "spec.etcdCluster.name is required"),
    ("no backupStorageType", {"etcdCluster": {"name": "c"}, "s3": S3}, "spec.backupStorageType is required"),
    ("CoreOS backup spelling storageType", {"etcdCluster": {"name": "c"}, "storageType": "S3", "s3": S3},
     "spec.backupStorageType is required"),
    ("s3 missing", {"etcdCluster": {"name": "c"}, "backupStorageType": "S3"},
     "spec.backupStorageType is S3 but spec.s3 is missing"),
    ("s3 path missing", {"etcdCluster": {"name": "c"}, "backupStorageType": "S3", "s3": {"awsSecret": "a"}},
     "spec.s3.path is required"),
    ("awsSecret not a string", {"etcdCluster": {"name": "c"}, "backupStorageType": "S3",
                                "s3": {"path": "b/k", "awsSecret": 1}},
     "spec.s3.awsSecret must be a string, got integer 1"),
    ("encryption secretName empty", {"etcdCluster": {"name": "c"}, "backupStorageType": "S3", "s3": S3,
                                     "encryption": {"secretName": ""}},
     "spec.encryption.secretName is required"),
]


@pytest.mark.parametrize(("raw", "reason"), [(raw, reason) for _, raw, reason in INVALID_RESTORE_SPECS],
                         ids=[case for case, _, _ in INVALID_RESTORE_SPECS])
def test_invalid_restore_specs(raw: Any, reason: str) -> None:
    with pytest.raises(InvalidRestoreSpec) as raised:
        parse_restore_spec(raw)
    assert reason in raised.value.reason
    restore = parse_etcd_restore({"metadata": {"name": "r"}, "spec": raw})
    assert restore.spec is None and restore.spec_error == raised.value.reason


@pytest.mark.parametrize(("raw", "expected"), [
    (None, BackupStatus()),
    ({"succeeded": True, "Reason": "", "etcdVersion": "3.6.16", "etcdRevision": 42,
      "lastSuccessDate": "2026-11-23T12:00:00Z"},
     BackupStatus(succeeded=True, etcd_version="3.6.16", etcd_revision=42,
                  last_success_date=datetime(2026, 11, 23, 12, 0, tzinfo=UTC))),
    # CoreOS writes "Reason"; "reason" is read as well.
    ({"succeeded": False, "Reason": "failed to save snapshot"}, BackupStatus(reason="failed to save snapshot")),
    ({"succeeded": False, "reason": "no endpoint answered"}, BackupStatus(reason="no endpoint answered")),
    # A status of the wrong shape reads as unset rather than blocking the spec.
    ({"succeeded": "yes", "etcdRevision": "42", "lastSuccessDate": "yesterday", "etcdVersion": 3},
     BackupStatus()),
])
def test_backup_status(raw: Any, expected: BackupStatus) -> None:
    assert parse_backup_status(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), [
    (None, RestoreStatus()),
    ({"succeeded": True}, RestoreStatus(succeeded=True)),
    ({"succeeded": False, "reason": "snapshot not found"}, RestoreStatus(reason="snapshot not found")),
    ({"succeeded": 1, "reason": 5}, RestoreStatus()),
])
def test_restore_status(raw: Any, expected: RestoreStatus) -> None:
    assert parse_etcd_restore({"metadata": {"name": "r"}, "spec": None, "status": raw}).status == expected


def test_compression_and_encryption_are_optional_additions() -> None:
    coreos = parse_backup_spec({"storageType": "S3", "s3": S3})
    assert coreos.compression == "None" and coreos.encryption is None
    spec = parse_backup_spec({"storageType": "S3", "s3": S3, "compression": "Gzip",
                              "encryption": {"secretName": "backup-key"}})
    assert spec.compression == "Gzip"
    assert spec.encryption == EncryptionKeyRef(secret_name="backup-key", secret_key="key")
    custom = parse_backup_spec({"storageType": "S3", "s3": S3, "encryption": {"secretName": "s", "secretKey": "aes"}})
    assert custom.encryption == EncryptionKeyRef("s", "aes")
    restore = parse_restore_spec({"etcdCluster": {"name": "c"}, "backupStorageType": "S3", "s3": S3,
                                  "encryption": {"secretName": "backup-key"}})
    assert restore.encryption == EncryptionKeyRef("backup-key")
    assert parse_restore_spec({"etcdCluster": {"name": "c"}, "backupStorageType": "S3", "s3": S3}).encryption is None
