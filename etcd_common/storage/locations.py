"""From a spec's storage location (`storageType` and its `s3`/`abs`/`gcs`/`oss` section) to the
`ObjectStorage` that reaches it, with the credentials of the section's secret: the one place the
backup and restore operators choose a backend."""
from __future__ import annotations

import inspect
from typing import Any, Final

from etcd_common.api.storage_locations import (
    STORAGE_TYPE_ABS,
    STORAGE_TYPE_GCS,
    STORAGE_TYPE_OSS,
    STORAGE_TYPE_S3,
    StorageLocation,
)
from etcd_common.storage import abs as abs_storage
from etcd_common.storage import gcs, objects, oss, s3
from etcd_common.storage.objects import LocationInvalid, ObjectStorage
from etcd_common.storage.secret_data import SecretReader as SecretReader

# storage type -> the URL scheme objects are named with in messages and command output.
SCHEMES: Final = {STORAGE_TYPE_S3: "s3", STORAGE_TYPE_ABS: "abs", STORAGE_TYPE_GCS: "gs", STORAGE_TYPE_OSS: "oss"}

def storage_for_location(location: StorageLocation, namespace: str, read_secret: SecretReader,
                         **options: Any) -> ObjectStorage:
    """The storage for `location` with its secret's credentials read from `namespace`. `options`
    tune the client (timeouts, attempts, part sizes); each backend takes the ones it knows.
    Raises the backend's SecretInvalid or LocationInvalid, or KubeError when the secret cannot be
    read for another reason than its absence."""
    if location.s3 is not None:
        return s3.storage_for_location(location.s3, namespace, read_secret, **_known(s3.S3Storage, options))
    other = location.other
    if other is None:
        raise LocationInvalid(f"storage type {location.storage_type} names no location")
    if location.storage_type == STORAGE_TYPE_ABS:
        return abs_storage.storage_for_location(other, namespace, read_secret,
                                                **_known(abs_storage.AbsStorage, options))
    if location.storage_type == STORAGE_TYPE_GCS:
        return gcs.storage_for_location(other, namespace, read_secret, **_known(gcs.GcsStorage, options))
    if location.storage_type == STORAGE_TYPE_OSS:
        return oss.storage_for_location(other, namespace, read_secret, **_known(s3.S3Storage, options))
    raise LocationInvalid(f"storage type {location.storage_type} is not supported")


def split_location(location: StorageLocation) -> tuple[str, str]:
    """(bucket or container, key) of the location's `path`; the backend's LocationInvalid, whose
    message names the field, when it lacks either."""
    return objects.split_path(location.path, backend=location.storage_type, field=f"spec.{location.section}.path",
                              bucket_word="container" if location.storage_type == STORAGE_TYPE_ABS else "bucket")


def object_url(location: StorageLocation, bucket: str, key: str) -> str:
    """`s3://b/k`, `abs://container/blob`, `gs://b/k` or `oss://b/k`: how messages name an object."""
    return f"{SCHEMES.get(location.storage_type, location.section)}://{bucket}/{key}"


def _known(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    accepted = inspect.signature(cls).parameters
    return {name: value for name, value in options.items() if name in accepted}
