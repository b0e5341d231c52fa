"""S3 (AWS or any S3-compatible server) as the backup and restore operators use it: a boto3 client
built from an `S3Location` and the CoreOS `awsSecret`, streaming multipart uploads and downloads,
and boto3's failures mapped to a few error classes whose `reason` goes into an object's status.

The secret has CoreOS's shape: key `credentials` holds an AWS shared-credentials file and key
`config` an AWS config file, both read for profile `default` (`aws_access_key_id`,
`aws_secret_access_key`, optional `aws_session_token`; `region`; and, as the AWS SDKs' shared
config has them, `endpoint_url` and a nested `s3 =` section with `addressing_style` and its own
`endpoint_url`, which wins over the profile's). Without a secret the client uses boto3's own
credential chain (environment, IRSA's web identity token, instance role): only where
`locations.storage_for_location` allowed the pod's identity.

Which server, and how buckets are addressed: the spec's `s3.endpoint` wins over the secret's
`endpoint_url`, and `s3.forcePathStyle: true` over its `addressing_style` (false or absent leaves
that to the secret); with neither, AWS and boto3's automatic addressing. So the CoreOS manifests,
which have only `path` and `awsSecret`, reach an S3-compatible server named in the secret.

Memory does not grow with the object size: uploads and downloads go part by part (PART_SIZE_BYTES,
at most MAX_CONCURRENCY parts in flight), from and to files on disk; a stream's parts are held in
memory, at most STREAM_PARTS_IN_MEMORY of them.

S3 takes an object's metadata before its first part. Metadata known only once a stream ended (a
backup's SHA-256) is set after the upload by copying the object onto itself with the metadata
replaced (`upload_stream(late_metadata=...)`): S3-compatible servers such as SeaweedFS only
rewrite the metadata; AWS copies the object server-side.
"""
from __future__ import annotations

import base64
import binascii
import configparser
import copy
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any, Final, Literal

import boto3.session
import botocore.exceptions
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from etcd_common.api.storage_locations import S3Location
from etcd_common.storage import objects
from etcd_common.storage.endpoints import is_http_url
from etcd_common.storage.objects import (
    AccessDenied,
    BucketNotFound,
    LocationInvalid,
    ObjectChanged,
    ObjectNotFound,
    SecretInvalid,
    StorageError,
    Unreachable,
    remove_quietly,
    utc_or_epoch,
)

# ObjectInfo and UploadResult were defined here before the other stores came; still importable here.
from etcd_common.storage.objects import ObjectInfo as ObjectInfo
from etcd_common.storage.objects import UploadResult as UploadResult
from etcd_common.storage.secret_data import SecretReader as SecretReader
from etcd_common.storage.secret_data import read_credentials

logger = logging.getLogger(__name__)

# File names inside the awsSecret (CoreOS `AWSSecretCredentialsFileName` / `AWSSecretConfigFileName`).
AWS_SECRET_CREDENTIALS_FILE: Final = "credentials"
AWS_SECRET_CONFIG_FILE: Final = "config"
AWS_PROFILE: Final = "default"
# Profile keys naming the S3 server (AWS SDK shared config): `endpoint_url`, and a nested section
# `s3 =` whose indented lines may hold `addressing_style` and an S3-only `endpoint_url`.
ENDPOINT_URL_KEY: Final = "endpoint_url"
S3_SECTION_KEY: Final = "s3"
ADDRESSING_STYLE_KEY: Final = "addressing_style"
AddressingStyle = Literal["path", "virtual", "auto"]
ADDRESSING_STYLES: Final[tuple[AddressingStyle, ...]] = ("path", "virtual", "auto")
# S3-compatible servers ignore the region, but a request must be signed for one.
DEFAULT_REGION: Final = "us-east-1"

