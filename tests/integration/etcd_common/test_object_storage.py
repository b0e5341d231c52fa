"""What every `ObjectStorage` backend must do, checked the same way against a real server for each:
ABS (Azurite), GCS (fake-gcs-server), OSS (its S3-compatible API on a standalone SeaweedFS) and
S3 (the sandbox's SeaweedFS: those cases need the sandbox). A multi-part upload from a file and
from a stream, download (pinned by ETag or generation too), metadata, list, delete, each failure
as its class with the backend's reason, an upload its progress callback stops, a streamed
upload's late metadata (ABS, OSS, S3; GCS takes metadata only up front) and a stream that
breaks off, and the restore seed's fetch with a mounted secret. Each backend's own parts (its secret's
keys, endpoints, paths, errors) are unit-tested in tests/unit/etcd_common."""
from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from etcd_common.api.storage_locations import OtherLocation
from etcd_common.seed import program as seed_program
from etcd_common.storage import abs as abs_storage
from etcd_common.storage import gcs, objects, oss, s3
from etcd_common.storage.objects import ObjectStorage, UploadResult
from kube_adapter.errors import NotFound
from kube_sandbox.azurite import ACCOUNT, ACCOUNT_KEY, Azurite
from kube_sandbox.fake_gcs import FakeGcs
from kube_sandbox.s3 import StandaloneS3
from kube_sandbox.testing import Sandbox

BLOCK = 256 * 1024  # ABS block and GCS chunk (GCS's smallest) of these tests
NO_SERVER = "http://127.0.0.1:9"  # nothing listens on the discard port


@dataclass(frozen=True)
class Store:
    """One backend as these tests see it."""

    backend: str  # the reasons' prefix
    client: ObjectStorage
    size: int  # several parts and a short last one
    # The download option that pins an object: "if_match" (its ETag) or "version_id" (its generation).
    pin_by: str
    # The backend's own check of how an upload of `size` bytes went out in parts.
    check_parts: Callable[[str, str, UploadResult, list[int]], None]
    unreachable: ObjectStorage  # the same store at an address nothing answers
    refused: ObjectStorage | None  # with credentials the server refuses; None: it accepts any
    # Whether `head` and an upload report a missing bucket as such. ABS and GCS do (they ask for the
    # bucket when a HEAD finds nothing); on S3 a HEAD's 404 has no error code, and SeaweedFS, the
    # S3 server here, creates a bucket that an object is put into.
    object_calls_find_missing_bucket: bool = True
    # For the restore seed (`--secret-dir`): the secret's keys as the seed pod mounts them, more
    # `fetch` arguments, and keys that make the server refuse the credentials (None: it accepts any).
    seed_secret: Mapping[str, str] = field(default_factory=dict)
    seed_args: tuple[str, ...] = ()
    refused_seed_secret: Mapping[str, str] | None = None


def abs_store(azurite: Azurite) -> Store:
    size = 3 * BLOCK + 12345

    def connect(*, key: str = ACCOUNT_KEY, endpoint: str = "") -> abs_storage.AbsStorage:
        return abs_storage.AbsStorage(abs_storage.AbsCredentials(ACCOUNT, key), endpoint=endpoint or azurite.endpoint,
                                      block_size_bytes=BLOCK, max_attempts=1)
    client = connect()

    def four_blocks(bucket: str, key: str, uploaded: UploadResult, sent: list[int]) -> None:
        assert len(sent) == 4
        blocks = client.client.get_blob_client(bucket, key).get_block_list("committed")[0]
        assert [block.size for block in blocks] == [BLOCK, BLOCK, BLOCK, 12345]
    wrong_key = "d3Jvbmcga2V5IGZvciB0aGUgZGV2IGFjY291bnQ="  # base64, not the account's key
    return Store("ABS", client, size, "if_match", four_blocks, unreachable=connect(endpoint=f"{NO_SERVER}/{ACCOUNT}"),
                 refused=connect(key=wrong_key),
                 seed_secret={"storage-account": ACCOUNT, "storage-key": ACCOUNT_KEY, "endpoint": azurite.endpoint},
                 refused_seed_secret={"storage-key": wrong_key})


