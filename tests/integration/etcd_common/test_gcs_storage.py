"""etcd_common.storage.gcs against a real fake-gcs-server: a resumable upload of several chunks
from a file and from a stream, download (pinned by generation too), metadata, list, delete, and
each failure as its class. Needs no Kubernetes sandbox. fake-gcs-server accepts any credentials,
so refused credentials are covered by the unit tests of the secret, not here."""
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from etcd_common.seed import program as seed_program
from etcd_common.storage import gcs, objects
from kube_sandbox.fake_gcs import FakeGcs

CHUNK = 256 * 1024  # GCS's smallest chunk
SIZE = 3 * CHUNK + 12345


def storage(fake_gcs: FakeGcs, *, endpoint: str | None = None) -> gcs.GcsStorage:
    return gcs.GcsStorage(gcs.GcsCredentials(access_token="any-token"), endpoint=endpoint or fake_gcs.endpoint,
                          chunk_size_bytes=CHUNK, timeout_seconds=10, retry_deadline_seconds=2)


def test_round_trip_of_a_multi_chunk_object(fake_gcs: FakeGcs, tmp_path: Path) -> None:
    client = storage(fake_gcs)
    bucket = f"gcs-storage-{os.getpid()}"
    client.create_bucket(bucket)
    client.create_bucket(bucket)  # already there: fine
    source = tmp_path / "source"
    source.write_bytes(os.urandom(SIZE))
    sent: list[int] = []
    uploaded = client.upload_file(bucket, "dir/file", str(source), metadata={"sha256": "abc"}, progress=sent.append)
    assert uploaded.size == SIZE and sum(sent) == SIZE and max(sent) <= CHUNK + 1
    streamed = client.upload_stream(bucket, "dir/stream", io.BytesIO(source.read_bytes()))
    assert streamed.size == SIZE
    info = client.head(bucket, "dir/file")
    assert info.size == SIZE and info.metadata == {"sha256": "abc"} and info.version_id
    assert sorted(o.key for o in client.list(bucket, "dir/")) == ["dir/file", "dir/stream"]
    target = tmp_path / "downloaded"
    assert client.download_file(bucket, "dir/stream", str(target)) == SIZE
    assert hashlib.sha256(target.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    assert client.download_file(bucket, "dir/file", str(target), version_id=info.version_id) == SIZE
    client.upload_stream(bucket, "dir/file", io.BytesIO(b"replaced"))
    with pytest.raises(objects.ObjectChanged) as changed:
        client.download_file(bucket, "dir/file", str(tmp_path / "pinned"), version_id=info.version_id)
    assert changed.value.reason == "GCSObjectChanged" and not (tmp_path / "pinned.part").exists()
    client.delete(bucket, "dir/file")
    client.delete(bucket, "dir/file")  # already gone: fine
    assert not client.exists(bucket, "dir/file") and client.exists(bucket, "dir/stream")
    with pytest.raises(objects.ObjectNotFound):
        client.download_file(bucket, "dir/file", str(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists() and not (tmp_path / "missing.part").exists()
    client.delete_bucket(bucket)
    client.delete_bucket(bucket)  # already gone: fine


def test_failures_are_typed(fake_gcs: FakeGcs, tmp_path: Path) -> None:
    client = storage(fake_gcs)
    missing = f"no-such-bucket-{os.getpid()}"
    for call in (lambda: client.check_bucket(missing), lambda: client.list(missing),
                 lambda: client.head(missing, "key"), lambda: client.delete(missing, "key")):
        with pytest.raises(objects.BucketNotFound) as not_found:
            call()
        assert not_found.value.reason == "GCSBucketNotFound"
    with pytest.raises(objects.Unreachable) as unreachable:
        storage(fake_gcs, endpoint="http://127.0.0.1:9").check_bucket("anything")
    assert unreachable.value.transient


def test_an_upload_whose_progress_callback_refuses_leaves_no_object(fake_gcs: FakeGcs, tmp_path: Path) -> None:
    """What the backup's completion gate relies on: stopped at its last bytes, nothing is finalized."""
    client = storage(fake_gcs)
    bucket = f"gcs-storage-gate-{os.getpid()}"
    client.create_bucket(bucket)
    source = tmp_path / "source"
    source.write_bytes(os.urandom(SIZE))
    sent = [0]

    def refuse_at_the_end(amount: int) -> None:
        sent[0] += amount
        if sent[0] >= SIZE:
            raise RuntimeError("check failed")
    with pytest.raises(objects.StorageError) as refused:
        client.upload_file(bucket, "gated", str(source), progress=refuse_at_the_end)
    assert isinstance(refused.value.__cause__, RuntimeError)
    assert not client.exists(bucket, "gated")
    client.delete_bucket(bucket)


def test_the_seed_fetches_with_the_mounted_gcp_secret(fake_gcs: FakeGcs, tmp_path: Path) -> None:
    """`etcd-restore-seed fetch --storage-type=GCS` as the seed pod runs it: the gcpSecret mounted as
    files, the object pinned by the generation the restore operator verified, its sha256 checked."""
    client = storage(fake_gcs)
    bucket = f"gcs-seed-{os.getpid()}"
    client.create_bucket(bucket)
    payload = os.urandom(SIZE)
    client.upload_stream(bucket, "snap.db", io.BytesIO(payload))
    generation = client.head(bucket, "snap.db").version_id
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "access-token").write_text("any-token")
    args = ["fetch", "--storage-type=GCS", f"--path={bucket}/snap.db", f"--secret-dir={secret_dir}",
            f"--endpoint={fake_gcs.endpoint}", f"--sha256={hashlib.sha256(payload).hexdigest()}",
            f"--staging-dir={tmp_path / 'staging'}", f"--snapshot={tmp_path / 'staging' / 'snapshot.db'}",
            f"--version-id={generation}"]
    assert seed_program.main(args) == 0
    assert (tmp_path / "staging" / "snapshot.db").read_bytes() == payload
    client.upload_stream(bucket, "snap.db", io.BytesIO(b"replaced since it was verified"))
    assert seed_program.main(args) == 1  # another generation: refused
    client.delete_bucket(bucket)
