"""Alibaba Cloud Object Storage Service (OSS) through its S3-compatible API, with the S3 storage
(`s3.S3Storage`, boto3) rather than Alibaba's own `oss2` SDK. Why: OSS serves the S3 API on its
normal endpoints (signature V4, virtual-hosted buckets), so one maintained, streaming, already
tested client covers both; oss2 would add a second multipart implementation, its own error
mapping and a dependency tree for the same requests. What differs is here: the CoreOS `ossSecret`
(keys `accessKeyID` and `accessKeySecret`), the spec's `endpoint` (CoreOS's default
http://oss-cn-hangzhou.aliyuncs.com), the region OSS signs with (from the endpoint's host:
`oss-<region>[-internal].aliyuncs.com`), virtual-hosted addressing (OSS refuses path-style
requests) except on an IP or localhost endpoint (an S3-compatible test server), reasons
`OSS<kind>`, and late metadata set by one CopyObject whatever the object's size.
"""
from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any, Final

from etcd_common.api.storage_locations import OtherLocation
from etcd_common.storage.endpoints import endpoint_url as checked_endpoint_url
from etcd_common.storage.s3 import AwsCredentials, S3Storage
from etcd_common.storage.secret_data import SecretReader as SecretReader
from etcd_common.storage.secret_data import read_credentials, require_keys, secret_values

BACKEND: Final = "OSS"
# Keys of the ossSecret (CoreOS `AlibabaCloudSecretCredentialsAccessKeyID` / `...AccessKeySecret`).
SECRET_ACCESS_KEY_ID: Final = "accessKeyID"
SECRET_ACCESS_KEY_SECRET: Final = "accessKeySecret"
DEFAULT_ENDPOINT: Final = "http://oss-cn-hangzhou.aliyuncs.com"
DEFAULT_REGION: Final = "cn-hangzhou"


class OssStorage(S3Storage):
    """S3Storage on an OSS endpoint; errors carry reasons `OSS<kind>`."""

    backend = BACKEND
    # OSS copies an object onto itself (late metadata) in one CopyObject at any size (the same
    # bucket, the same storage class); a part-by-part copy would rewrite it.
    single_copy_limit_bytes = None


def credentials_from_secret(secret: Mapping[str, Any], *, where: str = "ossSecret") -> AwsCredentials:
    values = secret_values(secret, where=where, backend=BACKEND)
    require_keys(values, (SECRET_ACCESS_KEY_ID, SECRET_ACCESS_KEY_SECRET), where=where, backend=BACKEND)
    return AwsCredentials(values[SECRET_ACCESS_KEY_ID], values[SECRET_ACCESS_KEY_SECRET])


def read_oss_credentials(read_secret: SecretReader, namespace: str, secret_name: str,
                         *, field: str = "spec.oss.ossSecret") -> AwsCredentials:
    return read_credentials(read_secret, namespace, secret_name, field=field, parse=credentials_from_secret,
                            backend=BACKEND)


def endpoint_url(endpoint: str) -> str:
    """The spec's endpoint as a URL ("" is CoreOS's default; a bare host gets https://)."""
    return checked_endpoint_url(endpoint.strip() or DEFAULT_ENDPOINT, where="spec.oss.endpoint", backend=BACKEND)


def region_of(endpoint: str) -> str:
    """`oss-cn-beijing.aliyuncs.com` -> `cn-beijing` (`-internal` dropped); else DEFAULT_REGION."""
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    label = host.split(".", 1)[0]
    if host.endswith(".aliyuncs.com") and label.startswith("oss-"):
        return label.removeprefix("oss-").removesuffix("-internal")
    return DEFAULT_REGION


def _is_local(endpoint: str) -> bool:
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    return all(part.isdigit() for part in host.split(".")) or ":" in host


def storage_for_location(location: OtherLocation, namespace: str, read_secret: SecretReader,
                         **options: Any) -> OssStorage:
    """The OssStorage for a spec's `oss` section with its ossSecret's credentials; without one,
    boto3's default chain (the pod's AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY holding an OSS
    AccessKey pair): reached only through `locations.storage_for_location`, which refuses that
    unless the operator lends its identity."""
    credentials = read_oss_credentials(read_secret, namespace, location.secret) if location.secret else None
    url = endpoint_url(location.endpoint)
    return OssStorage(endpoint=url, addressing_style="path" if _is_local(url) else "virtual",
                      credentials=credentials, region=region_of(url), **options)
