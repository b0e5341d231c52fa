"""etcd_common.storage.abs against a real Azurite blob service: a multi-block upload from a file
and from a stream, download (pinned by ETag too), metadata, list, delete, and each failure as its
class. Needs no Kubernetes sandbox."""
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from etcd_common.seed import program as seed_program
from etcd_common.storage import abs as abs_storage
from etcd_common.storage import objects
from kube_sandbox.azurite import ACCOUNT, ACCOUNT_KEY, Azurite

BLOCK = 256 * 1024
SIZE = 3 * BLOCK + 12345  # several blocks and a short last one


def storage(azurite: Azurite, *, key: str = ACCOUNT_KEY, endpoint: str | None = None) -> abs_storage.AbsStorage:
    return abs_storage.AbsStorage(abs_storage.AbsCredentials(ACCOUNT, key), endpoint=endpoint or azurite.endpoint,
                                  block_size_bytes=BLOCK, max_attempts=1)


def test_round_trip_of_a_multi_block_blob(azurite: Azurite, tmp_path: Path) -> None:
    client = storage(azurite)
    container = f"abs-storage-{os.getpid()}"
    client.create_bucket(container)
    client.create_bucket(container)  # already there: fine
    source = tmp_path / "source"
    source.write_bytes(os.urandom(SIZE))
    sent: list[int] = []
    uploaded = client.upload_file(container, "dir/file", str(source), metadata={"sha256": "abc", "etcd-revision": "7"},
                                  progress=sent.append)
    assert uploaded.size == SIZE and sum(sent) == SIZE and len(sent) == 4  # four blocks
    blocks = client.client.get_blob_client(container, "dir/file").get_block_list("committed")[0]
    assert [block.size for block in blocks] == [BLOCK, BLOCK, BLOCK, 12345]
    streamed = client.upload_stream(container, "dir/stream", io.BytesIO(source.read_bytes()))
    assert streamed.size == SIZE
    info = client.head(container, "dir/file")
    assert info.size == SIZE and info.metadata == {"sha256": "abc", "etcd-revision": "7"} and info.etag
    assert sorted(o.key for o in client.list(container, "dir/")) == ["dir/file", "dir/stream"]
    target = tmp_path / "downloaded"
    assert client.download_file(container, "dir/stream", str(target)) == SIZE
    assert hashlib.sha256(target.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    assert client.download_file(container, "dir/file", str(target), if_match=info.etag) == SIZE
    client.upload_stream(container, "dir/file", io.BytesIO(b"replaced"))
    with pytest.raises(objects.ObjectChanged) as changed:
        client.download_file(container, "dir/file", str(tmp_path / "pinned"), if_match=info.etag)
    assert changed.value.reason == "ABSObjectChanged" and not (tmp_path / "pinned.part").exists()
    client.delete(container, "dir/file")
    client.delete(container, "dir/file")  # already gone: fine
    assert not client.exists(container, "dir/file") and client.exists(container, "dir/stream")
    with pytest.raises(objects.ObjectNotFound):
        client.download_file(container, "dir/file", str(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists() and not (tmp_path / "missing.part").exists()
    client.delete_bucket(container)
    client.delete_bucket(container)  # already gone: fine


def test_failures_are_typed(azurite: Azurite, tmp_path: Path) -> None:
    client = storage(azurite)
    missing = f"no-such-container-{os.getpid()}"
    for call in (lambda: client.check_bucket(missing), lambda: client.list(missing),
                 lambda: client.head(missing, "key"), lambda: client.delete(missing, "key")):
        with pytest.raises(objects.BucketNotFound) as not_found:
            call()
        assert not_found.value.reason == "ABSBucketNotFound"
    source = tmp_path / "source"
    source.write_bytes(b"x" * 1000)
    with pytest.raises(objects.BucketNotFound):
        client.upload_file(missing, "key", str(source))
    wrong_key = "d3Jvbmcga2V5IGZvciB0aGUgZGV2IGFjY291bnQ="  # base64, not the account's key
    with pytest.raises(objects.AccessDenied) as denied:
        storage(azurite, key=wrong_key).check_bucket("anything")
    assert denied.value.reason == "ABSAccessDenied"
    with pytest.raises(objects.Unreachable) as unreachable:
        storage(azurite, endpoint=f"http://127.0.0.1:9/{ACCOUNT}").list("anything")
    assert unreachable.value.transient


def test_an_upload_whose_progress_callback_refuses_leaves_no_blob(azurite: Azurite, tmp_path: Path) -> None:
    """What the backup's completion gate relies on: stopped at its last block, nothing is committed."""
    client = storage(azurite)
    container = f"abs-storage-gate-{os.getpid()}"
    client.create_bucket(container)
    source = tmp_path / "source"
    source.write_bytes(os.urandom(SIZE))
    sent = [0]

    def refuse_at_the_end(amount: int) -> None:
        sent[0] += amount
        if sent[0] >= SIZE:
            raise RuntimeError("check failed")
    with pytest.raises(objects.StorageError) as refused:
        client.upload_file(container, "gated", str(source), progress=refuse_at_the_end)
    assert isinstance(refused.value.__cause__, RuntimeError)
    assert not client.exists(container, "gated")
    client.delete_bucket(container)


def test_the_seed_fetches_with_the_mounted_abs_secret(azurite: Azurite, tmp_path: Path) -> None:
    """`etcd-restore-seed fetch --storage-type=ABS` as the seed pod runs it: the absSecret mounted
    as files, the blob pinned by the ETag the restore operator verified, its sha256 checked."""
    client = storage(azurite)
    container = f"abs-seed-{os.getpid()}"
    client.create_bucket(container)
    payload = os.urandom(SIZE)
    uploaded = client.upload_stream(container, "snap.db", io.BytesIO(payload))
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    for key, value in (("storage-account", ACCOUNT), ("storage-key", ACCOUNT_KEY), ("endpoint", azurite.endpoint)):
        (secret_dir / key).write_text(value)
    args = ["fetch", "--storage-type=ABS", f"--path={container}/snap.db", f"--secret-dir={secret_dir}",
            f"--sha256={hashlib.sha256(payload).hexdigest()}", f"--staging-dir={tmp_path / 'staging'}",
            f"--snapshot={tmp_path / 'staging' / 'snapshot.db'}", f"--etag={uploaded.etag}"]
    assert seed_program.main(args) == 0
    assert (tmp_path / "staging" / "snapshot.db").read_bytes() == payload
    client.upload_stream(container, "snap.db", io.BytesIO(b"replaced since it was verified"))
    assert seed_program.main(args) == 1  # another blob: refused before it is downloaded
    (secret_dir / "storage-key").write_text("d3Jvbmcga2V5IGZvciB0aGUgZGV2IGFjY291bnQ=")
    assert seed_program.main(args) == 1  # refused credentials
    client.delete_bucket(container)
