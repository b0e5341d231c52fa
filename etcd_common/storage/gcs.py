"""Google Cloud Storage (GCS) as the backup and restore operators use it: the CoreOS `gcpSecret`
read into credentials, resumable uploads and streamed downloads with the google-cloud-storage
SDK, and its failures mapped to the `objects` error classes (reasons `GCS<kind>`).

The secret has CoreOS's keys, at most one of them used: `access-token` (an OAuth2 access token)
or `credentials.json` (a service-account key file); with both, the token wins, as in CoreOS. An
addition, as for the absSecret: optional `endpoint`, a server speaking the GCS JSON API, so
CoreOS's manifests (which have no endpoint field) reach an emulator or a private endpoint.
Without `gcpSecret` the client uses Application Default Credentials (GKE workload identity),
only where `locations.storage_for_location` allowed the pod's identity. An addition: the spec's
`gcs.endpoint` names another server speaking the GCS JSON API (an emulator such as
fake-gcs-server, or a private endpoint).

Uploads are resumable uploads sent CHUNK_SIZE_BYTES at a time (one chunk in memory) and finalized
only by the last chunk: a stopped upload leaves no object. A resumable upload takes the object's
metadata when it starts, and nothing after: metadata known only at the end (the snapshot's
SHA-256) would need a second write (a patch: on GCS a new metageneration and the
`storage.objects.update` permission; on fake-gcs-server a rewrite of the whole object). So GCS
does not take metadata last (`sets_metadata_last` False): the backup operator saves the snapshot
whole, then uploads it with all its metadata in one write. Downloads are streamed to a file
beside the target, renamed once complete. `ObjectInfo.version_id` is the object's generation,
which a download can pin.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, Final

import google.api_core.exceptions as api_errors
import google.auth.exceptions
from google.api_core.retry import Retry
from google.auth.credentials import AnonymousCredentials, Credentials
from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY
from google.oauth2 import credentials as oauth2_credentials
from google.oauth2 import service_account

from etcd_common.api.storage_locations import OtherLocation
from etcd_common.storage import objects
from etcd_common.storage.endpoints import endpoint_url
from etcd_common.storage.objects import (
    AccessDenied,
    BucketNotFound,
    ObjectChanged,
    ObjectInfo,
    ObjectNotFound,
    SecretInvalid,
    StorageError,
    Unreachable,
    UploadResult,
    remove_quietly,
    utc_or_epoch,
)
from etcd_common.storage.secret_data import SecretReader as SecretReader
from etcd_common.storage.secret_data import read_credentials, secret_values

BACKEND: Final = "GCS"
# Keys of the gcpSecret (CoreOS `GCPAccessToken`, `GCPCredentialsJson`).
SECRET_ACCESS_TOKEN: Final = "access-token"
SECRET_CREDENTIALS_JSON: Final = "credentials.json"
SECRET_ENDPOINT: Final = "endpoint"  # this project's addition
SCOPES: Final = ("https://www.googleapis.com/auth/devstorage.read_write",)
# The project named in requests that need one (bucket creation in tests) when the credentials
# name none; reading and writing objects needs no project.
DEFAULT_PROJECT: Final = "etcd-operator-py"

CHUNK_SIZE_BYTES: Final = 8 * 1024 * 1024  # a multiple of 256 KiB, as GCS requires
TIMEOUT_SECONDS: Final = 60.0
# How long the SDK retries transient failures (connection errors, 429, 5xx) of one call.
RETRY_DEADLINE_SECONDS: Final = 30.0


@dataclass(frozen=True)
class GcsCredentials:
    access_token: str = ""
    # The parsed credentials.json (a service-account key).
    service_account_info: Mapping[str, Any] | None = None
    endpoint: str = ""  # the secret's `endpoint`, checked; the spec's `gcs.endpoint` wins

    def __repr__(self) -> str:  # never log a secret
        kind = "access-token" if self.access_token else "credentials.json" if self.service_account_info else "none"
        return f"GcsCredentials({kind}, endpoint={self.endpoint!r})"

    @property
    def project(self) -> str:
        return str((self.service_account_info or {}).get("project_id") or "")

    @property
    def token_uri(self) -> str:
        """Where the service-account key's signed grant is posted ("" for an access token): an
        operator checks it against its endpoint allow list before any request."""
        return str((self.service_account_info or {}).get("token_uri") or "")

    def google_credentials(self) -> Credentials:
        if self.access_token:
            return oauth2_credentials.Credentials(token=self.access_token)  # type: ignore[no-untyped-call]
        assert self.service_account_info is not None
        return service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call, no-any-return]
            dict(self.service_account_info), scopes=list(SCOPES))


def credentials_from_secret(secret: Mapping[str, Any], *, where: str = "gcpSecret") -> GcsCredentials:
    """The credentials in a gcpSecret (API dict); SecretInvalid naming the key that is wrong."""
    values = secret_values(secret, where=where, backend=BACKEND)
    endpoint = values.get(SECRET_ENDPOINT, "")
    if endpoint:
        endpoint = endpoint_url(endpoint, where=f"{where}: key {SECRET_ENDPOINT!r}", backend=BACKEND,
                                error=SecretInvalid)
    token = values.get(SECRET_ACCESS_TOKEN, "")
    if token:
        return GcsCredentials(access_token=token, endpoint=endpoint)
    text = values.get(SECRET_CREDENTIALS_JSON, "")
    if not text:
        present = ", ".join(sorted(values)) or "none"
        raise SecretInvalid(f"{where} has neither {SECRET_ACCESS_TOKEN!r} nor {SECRET_CREDENTIALS_JSON!r} "
                            f"(keys present: {present})", backend=BACKEND)
    try:
        info = json.loads(text)
    except json.JSONDecodeError as error:
        raise SecretInvalid(f"{where}: key {SECRET_CREDENTIALS_JSON!r} is not JSON ({error.msg} at line "
                            f"{error.lineno})", backend=BACKEND) from error
    if not isinstance(info, dict) or info.get("type") != "service_account":
        raise SecretInvalid(f"{where}: key {SECRET_CREDENTIALS_JSON!r} is not a service-account key file "
                            "(\"type\": \"service_account\")", backend=BACKEND)
    missing = [field for field in ("client_email", "private_key", "token_uri") if not info.get(field)]
    if missing:
        raise SecretInvalid(f"{where}: key {SECRET_CREDENTIALS_JSON!r} lacks {', '.join(missing)}", backend=BACKEND)
    credentials = GcsCredentials(service_account_info=info, endpoint=endpoint)
    try:
        credentials.google_credentials()
    except (ValueError, google.auth.exceptions.GoogleAuthError) as error:
        raise SecretInvalid(f"{where}: key {SECRET_CREDENTIALS_JSON!r} cannot be used: {error}",
                            backend=BACKEND) from error
    return credentials


def read_gcs_credentials(read_secret: SecretReader, namespace: str, secret_name: str,
                         *, field: str = "spec.gcs.gcpSecret") -> GcsCredentials:
    return read_credentials(read_secret, namespace, secret_name, field=field, parse=credentials_from_secret,
                            backend=BACKEND)


def normalize_endpoint(endpoint: str) -> str:
    """`spec.gcs.endpoint` as a URL: "" is Google's; a bare `host:port` gets https://."""
    endpoint = endpoint.strip()
    if not endpoint:
        return ""
    return endpoint_url(endpoint, where="spec.gcs.endpoint", backend=BACKEND)


