"""`spec.restore` of an EtcdCluster: the snapshot its seed member starts from (an addition to
CoreOS v1beta2). The restore operator writes it after it verified the snapshot; the etcd operator
reads it only when it bootstraps the seed: the seed pod's init containers fetch the snapshot from
S3 with the secret's credentials, check its sha256 and restore it with `etcdutl snapshot restore`.
Once the cluster has bootstrapped, the field has no further effect."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from etcd_common.api.fields import FieldReader, SpecError
from etcd_common.api.storage_locations import STORAGE_TYPE_S3, S3Location, parse_storage_location

# etcd's own advice for a restore that watchers of the old cluster must not see go backwards:
# bump by more than the revisions the old cluster can have made since the snapshot.
DEFAULT_BUMP_REVISION: Final = 1_000_000_000
# The image whose `etcd-restore-seed` fetches the snapshot (this project's image, as deployed).
DEFAULT_FETCH_IMAGE: Final = "etcd-operator-py:0.1.0"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RestoreSource:
    """Where the seed's snapshot is and what it must be."""

    s3: S3Location
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
    # The S3 object verified (ETag; version id in a versioned bucket): the seed fetches only it.
    etag: str = ""
    version_id: str = ""


def parse_restore_source(raw: Any, error: type[SpecError] = SpecError) -> RestoreSource | None:
    """Parse `spec.restore` (None when absent); raises `error` naming the wrong field."""
    if raw is None:
        return None
    restore = FieldReader(raw, "spec.restore", error)
    storage = parse_storage_location(restore, "backupStorageType")
    if storage.storage_type != STORAGE_TYPE_S3 or storage.s3 is None:
        raise error(f"spec.restore.backupStorageType {storage.storage_type} is not supported; only S3 is")
    if not storage.s3.key:
        raise error(f"spec.restore.s3.path {storage.s3.path!r} must be <bucket>/<key>")
    sha256 = restore.string("sha256", required=True).lower()
    if not _SHA256_RE.match(sha256):
        raise error(f"spec.restore.sha256 {sha256!r} is not a hex sha256 (64 characters 0-9a-f)")
    bump = restore.integer("bumpRevision") if restore.has("bumpRevision") else DEFAULT_BUMP_REVISION
    return RestoreSource(
        s3=storage.s3,
        sha256=sha256,
        revision=restore.integer("revision"),
        bump_revision=bump,
        fetch_image=restore.string("fetchImage") or DEFAULT_FETCH_IMAGE,
        restore_uid=restore.string("restoreUID"),
        etag=restore.string("etag"),
        version_id=restore.string("versionId"),
    )


def restore_source_to_api(source: RestoreSource) -> dict[str, Any]:
    """The `spec.restore` dict for `source` (what the restore operator writes)."""
    s3: dict[str, Any] = {"path": source.s3.path}
    if source.s3.aws_secret:
        s3["awsSecret"] = source.s3.aws_secret
    if source.s3.endpoint:
        s3["endpoint"] = source.s3.endpoint
    if source.s3.force_path_style:
        s3["forcePathStyle"] = True
    result: dict[str, Any] = {
        "backupStorageType": STORAGE_TYPE_S3,
        "s3": s3,
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
    return result
