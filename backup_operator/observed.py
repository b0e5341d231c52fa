"""What one pass over an EtcdBackup saw: the object, what its status recorded about earlier
attempts (and trial restores), and the time (`observing.py` reads them; `planning.py` decides from them); and what a
backup that was taken found out (`BackupResult`). Pure types."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from etcd_common.api.etcd_backup import EtcdBackup, LastBackup, SnapshotFingerprint


@dataclass(frozen=True)
class RecordedBackup:
    """What the status says about earlier attempts (lenient: wrong types read as unset)."""

    observed_generation: int = 0
    succeeded: bool = False
    last_attempt_time: datetime | None = None
    first_attempt_time: datetime | None = None
    consecutive_failures: int = 0
    last_reason: str = ""


@dataclass(frozen=True)
class RecordedTrial:
    """status.trialRestore, read leniently (wrong types read as unset)."""

    last_attempt_time: datetime | None = None
    last_result: str = ""
    last_verified_time: datetime | None = None
    verified_backup_time: datetime | None = None


@dataclass(frozen=True)
class TrialFacts:
    """What one trial restore found."""

    key: str
    sha256: str
    snapshot_revision: int  # etcdutl snapshot status of the downloaded file
    served_revision: int  # what the throwaway etcd serves
    key_count: int
    hash_kv: int
    compact_revision: int
    restore_seconds: float  # from the download's start until the throwaway etcd answered


@dataclass(frozen=True)
class ObservedBackup:
    backup: EtcdBackup
    recorded: RecordedBackup
    now: datetime
    # spec.trialRestore: the backup a trial restore verifies, and what earlier trials recorded.
    last_backup: LastBackup | None = None
    trial: RecordedTrial = field(default_factory=RecordedTrial)

@dataclass(frozen=True)
class BackupResult:
    """One successful backup."""

    key: str
    size: int
    sha256: str
    etcd_revision: int
    etcd_version: str
    started: datetime
    duration_seconds: float
    endpoint: str = ""
    retained: int | None = None  # periodic backups of this path left after retention
    retention_error: str = ""
    # spec.compression and the key id of spec.encryption ("" = none); `size` is the object's then,
    # `sha256` still the snapshot's (checked by decoding the object before it was uploaded).
    compression: str = ""
    key_id: str = ""
    fingerprint: SnapshotFingerprint | None = None
    # The incarnation the snapshot is of (status.lastBackup.etcdClusterID / etcdClusterUID): the
    # etcd cluster ID its member answered for; the EtcdCluster's UID (spec.etcdCluster.name only).
    etcd_cluster_id: int = 0
    etcd_cluster_uid: str = ""
