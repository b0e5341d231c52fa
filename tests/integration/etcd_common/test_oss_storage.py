"""etcd_common.storage.oss (OSS through its S3-compatible API) against a real S3-compatible server
(SeaweedFS, standalone on loopback): built from an EtcdBackup's `oss` section and its ossSecret as
the operators build it, a multipart round trip, list, delete, and the failures with OSS reasons.
Needs no Kubernetes sandbox."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from etcd_common.api.storage_locations import OtherLocation
from etcd_common.storage import objects, oss, s3
from kube_adapter.errors import NotFound
from kube_sandbox.s3 import StandaloneS3

SIZE = 2 * s3.PART_SIZE_BYTES + 12345


def secrets(server: StandaloneS3, *, secret_key: str | None = None) -> oss.SecretReader:
    def read(namespace: str, name: str) -> dict[str, Any]:
        if name != "oss-credentials":
            raise NotFound(f"secret {namespace}/{name}")
        return {"stringData": {"accessKeyID": server.access_key, "accessKeySecret": secret_key or server.secret_key}}
    return read


def storage(server: StandaloneS3, *, secret_key: str | None = None, endpoint: str | None = None) -> oss.OssStorage:
    location = OtherLocation(path="unused/key", secret="oss-credentials", endpoint=endpoint or server.endpoint)
    return oss.storage_for_location(location, "default", secrets(server, secret_key=secret_key), max_attempts=1)


def test_round_trip_through_the_s3_compatible_api(standalone_s3: StandaloneS3, tmp_path: Path) -> None:
    client = storage(standalone_s3)
    assert client.addressing_style == "path"  # an IP endpoint: a test server, not OSS itself
    bucket = f"oss-storage-{os.getpid()}"
    client.create_bucket(bucket)
    source = tmp_path / "source"
    source.write_bytes(os.urandom(SIZE))
    uploaded = client.upload_file(bucket, "dir/file", str(source), metadata={"sha256": "abc"})
    assert uploaded.size == SIZE and uploaded.etag.endswith("-3")  # three parts
    assert [o.key for o in client.list(bucket, "dir/")] == ["dir/file"]
    target = tmp_path / "downloaded"
    assert client.download_file(bucket, "dir/file", str(target), if_match=uploaded.etag) == SIZE
    assert hashlib.sha256(target.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    client.delete(bucket, "dir/file")
    assert not client.exists(bucket, "dir/file")
    client.delete_bucket(bucket)


def test_failures_carry_oss_reasons(standalone_s3: StandaloneS3) -> None:
    with pytest.raises(objects.BucketNotFound) as missing:
        storage(standalone_s3).check_bucket(f"no-such-bucket-{os.getpid()}")
    assert missing.value.reason == "OSSBucketNotFound"
    with pytest.raises(objects.AccessDenied) as denied:
        storage(standalone_s3, secret_key="wrong").check_bucket("anything")
    assert denied.value.reason == "OSSAccessDenied"
    with pytest.raises(objects.Unreachable) as unreachable:
        storage(standalone_s3, endpoint="http://127.0.0.1:9").list("anything")
    assert unreachable.value.reason == "OSSUnreachable" and unreachable.value.transient
    with pytest.raises(objects.SecretInvalid) as no_secret:
        oss.storage_for_location(OtherLocation(path="b/k", secret="gone"), "default", secrets(standalone_s3))
    assert no_secret.value.reason == "OSSSecretInvalid" and "default/gone" in no_secret.value.message
