"""Azure Blob Storage (ABS) as the backup and restore operators use it: the CoreOS `absSecret`
read into credentials, block blobs uploaded and downloaded in blocks with the azure-storage-blob
SDK, and its failures mapped to the `objects` error classes (reasons `ABS<kind>`).

The secret has CoreOS's keys: `storage-account` and `storage-key` (the account's shared key),
optional `cloud` (a go-autorest environment name, AzurePublicCloud when absent). An addition:
optional `endpoint`, the blob service URL itself (`http://127.0.0.1:10000/devstoreaccount1` for
Azurite, or Azure Stack), which wins over `cloud`; the spec's `abs.endpoint` wins over both.

Uploads stage blocks of BLOCK_SIZE_BYTES (at most MAX_CONCURRENCY in flight, read from disk or
the stream as they are sent) and commit the block list last: the blob appears only once whole,
and memory stays flat in the snapshot's size. Downloads go chunk by chunk to a file beside the
target, renamed once complete. Metadata names must be C# identifiers on ABS, so `-` in a name is
stored as `_` and read back as `-` (the operators' names have no `_`).
"""
from __future__ import annotations

import base64
import binascii
import os
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import IO, Any, Final

from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.identity import WorkloadIdentityCredential
from azure.storage.blob import BlobBlock, BlobServiceClient, ExponentialRetry

