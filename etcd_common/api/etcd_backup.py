"""The EtcdBackup resource (CoreOS etcd.database.coreos.com/v1beta2) parsed once, at the edge, into
frozen dataclasses (its storage sections: `storage_locations`).

Field names follow CoreOS v1beta2 exactly, so CoreOS manifests (backup_cr.yaml,
periodic_backup_cr.yaml) parse unchanged. The parser checks the API shape only (types, required
fields, a storage section for the storage type); what the backup operator can do with the result
(e.g. only S3 is implemented) is its own decision.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.fields import FieldReader, JsonDict, SpecError, object_identity, spec_or_error
from etcd_common.api.storage_locations import (
    COMPRESSION_NONE,
    EncryptionKeyRef,
    StorageLocation,
    parse_compression,
    parse_encryption,
    parse_storage_location,
)


class InvalidBackupSpec(SpecError):
    """An EtcdBackup spec that does not have the v1beta2 shape; `reason` names the field."""


@dataclass(frozen=True)
class BackupPolicy:
    """`backupPolicy`; zero means "not set" for each field, as in CoreOS."""

    timeout_seconds: int = 0
    # 0: one backup; > 0: one every so many seconds.
    backup_interval_seconds: int = 0
    # 0: keep every periodic backup.
    max_backups: int = 0

    @property
    def periodic(self) -> bool:
        return self.backup_interval_seconds > 0


# spec.trialRestore defaults: the age alerted on is this many intervals (a trial that fails once
# is retried at the next interval before anyone is woken); one trial's time limit.
DEFAULT_MAX_UNVERIFIED_INTERVALS = 3
DEFAULT_TRIAL_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class TrialRestorePolicy:
    """Addition: `trialRestore`. Every `interval_seconds` the newest backup is restored into a
    throwaway etcd and checked; `max_unverified_age_seconds` is how old the newest verified backup
    may get before the EtcdBackupNotVerified alert fires; `timeout_seconds` bounds one trial."""

    interval_seconds: int
    max_unverified_age_seconds: int
    timeout_seconds: int = DEFAULT_TRIAL_TIMEOUT_SECONDS


@dataclass(frozen=True)
class BackupSpec:
    storage: StorageLocation
    etcd_endpoints: tuple[str, ...] = ()
    policy: BackupPolicy = field(default_factory=BackupPolicy)
    # Secret with etcd-client.crt, etcd-client.key and etcd-client-ca.crt; "" = plain HTTP.
    client_tls_secret: str = ""
    # Addition: `etcdCluster.name`, an EtcdCluster in the same namespace whose client endpoints
    # and client certificate (`spec.TLS.static.operatorSecret`) are used; "" = `etcdEndpoints`.
    etcd_cluster_name: str = ""
    # Additions: `compression` (None, Gzip) and `encryption` (AES-256-GCM with a key from a
    # Secret), applied on the operator before the upload (etcd_common.storage.codec).
    compression: str = COMPRESSION_NONE
    encryption: EncryptionKeyRef | None = None
    # Addition: `trialRestore` (None: backups are not restored on trial).
    trial_restore: TrialRestorePolicy | None = None

    @property
    def storage_type(self) -> str:
        return self.storage.storage_type


@dataclass(frozen=True)
class SnapshotFingerprint:
    """What a backup's snapshot holds, recorded when it is taken (status.lastBackup) for a trial
    restore to compare with: the snapshot's revision (read from the file's pages), and as
    the member counted them at that revision, the keys and the keyspace hash (`endpoint hashkv`,
    comparable only at the same compact revision). None: not asked (no spec.trialRestore), or the
    member could not tell (compacted past the revision meanwhile, gone)."""

    revision: int
    key_count: int | None = None
    hash_kv: int | None = None
    compact_revision: int | None = None


@dataclass(frozen=True)
class LastBackup:
    """`status.lastBackup`: the object the last success wrote (its key, without the bucket), when it
    was taken (`time`), the snapshot's sha256 (of the decoded snapshot when the object is compressed
    or encrypted), the member's revision before the snapshot, and what the snapshot held (for trial
    restores; None in records written before fingerprints)."""

    key: str
    taken: datetime | None = None
    sha256: str = ""
    etcd_revision: int = 0
    fingerprint: SnapshotFingerprint | None = None
    size: int = 0
    # The incarnation the snapshot is of: the etcd cluster ID its member answered for (0: not
    # recorded, a backup taken before they were: of no known incarnation), and the EtcdCluster's
    # metadata.uid ("" for a backup by spec.etcdEndpoints, which names no EtcdCluster).
    etcd_cluster_id: int = 0
    etcd_cluster_uid: str = ""

    def of_incarnation(self, etcd_cluster_id: int, cluster_uid: str) -> bool:
        """Is the snapshot of the etcd cluster `etcd_cluster_id`, run by the EtcdCluster of UID
        `cluster_uid` when the backup recorded one? Only then are its revisions comparable with
        that cluster's. The etcd cluster ID alone tells incarnations apart: etcd derives it from
        its first members' IDs, new in a cluster created again under its name (new member names)
        and in one rebuilt from a snapshot; the UID, when known, is a second check."""
        if not (self.etcd_cluster_id and etcd_cluster_id) or self.etcd_cluster_id != etcd_cluster_id:
            return False
        return not self.etcd_cluster_uid or self.etcd_cluster_uid == cluster_uid


@dataclass(frozen=True)
class BackupStatus:
    succeeded: bool = False
    reason: str = ""
    etcd_version: str = ""
    etcd_revision: int = 0
    last_success_date: datetime | None = None
    last_backup: LastBackup | None = None


@dataclass(frozen=True)
class EtcdBackup:
    """An EtcdBackup as read from the API. `spec` is None when it cannot be read (`spec_error`)."""

    name: str
    namespace: str
    uid: str
    generation: int
    spec: BackupSpec | None
    spec_error: str | None = None
    status: BackupStatus = field(default_factory=BackupStatus)

    def targets(self, cluster_name: str) -> bool:
        """Is this a backup of the EtcdCluster `cluster_name` of its namespace? By
        `etcdCluster.name`, else by an `etcdEndpoints` entry on that cluster's client service
        (`<name>-client`, short or qualified)."""
        if self.spec is None:
            return False
        if self.spec.etcd_cluster_name:
            return self.spec.etcd_cluster_name == cluster_name
        service = f"{cluster_name}{c.CLIENT_SERVICE_SUFFIX}"
        return any(_endpoint_host(endpoint) in (service, f"{service}.{self.namespace}")
                   or _endpoint_host(endpoint).startswith(f"{service}.{self.namespace}.svc")
                   for endpoint in self.spec.etcd_endpoints)

    @property
    def snapshot_location(self) -> StorageLocation | None:
        """Where the last success's object is (its bucket from spec, its key from status)."""
        last = self.status.last_backup
        if self.spec is None or last is None:
            return None
        bucket = self.spec.storage.path.strip().lstrip("/").split("/", 1)[0]
        return self.spec.storage.with_path(f"{bucket}/{last.key}")


