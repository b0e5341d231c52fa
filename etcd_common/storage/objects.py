"""What every object store looks like to the backup and restore operators: the error classes
whose `reason` goes into an object's status (prefixed with the store: `S3AccessDenied`,
`ABSSecretInvalid`, `GCSBucketNotFound`), what a listing and an upload return, and the
`ObjectStorage` protocol that `s3.S3Storage`, `abs.AbsStorage` and `gcs.GcsStorage` implement.

A "bucket" is an S3, GCS or OSS bucket or an Azure Blob Storage container; a "key" is an object
or blob name inside it. Every method raises a `StorageError`, never an SDK's exception. Also the
pieces every backend's objects share: splitting a `path`, an object's time, a partial download's
removal."""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, ClassVar, Protocol


class StorageError(Exception):
    """An object-store operation failed. `reason` is `<backend><kind>` (CamelCase, for status
    conditions and metrics); the message says what happened to which bucket or object."""

    kind: ClassVar[str] = "Failed"
    # Worth retrying as it is (the server or the network), rather than needing a fix by a person.
    transient: ClassVar[bool] = False
    backend: str = "Storage"

    def __init__(self, message: str, *, backend: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if backend is not None:
            self.backend = backend

    @property
    def reason(self) -> str:
        return f"{self.backend}{self.kind}"


class SecretInvalid(StorageError):
    """The credentials secret is missing, lacks a key, or a key's value cannot be used."""

    kind = "SecretInvalid"


class CredentialsRequired(SecretInvalid):
    """No credentials secret, and none may be borrowed: the operator lends its own pod identity
    (IRSA, GKE or Azure workload identity, an instance role) only where its administrator allowed
    it (`etcd_common.storage.locations`). Its reason is `CredentialsRequired` for every store: it
    is the operator's policy, not the store, that refused."""

    kind = "CredentialsRequired"

    @property
    def reason(self) -> str:
        return self.kind


class AccessDenied(StorageError):
    """The server refused the credentials or the permission."""

    kind = "AccessDenied"


class BucketNotFound(StorageError):
    kind = "BucketNotFound"


class ObjectNotFound(StorageError):
    kind = "ObjectNotFound"


class ObjectChanged(StorageError):
    """The object is not the one asked for by ETag, version id or generation (replaced since)."""

    kind = "ObjectChanged"


class Unreachable(StorageError):
    """No answer (connection refused, timeout) or a server-side error (5xx, throttling)."""

    kind = "Unreachable"
    transient = True


class LocationInvalid(StorageError):
    """The `path` or `endpoint` cannot name an object (no bucket, no key, bad URL)."""

    kind = "LocationInvalid"


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    last_modified: datetime
    etag: str = ""
    metadata: Mapping[str, str] | None = None
    # The object's version where the store keeps several: an S3 version id, an ABS version id,
    # a GCS generation; "" otherwise.
    version_id: str = ""


@dataclass(frozen=True)
class UploadResult:
    bucket: str
    key: str
    size: int
    etag: str


class ObjectStorage(Protocol):
    """One object store with one set of credentials, safe to share between threads. Uploads and
    downloads stream: memory does not grow with the object's size."""

    endpoint: str
    # The object's metadata can be given after its bytes (ABS: with the block list; S3 and OSS:
    # the object copied onto itself with it right after). GCS cannot: its resumable upload takes
    # metadata when it starts, and a patch after it would be a second write.
    sets_metadata_last: bool

    def check_bucket(self, bucket: str) -> None: ...

    def create_bucket(self, bucket: str) -> None: ...

    def delete_bucket(self, bucket: str) -> None: ...

    def upload_file(self, bucket: str, key: str, path: str, *, metadata: Mapping[str, str] | None = None,
                    progress: Callable[[int], None] | None = None) -> UploadResult:
        """`progress(bytes)` is called as parts are sent; raising from it stops the upload, and
        no object appears when it raises once every byte was handed over."""
        ...

    def upload_stream(self, bucket: str, key: str, stream: IO[bytes], *,
                      metadata: Mapping[str, str] | None = None,
                      late_metadata: Callable[[], Mapping[str, str]] | None = None) -> UploadResult:
        """Upload what `stream` returns up to its end (need not be seekable; memory flat). With
        `late_metadata` (only where `sets_metadata_last`), metadata known only once the stream
        ended (a digest of it) is added to the object's."""
        ...

    def download_file(self, bucket: str, key: str, path: str, *, if_match: str = "", version_id: str = "") -> int:
        """Download to `path` (a failed download leaves nothing there); returns the size. With
        `if_match` (an ETag) or `version_id`, that object or ObjectChanged."""
        ...

    def head(self, bucket: str, key: str, *, version_id: str = "") -> ObjectInfo: ...

    def exists(self, bucket: str, key: str) -> bool: ...

    def list(self, bucket: str, prefix: str = "") -> list[ObjectInfo]: ...

    def delete(self, bucket: str, key: str) -> None:
        """Delete one object; one already gone is fine."""
        ...


def split_path(path: str, *, backend: str = "S3", bucket_word: str = "bucket", key_word: str = "key",
               field: str = "path", error: type[LocationInvalid] = LocationInvalid) -> tuple[str, str]:
    """CoreOS's `path` "<bucket>/<key>" -> (bucket, key); raises `error` (the backend's
    LocationInvalid) naming `field` without both. The words are the store's: an ABS path is
    "<container>/<blob>", a GCS one "<bucket>/<object>"."""
    bucket, _, key = path.strip().lstrip("/").partition("/")
    if not bucket or not key:
        raise error(f"{field} {path!r} must be \"<{bucket_word}>/<{key_word}>\"", backend=backend)
    return bucket, key


def utc_or_epoch(value: Any) -> datetime:
    """An SDK's object time as an aware datetime (a naive one is UTC); the epoch when it gave none."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(0, tz=UTC)


def remove_quietly(path: str) -> None:
    """Remove a failed download's partial file; one never written is fine."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