def split_path(path: str) -> tuple[str, str]:
    """`path` "<bucket>/<object>" -> (bucket, object name)."""
    return objects.split_path(path, backend=BACKEND, key_word="object")


def translate_error(error: BaseException, *, bucket: str, key: str = "", operation: str = "") -> StorageError:
    if isinstance(error, StorageError):
        return error
    where = f"gs://{bucket}/{key}" if key else f"bucket {bucket!r}"
    doing = f"{operation} {where}" if operation else where
    text = str(getattr(error, "message", "") or error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, api_errors.PreconditionFailed):
        return ObjectChanged(f"{doing}: the object is not the one asked for (generation or ETag changed: "
                             "replaced since)", backend=BACKEND)
    if isinstance(error, api_errors.NotFound):
        if not key or "bucket" in text.lower():
            return BucketNotFound(f"{doing}: bucket {bucket!r} does not exist", backend=BACKEND)
        return ObjectNotFound(f"{doing}: no such object", backend=BACKEND)
    if isinstance(error, (api_errors.Forbidden, api_errors.Unauthorized)):
        return AccessDenied(f"{doing}: access denied ({text}); check the gcpSecret's credentials and their "
                            "permissions", backend=BACKEND)
    if isinstance(error, google.auth.exceptions.RefreshError):
        return AccessDenied(f"{doing}: the gcpSecret's credentials were refused: {text}", backend=BACKEND)
    if isinstance(error, google.auth.exceptions.DefaultCredentialsError):
        return SecretInvalid(f"{doing}: no gcpSecret and no application default credentials: {text}",
                             backend=BACKEND)
    if isinstance(error, (api_errors.ServerError, api_errors.TooManyRequests, api_errors.RetryError,
                          google.auth.exceptions.TransportError)) or _is_network_error(error):
        return Unreachable(f"{doing}: cannot reach GCS or it failed: {text}", backend=BACKEND)
    return StorageError(f"{doing}: {type(error).__name__}: {text}", backend=BACKEND)


