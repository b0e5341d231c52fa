"""The pure parts of the ABS, GCS and OSS storage: each secret read into credentials (CoreOS's key
names) and each way it can be wrong, with a reason naming the store and a message naming the key;
endpoints, regions and paths; the store chosen from a spec's location."""
from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from etcd_common.api.storage_locations import OtherLocation, S3Location, StorageLocation
from etcd_common.storage import abs as abs_storage
from etcd_common.storage import gcs, locations, objects, oss, s3
from kube_adapter.errors import NotFound

ACCOUNT_KEY = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


def data(**values: str) -> dict[str, Any]:
    """A Secret as the API returns it (base64 `data`); `_` in a name stands for `-`."""
    return {"data": {name.replace("_", "-"): base64.b64encode(value.encode()).decode() for name, value in values.items()}}


# --- ABS


def test_abs_secret_with_coreos_keys() -> None:
    credentials = abs_storage.credentials_from_secret(data(storage_account="acct", storage_key=ACCOUNT_KEY))
    assert credentials.account_url == "https://acct.blob.core.windows.net"
    assert ACCOUNT_KEY not in repr(credentials)
    china = abs_storage.credentials_from_secret(data(storage_account="acct", storage_key=ACCOUNT_KEY,
                                                     cloud="AzureChinaCloud"))
    assert china.account_url == "https://acct.blob.core.chinacloudapi.cn"
    local = abs_storage.credentials_from_secret({"stringData": {
        "storage-account": "devstoreaccount1", "storage-key": ACCOUNT_KEY,
        "endpoint": "http://127.0.0.1:10000/devstoreaccount1/"}})
    assert local.account_url == "http://127.0.0.1:10000/devstoreaccount1"


@pytest.mark.parametrize("secret, fragment", [
    (data(storage_account="acct"), "lacks 'storage-key' (keys present: storage-account)"),
    ({}, "lacks 'storage-account' and 'storage-key' (keys present: none)"),
    (data(storage_account="acct", storage_key="not base64!"), "'storage-key' is not an account key"),
    (data(storage_account="acct", storage_key=ACCOUNT_KEY, cloud="Moon"), "'cloud' = 'Moon' is not one of"),
    (data(storage_account="acct", storage_key=ACCOUNT_KEY, endpoint="ftp://x"), "key 'endpoint'"),
    ({"data": {"storage-account": "%%%"}}, "'storage-account' is not base64"),
])
def test_abs_secret_problems_name_the_key(secret: dict[str, Any], fragment: str) -> None:
    with pytest.raises(objects.SecretInvalid) as refused:
        abs_storage.credentials_from_secret(secret, where="secret ns/azure")
    assert refused.value.reason == "ABSSecretInvalid"
    assert fragment in refused.value.message and "secret ns/azure" in refused.value.message


def test_abs_needs_its_secret_or_the_blob_service_its_identity_writes_to() -> None:
    def no_secret(namespace: str, name: str) -> dict[str, Any]:
        raise NotFound(f"secrets {name}")
    with pytest.raises(objects.LocationInvalid, match="spec.abs.endpoint is required without spec.abs.absSecret"):
        abs_storage.location_credentials(OtherLocation("c/k"), "ns", no_secret)
    with pytest.raises(objects.SecretInvalid, match="secret ns/azure .spec.abs.absSecret. does not exist"):
        abs_storage.location_credentials(OtherLocation("c/k", secret="azure"), "ns", no_secret)


@pytest.mark.parametrize(("values", "fragment"), [
    ({"storage-account": "acct", "use-workload-identity": "true", "storage-key": ACCOUNT_KEY}, "say one way"),
    ({"storage-account": "acct", "use-workload-identity": "yes"}, "must be \"true\" or \"false\""),
    ({"use-workload-identity": "true"}, "lacks 'storage-account'"),
    ({"storage-account": "acct", "use-workload-identity": "false"}, "lacks 'storage-key'"),
])
def test_an_abs_secret_asking_for_workload_identity_says_it_one_way(values: dict[str, str], fragment: str) -> None:
    with pytest.raises(objects.SecretInvalid) as refused:
        abs_storage.credentials_from_secret({"stringData": values}, where="secret ns/azure")
    assert fragment in refused.value.message


def test_an_abs_secret_asking_for_workload_identity_names_its_account() -> None:
    credentials = abs_storage.credentials_from_secret(
        {"stringData": {"storage-account": "acct", "use-workload-identity": "True", "cloud": "AzureChinaCloud"}})
    assert credentials.workload_identity and not credentials.key
    assert credentials.account_url == "https://acct.blob.core.chinacloudapi.cn"


