"""The pure parts of etcd_common.storage.s3: the awsSecret's files (credentials and the S3 server
they name), paths, endpoints, which server and addressing a client ends up with, and boto3's
failures mapped to error classes, and the requests that set a streamed upload's late metadata
(against botocore's Stubber; a real S3 server is exercised by the integration tests)."""
from __future__ import annotations

import base64
import hashlib
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3.exceptions
import botocore.exceptions
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from etcd_common.api.storage_locations import S3Location
from etcd_common.seed import program as seed_program
from etcd_common.storage import oss, s3

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


# --- the S3 server named in the awsSecret (AWS SDK shared config: endpoint_url, nested `s3 =`)

SANDBOX_CONFIG = "[default]\nregion = us-east-1\nendpoint_url = http://127.0.0.1:9000\ns3 =\n    addressing_style = path\n"


@pytest.mark.parametrize("config, credentials_extra, expected", [
    ("", "", ("", None)),
    ("[default]\nregion = us-east-1\n", "", ("", None)),
    (SANDBOX_CONFIG, "", ("http://127.0.0.1:9000", "path")),
    ("[profile default]\nendpoint_url = https://s3.example/\n", "", ("https://s3.example", None)),
    # The S3-only endpoint wins over the profile's; the style is case-insensitive.
    ("[default]\nendpoint_url = http://a.example:1\ns3 =\n  endpoint_url = http://b.example:2\n"
     "  addressing_style = Virtual\n", "", ("http://b.example:2", "virtual")),
    # The CLI's own s3 settings are not ours: ignored.
    ("[default]\ns3 =\n  max_concurrent_requests = 20\n  # a comment\n  addressing_style = auto\n", "",
     ("", "auto")),
    ("[default]\nendpoint_url =\ns3 =\n", "", ("", None)),
    # Keys may be in the credentials file too; its values win, as with the SDKs.
    ("", "endpoint_url = http://c.example:3\n", ("http://c.example:3", None)),
    ("[default]\nendpoint_url = http://a.example:1\n", "endpoint_url = http://c.example:3\n",
     ("http://c.example:3", None)),
])
def test_server_named_in_the_secret(config: str, credentials_extra: str, expected: tuple[str, str | None]) -> None:
    credentials = s3.parse_aws_files(CREDENTIALS + credentials_extra, config)
    assert (credentials.endpoint_url, credentials.addressing_style) == expected
    assert credentials.access_key_id == "AKID"


@pytest.mark.parametrize("config, credentials_extra, fragment", [
    ("[default]\nendpoint_url = s3.example:9000\n", "",
     "file 'config', profile [default], key endpoint_url = 's3.example:9000': not an http:// or https:// URL"),
    ("[default]\nendpoint_url = ftp://s3.example\n", "", "key endpoint_url = 'ftp://s3.example': not an http://"),
    ("[default]\nendpoint_url = http://\n", "", "key endpoint_url = 'http://': not an http://"),
    ("[default]\nendpoint_url = http://s3.example:port\n", "", "key endpoint_url = 'http://s3.example:port'"),
    ("[default]\ns3 =\n  endpoint_url = s3.example\n", "", "file 'config', profile [default], key s3.endpoint_url"),
    ("[default]\ns3 =\n  addressing_style = dns\n", "",
     "key s3.addressing_style = 'dns': must be path, virtual or auto"),
    ("[default]\ns3 = path\n", "", "key s3 = 'path': must be a nested section"),
    ("[default]\ns3 =\n  addressing_style path\n", "", "key s3: line 'addressing_style path' is not `key = value`"),
    ("", "endpoint_url = 127.0.0.1:9000\n", "file 'credentials', profile [default], key endpoint_url"),
])
def test_unusable_server_settings_are_refused_naming_file_and_key(config: str, credentials_extra: str,
                                                                  fragment: str) -> None:
    with pytest.raises(s3.S3SecretInvalid) as refused:
        s3.parse_aws_files(CREDENTIALS + credentials_extra, config, where="secret ns/aws")
    assert fragment in refused.value.message and refused.value.message.startswith("secret ns/aws: ")
    assert refused.value.reason == s3.REASON_SECRET_INVALID


