"""From a spec's storage location (`storageType` and its `s3`/`abs`/`gcs`/`oss` section) to the
`ObjectStorage` that reaches it, with the credentials of the section's secret: the one place the
backup and restore operators choose a backend, and the one place that decides whether a location
without a secret may use the pod's own identity (the SDK's default credential chain: IRSA's web
identity token, GKE workload identity, an instance role, AWS_* environment variables; Azure
workload identity, also for an absSecret that says `use-workload-identity`). That is
refused unless the caller was allowed it (`allow_pod_identity`: the backup operator's
`--allow-pod-identity`, off by default), before any secret is read or any request is sent: a
tenant who names no secret must not get the operator's identity."""
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
from etcd_common.storage.objects import CredentialsRequired, LocationInvalid, ObjectStorage
from etcd_common.storage.secret_data import SecretReader as SecretReader

# storage type -> the URL scheme objects are named with in messages and command output.
SCHEMES: Final = {STORAGE_TYPE_S3: "s3", STORAGE_TYPE_ABS: "abs", STORAGE_TYPE_GCS: "gs", STORAGE_TYPE_OSS: "oss"}

# The flag that lends the pod's identity (named in refusals).
POD_IDENTITY_FLAG: Final = "--allow-pod-identity"


def storage_for_location(location: StorageLocation, namespace: str, read_secret: SecretReader, *,
                         allow_pod_identity: bool = False, **options: Any) -> ObjectStorage:
    """The storage for `location` with its secret's credentials read from `namespace`; without a
    secret, the SDK's default credential chain when `allow_pod_identity`, else CredentialsRequired.
    `options` tune the client (timeouts, attempts, part sizes); each backend takes the ones it
    knows. Raises CredentialsRequired, the backend's SecretInvalid or LocationInvalid, or
    KubeError when the secret cannot be read for another reason than its absence."""
    if not location.secret:
        refusal = pod_identity_refusal(location, allow_pod_identity)
        if refusal is not None:
            raise refusal
    if location.s3 is not None:
        return s3.storage_for_location(location.s3, namespace, read_secret, **_known(s3.S3Storage, options))
    other = location.other
    if other is None:
        raise LocationInvalid(f"storage type {location.storage_type} names no location")
    if location.storage_type == STORAGE_TYPE_ABS:
        credentials = abs_storage.location_credentials(other, namespace, read_secret)
        if credentials.workload_identity and location.secret:  # the absSecret asks for the pod's identity
            refusal = pod_identity_refusal(location, allow_pod_identity, by_secret=True)
            if refusal is not None:
                raise refusal
        return abs_storage.AbsStorage(credentials, endpoint=other.endpoint, **_known(abs_storage.AbsStorage, options))
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


def pod_identity_refusal(location: StorageLocation, allowed: bool, *, by_secret: bool = False) -> CredentialsRequired | None:
    """Why `location`, which names no secret (or, `by_secret`, an absSecret saying
    use-workload-identity), may not use the pod's own identity; None when it may (`allowed`)."""
    field = f"spec.{location.section}.{location.secret_field}"
    if allowed:
        return None
    if by_secret:
        return CredentialsRequired(
            f"secret {location.secret} ({field}) says {abs_storage.SECRET_USE_WORKLOAD_IDENTITY}, and this operator "
            f"does not lend its own identity ({POD_IDENTITY_FLAG} is off): give the secret storage-key instead, "
            f"or have the administrator enable {POD_IDENTITY_FLAG} for a workload identity meant for it",
            backend=location.storage_type)
    return CredentialsRequired(
        f"{field} is empty and this operator does not lend its own identity ({POD_IDENTITY_FLAG} is off): "
        f"name a Secret with the {location.storage_type} credentials in {field}, or have the administrator "
        f"enable {POD_IDENTITY_FLAG} for a workload identity meant for it", backend=location.storage_type)
