"""The pure parts of etcd_common.s3_storage: the awsSecret's files, paths, endpoints, and boto3's
failures mapped to error classes (a real S3 server is exercised by the integration tests)."""
from __future__ import annotations

import base64

import boto3.exceptions
import botocore.exceptions
import pytest

from etcd_common import s3_storage as s3

CREDENTIALS = "[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def client_error(code: str, status: int) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": f"{code} message"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "HeadObject")


def test_credentials_and_region_from_coreos_secret() -> None:
    secret = {"data": {"credentials": b64(CREDENTIALS), "config": b64("[default]\nregion = eu-west-1\n")}}
    credentials = s3.credentials_from_secret(secret)
    assert (credentials.access_key_id, credentials.secret_access_key, credentials.region) == ("AKID", "SECRET", "eu-west-1")
    assert "SECRET" not in repr(credentials)


def test_config_file_profile_section_and_session_token() -> None:
    credentials = s3.parse_aws_files(CREDENTIALS + "aws_session_token = TOKEN\n", "[profile default]\nregion = r1\n")
    assert (credentials.session_token, credentials.region) == ("TOKEN", "r1")


def test_string_data_is_read_as_written() -> None:
    assert s3.credentials_from_secret({"stringData": {"credentials": CREDENTIALS}}).access_key_id == "AKID"


@pytest.mark.parametrize("secret, fragment", [
    ({"data": {"accessKey": b64("x")}}, "no 'credentials' file"),
    ({"data": {}}, "keys present: none"),
    ({"data": {"credentials": "!!not base64!!"}}, "not base64"),
    ({"data": {"credentials": b64("aws_access_key_id = x\n")}}, "not an AWS credentials file"),
    ({"data": {"credentials": b64("[other]\naws_access_key_id = x\naws_secret_access_key = y\n")}},
     "lacks aws_access_key_id and aws_secret_access_key"),
    ({"data": {"credentials": b64("[default]\naws_access_key_id = x\n")}}, "lacks aws_secret_access_key"),
])
def test_malformed_secrets_are_refused_with_what_is_wrong(secret: dict[str, object], fragment: str) -> None:
    with pytest.raises(s3.S3SecretInvalid) as refused:
        s3.credentials_from_secret(secret, where="secret ns/aws")
    assert fragment in refused.value.message and "secret ns/aws" in refused.value.message
    assert refused.value.reason == s3.REASON_SECRET_INVALID


def test_missing_secret_is_a_secret_error() -> None:
    from kube_adapter.errors import NotFound

    def read(namespace: str, name: str) -> dict[str, object]:
        raise NotFound("secrets \"aws\" not found", status=404)
    with pytest.raises(s3.S3SecretInvalid, match="ns/aws .* does not exist"):
        s3.read_aws_credentials(read, "ns", "aws")


@pytest.mark.parametrize("path, expected", [
    ("bucket/key", ("bucket", "key")), ("bucket/dir/etcd.backup", ("bucket", "dir/etcd.backup")),
    ("/bucket/key", ("bucket", "key")),
])
def test_split_path(path: str, expected: tuple[str, str]) -> None:
    assert s3.split_path(path) == expected


@pytest.mark.parametrize("path", ["bucket", "bucket/", "", "/key"])
def test_split_path_needs_bucket_and_key(path: str) -> None:
    with pytest.raises(s3.S3LocationInvalid):
        s3.split_path(path)


@pytest.mark.parametrize("endpoint, expected", [
    ("", ""), ("http://127.0.0.1:9000/", "http://127.0.0.1:9000"), ("s3.example:443", "https://s3.example:443"),
])
def test_endpoint_normalisation(endpoint: str, expected: str) -> None:
    assert s3.normalize_endpoint(endpoint) == expected


def test_endpoint_with_another_scheme_is_refused() -> None:
    with pytest.raises(s3.S3LocationInvalid):
        s3.normalize_endpoint("ftp://x")


@pytest.mark.parametrize("error, key, expected", [
    (client_error("NoSuchBucket", 404), "k", s3.S3BucketNotFound),
    (client_error("404", 404), "", s3.S3BucketNotFound),
    (client_error("404", 404), "k", s3.S3ObjectNotFound),
    (client_error("NoSuchKey", 404), "k", s3.S3ObjectNotFound),
    (client_error("InvalidAccessKeyId", 403), "k", s3.S3AccessDenied),
    (client_error("SignatureDoesNotMatch", 403), "k", s3.S3AccessDenied),
    (client_error("403", 403), "", s3.S3AccessDenied),
    (client_error("InternalError", 500), "k", s3.S3Unreachable),
    (client_error("SlowDown", 503), "k", s3.S3Unreachable),
    (botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), "k", s3.S3Unreachable),
    (botocore.exceptions.NoCredentialsError(), "k", s3.S3SecretInvalid),
])
def test_boto_errors_map_to_classes(error: Exception, key: str, expected: type[s3.S3Error]) -> None:
    translated = s3.translate_error(error, bucket="b", key=key)
    assert type(translated) is expected
    assert translated.transient == (expected is s3.S3Unreachable)


def test_wrapped_upload_errors_are_looked_through() -> None:
    try:
        try:
            raise client_error("NoSuchBucket", 404)
        except botocore.exceptions.ClientError as inner:
            raise boto3.exceptions.S3UploadFailedError("Failed to upload") from inner
    except boto3.exceptions.S3UploadFailedError as outer:
        assert isinstance(s3.translate_error(outer, bucket="b", key="k"), s3.S3BucketNotFound)