def gcs_store(fake_gcs: FakeGcs) -> Store:
    def connect(endpoint: str = "") -> gcs.GcsStorage:
        return gcs.GcsStorage(gcs.GcsCredentials(access_token="any-token"), endpoint=endpoint or fake_gcs.endpoint,
                              chunk_size_bytes=BLOCK, timeout_seconds=10, retry_deadline_seconds=2)

    def chunk_by_chunk(bucket: str, key: str, uploaded: UploadResult, sent: list[int]) -> None:
        assert max(sent) <= BLOCK + 1
    # fake-gcs-server accepts any credentials: refused ones are covered by the unit tests of the secret.
    return Store("GCS", connect(), 3 * BLOCK + 12345, "version_id", chunk_by_chunk, unreachable=connect(NO_SERVER),
                 refused=None, seed_secret={"access-token": "any-token"}, seed_args=(f"--endpoint={fake_gcs.endpoint}",))


def parts(count: int) -> Callable[[str, str, UploadResult, list[int]], None]:
    """An S3 multipart upload's ETag ends in its number of parts."""
    def check(bucket: str, key: str, uploaded: UploadResult, sent: list[int]) -> None:
        assert uploaded.etag.endswith(f"-{count}")
    return check


def oss_store(server: StandaloneS3) -> Store:
    """Built from an EtcdBackup's `oss` section and its ossSecret, as the operators build it."""
    def connect(*, secret_key: str = "", endpoint: str = "") -> oss.OssStorage:
        def read(namespace: str, name: str) -> dict[str, Any]:
            if name != "oss-credentials":
                raise NotFound(f"secret {namespace}/{name}")
            return {"stringData": {"accessKeyID": server.access_key, "accessKeySecret": secret_key or server.secret_key}}
        location = OtherLocation(path="unused/key", secret="oss-credentials", endpoint=endpoint or server.endpoint)
        return oss.storage_for_location(location, "default", read, max_attempts=1)
    client = connect()
    assert client.addressing_style == "path"  # an IP endpoint: a test server, not OSS itself
    return Store("OSS", client, 2 * s3.PART_SIZE_BYTES + 12345, "if_match", parts(3),
                 unreachable=connect(endpoint=NO_SERVER), refused=connect(secret_key="wrong"),
                 object_calls_find_missing_bucket=False,
                 seed_secret={"accessKeyID": server.access_key, "accessKeySecret": server.secret_key},
                 seed_args=(f"--endpoint={server.endpoint}",), refused_seed_secret={"accessKeySecret": "wrong"})


def s3_store(sandbox: Sandbox) -> Store:
    config = sandbox.config

    def connect(*, secret_key: str = "", endpoint: str = "") -> s3.S3Storage:
        return s3.S3Storage(endpoint=endpoint or config.s3_endpoint, force_path_style=True, max_attempts=1,
                            credentials=s3.AwsCredentials(config.s3_access_key, secret_key or config.s3_secret_key))
    return Store("S3", connect(), 3 * s3.PART_SIZE_BYTES + 12345, "if_match", parts(4),
                 unreachable=connect(endpoint=NO_SERVER), refused=connect(secret_key="wrong"),
                 object_calls_find_missing_bucket=False)


# backend -> (the fixture of its server, how to reach it)
STORES: dict[str, tuple[str, Callable[[Any], Store]]] = {
    "ABS": ("azurite", abs_store),
    "GCS": ("fake_gcs", gcs_store),
    "OSS": ("standalone_s3", oss_store),
    "S3": ("sandbox", s3_store),
}


def reach(request: pytest.FixtureRequest) -> Store:
    server_fixture, build = STORES[request.param]
    return build(request.getfixturevalue(server_fixture))


@pytest.fixture(params=["ABS", "GCS", "OSS", pytest.param("S3", marks=pytest.mark.sandbox)])
def store(request: pytest.FixtureRequest) -> Store:
    return reach(request)


@pytest.fixture(params=["ABS", "OSS", pytest.param("S3", marks=pytest.mark.sandbox)])
def metadata_last_store(request: pytest.FixtureRequest) -> Store:
    """The stores that take metadata after an upload's bytes (`sets_metadata_last`): not GCS."""
    return reach(request)


