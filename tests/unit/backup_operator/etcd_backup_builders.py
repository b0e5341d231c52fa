"""EtcdBackup objects and what the backup operator observes and records about them, as the backup
operator's tests build them."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from backup_operator.observed import BackupResult, ObservedBackup, RecordedBackup
from etcd_common.api.etcd_backup import parse_etcd_backup

NOW = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
KEY = ("ns", "b")
# A spec every test can act on: one endpoint, S3, a backup every 10 minutes.
PERIODIC = {"etcdEndpoints": ["http://e-client.ns.svc:2379"], "storageType": "S3", "s3": {"path": "bucket/etcd.backup"},
            "backupPolicy": {"backupIntervalInSecond": 600}}


def raw_backup(spec: Any, *, namespace: str = "ns", generation: int = 1, status: dict[str, Any] | None = None,
               uid: str | None = None) -> dict[str, Any]:
    """EtcdBackup `<namespace>/b` as the API returns it (`uid` and `status` only when given)."""
    metadata: dict[str, Any] = {"namespace": namespace, "name": "b", **({"uid": uid} if uid else {}),
                                "generation": generation}
    return {"metadata": metadata, "spec": spec, **({"status": status} if status is not None else {})}


def stored_backup(spec: Any, *, generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """`raw_backup` as the operator's cache holds it: with its kind, apiVersion and uid."""
    return {"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdBackup",
            **raw_backup(spec, generation=generation, status=status, uid="u")}


def observed_backup(spec: Any, recorded: RecordedBackup | None = None, *, namespace: str = "ns", generation: int = 1,
                    now: datetime = NOW) -> ObservedBackup:
    """What one pass observes: the parsed EtcdBackup, what its status recorded (nothing by default), the time."""
    return ObservedBackup(parse_etcd_backup(raw_backup(spec, namespace=namespace, generation=generation)),
                          recorded if recorded is not None else RecordedBackup(), now)


def backup_result() -> BackupResult:
    """A successful backup taken at NOW."""
    return BackupResult(key="etcd.backup_v5_x", size=10, sha256="s", etcd_revision=5, etcd_version="3.6.16",
                        started=NOW, duration_seconds=1.0)
