"""Alibaba Cloud Object Storage Service (OSS) through its S3-compatible API, with the S3 storage
(`s3.S3Storage`, boto3) rather than Alibaba's own `oss2` SDK. Why: OSS serves the S3 API on its
normal endpoints (signature V4, virtual-hosted buckets), so one maintained, streaming, already
tested client covers both; oss2 would add a second multipart implementation, its own error
mapping and a dependency tree for the same requests. What differs is here: the CoreOS `ossSecret`
(keys `accessKeyID` and `accessKeySecret`), the spec's `endpoint` (CoreOS's default
http://oss-cn-hangzhou.aliyuncs.com), the region OSS signs with (from the endpoint's host:
`oss-<region>[-internal].aliyuncs.com`), virtual-hosted addressing (OSS refuses path-style
requests) except on an IP or localhost endpoint (an S3-compatible test server), and reasons
`OSS<kind>`.
"""
from __future__ import annotations

import base64
import binascii
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Final

from etcd_common.api.storage_locations import OtherLocation
from etcd_common.storage.objects import LocationInvalid, SecretInvalid
from etcd_common.storage.s3 import AwsCredentials, S3Storage
from kube_adapter.errors import KubeError, NotFound

BACKEND: Final = "OSS"
# Keys of the ossSecret (CoreOS `AlibabaCloudSecretCredentialsAccessKeyID` / `...AccessKeySecret`).
SECRET_ACCESS_KEY_ID: Final = "accessKeyID"
SECRET_ACCESS_KEY_SECRET: Final = "accessKeySecret"
DEFAULT_ENDPOINT: Final = "http://oss-cn-hangzhou.aliyuncs.com"
DEFAULT_REGION: Final = "cn-hangzhou"

SecretReader = Callable[[str, str], dict[str, Any]]


class OssStorage(S3Storage):
    """S3Storage on an OSS endpoint; errors carry reasons `OSS<kind>`."""

    backend = BACKEND


def credentials_from_secret(secret: Mapping[str, Any], *, where: str = "ossSecret") -> AwsCredentials:
    values: dict[str, str] = {}
    for name, encoded in (secret.get("data") or {}).items():
        try:
            values[name] = base64.b64decode(encoded, validate=True).decode("utf-8").strip()
        except (binascii.Error, ValueError, UnicodeDecodeError) as error:
            raise SecretInvalid(f"{where}: key {name!r} is not base64 of UTF-8 text", backend=BACKEND) from error
    values.update({name: str(value).strip() for name, value in (secret.get("stringData") or {}).items()})
    missing = [key for key in (SECRET_ACCESS_KEY_ID, SECRET_ACCESS_KEY_SECRET) if not values.get(key)]
    if missing:
        present = ", ".join(sorted(values)) or "none"
        raise SecretInvalid(f"{where} lacks {' and '.join(repr(k) for k in missing)} (keys present: {present})",
                            backend=BACKEND)
    return AwsCredentials(values[SECRET_ACCESS_KEY_ID], values[SECRET_ACCESS_KEY_SECRET])


def read_oss_credentials(read_secret: SecretReader, namespace: str, secret_name: str,
                         *, field: str = "spec.oss.ossSecret") -> AwsCredentials:
    where = f"secret {namespace}/{secret_name} ({field})"
    try:
        secret = read_secret(namespace, secret_name)
    except NotFound as error:
        raise SecretInvalid(f"{where} does not exist", backend=BACKEND) from error
    except KubeError:
        raise
    return credentials_from_secret(secret, where=where)


def endpoint_url(endpoint: str) -> str:
    """The spec's endpoint as a URL ("" is CoreOS's default; a bare host gets https://)."""
    endpoint = endpoint.strip() or DEFAULT_ENDPOINT
    if "://" not in endpoint:
        endpoint = f"https://{endpoint}"
    try:
        parts = urllib.parse.urlsplit(endpoint)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:
        valid = False
    if not valid:
        raise LocationInvalid(f"spec.oss.endpoint {endpoint!r} is not an http:// or https:// URL", backend=BACKEND)
    return endpoint.rstrip("/")


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
    """The OssStorage for a spec's `oss` section with its ossSecret's credentials (required)."""
    if not location.secret:
        raise SecretInvalid("spec.oss.ossSecret is required (a secret with accessKeyID and accessKeySecret)",
                            backend=BACKEND)
    credentials = read_oss_credentials(read_secret, namespace, location.secret)
    url = endpoint_url(location.endpoint)
    return OssStorage(endpoint=url, addressing_style="path" if _is_local(url) else "virtual",
                      credentials=credentials, region=region_of(url), **options)