@pytest.fixture(params=["ABS", "GCS", "OSS"])
def secret_dir_store(request: pytest.FixtureRequest) -> Store:
    """The stores whose secret the restore seed reads from `--secret-dir` (S3's: `--aws-dir`)."""
    return reach(request)


def test_round_trip_of_a_multi_part_object(store: Store, tmp_path: Path) -> None:
    client, size = store.client, store.size
    bucket = f"{store.backend.lower()}-storage-{os.getpid()}"
    client.create_bucket(bucket)
    client.create_bucket(bucket)  # already there: fine
    source = tmp_path / "source"
    source.write_bytes(os.urandom(size))
    sent: list[int] = []
    metadata = {"sha256": "abc", "etcd-revision": "7"}  # a `-`, which ABS cannot store as it is
    uploaded = client.upload_file(bucket, "dir/file", str(source), metadata=metadata, progress=sent.append)
    assert uploaded.size == size and sum(sent) == size
    store.check_parts(bucket, "dir/file", uploaded, sent)
    streamed = client.upload_stream(bucket, "dir/stream", io.BytesIO(source.read_bytes()))
    assert streamed.size == size
    info = client.head(bucket, "dir/file")
    assert info.size == size and info.metadata == metadata
    assert sorted(o.key for o in client.list(bucket, "dir/")) == ["dir/file", "dir/stream"]
    target = tmp_path / "downloaded"
    assert client.download_file(bucket, "dir/stream", str(target)) == size
    assert hashlib.sha256(target.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    pin = {"if_match": info.etag} if store.pin_by == "if_match" else {"version_id": info.version_id}
    assert all(pin.values())
    assert client.download_file(bucket, "dir/file", str(target), **pin) == size
    client.upload_stream(bucket, "dir/file", io.BytesIO(b"replaced"))
    with pytest.raises(objects.ObjectChanged) as changed:
        client.download_file(bucket, "dir/file", str(tmp_path / "pinned"), **pin)
    assert changed.value.reason == f"{store.backend}ObjectChanged" and not (tmp_path / "pinned.part").exists()
    client.delete(bucket, "dir/file")
    client.delete(bucket, "dir/file")  # already gone: fine
    assert not client.exists(bucket, "dir/file") and client.exists(bucket, "dir/stream")
    with pytest.raises(objects.ObjectNotFound):
        client.download_file(bucket, "dir/file", str(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists() and not (tmp_path / "missing.part").exists()
    client.delete_bucket(bucket)
    client.delete_bucket(bucket)  # already gone: fine
    with pytest.raises(objects.BucketNotFound):
        client.check_bucket(bucket)


def test_failures_are_typed(store: Store, tmp_path: Path) -> None:
    client = store.client
    missing = f"no-such-bucket-{os.getpid()}"
    source = tmp_path / "source"
    source.write_bytes(b"x" * 1000)
    calls: list[Callable[[], object]] = [
        lambda: client.check_bucket(missing), lambda: client.list(missing), lambda: client.delete(missing, "key")]
    if store.object_calls_find_missing_bucket:
        calls += [lambda: client.head(missing, "key"), lambda: client.upload_file(missing, "key", str(source))]
    for call in calls:
        with pytest.raises(objects.BucketNotFound) as not_found:
            call()
        assert not_found.value.reason == f"{store.backend}BucketNotFound"
    if store.refused is not None:
        with pytest.raises(objects.AccessDenied) as denied:
            store.refused.check_bucket("anything")
        assert denied.value.reason == f"{store.backend}AccessDenied"
    with pytest.raises(objects.Unreachable) as unreachable:
        store.unreachable.list("anything")
    assert unreachable.value.reason == f"{store.backend}Unreachable" and unreachable.value.transient


def test_an_upload_whose_progress_callback_refuses_leaves_no_object(store: Store, tmp_path: Path) -> None:
    """What the backup's completion gate relies on: stopped at its last bytes, nothing is
    committed (no block list, no finalized resumable upload, no completed multipart upload)."""
    client, size = store.client, store.size
    bucket = f"{store.backend.lower()}-storage-gate-{os.getpid()}"
    client.create_bucket(bucket)
    source = tmp_path / "source"
    source.write_bytes(os.urandom(size))
    sent = [0]

    def refuse_at_the_end(amount: int) -> None:
        sent[0] += amount
        if sent[0] >= size:
            raise RuntimeError("check failed")
    with pytest.raises(objects.StorageError) as refused:
        client.upload_file(bucket, "gated", str(source), progress=refuse_at_the_end)
    assert isinstance(refused.value.__cause__, RuntimeError)
    assert not client.exists(bucket, "gated")
    client.delete_bucket(bucket)


class BreakingStream:
    """A stream of `data` shaped as a backup's snapshot stream (`GrowingSnapshot`: not seekable
    for the SDKs, though `tell` and a `seek` back work) that raises once `break_at` bytes were read
    (if given), as it does when etcdctl fails mid-transfer; `ended` once the end was read."""

    def __init__(self, data: bytes, break_at: int | None = None) -> None:
        self._data = io.BytesIO(data)
        self._break_at = break_at
        self.ended = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._data.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._data.seek(offset, whence)

    def read(self, size: int = -1) -> bytes:
        if self._break_at is not None and self._data.tell() >= self._break_at:
            raise RuntimeError("the snapshot broke off")
        chunk = self._data.read(size)
        self.ended = not chunk or self._data.tell() == len(self._data.getvalue())
        return chunk


def test_a_streamed_upload_gets_the_metadata_known_only_at_its_end(metadata_last_store: Store,
                                                                  tmp_path: Path) -> None:
    """What a streamed backup relies on: the `sha256` is asked for only once the stream ended, and
    the object carries it beside the metadata given up front, its bytes intact (S3 and OSS: set
    by copying the object onto itself)."""
    store = metadata_last_store
    client, size = store.client, store.size
    assert client.sets_metadata_last
    bucket = f"{store.backend.lower()}-storage-late-{os.getpid()}"
    client.create_bucket(bucket)
    payload = os.urandom(size)
    digest = hashlib.sha256(payload).hexdigest()
    stream = BreakingStream(payload)

    def late() -> dict[str, str]:
        assert stream.ended, "late metadata asked for before the stream ended"
        return {"sha256": digest}
    up_front = {"etcd-revision": "7", "etcd-version": "3.6.16"}
    uploaded = client.upload_stream(bucket, "late", stream, metadata=up_front,  # type: ignore[arg-type]
                                    late_metadata=late)
    info = client.head(bucket, "late")
    assert info.metadata == {**up_front, "sha256": digest}
    assert uploaded.size == info.size == size and uploaded.etag == info.etag
    target = tmp_path / "downloaded"
    assert client.download_file(bucket, "late", str(target), if_match=info.etag) == size
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest
    client.delete_bucket(bucket)


def test_a_stream_that_breaks_off_never_becomes_an_object(store: Store) -> None:
    """A snapshot that breaks off mid-upload: the upload fails with what the stream raised, its
    late metadata is never asked for, no object appears (and on S3 and OSS no multipart upload
    is left behind)."""
    client, size = store.client, store.size
    bucket = f"{store.backend.lower()}-storage-broken-{os.getpid()}"
    client.create_bucket(bucket)

    def late() -> dict[str, str]:
        raise AssertionError("late metadata asked for a stream that broke off")
    with pytest.raises(objects.StorageError) as stopped:
        client.upload_stream(bucket, "broken", BreakingStream(os.urandom(size), break_at=size // 2),  # type: ignore[arg-type]
                             metadata={"etcd-revision": "7"}, late_metadata=late if client.sets_metadata_last else None)
    assert "the snapshot broke off" in repr(list(_causes(stopped.value)))
    assert not client.exists(bucket, "broken")
    if isinstance(client, s3.S3Storage):
        assert client.client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    client.delete_bucket(bucket)


def test_gcs_takes_an_objects_metadata_only_when_its_upload_starts(fake_gcs: FakeGcs, tmp_path: Path) -> None:
    """A resumable upload sends the metadata before the first chunk: GCS is not a store that takes
    metadata last, so the backup operator uploads a saved snapshot with its `sha256` from the
    start. Asking for late metadata is refused before anything is sent; an upload with metadata
    creates the object carrying it."""
    client = gcs_store(fake_gcs).client
    assert not client.sets_metadata_last
    bucket = f"gcs-storage-up-front-{os.getpid()}"
    client.create_bucket(bucket)

    def late() -> dict[str, str]:
        raise AssertionError("late metadata asked for")
    with pytest.raises(ValueError, match="metadata when its upload starts"):
        client.upload_stream(bucket, "late", io.BytesIO(b"snapshot"), late_metadata=late)
    assert not client.exists(bucket, "late")
    payload = os.urandom(3 * BLOCK + 7)
    path = tmp_path / "snapshot"
    path.write_bytes(payload)
    metadata = {"sha256": hashlib.sha256(payload).hexdigest(), "etcd-revision": "7"}
    uploaded = client.upload_file(bucket, "up-front", str(path), metadata=metadata)
    info = client.head(bucket, "up-front")
    assert info.metadata == metadata and info.etag == uploaded.etag and info.size == len(payload)
    client.delete_bucket(bucket)


@pytest.mark.parametrize("s3_store_name", ["OSS", pytest.param("S3", marks=pytest.mark.sandbox)])
def test_late_metadata_the_server_refuses_fails_the_upload_and_copies_nothing_else(
        s3_store_name: str, request: pytest.FixtureRequest) -> None:
    """S3 and OSS: the object is complete before its late metadata is set, and the copy onto itself
    copies only that object (its ETag). Here another writer replaces it in between: the server
    refuses the copy, the upload fails as ObjectChanged (never reported done), saying what stays,
    and the other writer's object is left as it wrote it."""
    server_fixture, build = STORES[s3_store_name]
    client = build(request.getfixturevalue(server_fixture)).client
    bucket = f"{s3_store_name.lower()}-storage-refused-{os.getpid()}"
    client.create_bucket(bucket)

    def replaced_meanwhile() -> dict[str, str]:
        client.upload_stream(bucket, "k", io.BytesIO(b"another writer's"), metadata={"writer": "other"})
        return {"sha256": "a" * 64}
    with pytest.raises(objects.ObjectChanged) as refused:
        client.upload_stream(bucket, "k", io.BytesIO(os.urandom(1000)), metadata={"etcd-revision": "7"},
                             late_metadata=replaced_meanwhile)
    assert refused.value.reason == f"{s3_store_name}ObjectChanged"
    assert refused.value.message.startswith(f"set metadata (a copy onto itself) on s3://{bucket}/k: ")
    assert refused.value.message.endswith("; the uploaded object stays, without sha256")
    info = client.head(bucket, "k")
    assert info.metadata == {"writer": "other"} and info.size == len(b"another writer's")
    client.delete_bucket(bucket)


def _causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def test_the_seed_fetches_with_the_mounted_secret(secret_dir_store: Store, tmp_path: Path) -> None:
    """`etcd-restore-seed fetch --storage-type=<backend>` as the seed pod runs it: the secret mounted
    as files, the object pinned by the ETag or generation the restore operator verified, its
    sha256 checked."""
    store = secret_dir_store
    client = store.client
    bucket = f"{store.backend.lower()}-seed-{os.getpid()}"
    client.create_bucket(bucket)
    payload = os.urandom(store.size)
    client.upload_stream(bucket, "snap.db", io.BytesIO(payload))
    info = client.head(bucket, "snap.db")
    pin = f"--etag={info.etag}" if store.pin_by == "if_match" else f"--version-id={info.version_id}"
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    for key, value in store.seed_secret.items():
        (secret_dir / key).write_text(value)
    args = ["fetch", f"--storage-type={store.backend}", f"--path={bucket}/snap.db", f"--secret-dir={secret_dir}",
            *store.seed_args, f"--sha256={hashlib.sha256(payload).hexdigest()}",
            f"--staging-dir={tmp_path / 'staging'}", f"--snapshot={tmp_path / 'staging' / 'snapshot.db'}", pin]
    assert seed_program.main(args) == 0
    assert (tmp_path / "staging" / "snapshot.db").read_bytes() == payload
    client.upload_stream(bucket, "snap.db", io.BytesIO(b"replaced since it was verified"))
    assert seed_program.main(args) == 1  # another object: refused before it is downloaded
    if store.refused_seed_secret is not None:
        for key, value in store.refused_seed_secret.items():
            (secret_dir / key).write_text(value)
        assert seed_program.main(args) == 1  # refused credentials
    client.delete_bucket(bucket)
