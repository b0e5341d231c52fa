"""etcd_common.storage.s3 against the sandbox's real S3 server (SeaweedFS): multipart upload from a
file and from a stream, download, head with metadata, list, delete, and each failure as its class."""
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from etcd_common.storage import s3
from kube_sandbox.testing import Sandbox

pytestmark = pytest.mark.sandbox
SIZE = 3 * s3.PART_SIZE_BYTES + 12345  # several parts and a short last one


def storage(sandbox: Sandbox, *, secret_key: str | None = None, endpoint: str | None = None) -> s3.S3Storage:
    config = sandbox.config
    return s3.S3Storage(endpoint=endpoint or config.s3_endpoint, force_path_style=True, max_attempts=1,
                        credentials=s3.AwsCredentials(config.s3_access_key, secret_key or config.s3_secret_key))


def test_round_trip_of_a_multipart_object(sandbox: Sandbox, tmp_path: Path) -> None:
    client = storage(sandbox)
    bucket = f"s3-storage-{os.getpid()}"
    client.create_bucket(bucket)
    client.create_bucket(bucket)  # already there: fine
    source = tmp_path / "source"
    source.write_bytes(os.urandom(SIZE))
    uploaded = client.upload_file(bucket, "dir/file", str(source), metadata={"sha256": "abc"})
    assert uploaded.size == SIZE and uploaded.etag.endswith("-4")  # four parts
    streamed = client.upload_stream(bucket, "dir/stream", io.BytesIO(source.read_bytes()))
    assert streamed.size == SIZE
    info = client.head(bucket, "dir/file")
    assert info.size == SIZE and info.metadata == {"sha256": "abc"}
    assert sorted(o.key for o in client.list(bucket, "dir/")) == ["dir/file", "dir/stream"]
    target = tmp_path / "downloaded"
    assert client.download_file(bucket, "dir/stream", str(target)) == SIZE
    assert hashlib.sha256(target.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    client.delete(bucket, "dir/file")
    client.delete(bucket, "dir/file")  # already gone: fine
    assert not client.exists(bucket, "dir/file") and client.exists(bucket, "dir/stream")
    with pytest.raises(s3.S3ObjectNotFound):
        client.download_file(bucket, "dir/file", str(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists() and not (tmp_path / "missing.part").exists()
    client.delete_bucket(bucket)
    client.delete_bucket(bucket)  # already gone: fine
    with pytest.raises(s3.S3BucketNotFound):
        client.check_bucket(bucket)


def test_failures_are_typed(sandbox: Sandbox) -> None:
    client = storage(sandbox)
    with pytest.raises(s3.S3BucketNotFound):
        client.check_bucket(f"no-such-bucket-{os.getpid()}")
    with pytest.raises(s3.S3AccessDenied):
        storage(sandbox, secret_key="wrong").check_bucket("anything")
    with pytest.raises(s3.S3Unreachable) as unreachable:
        storage(sandbox, endpoint="http://127.0.0.1:9").list("anything")
    assert unreachable.value.transient


def test_an_upload_whose_progress_callback_refuses_leaves_no_object(sandbox: Sandbox, tmp_path: Path) -> None:
    """What the backup's completion gate relies on: a multipart upload stopped at its last bytes
    is never completed."""
    client = storage(sandbox)
    bucket = f"s3-storage-gate-{os.getpid()}"
    client.create_bucket(bucket)
    source = tmp_path / "source"
    source.write_bytes(os.urandom(SIZE))
    sent = [0]

    def refuse_at_the_end(amount: int) -> None:
        sent[0] += amount
        if sent[0] >= SIZE:
            raise RuntimeError("check failed")
    with pytest.raises(s3.S3Error) as refused:
        client.upload_file(bucket, "gated", str(source), progress=refuse_at_the_end)
    assert isinstance(refused.value.__cause__, RuntimeError)
    assert not client.exists(bucket, "gated")
    client.delete_bucket(bucket)