# Parts of files are read from disk as they are sent, so more parts in flight cost little memory
# (a stream's parts are buffered: at most STREAM_PARTS_IN_MEMORY of them).
PART_SIZE_BYTES: Final = 8 * 1024 * 1024
MULTIPART_THRESHOLD_BYTES: Final = 8 * 1024 * 1024
# A pinned download (If-Match / VersionId) streams one GetObject to disk in pieces of this size.
DOWNLOAD_CHUNK_BYTES: Final = 1024 * 1024
MAX_CONCURRENCY: Final = 10  # boto3's own default
# A stream's parts are read into memory (a file's are read from disk as they are sent): at most
# this many held at once (boto3's default, 10, costs 80 MiB).
STREAM_PARTS_IN_MEMORY: Final = 4
CONNECT_TIMEOUT_SECONDS: Final = 5.0
READ_TIMEOUT_SECONDS: Final = 60.0
# botocore's own retries of throttling, 5xx and connection errors, per request.
MAX_ATTEMPTS: Final = 3
# The largest object one CopyObject copies (S3's limit): a larger one's self-copy (late metadata)
# goes part by part (UploadPartCopy) with boto3's managed copy, LATE_METADATA_COPY_PART_BYTES a part.
SINGLE_COPY_LIMIT_BYTES: Final = 5 * 1024 ** 3
LATE_METADATA_COPY_PART_BYTES: Final = 512 * 1024 ** 2

# Status reasons (CamelCase, as Kubernetes condition reasons are).
REASON_SECRET_INVALID: Final = "S3SecretInvalid"
REASON_ACCESS_DENIED: Final = "S3AccessDenied"
REASON_BUCKET_NOT_FOUND: Final = "S3BucketNotFound"
REASON_OBJECT_NOT_FOUND: Final = "S3ObjectNotFound"
REASON_UNREACHABLE: Final = "S3Unreachable"
REASON_LOCATION_INVALID: Final = "S3LocationInvalid"
REASON_OBJECT_CHANGED: Final = "S3ObjectChanged"
REASON_FAILED: Final = "S3Failed"

# ---------------------------------------------------------------------------------------------
# Errors


class S3Error(StorageError):
    """An S3 operation failed (`reason` S3Failed, or the subclass's S3<kind>)."""

    backend = "S3"


class S3SecretInvalid(S3Error, SecretInvalid):
    """The awsSecret is missing, has no usable credentials for profile `default`, or names the S3
    server in a way that cannot be used (not a URL, an unknown addressing style)."""


class S3AccessDenied(S3Error, AccessDenied):
    """The server refused the credentials (unknown key, wrong secret) or the permission."""


class S3BucketNotFound(S3Error, BucketNotFound):
    pass


class S3ObjectNotFound(S3Error, ObjectNotFound):
    pass


class S3ObjectChanged(S3Error, ObjectChanged):
    """The object is not the one asked for by ETag or version id (replaced since; HTTP 412)."""


class S3Unreachable(S3Error, Unreachable):
    """No answer (connection refused, timeout) or a server-side error (5xx, throttling)."""


class S3LocationInvalid(S3Error, LocationInvalid):
    """The `path` or `endpoint` cannot name an object (no bucket, no key, bad URL)."""


_ACCESS_DENIED_CODES = frozenset({
    "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
    "AuthorizationHeaderMalformed", "InvalidSecurity", "AllAccessDisabled", "AccountProblem", "403", "Forbidden",
})
_TRANSIENT_CODES = frozenset({
    "InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "RequestTimeTooSkewed", "503", "500",
    "502", "504", "Throttling", "ThrottlingException",
})
_CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ConnectionClosedError,
    botocore.exceptions.ConnectionError,
    botocore.exceptions.HTTPClientError,
)


def translate_error(error: BaseException, *, bucket: str, key: str = "", operation: str = "",
                    backend: str = "S3") -> S3Error:
    """The `S3Error` for a boto3/botocore failure of `operation` on `bucket`/`key`; looks through
    boto3's transfer wrappers (S3UploadFailedError) to the error they wrap. `backend` prefixes the
    reason (OSS, reached through its S3-compatible API, reports `OSS<kind>`)."""
    if isinstance(error, S3Error):
        return error
    translated = _translate(error, bucket=bucket, key=key, operation=operation)
    translated.backend = backend
    return translated