def _is_network_error(error: BaseException) -> bool:
    """The HTTP transport's connection errors and timeouts (requests' are OSErrors), not a local
    file's."""
    return isinstance(error, (ConnectionError, TimeoutError)) or (
        isinstance(error, OSError) and not isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError,
                                                             NotADirectoryError)))


class _ProgressReader:
    """A binary reader that reports each read's size to `progress` (before the bytes are sent:
    raising from it keeps them, and so the upload's final chunk, from being sent)."""

    def __init__(self, stream: IO[bytes], progress: Callable[[int], None]) -> None:
        self._stream = stream
        self._progress = progress

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        if data:
            self._progress(len(data))
        return data

    def tell(self) -> int:
        return self._stream.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stream.seek(offset, whence)


class GcsStorage:
    """One GCS (or GCS JSON API) endpoint with one set of credentials; safe to share between threads."""

    backend: str = BACKEND
    sets_metadata_last: bool = False  # a resumable upload takes metadata when it starts only

    def __init__(self, credentials: GcsCredentials | None, *, endpoint: str = "", anonymous: bool = False,
                 chunk_size_bytes: int = CHUNK_SIZE_BYTES, timeout_seconds: float = TIMEOUT_SECONDS,
                 retry_deadline_seconds: float = RETRY_DEADLINE_SECONDS) -> None:
        self.endpoint = normalize_endpoint(endpoint)
        # The gcpSecret key's token_uri (checked by the operators before any request), "" when none.
        self.token_uri = credentials.token_uri if credentials is not None else ""
        self.chunk_size_bytes = chunk_size_bytes
        self.timeout_seconds = timeout_seconds
        self.retry: Retry = DEFAULT_RETRY.with_deadline(retry_deadline_seconds).with_timeout(retry_deadline_seconds)
        options: dict[str, Any] = {}
        if self.endpoint:
            options["client_options"] = {"api_endpoint": self.endpoint}
        google_credentials: Credentials | None
        if credentials is not None:
            google_credentials = credentials.google_credentials()
        elif anonymous:
            google_credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
        else:
            google_credentials = None  # application default credentials
        try:
            self.client = storage.Client(project=(credentials.project if credentials else "") or DEFAULT_PROJECT,
                                         credentials=google_credentials, **options)
        except (google.auth.exceptions.GoogleAuthError, ValueError) as error:
            raise translate_error(error, bucket="", operation="connect to GCS for") from error

    def __repr__(self) -> str:
        return f"GcsStorage(endpoint={self.endpoint or 'Google'!r})"

    # --- buckets

    def check_bucket(self, bucket: str) -> None:
        try:
            self.client.get_bucket(bucket, timeout=self.timeout_seconds, retry=self.retry)
        except Exception as error:
            raise translate_error(error, bucket=bucket, operation="check") from error

    def create_bucket(self, bucket: str) -> None:
        try:
            self.client.create_bucket(bucket, timeout=self.timeout_seconds)
        except api_errors.Conflict:
            return
        except Exception as error:
            raise translate_error(error, bucket=bucket, operation="create") from error

    def delete_bucket(self, bucket: str) -> None:
        try:
            self.client.bucket(bucket).delete(force=True, timeout=self.timeout_seconds, retry=self.retry)
        except api_errors.NotFound:
            return
        except Exception as error:
            raise translate_error(error, bucket=bucket, operation="delete") from error

    # --- objects

    def upload_file(self, bucket: str, key: str, path: str, *, metadata: Mapping[str, str] | None = None,
                    progress: Callable[[int], None] | None = None) -> UploadResult:
        with open(path, "rb") as stream:
            source: Any = stream if progress is None else _ProgressReader(stream, progress)
            return self._upload(bucket, key, source, metadata)

    def upload_stream(self, bucket: str, key: str, stream: IO[bytes], *,
                      metadata: Mapping[str, str] | None = None,
                      late_metadata: Callable[[], Mapping[str, str]] | None = None) -> UploadResult:
        if late_metadata is not None:
            raise ValueError("GCS takes an object's metadata when its upload starts, not after its bytes "
                             "(sets_metadata_last is False)")
        return self._upload(bucket, key, stream, metadata)

    def _upload(self, bucket: str, key: str, stream: Any, metadata: Mapping[str, str] | None) -> UploadResult:
        blob = self.client.bucket(bucket).blob(key, chunk_size=self.chunk_size_bytes)
        if metadata:
            blob.metadata = dict(metadata)
        try:
            # size=None: always a resumable upload, read chunk by chunk (never the whole stream).
            blob.upload_from_file(stream, size=None, timeout=self.timeout_seconds, retry=self.retry)
        except Exception as error:
            raise self._with_bucket_check(error, bucket, key, "upload to") from error
        return UploadResult(bucket, key, int(blob.size or 0), str(blob.etag or ""))

    def download_file(self, bucket: str, key: str, path: str, *, if_match: str = "", version_id: str = "") -> int:
        partial = f"{path}.part"
        blob = self.client.bucket(bucket).blob(key, generation=int(version_id) if version_id.isdigit() else None)
        pins: dict[str, Any] = {}
        if if_match:
            pins["if_etag_match"] = if_match
        try:
            with open(partial, "wb") as out:
                blob.download_to_file(out, timeout=self.timeout_seconds, retry=self.retry, **pins)
            os.replace(partial, path)
        except Exception as error:
            remove_quietly(partial)
            if version_id and isinstance(error, api_errors.NotFound):
                # The generation asked for is gone: the object was replaced (or deleted) since.
                try:
                    self.head(bucket, key)
                except ObjectNotFound:
                    raise ObjectNotFound(f"download gs://{bucket}/{key}: no such object", backend=BACKEND) from error
                raise ObjectChanged(f"download gs://{bucket}/{key}: generation {version_id} is gone (replaced since)",
                                    backend=BACKEND) from error
            raise self._with_bucket_check(error, bucket, key, "download") from error
        return os.path.getsize(path)

    def head(self, bucket: str, key: str, *, version_id: str = "") -> ObjectInfo:
        try:
            blob = self.client.bucket(bucket).get_blob(
                key, generation=int(version_id) if version_id.isdigit() else None,
                timeout=self.timeout_seconds, retry=self.retry)
        except Exception as error:
            raise self._with_bucket_check(error, bucket, key, "read") from error
        if blob is None:
            self.check_bucket(bucket)
            raise ObjectNotFound(f"read gs://{bucket}/{key}: no such object", backend=BACKEND)
        return _info(blob)

    def exists(self, bucket: str, key: str) -> bool:
        try:
            self.head(bucket, key)
        except ObjectNotFound:
            return False
        return True

    def list(self, bucket: str, prefix: str = "") -> list[ObjectInfo]:
        try:
            return [_info(blob) for blob in self.client.list_blobs(bucket, prefix=prefix or None,
                                                                   timeout=self.timeout_seconds, retry=self.retry)]
        except Exception as error:
            raise translate_error(error, bucket=bucket, operation=f"list {prefix!r} in") from error

    def delete(self, bucket: str, key: str) -> None:
        try:
            self.client.bucket(bucket).blob(key).delete(timeout=self.timeout_seconds, retry=self.retry)
        except api_errors.NotFound:
            self.check_bucket(bucket)  # a missing bucket is an error; a missing object is fine
        except Exception as error:
            raise translate_error(error, bucket=bucket, key=key, operation="delete") from error

    def _with_bucket_check(self, error: BaseException, bucket: str, key: str, operation: str) -> StorageError:
        """A 404 on an object does not say which is missing: ask for the bucket."""
        translated = translate_error(error, bucket=bucket, key=key, operation=operation)
        if isinstance(translated, (ObjectNotFound, BucketNotFound)):
            try:
                self.check_bucket(bucket)
            except BucketNotFound as missing:
                return missing
            except StorageError:
                return translated
            if isinstance(translated, BucketNotFound):
                return ObjectNotFound(f"{operation} gs://{bucket}/{key}: no such object", backend=BACKEND)
        return translated


def storage_for_location(location: OtherLocation, namespace: str, read_secret: SecretReader,
                         **options: Any) -> GcsStorage:
    """The GcsStorage for a spec's `gcs` section; without gcpSecret, application default credentials
    (`locations.storage_for_location` decides whether that is allowed). The spec's endpoint wins
    over the secret's."""
    credentials = (read_gcs_credentials(read_secret, namespace, location.secret) if location.secret else None)
    endpoint = location.endpoint or (credentials.endpoint if credentials is not None else "")
    return GcsStorage(credentials, endpoint=endpoint, **options)


def _info(blob: Any) -> ObjectInfo:
    return ObjectInfo(key=str(blob.name), size=int(blob.size or 0), last_modified=utc_or_epoch(blob.updated),
                      etag=str(blob.etag or ""), metadata=dict(blob.metadata or {}),
                      version_id=str(blob.generation or ""))
