"""A location without a storage secret: refused (CredentialsRequired, before any secret is read or
any SDK client built) unless the caller lends the pod's own identity; then the SDK's default
credential chain (boto3's default session for S3 and OSS, google.auth.default for GCS) with no
key of ours in it. ABS: azure-identity's WorkloadIdentityCredential (also asked for by an absSecret saying
use-workload-identity, which needs the same permission). The seed pod never
fetches without a mounted secret."""
from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3.session
import google.auth
import pytest
from azure.identity import WorkloadIdentityCredential
from google.auth.credentials import AnonymousCredentials

from etcd_common.api.storage_locations import OtherLocation, S3Location, StorageLocation
from etcd_common.seed import program as seed_program
from etcd_common.storage import abs as abs_storage
from etcd_common.storage import gcs, locations, objects, oss, s3

NO_SECRET = {
    "S3": StorageLocation("S3", s3=S3Location("bucket/key")),
    "ABS": StorageLocation("ABS", other=OtherLocation("container/blob")),
    "GCS": StorageLocation("GCS", other=OtherLocation("bucket/object")),
    "OSS": StorageLocation("OSS", other=OtherLocation("bucket/object")),
}
SECRET_FIELDS = {"S3": "spec.s3.awsSecret", "ABS": "spec.abs.absSecret", "GCS": "spec.gcs.gcpSecret",
                 "OSS": "spec.oss.ossSecret"}


def no_api(namespace: str, name: str) -> dict[str, Any]:
    raise AssertionError("no secret may be read for a location that names none")