def _translate(error: BaseException, *, bucket: str, key: str, operation: str) -> S3Error:
    where = f"s3://{bucket}/{key}" if key else f"bucket {bucket!r}"
    doing = f"{operation} {where}" if operation else where
    for cause in _causes(error):
        if isinstance(cause, botocore.exceptions.ClientError):
            details: Mapping[str, Any] = cause.response.get("Error") or {}
            response_metadata: Mapping[str, Any] = cause.response.get("ResponseMetadata") or {}
            code = str(details.get("Code") or "")
            status = int(response_metadata.get("HTTPStatusCode") or 0)
            text = str(details.get("Message") or code or status)
            if code == "PreconditionFailed" or status == 412:
                return S3ObjectChanged(f"{doing}: the object is not the one asked for (ETag or version "
                                       "changed: replaced since)")
            if code == "NoSuchBucket" or (status == 404 and not key):
                return S3BucketNotFound(f"{doing}: bucket {bucket!r} does not exist")
            if code in ("NoSuchKey", "NotFound", "404") or status == 404:
                return S3ObjectNotFound(f"{doing}: no such object")
            if code in _ACCESS_DENIED_CODES or status in (401, 403):
                return S3AccessDenied(f"{doing}: access denied ({code or status}: {text}); "
                                      "check the credentials in the awsSecret and their permissions")
            if code in _TRANSIENT_CODES or status >= 500 or status == 429:
                return S3Unreachable(f"{doing}: server error ({code or status}: {text})")
            return S3Error(f"{doing}: {code or status}: {text}")
        if isinstance(cause, (botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError)):
            return S3SecretInvalid(f"{doing}: no usable AWS credentials: {cause}")
        if isinstance(cause, _CONNECTION_ERRORS):
            return S3Unreachable(f"{doing}: cannot reach the S3 server: {cause}")
        if isinstance(cause, botocore.exceptions.ParamValidationError):
            return S3LocationInvalid(f"{doing}: {cause}")
    return S3Error(f"{doing}: {type(error).__name__}: {error}")


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


# ---------------------------------------------------------------------------------------------
# Credentials (pure)


@dataclass(frozen=True)
class AwsCredentials:
    """Profile `default` of the awsSecret's files: the credentials, and where the S3 server is
    ("" / None: not set there)."""

    access_key_id: str
    secret_access_key: str = ""
    session_token: str = ""
    region: str = ""
    endpoint_url: str = ""
    addressing_style: AddressingStyle | None = None

    def __repr__(self) -> str:  # never log a secret
        return (f"AwsCredentials(access_key_id={self.access_key_id!r}, region={self.region!r}, "
                f"endpoint_url={self.endpoint_url!r}, addressing_style={self.addressing_style!r})")


# A profile key's value and the file it was read from (for messages).
_Setting = tuple[str, str]