def _endpoint_host(endpoint: str) -> str:
    """The host of an endpoint URL ("http://c-client.ns:2379" -> "c-client.ns")."""
    rest = endpoint.split("://", 1)[-1]
    return rest.split("/", 1)[0].rsplit(":", 1)[0]


def parse_etcd_backup(obj: JsonDict) -> EtcdBackup:
    """Parse a whole EtcdBackup. Spec problems do not raise: they become `spec_error`, so the
    operator can report them in the object's status."""
    identity = object_identity(obj)
    spec, spec_error = spec_or_error(obj.get("spec"), parse_backup_spec, InvalidBackupSpec)
    return EtcdBackup(
        name=identity.name, namespace=identity.namespace, uid=identity.uid, generation=identity.generation,
        spec=spec, spec_error=spec_error, status=parse_backup_status(obj.get("status")),
    )


def parse_backup_spec(raw: Any) -> BackupSpec:
    """Parse `spec`; raises InvalidBackupSpec naming the field that is wrong."""
    if raw is None:
        raise InvalidBackupSpec("spec is required")
    spec = FieldReader(raw, "spec", InvalidBackupSpec)
    policy = spec.child("backupPolicy")
    return BackupSpec(
        storage=parse_storage_location(spec, "storageType"),
        etcd_endpoints=spec.strings("etcdEndpoints"),
        policy=BackupPolicy() if policy is None else BackupPolicy(
            timeout_seconds=policy.integer("timeoutInSecond"),
            backup_interval_seconds=policy.integer("backupIntervalInSecond"),
            max_backups=policy.integer("maxBackups"),
        ),
        client_tls_secret=spec.string("clientTLSSecret"),
        etcd_cluster_name=_etcd_cluster_name(spec),
        compression=parse_compression(spec),
        encryption=parse_encryption(spec),
        trial_restore=_trial_restore(spec),
    )