def test_repr_names_the_server_not_the_secret() -> None:
    credentials = s3.parse_aws_files(CREDENTIALS + "aws_session_token = TOKEN\n", SANDBOX_CONFIG)
    assert "SECRET" not in repr(credentials) and "TOKEN" not in repr(credentials)
    assert "http://127.0.0.1:9000" in repr(credentials) and "'path'" in repr(credentials)


class Sent(Exception):
    """What the client would have sent (raised before anything goes on the wire)."""


def request_url(storage: s3.S3Storage) -> str:
    """The URL of a HEAD of backups/etcd.backup as this client builds it; nothing is sent."""
    def capture(request: Any, **_: Any) -> None:
        raise Sent(request.url)
    storage.client.meta.events.register("before-send.s3", capture)
    with pytest.raises(Sent) as sent:
        storage.client.head_object(Bucket="backups", Key="etcd.backup")
    return str(sent.value)


def secret_with(config: str) -> s3.AwsCredentials:
    return s3.parse_aws_files(CREDENTIALS, config)


@pytest.mark.parametrize("location, credentials, expected_url", [
    # Neither names a server: AWS, virtual-hosted (boto3's automatic addressing).
    (S3Location("backups/etcd.backup"), secret_with("[default]\nregion = us-east-1\n"),
     "https://backups.s3.amazonaws.com/etcd.backup"),
    # Only the secret: its endpoint and addressing.
    (S3Location("backups/etcd.backup"), secret_with(SANDBOX_CONFIG), "http://127.0.0.1:9000/backups/etcd.backup"),
    (S3Location("backups/etcd.backup"),
     secret_with("[default]\nendpoint_url = http://s3.example:9000\ns3 =\n  addressing_style = virtual\n"),
     "http://backups.s3.example:9000/etcd.backup"),
    (S3Location("backups/etcd.backup"), secret_with("[default]\ns3 =\n  addressing_style = path\n"),
     "https://s3.amazonaws.com/backups/etcd.backup"),
    # The spec wins: its endpoint over the secret's, forcePathStyle over the secret's style.
    (S3Location("backups/etcd.backup", endpoint="http://spec.example:1"), secret_with(SANDBOX_CONFIG),
     "http://spec.example:1/backups/etcd.backup"),
    (S3Location("backups/etcd.backup", force_path_style=True),
     secret_with("[default]\nendpoint_url = http://s3.example:9000\ns3 =\n  addressing_style = virtual\n"),
     "http://s3.example:9000/backups/etcd.backup"),
    # Each field on its own: the spec's endpoint, the secret's style.
    (S3Location("backups/etcd.backup", endpoint="http://spec.example:1"),
     secret_with("[default]\ns3 =\n  addressing_style = virtual\n"), "http://backups.spec.example:1/etcd.backup"),
    (S3Location("backups/etcd.backup", endpoint="http://spec.example:1", force_path_style=True), secret_with(""),
     "http://spec.example:1/backups/etcd.backup"),
])
def test_spec_wins_over_the_secret_field_by_field(location: S3Location, credentials: s3.AwsCredentials,
                                                  expected_url: str) -> None:
    # (Always with credentials: without, boto3 would look for some, instance metadata included.)
    assert request_url(s3.S3Storage.for_location(location, credentials)) == expected_url


def test_operators_and_the_one_shot_command_take_the_server_from_the_secret() -> None:
    """storage_for_location: what the backup operator, the restore operator's verification and
    `etcd-backup` build their client with."""
    secret = {"stringData": {"credentials": CREDENTIALS, "config": SANDBOX_CONFIG}}
    storage = s3.storage_for_location(S3Location("backups/etcd.backup", aws_secret="aws"), "ns",
                                      lambda namespace, name: secret)
    assert (storage.endpoint, storage.addressing_style) == ("http://127.0.0.1:9000", "path")
    assert repr(storage) == "S3Storage(endpoint='http://127.0.0.1:9000', addressing_style='path')"


