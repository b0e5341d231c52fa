"""crds/etcdrestores.yaml accepts the CoreOS example and keeps every status field the restore
operator writes; the EtcdCluster CRD keeps the `spec.restore` it writes (nothing pruned)."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from etcd_common.api.restore_source import RestoreSource, restore_source_to_api
from etcd_common.api.storage_locations import EncryptionKeyRef, S3Location
from restore_operator.observed import SnapshotFacts
from restore_operator.status import next_status, snapshot_to_api
from tests.support.openapi_schema import BACKUP_SCHEMA, CLUSTER_SCHEMA, RESTORE_SCHEMA, crd, validate

REPO = Path(__file__).resolve().parents[3]
CRD = crd("etcdrestores.yaml")
[VERSION] = CRD["spec"]["versions"]
SCHEMA = RESTORE_SCHEMA


def test_crd_is_v1_with_status_subresource_and_printer_columns() -> None:
    assert CRD["apiVersion"] == "apiextensions.k8s.io/v1"
    assert CRD["spec"]["group"] == "etcd.database.coreos.com" and VERSION["name"] == "v1beta2"
    assert VERSION["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in VERSION["additionalPrinterColumns"]}
    assert columns["Phase"] == ".status.phase" and columns["Succeeded"] == ".status.succeeded"


def test_coreos_example_is_admitted() -> None:
    example = yaml.safe_load((REPO / "examples" / "restore_cr.yaml").read_text())
    assert validate(SCHEMA, example) == ([], [])
    sandbox = yaml.safe_load((REPO / "examples" / "sandbox-restore.yaml").read_text())
    assert validate(SCHEMA, sandbox) == ([], [])


def test_missing_cluster_name_is_refused() -> None:
    errors, _ = validate(SCHEMA, {"spec": {"etcdCluster": {}, "backupStorageType": "S3", "s3": {"path": "b/k"}}})
    assert any("name is required" in e for e in errors)


def test_every_status_field_written_is_kept() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    facts = SnapshotFacts(sha256="a" * 64, size=10, revision=5, total_keys=2, hash=7)
    status = next_status({}, generation=1, now=now, phase="Completed", message="done", reason="", succeeded=True,
                         updates={"snapshot": snapshot_to_api(facts), "servedRevision": 1_000_000_005,
                                  "restoredCluster": {"name": "c", "uid": "u"}, "clusterSpec": {"size": 3}},
                         conditions={"SnapshotVerified": ("True", "Verified", "ok")})
    assert validate(SCHEMA, {"spec": {"etcdCluster": {"name": "c"}, "backupStorageType": "S3",
                                      "s3": {"path": "b/k"}}, "status": status}) == ([], [])


def test_cluster_crd_keeps_spec_restore() -> None:
    source = RestoreSource(s3=S3Location(path="b/k", aws_secret="aws", endpoint="http://127.0.0.1:9000",
                                         force_path_style=True), sha256="b" * 64, revision=5, restore_uid="u")
    manifest: dict[str, Any] = {"spec": {"size": 3, "restore": restore_source_to_api(source)}}
    assert validate(CLUSTER_SCHEMA, manifest) == ([], [])


BACKUP = {"storageType": "S3", "s3": {"path": "b/k", "awsSecret": "aws"}, "etcdEndpoints": ["http://e:2379"]}
RESTORE = {"etcdCluster": {"name": "c"}, "backupStorageType": "S3", "s3": {"path": "b/k", "awsSecret": "aws"}}


def test_compression_and_encryption_are_admitted_and_kept() -> None:
    backup = {**BACKUP, "compression": "Gzip", "encryption": {"secretName": "backup-key", "secretKey": "aes"}}
    status = {"lastBackup": {"key": "k", "size": 1, "sha256": "a" * 64, "compression": "Gzip",
                             "encryptionKeyId": "0123456789abcdef"}}
    assert validate(BACKUP_SCHEMA, {"spec": backup, "status": status}) == ([], [])
    assert validate(SCHEMA, {"spec": {**RESTORE, "encryption": {"secretName": "backup-key"}}}) == ([], [])
    facts = SnapshotFacts(sha256="a" * 64, size=10, revision=5, compression="Gzip", key_id="0123456789abcdef")
    assert validate(SCHEMA, {"spec": RESTORE, "status": {"snapshot": snapshot_to_api(facts)}}) == ([], [])


def test_the_schema_refuses_what_it_can() -> None:
    for wrong, fragment in [({"compression": "Zstd"}, "compression"), ({"compression": "gzip"}, "compression"),
                            ({"encryption": {"secretKey": "k"}}, "secretName"),
                            ({"encryption": {"secretName": ""}}, "secretName"),
                            ({"encryption": {"secretName": "s", "secretKey": "a/b"}}, "secretKey")]:
        errors, _ = validate(BACKUP_SCHEMA, {"spec": {**BACKUP, **wrong}})
        assert any(fragment in error for error in errors), (wrong, errors)
    errors, _ = validate(SCHEMA, {"spec": {**RESTORE, "encryption": {}}})
    assert any("secretName" in error for error in errors), errors


def test_cluster_crd_keeps_spec_restore_encryption() -> None:
    source = RestoreSource(s3=S3Location(path="b/k", aws_secret="aws"), sha256="b" * 64,
                           encryption=EncryptionKeyRef("backup-key", "aes"))
    manifest: dict[str, Any] = {"spec": {"size": 3, "restore": restore_source_to_api(source)}}
    assert validate(CLUSTER_SCHEMA, manifest) == ([], [])