def _trial_restore(spec: FieldReader) -> TrialRestorePolicy | None:
    """`trialRestore`: intervalInSecond is required (at least 1); the age and the timeout default."""
    trial = spec.child("trialRestore")
    if trial is None:
        return None
    if not trial.has("intervalInSecond"):
        raise InvalidBackupSpec(f"{trial.path('intervalInSecond')} is required")
    interval = trial.integer("intervalInSecond", minimum=1)
    max_age = trial.integer("maxUnverifiedAgeInSecond", minimum=0)
    timeout = trial.integer("timeoutInSecond", minimum=0)
    return TrialRestorePolicy(
        interval_seconds=interval,
        max_unverified_age_seconds=max_age or interval * DEFAULT_MAX_UNVERIFIED_INTERVALS,
        timeout_seconds=timeout or DEFAULT_TRIAL_TIMEOUT_SECONDS,
    )


def _etcd_cluster_name(spec: FieldReader) -> str:
    cluster = spec.child("etcdCluster")
    return "" if cluster is None else cluster.string("name", required=True)


def parse_backup_status(raw: Any) -> BackupStatus:
    """The status as last written. Lenient: a field of the wrong type reads as unset, so a bad
    status never stops the spec from being acted on (the next status write repairs it)."""
    if not isinstance(raw, Mapping):
        return BackupStatus()
    # CoreOS's JSON name is "Reason" (capital R) for EtcdBackup; "reason" is accepted too.
    reason = raw.get("Reason", raw.get("reason"))
    revision = raw.get("etcdRevision")
    return BackupStatus(
        succeeded=raw.get("succeeded") is True,
        reason=reason if isinstance(reason, str) else "",
        etcd_version=_string_or_empty(raw.get("etcdVersion")),
        etcd_revision=revision if isinstance(revision, int) and not isinstance(revision, bool) else 0,
        last_success_date=_timestamp(raw.get("lastSuccessDate")),
        last_backup=_last_backup(raw.get("lastBackup")),
    )


def _last_backup(raw: Any) -> LastBackup | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("key"), str) or not isinstance(raw.get("sha256"), str):
        return None
    return LastBackup(key=raw["key"], taken=_timestamp(raw.get("time")), sha256=raw["sha256"],
                      etcd_revision=_integer_or_none(raw.get("etcdRevision")) or 0,
                      fingerprint=parse_snapshot_fingerprint(raw), size=_integer_or_none(raw.get("size")) or 0,
                      etcd_cluster_id=_hex_or_zero(raw.get("etcdClusterID")),
                      etcd_cluster_uid=_string_or_empty(raw.get("etcdClusterUID")))


def _hex_or_zero(value: Any) -> int:
    """An etcd cluster ID as status records it (hex, as etcdctl prints IDs; uint64 does not fit
    the API's int64); 0 when absent or not hex."""
    try:
        return int(value, 16) if isinstance(value, str) and value else 0
    except ValueError:
        return 0


def parse_snapshot_fingerprint(last_backup: Mapping[str, Any]) -> SnapshotFingerprint | None:
    """status.lastBackup's snapshotRevision, keyCount, hashKV and hashKVCompactRevision (None:
    no snapshotRevision; the others unset when of the wrong type)."""
    revision = _integer_or_none(last_backup.get("snapshotRevision"))
    return None if revision is None else SnapshotFingerprint(
        revision, key_count=_integer_or_none(last_backup.get("keyCount")),
        hash_kv=_integer_or_none(last_backup.get("hashKV")),
        compact_revision=_integer_or_none(last_backup.get("hashKVCompactRevision")))


def _integer_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _string_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