def test_seed_restore_fetch_takes_the_server_from_the_mounted_secret(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    aws_dir = tmp_path / "aws"
    aws_dir.mkdir()
    (aws_dir / "credentials").write_text(CREDENTIALS)
    (aws_dir / "config").write_text(SANDBOX_CONFIG)
    content = b"snapshot bytes"
    used: list[tuple[str, str | None]] = []

    def download_file(self: s3.S3Storage, bucket: str, key: str, path: str, **pins: str) -> int:
        used.append((self.endpoint, self.addressing_style))
        Path(path).write_bytes(content)
        return len(content)
    monkeypatch.setattr(s3.S3Storage, "download_file", download_file)

    size = seed_program.fetch(S3Location("backups/etcd.backup"), aws_dir=str(aws_dir),
                                      sha256=hashlib.sha256(content).hexdigest(),
                                      staging_dir=str(tmp_path / "staging"), snapshot=str(tmp_path / "staging" / "s.db"))

    assert size == len(content) and used == [("http://127.0.0.1:9000", "path")]


def test_precondition_failed_is_the_object_changed() -> None:
    translated = s3.translate_error(client_error("PreconditionFailed", 412), bucket="b", key="k")
    assert type(translated) is s3.S3ObjectChanged and not translated.transient


def stubbed_storage() -> tuple[s3.S3Storage, Stubber]:
    storage = s3.S3Storage(endpoint="http://127.0.0.1:9", credentials=s3.AwsCredentials("id", "secret"))
    return storage, Stubber(storage.client)


def test_pinned_download_asks_for_that_object_only(tmp_path: Path) -> None:
    storage, stub = stubbed_storage()
    content = b"x" * (3 * s3.DOWNLOAD_CHUNK_BYTES + 5)
    stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(content), len(content))},
                      {"Bucket": "b", "Key": "k", "IfMatch": '"etag-1"', "VersionId": "v7"})
    with stub:
        size = storage.download_file("b", "k", str(tmp_path / "s.db"), if_match="etag-1", version_id="v7")
    stub.assert_no_pending_responses()
    assert size == len(content) and (tmp_path / "s.db").read_bytes() == content


def test_pinned_download_of_a_replaced_object_leaves_no_file(tmp_path: Path) -> None:
    storage, stub = stubbed_storage()
    stub.add_client_error("get_object", service_error_code="PreconditionFailed", http_status_code=412,
                          expected_params={"Bucket": "b", "Key": "k", "IfMatch": '"etag-1"'})
    with stub, pytest.raises(s3.S3ObjectChanged):
        storage.download_file("b", "k", str(tmp_path / "s.db"), if_match="etag-1")
    assert list(tmp_path.iterdir()) == []


def test_head_reads_the_version_asked_for() -> None:
    storage, stub = stubbed_storage()
    stub.add_response("head_object", {"ContentLength": 10, "ETag": '"e"', "VersionId": "v7",
                                      "LastModified": datetime(2024, 1, 1, tzinfo=UTC)},
                      {"Bucket": "b", "Key": "k", "VersionId": "v7"})
    with stub:
        info = storage.head("b", "k", version_id="v7")
    assert (info.etag, info.version_id, info.size) == ("e", "v7", 10)