def parse_aws_files(credentials: str, config: str = "", *, where: str = "awsSecret") -> AwsCredentials:
    """Read profile `default` of an AWS shared-credentials file and config file (as the AWS SDKs
    do: keys may be in either, the credentials file's win; the config file's section is `[default]`
    or `[profile default]`). Raises S3SecretInvalid naming what is wrong, in which file and key."""
    profile: dict[str, _Setting] = {}
    s3_section: dict[str, _Setting] = {}
    for text, file_name, sections in (
        (config, AWS_SECRET_CONFIG_FILE, (AWS_PROFILE, f"profile {AWS_PROFILE}")),
        (credentials, AWS_SECRET_CREDENTIALS_FILE, (AWS_PROFILE,)),
    ):
        if not text.strip():
            continue
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text)
        except configparser.Error as error:
            raise S3SecretInvalid(f"{where}: file {file_name!r} is not an AWS {file_name} file: "
                                  f"{str(error).splitlines()[0]}") from error
        for section in sections:
            if not parser.has_section(section):
                continue
            for key, value in parser.items(section):
                key = key.strip().lower()
                if key == S3_SECTION_KEY:
                    nested = _nested_section(
                        value, f"{where}: file {file_name!r}, profile [{AWS_PROFILE}], key {S3_SECTION_KEY}")
                    s3_section.update({k: (v, file_name) for k, v in nested.items()})
                else:
                    profile[key] = (value.strip(), file_name)
    access_key = profile.get("aws_access_key_id", ("", ""))[0]
    secret_key = profile.get("aws_secret_access_key", ("", ""))[0]
    if not access_key or not secret_key:
        missing = [name for name, value in (("aws_access_key_id", access_key),
                                            ("aws_secret_access_key", secret_key)) if not value]
        raise S3SecretInvalid(f"{where}: profile [{AWS_PROFILE}] of file {AWS_SECRET_CREDENTIALS_FILE!r} "
                              f"lacks {' and '.join(missing)}")
    # The S3-only endpoint wins over the profile's, as with the SDKs' service-specific settings.
    endpoint_url = ""
    for settings, key in ((s3_section, f"{S3_SECTION_KEY}.{ENDPOINT_URL_KEY}"), (profile, ENDPOINT_URL_KEY)):
        value, file_name = settings.get(ENDPOINT_URL_KEY, ("", ""))
        if value:
            endpoint_url = _endpoint_url(value, f"{where}: file {file_name!r}, profile [{AWS_PROFILE}], key {key}")
            break
    addressing_style: AddressingStyle | None = None
    value, file_name = s3_section.get(ADDRESSING_STYLE_KEY, ("", ""))
    if value:
        addressing_style = next((style for style in ADDRESSING_STYLES if style == value.lower()), None)
        if addressing_style is None:
            raise S3SecretInvalid(f"{where}: file {file_name!r}, profile [{AWS_PROFILE}], key "
                                  f"{S3_SECTION_KEY}.{ADDRESSING_STYLE_KEY} = {value!r}: must be "
                                  f"{', '.join(ADDRESSING_STYLES[:-1])} or {ADDRESSING_STYLES[-1]}")
    return AwsCredentials(access_key, secret_key, profile.get("aws_session_token", ("", ""))[0],
                          profile.get("region", ("", ""))[0], endpoint_url, addressing_style)


def _nested_section(value: str, where: str) -> dict[str, str]:
    """The `key = value` lines of a nested section (`s3 =` alone on its line, the settings on the
    indented lines below it, which configparser hands over as one value starting with a newline)."""
    if value.strip() and not value.startswith("\n"):
        raise S3SecretInvalid(f"{where} = {value.strip()!r}: must be a nested section: `{S3_SECTION_KEY} =` "
                              f"alone on its line, then indented lines such as `{ADDRESSING_STYLE_KEY} = path`")
    settings: dict[str, str] = {}
    for line in value.splitlines():
        if not line.strip():
            continue
        key, equals, setting = line.partition("=")
        if not equals or not key.strip():
            raise S3SecretInvalid(f"{where}: line {line.strip()!r} is not `key = value`")
        settings[key.strip().lower()] = setting.strip()
    return settings


def _endpoint_url(value: str, where: str) -> str:
    """A config file's endpoint URL, checked: the SDKs take only a full http(s) URL."""
    if not is_http_url(value):
        raise S3SecretInvalid(f"{where} = {value!r}: not an http:// or https:// URL "
                              "(e.g. http://s3.example:9000)")
    return value.rstrip("/")


def credentials_from_secret(secret: Mapping[str, Any], *, where: str = "awsSecret") -> AwsCredentials:
    """The credentials in a Secret (API dict: base64 `data`, or `stringData` as written)."""
    files: dict[str, str] = {}
    data = secret.get("data") or {}
    string_data = secret.get("stringData") or {}
    for name in (AWS_SECRET_CREDENTIALS_FILE, AWS_SECRET_CONFIG_FILE):
        if name in string_data:
            files[name] = str(string_data[name])
            continue
        encoded = data.get(name)
        if not encoded:
            continue
        try:
            files[name] = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError) as error:
            raise S3SecretInvalid(f"{where}: key {name!r} is not base64 of a UTF-8 text file") from error
    if not files.get(AWS_SECRET_CREDENTIALS_FILE, "").strip() and not files.get(AWS_SECRET_CONFIG_FILE, "").strip():
        present = ", ".join(sorted({*data, *string_data})) or "none"
        raise S3SecretInvalid(f"{where} has no {AWS_SECRET_CREDENTIALS_FILE!r} file "
                              f"(an AWS shared-credentials file); keys present: {present}")
    return parse_aws_files(files.get(AWS_SECRET_CREDENTIALS_FILE, ""), files.get(AWS_SECRET_CONFIG_FILE, ""),
                           where=where)


