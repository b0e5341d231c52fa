"""`spec.restore` of an EtcdCluster: the snapshot its seed member starts from (an addition to
CoreOS v1beta2). The restore operator writes it after it verified the snapshot; the etcd operator
reads it only when it bootstraps the seed: the seed pod's init containers fetch the snapshot from
its object store (S3, ABS, GCS or OSS) with the section's secret's credentials (or copy it from
the claim the restore operator staged it on, `stagedClaim`), check its sha256 and restore it
with `etcdutl snapshot restore`. Once the cluster has bootstrapped, the field has
no further effect."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Final

from etcd_common.api.fields import FieldReader, SpecError
from etcd_common.api.storage_locations import (
    SECRET_FIELDS,
    STORAGE_TYPE_S3,
    EncryptionKeyRef,
    OtherLocation,
    S3Location,
    StorageLocation,
    encryption_to_api,
    parse_encryption,
    parse_storage_location,
)

# etcd's own advice for a restore that watchers of the old cluster must not see go backwards:
# bump by more than the revisions the old cluster can have made since the snapshot.
DEFAULT_BUMP_REVISION: Final = 1_000_000_000
# The image whose `etcd-restore-seed` fetches the snapshot (this project's image, as deployed).
DEFAULT_FETCH_IMAGE: Final = "etcd-operator-py:0.1.0"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RestoreSource:
    """Where the seed's snapshot is and what it must be: on S3 (`s3`), or on the store of
    `storage_type` (`other`: ABS, GCS or OSS)."""

    s3: S3Location | None
    # Hex sha256 of the snapshot file; the seed refuses any other file.
    sha256: str
    # The snapshot's revision (informational; recorded by the restore operator).
    revision: int = 0
    # Added to every revision of the restored data (and marked compacted); 0 = none.
    bump_revision: int = DEFAULT_BUMP_REVISION
    # Image with the `etcd-restore-seed` program (fetch and install steps of the seed pod).
    fetch_image: str = DEFAULT_FETCH_IMAGE
    # uid of the EtcdRestore that wrote it ("" when written by hand).
    restore_uid: str = ""
    # The object verified (ETag; S3/ABS version id or GCS generation): the seed fetches only it.
    etag: str = ""
    version_id: str = ""
    storage_type: str = STORAGE_TYPE_S3
    other: OtherLocation | None = None
    # The Secret with the key of an encrypted snapshot (mounted into the fetch step); None: not encrypted.
    encryption: EncryptionKeyRef | None = None
    # A PersistentVolumeClaim on which the restore operator staged the verified (decoded) snapshot
    # (`etcd_common.seed.pod.staging_pod`): the seed copies it from there (mounted read-only)
    # instead of downloading it, with no credentials. "": the seed downloads the object.
    staged_claim: str = ""
    # One staged claim per member of a restored cluster that bootstraps all at once (each holds
    # the same checked snapshot; the first is `staged_claim`): the etcd operator starts that many
    # members together, each restoring its own copy with all of them in `--initial-cluster`, as
    # etcd's disaster-recovery guide does, so none joins by a raft snapshot. Empty: the seed alone
    # restores, the others join it one at a time.
    staged_claims: tuple[str, ...] = ()

    def for_member(self, index: int) -> RestoreSource:
        """The source member `index` of an all-at-once bootstrap restores from: its own staged claim."""
        return dataclasses.replace(self, staged_claim=self.staged_claims[index], staged_claims=())

    @property
    def location(self) -> StorageLocation:
        return StorageLocation(self.storage_type, s3=self.s3, other=self.other)

    @classmethod
    def at(cls, location: StorageLocation, **fields: Any) -> RestoreSource:
        """The source for the snapshot at `location` (`fields`: the other fields)."""
        return cls(s3=location.s3, storage_type=location.storage_type, other=location.other, **fields)


def parse_restore_source(raw: Any, error: type[SpecError] = SpecError) -> RestoreSource | None:
    """Parse `spec.restore` (None when absent); raises `error` naming the wrong field."""
    if raw is None:
        return None
    restore = FieldReader(raw, "spec.restore", error)
    storage = parse_storage_location(restore, "backupStorageType")
    bucket, _, key = storage.path.strip().lstrip("/").partition("/")
    if not bucket or not key:
        raise error(f"spec.restore.{storage.section}.path {storage.path!r} must be <bucket>/<key>")
    sha256 = restore.string("sha256", required=True).lower()
    if not _SHA256_RE.match(sha256):
        raise error(f"spec.restore.sha256 {sha256!r} is not a hex sha256 (64 characters 0-9a-f)")
    bump = restore.integer("bumpRevision") if restore.has("bumpRevision") else DEFAULT_BUMP_REVISION
    return RestoreSource.at(
        storage,
        sha256=sha256,
        revision=restore.integer("revision"),
        bump_revision=bump,
        fetch_image=restore.string("fetchImage") or DEFAULT_FETCH_IMAGE,
        restore_uid=restore.string("restoreUID"),
        etag=restore.string("etag"),
        version_id=restore.string("versionId"),
        encryption=parse_encryption(restore),
        staged_claim=restore.string("stagedClaim"),
        staged_claims=_staged_claims(restore, error),
    )


def _staged_claims(restore: FieldReader, error: type[SpecError]) -> tuple[str, ...]:
    claims = restore.strings("stagedClaims")
    if not all(claims) or len(set(claims)) != len(claims):
        raise error(f"spec.restore.stagedClaims {list(claims)!r} must name distinct claims")
    first = restore.string("stagedClaim")
    if claims and claims[0] != first:
        raise error(f"spec.restore.stagedClaims must start with spec.restore.stagedClaim {first!r}")
    return claims


def restore_source_to_api(source: RestoreSource) -> dict[str, Any]:
    """The `spec.restore` dict for `source` (what the restore operator writes)."""
    location = source.location
    section: dict[str, Any] = {"path": location.path}
    if location.secret:
        section[SECRET_FIELDS[location.section]] = location.secret
    if location.endpoint:
        section["endpoint"] = location.endpoint
    if source.s3 is not None and source.s3.force_path_style:
        section["forcePathStyle"] = True
    result: dict[str, Any] = {
        "backupStorageType": location.storage_type,
        location.section: section,
        "sha256": source.sha256,
        "revision": source.revision,
        "bumpRevision": source.bump_revision,
        "fetchImage": source.fetch_image,
    }
    if source.restore_uid:
        result["restoreUID"] = source.restore_uid
    if source.etag:
        result["etag"] = source.etag
    if source.version_id:
        result["versionId"] = source.version_id
    if source.encryption is not None:
        result["encryption"] = encryption_to_api(source.encryption)
    if source.staged_claim:
        result["stagedClaim"] = source.staged_claim
    if source.staged_claims:
        result["stagedClaims"] = list(source.staged_claims)
    return result
