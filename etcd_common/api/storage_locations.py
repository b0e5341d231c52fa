"""Where a snapshot is stored, as the v1beta2 kinds name it: the storage type and the section it
names (`s3`, `abs`, `gcs`, `oss`), shared by an EtcdBackup's `storageType`, an EtcdRestore's
`backupStorageType` and an EtcdCluster's `spec.restore`. Field names follow CoreOS v1beta2."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from etcd_common.api.fields import FieldReader

STORAGE_TYPE_S3 = "S3"
STORAGE_TYPE_ABS = "ABS"
STORAGE_TYPE_GCS = "GCS"
STORAGE_TYPE_OSS = "OSS"
# storage type -> the spec section that says where (CoreOS's `BackupSource`/`RestoreSource`).
STORAGE_SECTIONS: Mapping[str, str] = {
    STORAGE_TYPE_S3: "s3", STORAGE_TYPE_ABS: "abs", STORAGE_TYPE_GCS: "gcs", STORAGE_TYPE_OSS: "oss",
}
# section -> the field naming its credentials secret.
SECRET_FIELDS: Mapping[str, str] = {"s3": "awsSecret", "abs": "absSecret", "gcs": "gcpSecret", "oss": "ossSecret"}


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
    """`abs`, `gcs` or `oss`: where on Azure Blob Storage, Google Cloud Storage or Alibaba OSS.

    `path` is "<container or bucket>/<key>"; `secret` comes from `absSecret` (keys
    storage-account, storage-key, optional cloud and endpoint), `gcpSecret` (access-token or
    credentials.json; "" = application default credentials) or `ossSecret` (accessKeyID,
    accessKeySecret); `endpoint` is OSS's (CoreOS) or, an addition, the blob service URL of ABS
    or a GCS JSON API server ("" = the provider's own)."""

    path: str
    secret: str = ""
    endpoint: str = ""

    @property
    def bucket(self) -> str:
        return self.path.strip().lstrip("/").split("/", 1)[0]

    @property
    def key(self) -> str:
        parts = self.path.strip().lstrip("/").split("/", 1)
        return parts[1] if len(parts) == 2 else ""


@dataclass(frozen=True)
class StorageLocation:
    """The storage type and the section it names; the other sections are ignored."""

    storage_type: str
    s3: S3Location | None = None
    other: OtherLocation | None = None

    @property
    def section(self) -> str:
        """`s3`, `abs`, `gcs` or `oss`: the spec field the location was read from."""
        return STORAGE_SECTIONS[self.storage_type]

    @property
    def secret_field(self) -> str:
        """The section's credentials-secret field (`awsSecret`, `absSecret`, ...)."""
        return SECRET_FIELDS[self.section]

    @property
    def path(self) -> str:
        return self.s3.path if self.s3 is not None else self.other.path if self.other is not None else ""

    @property
    def secret(self) -> str:
        return self.s3.aws_secret if self.s3 is not None else self.other.secret if self.other is not None else ""

    @property
    def endpoint(self) -> str:
        return self.s3.endpoint if self.s3 is not None else self.other.endpoint if self.other is not None else ""

    def with_path(self, path: str) -> StorageLocation:
        """The same location with another path (the one-shot command's flag)."""
        if self.s3 is not None:
            return replace(self, s3=replace(self.s3, path=path))
        return replace(self, other=replace(self.other or OtherLocation(""), path=path))


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
        secret=location.string(SECRET_FIELDS[section]),
        endpoint=location.string("endpoint"),
    ))


# `compression` of an EtcdBackup (an addition): how the snapshot is compressed before it is
# encrypted and uploaded.
COMPRESSION_NONE = "None"
COMPRESSION_GZIP = "Gzip"
COMPRESSIONS = (COMPRESSION_NONE, COMPRESSION_GZIP)
DEFAULT_ENCRYPTION_KEY = "key"


@dataclass(frozen=True)
class EncryptionKeyRef:
    """`encryption` of an EtcdBackup, an EtcdRestore or an EtcdCluster's `spec.restore` (an
    addition): the Secret in the object's namespace, and the key in it, holding the AES-256 key
    (base64 of 32 bytes)."""

    secret_name: str
    secret_key: str = DEFAULT_ENCRYPTION_KEY


def parse_compression(spec: FieldReader, key: str = "compression") -> str:
    """`compression`: None (absent) or Gzip."""
    value = spec.string(key) or COMPRESSION_NONE
    if value not in COMPRESSIONS:
        raise spec.error(f"{spec.path(key)} {value!r} is not one of {', '.join(COMPRESSIONS)}")
    return value


def parse_encryption(spec: FieldReader, key: str = "encryption") -> EncryptionKeyRef | None:
    """`encryption: {secretName, secretKey}` (None when absent)."""
    section = spec.child(key)
    if section is None:
        return None
    return EncryptionKeyRef(secret_name=section.string("secretName", required=True),
                            secret_key=section.string("secretKey") or DEFAULT_ENCRYPTION_KEY)


def encryption_to_api(ref: EncryptionKeyRef) -> dict[str, str]:
    return {"secretName": ref.secret_name, "secretKey": ref.secret_key}