def read_aws_credentials(read_secret: SecretReader, namespace: str, secret_name: str,
                         *, field: str = "spec.s3.awsSecret") -> AwsCredentials:
    """The credentials of secret `namespace/secret_name`, named in the spec at `field`. A missing
    secret is S3SecretInvalid; other API failures pass through as KubeError."""
    return read_credentials(read_secret, namespace, secret_name, field=field, parse=credentials_from_secret,
                            backend="S3", invalid=S3SecretInvalid)


def normalize_endpoint(endpoint: str) -> str:
    """`endpoint` as a URL boto3 takes: "" stays "" (AWS); a bare `host:port` gets https://, as the
    AWS Go SDK CoreOS used did."""
    endpoint = endpoint.strip()
    if not endpoint:
        return ""
    if "://" not in endpoint:
        endpoint = f"https://{endpoint}"
    if not endpoint.startswith(("http://", "https://")):
        raise S3LocationInvalid(f"endpoint {endpoint!r} must be an http:// or https:// URL")
    return endpoint.rstrip("/")


def split_path(path: str) -> tuple[str, str]:
    """CoreOS's `path` "<bucket>/<key>" -> (bucket, key); raises S3LocationInvalid without both."""
    return objects.split_path(path, backend="S3", error=S3LocationInvalid)


# ---------------------------------------------------------------------------------------------
# The client