class Sessions:
    """boto3.session.Session replaced: records what each client is built with (no network)."""

    def __init__(self) -> None:
        self.clients: list[dict[str, Any]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Sessions:
        assert not args and not kwargs, "a session of its own, from the default chain"
        return self

    def client(self, service: str, **kwargs: Any) -> object:
        self.clients.append({"service": service, **kwargs})
        return object()


@pytest.fixture(autouse=True)
def fresh_s3_session() -> Iterator[None]:
    """S3 clients with a secret's keys come from one cached session: each test's Sessions makes it."""
    s3._shared_session.cache_clear()
    yield
    s3._shared_session.cache_clear()


@pytest.fixture
def no_sdk_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every SDK's client constructor refuses to run: a refusal must come before any of them."""
    def untouchable(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no SDK client may be built for a refused location")
    monkeypatch.setattr(boto3.session, "Session", untouchable)
    monkeypatch.setattr(gcs.storage, "Client", untouchable)
    monkeypatch.setattr(abs_storage, "BlobServiceClient", untouchable)
    monkeypatch.setattr(google.auth, "default", untouchable)


@pytest.mark.parametrize("storage_type", sorted(NO_SECRET))
def test_no_secret_and_no_permission_is_refused_not_the_operators_identity(storage_type: str,
                                                                           no_sdk_clients: None) -> None:
    with pytest.raises(objects.CredentialsRequired) as refused:
        locations.storage_for_location(NO_SECRET[storage_type], "tenant", no_api)
    assert refused.value.reason == "CredentialsRequired" and not refused.value.transient
    assert isinstance(refused.value, objects.SecretInvalid)  # handled wherever a bad secret is
    message = refused.value.message
    assert SECRET_FIELDS[storage_type] in message and "--allow-pod-identity is off" in message


ABS_ENDPOINT = "https://acct.blob.core.windows.net"
WORKLOAD_ENV = {"AZURE_CLIENT_ID": "client", "AZURE_TENANT_ID": "tenant-id", "AZURE_FEDERATED_TOKEN_FILE": "/var/run/t"}


@pytest.fixture
def workload_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the Azure workload identity webhook sets in a pod."""
    for name, value in WORKLOAD_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AZURE_AUTHORITY_HOST", raising=False)


def abs_secret(**values: str) -> Any:
    def read(namespace: str, name: str) -> dict[str, Any]:
        return {"stringData": {key.replace("_", "-"): value for key, value in values.items()}}
    return read


def test_allowed_abs_without_a_secret_uses_the_pods_workload_identity(workload_env: None) -> None:
    location = StorageLocation("ABS", other=OtherLocation("container/blob", endpoint=ABS_ENDPOINT))
    storage = locations.storage_for_location(location, "tenant", no_api, allow_pod_identity=True)
    assert isinstance(storage, abs_storage.AbsStorage) and storage.endpoint == ABS_ENDPOINT
    credential = storage.client.credential
    assert isinstance(credential, WorkloadIdentityCredential)


def test_an_abs_secret_saying_use_workload_identity_is_the_pods_identity_so_it_needs_the_permission(
        workload_env: None, no_sdk_clients: None) -> None:
    location = StorageLocation("ABS", other=OtherLocation("container/blob", secret="azure"))
    with pytest.raises(objects.CredentialsRequired) as refused:
        locations.storage_for_location(location, "tenant", abs_secret(storage_account="acct",
                                                                      use_workload_identity="true"))
    assert "use-workload-identity" in refused.value.message and "--allow-pod-identity is off" in refused.value.message


def test_an_allowed_abs_secret_saying_use_workload_identity_names_the_account(workload_env: None) -> None:
    location = StorageLocation("ABS", other=OtherLocation("container/blob", secret="azure"))
    storage = locations.storage_for_location(location, "tenant", abs_secret(storage_account="acct",
                                                                            use_workload_identity="true"),
                                             allow_pod_identity=True)
    assert isinstance(storage, abs_storage.AbsStorage) and storage.endpoint == ABS_ENDPOINT
    assert isinstance(storage.client.credential, WorkloadIdentityCredential)


def test_allowed_abs_without_the_webhooks_environment_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in WORKLOAD_ENV:
        monkeypatch.delenv(name, raising=False)
    location = StorageLocation("ABS", other=OtherLocation("container/blob", endpoint=ABS_ENDPOINT))
    with pytest.raises(objects.CredentialsRequired) as refused:
        locations.storage_for_location(location, "tenant", no_api, allow_pod_identity=True)
    assert "AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE not set" in refused.value.message


def test_allowed_abs_without_a_secret_needs_the_blob_service_url(workload_env: None) -> None:
    with pytest.raises(objects.LocationInvalid, match="spec.abs.endpoint is required without spec.abs.absSecret"):
        locations.storage_for_location(NO_SECRET["ABS"], "tenant", no_api, allow_pod_identity=True)


@pytest.mark.parametrize("storage_type, storage_class", [("S3", s3.S3Storage), ("OSS", oss.OssStorage)])
def test_allowed_s3_and_oss_use_boto3s_default_chain(monkeypatch: pytest.MonkeyPatch, storage_type: str,
                                                     storage_class: type) -> None:
    sessions = Sessions()
    monkeypatch.setattr(boto3.session, "Session", sessions)
    storage = locations.storage_for_location(NO_SECRET[storage_type], "tenant", no_api, allow_pod_identity=True)
    assert isinstance(storage, storage_class)
    [client] = sessions.clients
    assert client["service"] == "s3"
    # No key of ours: boto3 resolves the credentials itself (AWS_* environment, IRSA's
    # AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, instance role).
    assert not {"aws_access_key_id", "aws_secret_access_key", "aws_session_token"} & set(client)


def test_allowed_gcs_uses_application_default_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []

    def default(*args: Any, **kwargs: Any) -> tuple[Any, str]:
        asked.append(kwargs)
        return AnonymousCredentials(), "project-of-the-pod"  # type: ignore[no-untyped-call]
    monkeypatch.setattr(google.auth, "default", default)
    storage = locations.storage_for_location(NO_SECRET["GCS"], "tenant", no_api, allow_pod_identity=True)
    assert isinstance(storage, gcs.GcsStorage)
    assert asked, "the client's credentials come from google.auth.default (GKE workload identity)"
    assert isinstance(storage.client._credentials, AnonymousCredentials)


def test_a_named_secret_is_read_whatever_the_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = Sessions()
    monkeypatch.setattr(boto3.session, "Session", sessions)
    read: list[tuple[str, str]] = []

    def secret(namespace: str, name: str) -> dict[str, Any]:
        read.append((namespace, name))
        return {"data": {"accessKeyID": base64.b64encode(b"id").decode(),
                         "accessKeySecret": base64.b64encode(b"key").decode()}}
    location = StorageLocation("OSS", other=OtherLocation("bucket/object", secret="ali"))
    for allowed in (False, True):
        locations.storage_for_location(location, "tenant", secret, allow_pod_identity=allowed)
    assert read == [("tenant", "ali")] * 2
    assert [c["aws_access_key_id"] for c in sessions.clients] == ["id", "id"]


@pytest.mark.parametrize("args", [
    ["--s3-path=bucket/key"],
    ["--storage-type=GCS", "--path=bucket/object"],
    ["--storage-type=OSS", "--path=bucket/object"],
])
def test_the_seed_never_fetches_without_a_mounted_secret(tmp_path: Path, no_sdk_clients: None,
                                                         capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    staging = tmp_path / "restore"
    status = seed_program.main(["fetch", *args, f"--sha256={'a' * 64}", f"--staging-dir={staging}",
                                f"--snapshot={staging}/snapshot.db"])
    assert status == 1
    assert "no secret is mounted" in capsys.readouterr().err
    assert not staging.exists()