def test_abs_metadata_names_round_trip() -> None:
    stored = abs_storage._to_abs_metadata({"sha256": "x", "etcd-revision": "7"})
    assert stored == {"sha256": "x", "etcd_revision": "7"}
    assert abs_storage._from_abs_metadata(stored) == {"sha256": "x", "etcd-revision": "7"}


# --- GCS


def test_gcs_access_token_wins_over_credentials_json() -> None:
    credentials = gcs.credentials_from_secret(data(access_token="ya29.token\n", **{"credentials.json": "{}"}))
    assert credentials.access_token == "ya29.token" and credentials.service_account_info is None
    assert "ya29" not in repr(credentials)


@pytest.mark.parametrize("secret, fragment", [
    ({}, "has neither 'access-token' nor 'credentials.json' (keys present: none)"),
    (data(token="x"), "(keys present: token)"),
    ({"stringData": {"credentials.json": "{not json"}}, "'credentials.json' is not JSON"),
    ({"stringData": {"credentials.json": json.dumps({"type": "authorized_user"})}}, "not a service-account key"),
    ({"stringData": {"credentials.json": json.dumps({"type": "service_account", "client_email": "a@b"})}},
     "lacks private_key, token_uri"),
    ({"stringData": {"credentials.json": json.dumps({
        "type": "service_account", "client_email": "a@b", "token_uri": "https://oauth2.example/token",
        "private_key": "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"})}},
     "'credentials.json' cannot be used"),
])
def test_gcs_secret_problems_name_the_key(secret: dict[str, Any], fragment: str) -> None:
    with pytest.raises(objects.SecretInvalid) as refused:
        gcs.credentials_from_secret(secret)
    assert refused.value.reason == "GCSSecretInvalid" and fragment in refused.value.message


@pytest.mark.parametrize("endpoint, expected", [
    ("", ""), ("127.0.0.1:4443", "https://127.0.0.1:4443"), ("http://127.0.0.1:4443/", "http://127.0.0.1:4443"),
])
def test_gcs_endpoint(endpoint: str, expected: str) -> None:
    assert gcs.normalize_endpoint(endpoint) == expected


def test_gcs_secret_may_name_the_server_and_the_spec_wins() -> None:
    secrets = {"token": data(access_token="t", endpoint="http://127.0.0.1:4443/"),
               "bad": data(access_token="t", endpoint="ftp://x")}

    def secret(namespace: str, name: str) -> dict[str, Any]:
        return secrets[name]
    assert gcs.storage_for_location(OtherLocation("b/k", secret="token"), "ns", secret).endpoint == "http://127.0.0.1:4443"
    spec_wins = OtherLocation("b/k", secret="token", endpoint="http://127.0.0.1:5555")
    assert gcs.storage_for_location(spec_wins, "ns", secret).endpoint == "http://127.0.0.1:5555"
    with pytest.raises(objects.SecretInvalid) as refused:
        gcs.storage_for_location(OtherLocation("b/k", secret="bad"), "ns", secret)
    assert refused.value.reason == "GCSSecretInvalid" and "key 'endpoint'" in refused.value.message


def test_gcs_endpoint_that_is_no_url() -> None:
    with pytest.raises(objects.LocationInvalid) as refused:
        gcs.normalize_endpoint("ftp://x")
    assert refused.value.reason == "GCSLocationInvalid"


# --- OSS


def test_oss_secret_with_coreos_keys() -> None:
    credentials = oss.credentials_from_secret(data(accessKeyID="id", accessKeySecret="secret"))
    assert (credentials.access_key_id, credentials.secret_access_key) == ("id", "secret")
    with pytest.raises(objects.SecretInvalid) as refused:
        oss.credentials_from_secret(data(accessKeyID="id"), where="secret ns/ali")
    assert refused.value.reason == "OSSSecretInvalid"
    assert "secret ns/ali lacks 'accessKeySecret' (keys present: accessKeyID)" in refused.value.message


def test_oss_needs_its_secret() -> None:
    def no_secret(namespace: str, name: str) -> dict[str, Any]:
        raise NotFound(f"secrets {name}")
    with pytest.raises(objects.CredentialsRequired, match="spec.oss.ossSecret is empty"):
        locations.storage_for_location(StorageLocation("OSS", other=OtherLocation("b/k")), "ns", no_secret)
    with pytest.raises(objects.SecretInvalid) as missing:
        oss.storage_for_location(OtherLocation("b/k", secret="gone"), "default", no_secret)
    assert missing.value.reason == "OSSSecretInvalid"
    assert "secret default/gone (spec.oss.ossSecret) does not exist" in missing.value.message