from etcd_common.api.storage_locations import OtherLocation
from etcd_common.storage import objects
from etcd_common.storage.endpoints import endpoint_url
from etcd_common.storage.objects import (
    AccessDenied,
    BucketNotFound,
    CredentialsRequired,
    LocationInvalid,
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
from etcd_common.storage.secret_data import read_credentials, require_keys, secret_values

BACKEND: Final = "ABS"
# Keys of the absSecret (CoreOS `AzureSecretStorageAccount`, `AzureSecretStorageKey`,
# `AzureCloudKey`), and this project's `endpoint`.
SECRET_STORAGE_ACCOUNT: Final = "storage-account"
SECRET_STORAGE_KEY: Final = "storage-key"
SECRET_CLOUD: Final = "cloud"
SECRET_ENDPOINT: Final = "endpoint"
# An addition: "true" = no storage-key; the operator's Azure workload identity writes to the
# account (only where its administrator allowed it: `locations.storage_for_location`).
SECRET_USE_WORKLOAD_IDENTITY: Final = "use-workload-identity"
# What the Azure workload identity webhook sets in a pod of a ServiceAccount labelled for it
# (`azure.workload.identity/use: "true"`, annotated with the identity's client id).
WORKLOAD_IDENTITY_ENV: Final = ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE")
# Microsoft Entra's own authority hosts; another AZURE_AUTHORITY_HOST (Azure Stack, a test's
# stand-in) is used as it is, without asking Microsoft's instance discovery about it.
PUBLIC_AUTHORITY_HOSTS: Final = frozenset({"login.microsoftonline.com", "login.microsoftonline.us",
                                           "login.chinacloudapi.cn", "login.microsoftonline.de"})
# go-autorest environment names (upper-cased, as it compares them) -> storage endpoint suffix.
CLOUD_SUFFIXES: Final[Mapping[str, str]] = {
    "AZUREPUBLICCLOUD": "core.windows.net",
    "AZUREUSGOVERNMENTCLOUD": "core.usgovcloudapi.net",
    "AZURECHINACLOUD": "core.chinacloudapi.cn",
    "AZUREGERMANCLOUD": "core.cloudapi.de",
}

BLOCK_SIZE_BYTES: Final = 8 * 1024 * 1024
MAX_CONCURRENCY: Final = 4
DOWNLOAD_CHUNK_BYTES: Final = 4 * 1024 * 1024
CONNECT_TIMEOUT_SECONDS: Final = 5.0
READ_TIMEOUT_SECONDS: Final = 60.0
MAX_ATTEMPTS: Final = 3
# The SDK's own waits between attempts: 1 s, then 3 s (about; 1 s of jitter), not its defaults of
# 15 s then 18 s, which made a store outage take 33 s per call to report. The operators retry
# with their own backoff after that (5 s doubling for backups).
RETRY_INITIAL_BACKOFF_SECONDS: Final = 1
RETRY_INCREMENT_BASE: Final = 2
RETRY_JITTER_SECONDS: Final = 1


@dataclass(frozen=True)
class AbsCredentials:
    account: str
    key: str = ""
    cloud: str = ""
    endpoint: str = ""
    # No shared key: the pod's Azure workload identity (WorkloadIdentityCredential) signs in.
    workload_identity: bool = False

    def __repr__(self) -> str:  # never log a secret
        return (f"AbsCredentials(account={self.account!r}, cloud={self.cloud!r}, endpoint={self.endpoint!r}, "
                f"workload_identity={self.workload_identity})")

    @property
    def account_url(self) -> str:
        """The blob service URL: `endpoint` if set, else the cloud's."""
        if self.endpoint:
            return self.endpoint
        suffix = CLOUD_SUFFIXES[(self.cloud or "AzurePublicCloud").upper()]
        return f"https://{self.account}.blob.{suffix}"


def credentials_from_secret(secret: Mapping[str, Any], *, where: str = "absSecret") -> AbsCredentials:
    """The credentials in an absSecret (API dict); SecretInvalid naming the key that is wrong."""
    values = secret_values(secret, where=where, backend=BACKEND)
    use_identity = values.get(SECRET_USE_WORKLOAD_IDENTITY, "").strip().lower()
    if use_identity not in ("", "true", "false"):
        raise SecretInvalid(f"{where}: key {SECRET_USE_WORKLOAD_IDENTITY!r} must be \"true\" or \"false\"",
                            backend=BACKEND)
    if use_identity == "true":
        require_keys(values, (SECRET_STORAGE_ACCOUNT,), where=where, backend=BACKEND)
        if SECRET_STORAGE_KEY in values:
            raise SecretInvalid(f"{where}: {SECRET_USE_WORKLOAD_IDENTITY!r} is \"true\" and {SECRET_STORAGE_KEY!r} is "
                                "given: say one way to sign in (remove one of them)", backend=BACKEND)
    else:
        require_keys(values, (SECRET_STORAGE_ACCOUNT, SECRET_STORAGE_KEY), where=where, backend=BACKEND)
        try:
            base64.b64decode(values[SECRET_STORAGE_KEY], validate=True)
        except (binascii.Error, ValueError) as error:
            raise SecretInvalid(f"{where}: key {SECRET_STORAGE_KEY!r} is not an account key (base64 text)",
                                backend=BACKEND) from error
    cloud = values.get(SECRET_CLOUD, "")
    if cloud and cloud.upper() not in CLOUD_SUFFIXES:
        raise SecretInvalid(f"{where}: key {SECRET_CLOUD!r} = {cloud!r} is not one of "
                            "AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud, AzureGermanCloud",
                            backend=BACKEND)
    endpoint = values.get(SECRET_ENDPOINT, "")
    if endpoint:
        endpoint = normalize_endpoint(endpoint, where=f"{where}: key {SECRET_ENDPOINT!r}", error=SecretInvalid)
    return AbsCredentials(values[SECRET_STORAGE_ACCOUNT], values.get(SECRET_STORAGE_KEY, ""), cloud, endpoint,
                          workload_identity=use_identity == "true")


def read_abs_credentials(read_secret: SecretReader, namespace: str, secret_name: str,
                         *, field: str = "spec.abs.absSecret") -> AbsCredentials:
    return read_credentials(read_secret, namespace, secret_name, field=field, parse=credentials_from_secret,
                            backend=BACKEND)


def normalize_endpoint(endpoint: str, *, where: str = "spec.abs.endpoint",
                       error: type[StorageError] = LocationInvalid) -> str:
    """A blob service URL, checked: http(s), a host; a bare `host[:port]/path` gets https://."""
    return endpoint_url(endpoint.strip(), where=where, backend=BACKEND, error=error, of=" of a blob service")


def split_path(path: str) -> tuple[str, str]:
    """`path` "<container>/<blob>" -> (container, blob name)."""
    return objects.split_path(path, backend=BACKEND, bucket_word="container", key_word="blob")


def translate_error(error: BaseException, *, bucket: str, key: str = "", operation: str = "") -> StorageError:
    """The StorageError for an azure-core failure of `operation` on container `bucket`/blob `key`."""
    if isinstance(error, StorageError):
        return error
    where = f"abs://{bucket}/{key}" if key else f"container {bucket!r}"
    doing = f"{operation} {where}" if operation else where
    code = str(getattr(error, "error_code", "") or "")
    status = int(getattr(error, "status_code", 0) or 0)
    text = str(getattr(error, "reason", "") or code or error).splitlines()[0]
    if isinstance(error, ResourceModifiedError) or code == "ConditionNotMet" or status == 412:
        return ObjectChanged(f"{doing}: the blob is not the one asked for (ETag or version changed: replaced since)",
                             backend=BACKEND)
    if code == "ContainerNotFound" or (status == 404 and not key):
        return BucketNotFound(f"{doing}: container {bucket!r} does not exist", backend=BACKEND)
    if isinstance(error, ResourceNotFoundError) or code in ("BlobNotFound", "ResourceNotFound") or status == 404:
        return ObjectNotFound(f"{doing}: no such blob", backend=BACKEND)
    if isinstance(error, ClientAuthenticationError) or status in (401, 403):
        return AccessDenied(f"{doing}: access denied ({code or status}: {text}); check storage-account and "
                            "storage-key in the absSecret and their permissions", backend=BACKEND)
    if isinstance(error, (ServiceRequestError, ServiceResponseError)):
        return Unreachable(f"{doing}: cannot reach the blob service: {text}", backend=BACKEND)
    if isinstance(error, HttpResponseError) and (status >= 500 or status == 429):
        return Unreachable(f"{doing}: server error ({code or status}: {text})", backend=BACKEND)
    if isinstance(error, OSError):
        return StorageError(f"{doing}: {error}", backend=BACKEND)
    return StorageError(f"{doing}: {code or status or type(error).__name__}: {text}", backend=BACKEND)


def _to_abs_metadata(metadata: Mapping[str, str] | None) -> dict[str, str] | None:
    return {name.replace("-", "_"): value for name, value in metadata.items()} if metadata else None


def _from_abs_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    return {name.replace("_", "-"): value for name, value in (metadata or {}).items()}


class AbsStorage:
    """One storage account's blob service; safe to share between threads."""

    backend: str = BACKEND
    sets_metadata_last: bool = True

    def __init__(self, credentials: AbsCredentials, *, endpoint: str = "",
                 block_size_bytes: int = BLOCK_SIZE_BYTES, max_concurrency: int = MAX_CONCURRENCY,
                 connect_timeout_seconds: float = CONNECT_TIMEOUT_SECONDS,
                 read_timeout_seconds: float = READ_TIMEOUT_SECONDS, max_attempts: int = MAX_ATTEMPTS) -> None:
        self.endpoint = normalize_endpoint(endpoint) if endpoint else credentials.account_url
        self.block_size_bytes = block_size_bytes
        self.max_concurrency = max(1, max_concurrency)
        credential: Any = (workload_identity_credential() if credentials.workload_identity
                           else {"account_name": credentials.account, "account_key": credentials.key})
        self.client = BlobServiceClient(
            self.endpoint, credential=credential,
            connection_timeout=connect_timeout_seconds, read_timeout=read_timeout_seconds,
            retry_policy=ExponentialRetry(
                initial_backoff=RETRY_INITIAL_BACKOFF_SECONDS, increment_base=RETRY_INCREMENT_BASE,
                random_jitter_range=RETRY_JITTER_SECONDS, retry_total=max(0, max_attempts - 1),
                retry_connect=max(0, max_attempts - 1)),
            max_chunk_get_size=DOWNLOAD_CHUNK_BYTES, max_single_get_size=DOWNLOAD_CHUNK_BYTES,
        )

    def __repr__(self) -> str:
        return f"AbsStorage(endpoint={self.endpoint!r})"

    # --- containers

    def check_bucket(self, bucket: str) -> None:
        try:
            self.client.get_container_client(bucket).get_container_properties()
        except (AzureError, OSError) as error:
            raise translate_error(error, bucket=bucket, operation="check") from error

    def create_bucket(self, bucket: str) -> None:
        try:
            self.client.create_container(bucket)
        except ResourceExistsError:
            return
        except (AzureError, OSError) as error:
            raise translate_error(error, bucket=bucket, operation="create") from error

    def delete_bucket(self, bucket: str) -> None:
        try:
            self.client.delete_container(bucket)
        except ResourceNotFoundError:
            return
        except (AzureError, OSError) as error:
            raise translate_error(error, bucket=bucket, operation="delete") from error

    # --- blobs

    def upload_file(self, bucket: str, key: str, path: str, *, metadata: Mapping[str, str] | None = None,
                    progress: Callable[[int], None] | None = None) -> UploadResult:
        """Upload the file at `path` block by block; `progress` is called after each staged block
        (raising from it stops the upload before the block list is committed)."""
        with open(path, "rb") as stream:
            return self._upload(bucket, key, stream, metadata=metadata, progress=progress)

    def upload_stream(self, bucket: str, key: str, stream: IO[bytes], *,
                      metadata: Mapping[str, str] | None = None,
                      late_metadata: Callable[[], Mapping[str, str]] | None = None) -> UploadResult:
        """The block list (and with it the metadata, `late_metadata` too) is committed once the
        stream has ended."""
        return self._upload(bucket, key, stream, metadata=metadata, progress=None, late_metadata=late_metadata)

    def _upload(self, bucket: str, key: str, stream: IO[bytes], *, metadata: Mapping[str, str] | None,
                progress: Callable[[int], None] | None,
                late_metadata: Callable[[], Mapping[str, str]] | None = None) -> UploadResult:
        blob = self.client.get_blob_client(bucket, key)
        prefix = uuid.uuid4().hex  # block ids of this upload only; uncommitted ones expire
        block_ids: list[str] = []
        size = 0
        in_flight: set[Future[None]] = set()
        lock = threading.Lock()

        def stage(block_id: str, data: bytes) -> None:
            blob.stage_block(block_id, data, length=len(data))
            if progress is not None:
                with lock:
                    progress(len(data))

        try:
            with ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="abs-upload") as pool:
                try:
                    for index, data in enumerate(_blocks(stream, self.block_size_bytes)):
                        block_id = base64.b64encode(f"{prefix}-{index:08d}".encode()).decode()
                        block_ids.append(block_id)
                        size += len(data)
                        in_flight.add(pool.submit(stage, block_id, data))
                        if len(in_flight) >= self.max_concurrency:  # at most so many blocks in memory
                            done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                            for future in done:
                                future.result()
                    for future in in_flight:
                        future.result()
                except BaseException:
                    for future in in_flight:
                        future.cancel()
                    raise
            if late_metadata is not None:
                metadata = {**(metadata or {}), **late_metadata()}
            committed = blob.commit_block_list([BlobBlock(block_id=block_id) for block_id in block_ids],
                                               metadata=_to_abs_metadata(metadata))
        except (AzureError, OSError) as error:
            raise translate_error(error, bucket=bucket, key=key, operation="upload to") from error
        except StorageError:
            raise
        except Exception as error:  # the progress callback refused: no blob was committed
            raise StorageError(f"upload to abs://{bucket}/{key} stopped: {error}", backend=BACKEND) from error
        # The committed blob is the blocks listed: their bytes; no HEAD round trip needed.
        return UploadResult(bucket, key, size, str(committed.get("etag") or "").strip('"'))

    def download_file(self, bucket: str, key: str, path: str, *, if_match: str = "", version_id: str = "") -> int:
        partial = f"{path}.part"
        options: dict[str, Any] = {}
        if if_match:
            options.update(etag=if_match.strip('"'), match_condition=MatchConditions.IfNotModified)
        if version_id:
            options["version_id"] = version_id
        try:
            downloader = self.client.get_blob_client(bucket, key).download_blob(**options)
            with open(partial, "wb") as out:
                for chunk in downloader.chunks():
                    out.write(chunk)
            os.replace(partial, path)
        except (AzureError, OSError) as error:
            remove_quietly(partial)
            raise translate_error(error, bucket=bucket, key=key, operation="download") from error
        return os.path.getsize(path)

    def head(self, bucket: str, key: str, *, version_id: str = "") -> ObjectInfo:
        try:
            properties = self.client.get_blob_client(bucket, key).get_blob_properties(version_id=version_id or None)
        except (AzureError, OSError) as error:
            raise self._not_found_in(error, bucket, key, "read") from error
        return ObjectInfo(key=key, size=int(properties.size or 0),
                          last_modified=utc_or_epoch(properties.last_modified), etag=str(properties.etag or "").strip('"'),
                          metadata=_from_abs_metadata(properties.metadata), version_id=str(properties.version_id or ""))

    def exists(self, bucket: str, key: str) -> bool:
        try:
            self.head(bucket, key)
        except ObjectNotFound:
            return False
        return True

    def list(self, bucket: str, prefix: str = "") -> list[ObjectInfo]:
        try:
            return [ObjectInfo(key=str(item.name), size=int(item.size or 0),
                               last_modified=utc_or_epoch(item.last_modified), etag=str(item.etag or "").strip('"'))
                    for item in self.client.get_container_client(bucket).list_blobs(name_starts_with=prefix or None)]
        except (AzureError, OSError) as error:
            raise translate_error(error, bucket=bucket, operation=f"list {prefix!r} in") from error

    def delete(self, bucket: str, key: str) -> None:
        try:
            self.client.get_blob_client(bucket, key).delete_blob()
        except (AzureError, OSError) as error:
            translated = self._not_found_in(error, bucket, key, "delete")
            if isinstance(translated, ObjectNotFound):
                return
            raise translated from error

    def _not_found_in(self, error: BaseException, bucket: str, key: str, operation: str) -> StorageError:
        """A HEAD's 404 has no error code: tell a missing container from a missing blob."""
        translated = translate_error(error, bucket=bucket, key=key, operation=operation)
        if isinstance(translated, ObjectNotFound) and not getattr(error, "error_code", None):
            try:
                self.check_bucket(bucket)
            except BucketNotFound as missing:
                return missing
            except StorageError:
                pass
        return translated


