"""The EtcdRestore resource (CoreOS etcd.database.coreos.com/v1beta2) parsed once, at the edge, into
frozen dataclasses. Field names follow CoreOS v1beta2 exactly (restore_cr.yaml parses unchanged);
the storage sections are the ones an EtcdBackup writes to (`storage_locations`)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from etcd_common.api.etcd_cluster import parse_cluster_spec
from etcd_common.api.fields import FieldReader, JsonDict, SpecError, object_identity, spec_or_error
from etcd_common.api.storage_locations import (
    EncryptionKeyRef,
    StorageLocation,
    parse_encryption,
    parse_storage_location,
)


class InvalidRestoreSpec(SpecError):
    """An EtcdRestore spec that does not have the v1beta2 shape; `reason` names the field."""


@dataclass(frozen=True)
class RestoreSpec:
    # `etcdCluster.name`: the EtcdCluster (same namespace) to seed from the snapshot.
    etcd_cluster_name: str
    # `backupStorageType` and the section it names.
    storage: StorageLocation
    # Addition: `clusterSpec`, the EtcdCluster spec to create when no EtcdCluster of that name
    # exists (an existing one is recreated with its own spec). None: the defaults.
    cluster_spec: JsonDict | None = None
    # Addition: `encryption`, the Secret with the key an encrypted backup is decrypted with
    # (compression is recognised from the object itself).
    encryption: EncryptionKeyRef | None = None

    @property
    def storage_type(self) -> str:
        return self.storage.storage_type


@dataclass(frozen=True)
class RestoreStatus:
    succeeded: bool = False
    reason: str = ""


@dataclass(frozen=True)
class EtcdRestore:
    """An EtcdRestore as read from the API. `spec` is None when it cannot be read (`spec_error`)."""

    name: str
    namespace: str
    uid: str
    generation: int
    spec: RestoreSpec | None
    spec_error: str | None = None
    status: RestoreStatus = field(default_factory=RestoreStatus)
    # metadata.deletionTimestamp set, and metadata.finalizers.
    deleting: bool = False
    finalizers: tuple[str, ...] = ()


def parse_etcd_restore(obj: JsonDict) -> EtcdRestore:
    """Parse a whole EtcdRestore. Spec problems do not raise: they become `spec_error`."""
    identity = object_identity(obj)
    spec, spec_error = spec_or_error(obj.get("spec"), parse_restore_spec, InvalidRestoreSpec)
    raw_metadata = obj.get("metadata")
    metadata: JsonDict = raw_metadata if isinstance(raw_metadata, dict) else {}
    return EtcdRestore(
        name=identity.name, namespace=identity.namespace, uid=identity.uid, generation=identity.generation,
        spec=spec, spec_error=spec_error, status=parse_restore_status(obj.get("status")),
        deleting=bool(metadata.get("deletionTimestamp")),
        finalizers=tuple(str(f) for f in metadata.get("finalizers") or () if isinstance(f, str)),
    )


def parse_restore_spec(raw: Any) -> RestoreSpec:
    """Parse `spec`; raises InvalidRestoreSpec naming the field that is wrong."""
    if raw is None:
        raise InvalidRestoreSpec("spec is required")
    spec = FieldReader(raw, "spec", InvalidRestoreSpec)
    cluster = spec.child("etcdCluster")
    if cluster is None:
        raise InvalidRestoreSpec("spec.etcdCluster is required (the EtcdCluster to restore into)")
    template = spec.child("clusterSpec")
    if template is not None:
        try:
            parse_cluster_spec({"size": 3, **template.raw})
        except SpecError as error:
            raise InvalidRestoreSpec(f"spec.clusterSpec: {error.reason}") from error
    return RestoreSpec(
        etcd_cluster_name=cluster.string("name", required=True),
        storage=parse_storage_location(spec, "backupStorageType"),
        cluster_spec=None if template is None else dict(template.raw),
        encryption=parse_encryption(spec),
    )


def parse_restore_status(raw: Any) -> RestoreStatus:
    """The status as last written; lenient like `parse_backup_status`."""
    if not isinstance(raw, Mapping):
        return RestoreStatus()
    reason = raw.get("reason")
    return RestoreStatus(succeeded=raw.get("succeeded") is True, reason=reason if isinstance(reason, str) else "")