@pytest.mark.parametrize("endpoint, url, region, style", [
    ("", "http://oss-cn-hangzhou.aliyuncs.com", "cn-hangzhou", "virtual"),
    ("oss-cn-beijing.aliyuncs.com", "https://oss-cn-beijing.aliyuncs.com", "cn-beijing", "virtual"),
    ("https://oss-eu-central-1-internal.aliyuncs.com", "https://oss-eu-central-1-internal.aliyuncs.com",
     "eu-central-1", "virtual"),
    ("http://127.0.0.1:9000", "http://127.0.0.1:9000", oss.DEFAULT_REGION, "path"),
])
def test_oss_endpoint_region_and_addressing(endpoint: str, url: str, region: str, style: str) -> None:
    def secret(namespace: str, name: str) -> dict[str, Any]:
        return data(accessKeyID="id", accessKeySecret="secret")
    storage = oss.storage_for_location(OtherLocation("b/k", secret="ali", endpoint=endpoint), "ns", secret)
    assert (storage.endpoint, oss.region_of(url), storage.addressing_style) == (url, region, style)
    assert storage.client.meta.region_name == region and storage.backend == "OSS"


# --- the location decides


def test_the_location_decides_the_store_and_the_errors_say_which() -> None:
    def secret(namespace: str, name: str) -> dict[str, Any]:
        return {"ali": data(accessKeyID="id", accessKeySecret="s"),
                "azure": data(storage_account="acct", storage_key=ACCOUNT_KEY),
                "gcp": data(access_token="t")}[name]
    s3_location = StorageLocation("S3", s3=S3Location("b/k", endpoint="http://127.0.0.1:9000"))
    assert isinstance(locations.storage_for_location(s3_location, "ns", secret, allow_pod_identity=True,
                                                     max_attempts=1), s3.S3Storage)
    abs_location = StorageLocation("ABS", other=OtherLocation("c/k", secret="azure"))
    assert isinstance(locations.storage_for_location(abs_location, "ns", secret, max_attempts=1, part_size_bytes=1),
                      abs_storage.AbsStorage)  # options a store does not take are left out
    gcs_location = StorageLocation("GCS", other=OtherLocation("b/k", secret="gcp", endpoint="http://127.0.0.1:1"))
    assert isinstance(locations.storage_for_location(gcs_location, "ns", secret), gcs.GcsStorage)
    oss_location = StorageLocation("OSS", other=OtherLocation("b/k", secret="ali"))
    assert isinstance(locations.storage_for_location(oss_location, "ns", secret), oss.OssStorage)
    assert locations.object_url(gcs_location, "b", "k") == "gs://b/k"
    assert locations.object_url(abs_location, "c", "k") == "abs://c/k"
    with pytest.raises(objects.LocationInvalid) as refused:
        locations.split_location(StorageLocation("ABS", other=OtherLocation("container-only")))
    assert refused.value.reason == "ABSLocationInvalid"
    assert "spec.abs.path 'container-only' must be \"<container>/<key>\"" in refused.value.message


def test_s3_errors_keep_their_classes_and_reasons() -> None:
    error = s3.S3AccessDenied("denied")
    assert isinstance(error, objects.AccessDenied) and isinstance(error, s3.S3Error)
    assert error.reason == s3.REASON_ACCESS_DENIED and s3.S3Unreachable("x").transient
    assert s3.translate_error(RuntimeError("x"), bucket="b", backend="OSS").reason == "OSSFailed"


def test_abs_retries_its_attempts_within_seconds_not_the_sdks_half_minute() -> None:
    storage = abs_storage.AbsStorage(abs_storage.AbsCredentials("account", base64.b64encode(b"k").decode()),
                                     endpoint="http://127.0.0.1:9/account")
    policy = storage.client._config.retry_policy
    waits = [policy.get_backoff_time({"count": count}) for count in range(abs_storage.MAX_ATTEMPTS - 1)]
    assert policy.total_retries == policy.connect_retries == abs_storage.MAX_ATTEMPTS - 1
    assert all(0 <= wait <= 4 for wait in waits), waits  # the SDK's defaults: 12-18 s, then 15-21 s
