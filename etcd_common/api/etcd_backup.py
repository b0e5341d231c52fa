"""The EtcdBackup resource (CoreOS etcd.database.coreos.com/v1beta2) parsed once, at the edge, into
frozen dataclasses; also the storage locations an EtcdRestore shares with it.

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

from etcd_common.api.etcd_cluster import JsonDict, SpecError
from etcd_common.api.fields import FieldReader, object_identity

STORAGE_TYPE_S3 = "S3"
STORAGE_TYPE_ABS = "ABS"
STORAGE_TYPE_GCS = "GCS"
STORAGE_TYPE_OSS = "OSS"
# storage type -> the spec section that says where (CoreOS's `BackupSource`/`RestoreSource`).
STORAGE_SECTIONS: Mapping[str, str] = {
    STORAGE_TYPE_S3: "s3", STORAGE_TYPE_ABS: "abs", STORAGE_TYPE_GCS: "gcs", STORAGE_TYPE_OSS: "oss",
}
# section -> the field naming its credentials secret.
_SECRET_FIELDS: Mapping[str, str] = {"abs": "absSecret", "gcs": "gcpSecret", "oss": "ossSecret"}


class InvalidBackupSpec(SpecError):
    """An EtcdBackup spec that does not have the v1beta2 shape; `reason` names the field."""


@dataclass(frozen=True)
class S3Location:
    """`s3`: where on S3 (or an S3-compatible server) a snapshot lives."""

    # "<bucket>/<key>"
    path: str
    # Secret with `credentials` and `config` files (profile `default`); "" = the operator's own.
    aws_secret: str = ""
    # "" = AWS; else an S3-compatible server's URL.
    endpoint: str = ""
    force_path_style: bool = False

    @property
    def bucket(self) -> str:
        return self.path.split("/", 1)[0]

    @property
    def key(self) -> str:
        return self.path.split("/", 1)[1] if "/" in self.path else ""


@dataclass(frozen=True)
class OtherLocation:
    """`abs`, `gcs` or `oss`: read for CoreOS compatibility (path, its credentials secret from
    `absSecret`/`gcpSecret`/`ossSecret`, and OSS's endpoint)."""

    path: str
    secret: str = ""
    endpoint: str = ""


@dataclass(frozen=True)
class StorageLocation:
    """The storage type and the section it names; the other sections are ignored."""

    storage_type: str
    s3: S3Location | None = None
    other: OtherLocation | None = None


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

    @property
    def storage_type(self) -> str:
        return self.storage.storage_type


@dataclass(frozen=True)
class BackupStatus:
    succeeded: bool = False
    reason: str = ""
    etcd_version: str = ""
    etcd_revision: int = 0
    last_success_date: datetime | None = None


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


def parse_etcd_backup(obj: JsonDict) -> EtcdBackup:
    """Parse a whole EtcdBackup. Spec problems do not raise: they become `spec_error`, so the
    operator can report them in the object's status."""
    identity = object_identity(obj)
    spec: BackupSpec | None = None
    spec_error: str | None = None
    try:
        spec = parse_backup_spec(obj.get("spec"))
    except InvalidBackupSpec as error:
        spec_error = error.reason
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
    )


def _etcd_cluster_name(spec: FieldReader) -> str:
    cluster = spec.child("etcdCluster")
    return "" if cluster is None else cluster.string("name", required=True)


def parse_storage_location(spec: FieldReader, type_field: str) -> StorageLocation:
    """The storage type in `type_field` (`storageType` of a backup, `backupStorageType` of a
    restore) and the section it names, which must be present."""
    storage_type = spec.string(type_field, required=True)
    section = STORAGE_SECTIONS.get(storage_type)
    if section is None:
        raise spec.error(
            f"{spec.path(type_field)} {storage_type!r} is not one of {', '.join(STORAGE_SECTIONS)}"
        )
    location = spec.child(section)
    if location is None:
        raise spec.error(f"{spec.path(type_field)} is {storage_type} but {spec.path(section)} is missing")
    if section == "s3":
        return StorageLocation(storage_type, s3=S3Location(
            path=location.string("path", required=True),
            aws_secret=location.string("awsSecret"),
            endpoint=location.string("endpoint"),
            force_path_style=location.boolean("forcePathStyle"),
        ))
    return StorageLocation(storage_type, other=OtherLocation(
        path=location.string("path", required=True),
        secret=location.string(_SECRET_FIELDS[section]),
        endpoint=location.string("endpoint"),
    ))


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
    )


def _string_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