def test_seed_fetch_passes_the_pins_and_refuses_a_replaced_object(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[dict[str, str]] = []

    def download_file(self: s3.S3Storage, bucket: str, key: str, path: str, **pins: str) -> int:
        asked.append(pins)
        raise s3.S3ObjectChanged(f"download s3://{bucket}/{key}: the object is not the one asked for")
    monkeypatch.setattr(s3.S3Storage, "download_file", download_file)
    aws_dir = tmp_path / "aws"
    aws_dir.mkdir()
    (aws_dir / "credentials").write_text("[default]\naws_access_key_id = id\naws_secret_access_key = key\n")

    with pytest.raises(seed_program.SnapshotMismatch, match="changed since the restore verified it"):
        seed_program.fetch(S3Location("backups/etcd.backup"), aws_dir=str(aws_dir), sha256="a" * 64,
                           staging_dir=str(tmp_path / "staging"), snapshot=str(tmp_path / "staging" / "s.db"),
                           etag="etag-1", version_id="v7")
    assert asked == [{"if_match": "etag-1", "version_id": "v7"}]
    code = seed_program.main(["fetch", "--s3-path=backups/etcd.backup", f"--sha256={'a' * 64}",
                              f"--staging-dir={tmp_path / 'staging'}", f"--snapshot={tmp_path / 'staging' / 's.db'}",
                              "--etag=etag-1", f"--aws-dir={aws_dir}"])
    assert code == 1


# --- late metadata (a streamed backup's sha256): set by copying the object onto itself


class EndingStream:
    """A non-seekable stream; `ended` once its last byte was read."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.ended = False

    def read(self, size: int = -1) -> bytes:
        chunk = self._data.read(size)
        self.ended = self._data.tell() == len(self._data.getvalue())
        return chunk


UP_FRONT = {"etcd-revision": "7", "etcd-version": "3.6.16"}
LATE = {"sha256": "a" * 64}


def late_storage(storage_class: type[s3.S3Storage] = s3.S3Storage) -> tuple[s3.S3Storage, Stubber]:
    # One request at a time, in this thread: the stubbed answers come in order.
    storage = storage_class(endpoint="http://127.0.0.1:9", credentials=s3.AwsCredentials("id", "secret"),
                            max_concurrency=1)
    return storage, Stubber(storage.client)


def head_answer(size: int, etag: str, metadata: dict[str, str], version_id: str = "") -> dict[str, Any]:
    return {"ContentLength": size, "ETag": f'"{etag}"', "Metadata": metadata,
            "LastModified": datetime(2026, 1, 1, tzinfo=UTC), **({"VersionId": version_id} if version_id else {})}


def expect_upload(stub: Stubber, data: bytes, uploaded: dict[str, Any]) -> None:
    """The upload (one PutObject: below the multipart threshold) with the up-front metadata only,
    then the HEAD that names the object the copy must copy."""
    stub.add_response("put_object", {"ETag": '"e1"'},
                      {"Bucket": "b", "Key": "k", "Body": ANY, "Metadata": UP_FRONT})
    stub.add_response("head_object", uploaded, {"Bucket": "b", "Key": "k"})


def ending_late_metadata(stream: EndingStream) -> Any:
    def late() -> dict[str, str]:
        assert stream.ended, "late metadata asked for before the stream ended"
        return LATE
    return late


@pytest.mark.parametrize("storage_class, size", [
    (s3.S3Storage, 1000),
    # OSS copies an object onto itself in one CopyObject at any size (same bucket).
    (oss.OssStorage, s3.SINGLE_COPY_LIMIT_BYTES + 1),
])
def test_late_metadata_is_set_by_copying_the_uploaded_object_onto_itself(storage_class: type[s3.S3Storage],
                                                                        size: int) -> None:
    storage, stub = late_storage(storage_class)
    data = b"x" * 1000
    stream = EndingStream(data)
    expect_upload(stub, data, head_answer(size, "e1", UP_FRONT, "v1"))
    stub.add_response("copy_object", {"CopyObjectResult": {"ETag": '"e2"'}}, {
        "Bucket": "b", "Key": "k", "CopySource": {"Bucket": "b", "Key": "k"},
        "MetadataDirective": "REPLACE", "Metadata": {**UP_FRONT, **LATE}, "CopySourceIfMatch": '"e1"'})
    stub.add_response("head_object", head_answer(size, "e2", {**UP_FRONT, **LATE}, "v2"), {"Bucket": "b", "Key": "k"})
    with stub:
        uploaded = storage.upload_stream("b", "k", stream, metadata=UP_FRONT,  # type: ignore[arg-type]
                                         late_metadata=ending_late_metadata(stream))
    stub.assert_no_pending_responses()
    assert storage.sets_metadata_last and uploaded == s3.UploadResult("b", "k", size, "e2")


def test_above_the_copy_limit_late_metadata_goes_on_a_part_by_part_copy() -> None:
    """boto3's managed copy: a new multipart upload with every metadata item, the object's bytes
    copied into it (UploadPartCopy), only from the object uploaded (its ETag)."""
    storage, stub = late_storage()
    storage.single_copy_limit_bytes = 100
    data = b"x" * 1000
    stream = EndingStream(data)
    expect_upload(stub, data, head_answer(len(data), "e1", UP_FRONT))
    stub.add_response("head_object", head_answer(len(data), "e1", UP_FRONT), {"Bucket": "b", "Key": "k", "IfMatch": '"e1"'})
    stub.add_response("create_multipart_upload", {"UploadId": "u1"},
                      {"Bucket": "b", "Key": "k", "Metadata": {**UP_FRONT, **LATE}})
    stub.add_response("upload_part_copy", {"CopyPartResult": {"ETag": '"p1"'}}, {
        "Bucket": "b", "Key": "k", "UploadId": "u1", "PartNumber": 1, "CopySource": {"Bucket": "b", "Key": "k"},
        "CopySourceRange": "bytes=0-999", "CopySourceIfMatch": ANY})
    stub.add_response("complete_multipart_upload", {"ETag": '"e2-1"'}, {
        "Bucket": "b", "Key": "k", "UploadId": "u1", "MultipartUpload": {"Parts": [{"ETag": '"p1"', "PartNumber": 1}]}})
    stub.add_response("head_object", head_answer(len(data), "e2-1", {**UP_FRONT, **LATE}), {"Bucket": "b", "Key": "k"})
    with stub:
        uploaded = storage.upload_stream("b", "k", stream, metadata=UP_FRONT,  # type: ignore[arg-type]
                                         late_metadata=ending_late_metadata(stream))
    stub.assert_no_pending_responses()
    assert uploaded.etag == "e2-1"


def test_a_failed_copy_fails_the_upload_with_the_store_reason_saying_what_stays() -> None:
    storage, stub = late_storage()
    data = b"x" * 1000
    expect_upload(stub, data, head_answer(len(data), "e1", UP_FRONT, "v1"))
    stub.add_client_error("copy_object", service_error_code="AccessDenied", http_status_code=403)
    with stub, pytest.raises(s3.S3AccessDenied) as refused:
        storage.upload_stream("b", "k", io.BytesIO(data), metadata=UP_FRONT, late_metadata=lambda: LATE)
    stub.assert_no_pending_responses()  # nothing else asked: the complete object is kept
    assert refused.value.reason == s3.REASON_ACCESS_DENIED
    assert refused.value.message.startswith("set metadata (a copy onto itself) on s3://b/k: access denied")
    assert refused.value.message.endswith("; the uploaded object stays, without sha256")


def test_a_server_that_keeps_the_old_metadata_fails_the_upload() -> None:
    """Never an object reported uploaded without its late metadata: it is read back."""
    storage, stub = late_storage()
    data = b"x" * 1000
    expect_upload(stub, data, head_answer(len(data), "e1", UP_FRONT))
    stub.add_response("copy_object", {"CopyObjectResult": {"ETag": '"e1"'}})
    stub.add_response("head_object", head_answer(len(data), "e1", UP_FRONT), {"Bucket": "b", "Key": "k"})
    with stub, pytest.raises(s3.S3Error) as failed:
        storage.upload_stream("b", "k", io.BytesIO(data), metadata=UP_FRONT, late_metadata=lambda: LATE)
    stub.assert_no_pending_responses()
    assert failed.value.reason == s3.REASON_FAILED and "lacks sha256" in failed.value.message


def test_a_stream_keeps_at_most_its_part_bound_in_memory_a_file_upload_its_concurrency() -> None:
    storage = s3.S3Storage(endpoint="http://127.0.0.1:9", part_size_bytes=16 * 2**20, max_concurrency=6)
    stream, file = storage.stream_transfer_config, storage.transfer_config
    assert stream.max_in_memory_upload_chunks == s3.STREAM_PARTS_IN_MEMORY
    assert file.max_in_memory_upload_chunks != s3.STREAM_PARTS_IN_MEMORY
    assert (stream.multipart_chunksize, stream.max_request_concurrency) == (16 * 2**20, 6)
    assert (file.multipart_chunksize, file.max_request_concurrency) == (16 * 2**20, 6)


def test_clients_with_a_secrets_keys_share_one_session_and_the_pod_identity_gets_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A session reads botocore's S3 model again when it makes its first client (tens of ms of
    CPU per backup); the pod's own credential chain is resolved afresh for each client."""
    made: list[object] = []

    class CountingSession(boto3.session.Session):
        def __init__(self) -> None:
            made.append(self)
            super().__init__()
    monkeypatch.setattr(boto3.session, "Session", CountingSession)
    s3._shared_session.cache_clear()
    keys = s3.AwsCredentials("AKIAEXAMPLE", "secret")
    first = s3.S3Storage(endpoint="http://127.0.0.1:9", credentials=keys)
    second = s3.S3Storage(endpoint="http://127.0.0.1:9", credentials=s3.AwsCredentials("AKIAOTHER", "other"))
    assert len(made) == 1
    assert first.client._request_signer._credentials.access_key == "AKIAEXAMPLE"
    assert second.client._request_signer._credentials.access_key == "AKIAOTHER"
    s3.S3Storage(endpoint="http://127.0.0.1:9")
    s3.S3Storage(endpoint="http://127.0.0.1:9")
    assert len(made) == 3
    s3._shared_session.cache_clear()  # later tests get a session made by the real class