class S3Storage:
    """One S3 endpoint with one set of credentials; safe to share between threads (boto3 clients
    are). Every method raises an `S3Error`, never a boto3 exception."""

    # The reasons' prefix (`OSS` for the OSS storage, which is this class on OSS's S3 API).
    backend: str = "S3"
    # Late metadata is set by a copy of the object onto itself after the upload (`upload_stream`).
    sets_metadata_last: bool = True
    # Above this size the self-copy goes part by part; None: one CopyObject at any size.
    single_copy_limit_bytes: int | None = SINGLE_COPY_LIMIT_BYTES

    def __init__(
        self,
        *,
        endpoint: str = "",
        force_path_style: bool = False,
        addressing_style: AddressingStyle | None = None,
        credentials: AwsCredentials | None = None,
        region: str = "",
        part_size_bytes: int = PART_SIZE_BYTES,
        max_concurrency: int = MAX_CONCURRENCY,
        connect_timeout_seconds: float = CONNECT_TIMEOUT_SECONDS,
        read_timeout_seconds: float = READ_TIMEOUT_SECONDS,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.endpoint = normalize_endpoint(endpoint)
        # force_path_style=True is addressing_style="path"; None leaves it to boto3 ("auto").
        self.addressing_style: AddressingStyle | None = "path" if force_path_style else addressing_style
        self.force_path_style = self.addressing_style == "path"
        config = Config(
            connect_timeout=connect_timeout_seconds,
            read_timeout=read_timeout_seconds,
            retries={"max_attempts": max_attempts, "mode": "standard"},
            s3={"addressing_style": self.addressing_style or "auto"},
            # S3-compatible servers do not all take the newer default checksums; S3 needs none.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        kwargs: dict[str, Any] = {
            "region_name": region or (credentials.region if credentials else "") or DEFAULT_REGION,
            "config": config,
        }
        if self.endpoint:
            kwargs["endpoint_url"] = self.endpoint
        if credentials is not None:
            kwargs["aws_access_key_id"] = credentials.access_key_id
            kwargs["aws_secret_access_key"] = credentials.secret_access_key
            if credentials.session_token:
                kwargs["aws_session_token"] = credentials.session_token
        self.client: Any = _new_client(kwargs, shared_session=credentials is not None)
        self.max_concurrency = max_concurrency
        self.transfer_config = TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD_BYTES,
            multipart_chunksize=part_size_bytes,
            max_concurrency=max_concurrency,
            use_threads=max_concurrency > 1,
        )
        self.stream_transfer_config = copy.copy(self.transfer_config)
        # Not among boto3's TransferConfig arguments; s3transfer's, which it extends, reads it.
        self.stream_transfer_config.max_in_memory_upload_chunks = STREAM_PARTS_IN_MEMORY

    def _translate(self, error: BaseException, *, bucket: str, key: str = "", operation: str = "") -> S3Error:
        return translate_error(error, bucket=bucket, key=key, operation=operation, backend=self.backend)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(endpoint={self.endpoint or 'AWS'!r}, "
                f"addressing_style={self.addressing_style or 'auto'!r})")

    @classmethod
    def for_location(cls, location: S3Location, credentials: AwsCredentials | None, **options: Any) -> S3Storage:
        """The storage for a spec's `s3` section and its awsSecret's profile: the spec's `endpoint`
        and `forcePathStyle: true` win over the secret's `endpoint_url` and `addressing_style`."""
        from_secret = credentials or AwsCredentials("")
        return cls(endpoint=location.endpoint or from_secret.endpoint_url,
                   addressing_style="path" if location.force_path_style else from_secret.addressing_style,
                   credentials=credentials, **options)

    # --- buckets

    def check_bucket(self, bucket: str) -> None:
        """Raises S3BucketNotFound, S3AccessDenied or S3Unreachable unless the bucket is there for us."""
        try:
            self.client.head_bucket(Bucket=bucket)
        except Exception as error:
            raise self._translate(error, bucket=bucket, operation="check") from error

    def create_bucket(self, bucket: str) -> None:
        """Create a bucket (tests, demos); one that exists already is fine."""
        try:
            self.client.create_bucket(Bucket=bucket)
        except botocore.exceptions.ClientError as error:
            code = (error.response.get("Error") or {}).get("Code")
            if code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                return
            raise self._translate(error, bucket=bucket, operation="create") from error
        except Exception as error:
            raise self._translate(error, bucket=bucket, operation="create") from error

    def delete_bucket(self, bucket: str) -> None:
        """Delete a bucket and every object in it (tests, demos); one already gone is fine."""
        try:
            for info in self.list(bucket):
                self.delete(bucket, info.key)
            self.client.delete_bucket(Bucket=bucket)
        except S3BucketNotFound:
            return
        except botocore.exceptions.ClientError as error:
            if (error.response.get("Error") or {}).get("Code") == "NoSuchBucket":
                return
            raise self._translate(error, bucket=bucket, operation="delete") from error

    # --- objects

    def upload_file(self, bucket: str, key: str, path: str, *, metadata: Mapping[str, str] | None = None,
                    progress: Callable[[int], None] | None = None) -> UploadResult:
        """Upload the file at `path` (multipart above MULTIPART_THRESHOLD_BYTES, read part by
        part from disk). `metadata` becomes x-amz-meta-* headers. The object appears only once
        complete; a failed multipart upload is aborted."""
        extra: dict[str, Any] = {"Metadata": dict(metadata)} if metadata else {}
        try:
            self.client.upload_file(path, bucket, key, ExtraArgs=extra or None, Config=self.transfer_config,
                                    Callback=progress)
        except Exception as error:
            raise self._translate(error, bucket=bucket, key=key, operation="upload to") from error
        info = self.head(bucket, key)
        return UploadResult(bucket, key, info.size, info.etag)

    def upload_stream(self, bucket: str, key: str, stream: IO[bytes], *,
                      metadata: Mapping[str, str] | None = None,
                      late_metadata: Callable[[], Mapping[str, str]] | None = None) -> UploadResult:
        """Upload from a readable binary stream (need not be seekable); at most
        STREAM_PARTS_IN_MEMORY parts are held in memory at once. S3 takes metadata before the first
        part: `late_metadata` (called once the upload is complete) is set by copying the object
        onto itself with every metadata item, `metadata`'s too, replaced (`_add_late_metadata`)."""
        extra: dict[str, Any] = {"Metadata": dict(metadata)} if metadata else {}
        try:
            self.client.upload_fileobj(stream, bucket, key, ExtraArgs=extra or None, Config=self.stream_transfer_config)
        except Exception as error:
            raise self._translate(error, bucket=bucket, key=key, operation="upload to") from error
        if late_metadata is not None:
            return self._add_late_metadata(bucket, key, dict(metadata or {}), late_metadata)
        info = self.head(bucket, key)
        return UploadResult(bucket, key, info.size, info.etag)

    def _add_late_metadata(self, bucket: str, key: str, metadata: dict[str, str],
                           late_metadata: Callable[[], Mapping[str, str]]) -> UploadResult:
        """Copy the object just uploaded onto itself (MetadataDirective REPLACE; only that very
        object: its ETag; a versioned bucket gets a second version),
        then read back that it carries every item. On any failure an S3Error saying that the
        object stays without its late metadata: its bytes are complete (a backup's snapshot was
        checked before the upload completed), so it is kept, never reported as uploaded."""
        late: Mapping[str, str] = {}
        try:
            uploaded = self.head(bucket, key)
            late = late_metadata()
            wanted = {**metadata, **late}
            self._copy_onto_itself(bucket, key, uploaded, wanted)
            info = self.head(bucket, key)
            kept = info.metadata or {}
            missing = sorted(name for name, value in wanted.items() if kept.get(name) != value)
            if missing:
                raise S3Error(f"set metadata on s3://{bucket}/{key}: the copy onto itself succeeded, but the "
                              f"object lacks {', '.join(missing)} (the server did not replace its metadata)",
                              backend=self.backend)
        except Exception as error:
            failed = self._translate(error, bucket=bucket, key=key, operation="set metadata (a copy onto itself) on")
            raise type(failed)(f"{failed.message}; the uploaded object stays, without "
                               f"{', '.join(sorted(late)) or 'its late metadata'}",
                               backend=self.backend) from error
        return UploadResult(bucket, key, info.size, info.etag)

    def _copy_onto_itself(self, bucket: str, key: str, uploaded: ObjectInfo, metadata: Mapping[str, str]) -> None:
        # Pinned by ETag, not by version id: copying a version needs s3:GetObjectVersion as well.
        source = {"Bucket": bucket, "Key": key}
        args: dict[str, Any] = {"MetadataDirective": "REPLACE", "Metadata": dict(metadata),
                                "CopySourceIfMatch": f'"{uploaded.etag}"'}
        if self.single_copy_limit_bytes is None or uploaded.size <= self.single_copy_limit_bytes:
            self.client.copy_object(Bucket=bucket, Key=key, CopySource=source, **args)
            return
        # boto3's managed copy: UploadPartCopy of every part, the metadata on the new upload.
        config = TransferConfig(multipart_threshold=self.single_copy_limit_bytes,
                                multipart_chunksize=LATE_METADATA_COPY_PART_BYTES,
                                max_concurrency=self.max_concurrency, use_threads=self.max_concurrency > 1)
        self.client.copy(source, bucket, key, ExtraArgs=args, Config=config)

    def download_file(self, bucket: str, key: str, path: str, *, if_match: str = "", version_id: str = "") -> int:
        """Download an object to `path` (written beside it and renamed once complete: a failed
        download leaves no partial file at `path`); returns its size. With `if_match` (an ETag)
        or `version_id`, that object or none: S3ObjectChanged when the key holds another."""
        partial = f"{path}.part"
        try:
            if if_match or version_id:
                self._get_pinned(bucket, key, partial, if_match=if_match, version_id=version_id)
            else:
                self.client.download_file(bucket, key, partial, Config=self.transfer_config)
            os.replace(partial, path)
        except Exception as error:
            remove_quietly(partial)
            if isinstance(error, OSError) and not isinstance(error, botocore.exceptions.BotoCoreError):
                raise S3Error(f"download s3://{bucket}/{key} to {path}: {error}", backend=self.backend) from error
            raise self._translate(error, bucket=bucket, key=key, operation="download") from error
        return os.path.getsize(path)

    def _get_pinned(self, bucket: str, key: str, path: str, *, if_match: str, version_id: str) -> None:
        """One GetObject with If-Match / VersionId (the transfer manager takes neither), streamed
        to `path` chunk by chunk."""
        pins: dict[str, str] = {}
        if if_match:
            pins["IfMatch"] = f'"{if_match.strip(chr(34))}"'
        if version_id:
            pins["VersionId"] = version_id
        answer = self.client.get_object(Bucket=bucket, Key=key, **pins)
        with open(path, "wb") as out:
            for chunk in answer["Body"].iter_chunks(DOWNLOAD_CHUNK_BYTES):
                out.write(chunk)

    def head(self, bucket: str, key: str, *, version_id: str = "") -> ObjectInfo:
        """Size, time, ETag and user metadata of one object (of one version of it, in a versioned
        bucket); S3ObjectNotFound if there is none."""
        try:
            answer = self.client.head_object(Bucket=bucket, Key=key, **({"VersionId": version_id} if version_id else {}))
        except Exception as error:
            raise self._translate(error, bucket=bucket, key=key, operation="read") from error
        return ObjectInfo(
            key=key, size=int(answer.get("ContentLength", 0)),
            last_modified=utc_or_epoch(answer.get("LastModified")), etag=str(answer.get("ETag", "")).strip('"'),
            metadata=dict(answer.get("Metadata") or {}), version_id=str(answer.get("VersionId") or ""),
        )

    def exists(self, bucket: str, key: str) -> bool:
        try:
            self.head(bucket, key)
        except S3ObjectNotFound:
            return False
        return True

    def list(self, bucket: str, prefix: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with `prefix` (all pages)."""
        objects: list[ObjectInfo] = []
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for entry in page.get("Contents") or []:
                    objects.append(ObjectInfo(
                        key=str(entry["Key"]), size=int(entry.get("Size", 0)),
                        last_modified=utc_or_epoch(entry.get("LastModified")), etag=str(entry.get("ETag", "")).strip('"'),
                    ))
        except Exception as error:
            raise self._translate(error, bucket=bucket, operation=f"list {prefix!r} in") from error
        return objects

    def delete(self, bucket: str, key: str) -> None:
        """Delete one object; one already gone is fine (S3 semantics)."""
        try:
            self.client.delete_object(Bucket=bucket, Key=key)
        except Exception as error:
            raise self._translate(error, bucket=bucket, key=key, operation="delete") from error


# Clients with a secret's keys are made from one session: a new session reads botocore's S3
# model again (60-180 ms of CPU, on every backup). Making clients from a session is not
# thread-safe, hence the lock.
_SHARED_SESSION_LOCK = threading.Lock()


@functools.cache
def _shared_session() -> boto3.session.Session:
    return boto3.session.Session()


def _new_client(kwargs: Mapping[str, Any], *, shared_session: bool) -> Any:
    """An S3 client; without keys (the pod's own credential chain) from a session of its own, so
    that the chain is resolved afresh for each client."""
    if not shared_session:
        return boto3.session.Session().client("s3", **kwargs)
    with _SHARED_SESSION_LOCK:
        return _shared_session().client("s3", **kwargs)


def storage_for_location(location: S3Location, namespace: str, read_secret: SecretReader,
                         **options: Any) -> S3Storage:
    """The `S3Storage` for a spec's `s3` section, with the credentials of its awsSecret in
    `namespace` (boto3's own chain when it names none: `locations.storage_for_location` decides
    whether that is allowed). Raises S3SecretInvalid,
    S3LocationInvalid, or KubeError when the secret cannot be read for another reason."""
    credentials = (read_aws_credentials(read_secret, namespace, location.aws_secret)
                   if location.aws_secret else None)
    return S3Storage.for_location(location, credentials, **options)