def location_credentials(location: OtherLocation, namespace: str, read_secret: SecretReader) -> AbsCredentials:
    """The absSecret's credentials; without absSecret, the pod's workload identity for the blob
    service spec.abs.endpoint names (it must: no secret names the account). Whether the pod's
    identity may be used at all is `locations.storage_for_location`'s decision."""
    if location.secret:
        return read_abs_credentials(read_secret, namespace, location.secret)
    if not location.endpoint:
        raise LocationInvalid("spec.abs.endpoint is required without spec.abs.absSecret: the storage account's "
                              "blob service URL (https://ACCOUNT.blob.core.windows.net), which the operator's "
                              "workload identity writes to", backend=BACKEND)
    return AbsCredentials("", endpoint=normalize_endpoint(location.endpoint), workload_identity=True)


def workload_identity_credential() -> Any:
    """azure-identity's WorkloadIdentityCredential from the environment the workload identity
    webhook sets (CredentialsRequired naming what is missing: the pod has no identity then)."""
    missing = [name for name in WORKLOAD_IDENTITY_ENV if not os.environ.get(name)]
    if missing:
        raise CredentialsRequired(
            f"Azure workload identity is not set up for this pod: {', '.join(missing)} not set (the workload "
            "identity webhook sets them in pods of a ServiceAccount labelled azure.workload.identity/use: \"true\" "
            "and annotated azure.workload.identity/client-id)", backend=BACKEND)
    authority_host = urllib.parse.urlparse(os.environ.get("AZURE_AUTHORITY_HOST", "")).hostname
    try:
        return WorkloadIdentityCredential(
            disable_instance_discovery=bool(authority_host) and authority_host not in PUBLIC_AUTHORITY_HOSTS)
    except ValueError as error:
        raise CredentialsRequired(f"Azure workload identity is not usable: {error}", backend=BACKEND) from error


def _blocks(stream: IO[bytes], size: int) -> Iterator[bytes]:
    """The stream in blocks of `size` bytes (the last may be shorter; none for an empty stream,
    whose empty block list commits an empty blob)."""
    while True:
        data = _read_full(stream, size)
        if data:
            yield data
        if len(data) < size:
            return


def _read_full(stream: IO[bytes], size: int) -> bytes:
    parts: list[bytes] = []
    left = size
    while left > 0:
        data = stream.read(left)
        if not data:
            break
        parts.append(data)
        left -= len(data)
    return b"".join(parts)
