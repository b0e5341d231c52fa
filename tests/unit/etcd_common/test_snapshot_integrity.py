"""The SHA-256 trailer check that keeps truncated or corrupt snapshots out of S3 and away from etcdutl."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from etcd_common.etcd.etcdctl import SnapshotInvalid
from etcd_common.etcd.snapshot_integrity import verify_snapshot_file


def snapshot(tmp_path: Path, body: bytes) -> Path:
    path = tmp_path / "snap.db"
    path.write_bytes(body + hashlib.sha256(body).digest())
    return path


@pytest.mark.parametrize("size", [1, 1024 * 1024 - 20, 1024 * 1024, 3 * 1024 * 1024 + 7])
def test_whole_snapshot_passes_and_its_file_hash_is_returned(tmp_path: Path, size: int) -> None:
    path = snapshot(tmp_path, bytes(range(256)) * (size // 256) + b"x" * (size % 256))
    assert verify_snapshot_file(str(path)) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_truncated_snapshot_fails(tmp_path: Path) -> None:
    path = snapshot(tmp_path, b"a" * 100_000)
    path.write_bytes(path.read_bytes()[:-1000])
    with pytest.raises(SnapshotInvalid, match="integrity"):
        verify_snapshot_file(str(path))


def test_corrupt_byte_fails(tmp_path: Path) -> None:
    path = snapshot(tmp_path, b"a" * 100_000)
    data = bytearray(path.read_bytes())
    data[500] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotInvalid):
        verify_snapshot_file(str(path))


def test_too_short_fails(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with pytest.raises(SnapshotInvalid, match="too short"):
        verify_snapshot_file(str(path))


def test_digest_fed_in_any_chunking_matches_the_file(tmp_path: Path) -> None:
    from etcd_common.etcd.snapshot_integrity import SnapshotDigest

    path = snapshot(tmp_path, bytes(range(256)) * 300)
    data = path.read_bytes()
    for chunk_size in (1, 7, 31, 32, 33, 1000, len(data)):
        digest = SnapshotDigest()
        for start in range(0, len(data), chunk_size):
            digest.feed(data[start:start + chunk_size])
        assert digest.finish("x") == hashlib.sha256(data).hexdigest()
    # Chunks of mixed sizes, shorter and longer than the trailer, cut anywhere; and the same
    # cuts over a file with one byte changed fail the check.
    sizes = [5, 40, 32, 1, 1000, 31, 33, 7]
    corrupt = data[:100] + bytes([data[100] ^ 1]) + data[101:]
    for contents, whole in ((data, True), (corrupt, False)):
        for shift in range(len(sizes)):
            digest, start, i = SnapshotDigest(), 0, shift
            while start < len(contents):
                digest.feed(contents[start:start + sizes[i % len(sizes)]])
                start += sizes[i % len(sizes)]
                i += 1
            if whole:
                assert digest.finish("x") == hashlib.sha256(contents).hexdigest()
            else:
                with pytest.raises(SnapshotInvalid, match="integrity check"):
                    digest.finish("x")


def test_follow_digests_a_snapshot_while_it_is_written_and_renamed(tmp_path: Path) -> None:
    import threading

    from etcd_common.etcd.snapshot_integrity import follow_snapshot

    body = bytes(range(256)) * 40_000
    data = body + hashlib.sha256(body).digest()
    final = tmp_path / "snapshot.db"
    partial = tmp_path / "snapshot.db.part"
    written = threading.Event()
    result: list[str | None] = []
    follower = threading.Thread(target=lambda: result.append(follow_snapshot(str(partial), str(final), written)))
    follower.start()
    with open(partial, "wb") as out:
        out.write(data[: len(data) // 2])
        out.flush()
        out.write(data[len(data) // 2:])
    partial.rename(final)
    written.set()
    follower.join(timeout=30)
    assert result == [hashlib.sha256(data).hexdigest()]


def test_follow_reports_a_truncated_snapshot(tmp_path: Path) -> None:
    import threading

    from etcd_common.etcd.snapshot_integrity import follow_snapshot

    path = snapshot(tmp_path, b"a" * 100_000)
    path.write_bytes(path.read_bytes()[:-10])
    written = threading.Event()
    written.set()
    with pytest.raises(SnapshotInvalid):
        follow_snapshot(str(tmp_path / "absent.part"), str(path), written)


def test_follow_without_any_file_is_none(tmp_path: Path) -> None:
    import threading

    from etcd_common.etcd.snapshot_integrity import follow_snapshot

    written = threading.Event()
    written.set()
    assert follow_snapshot(str(tmp_path / "a.part"), str(tmp_path / "a"), written) is None


def test_a_problem_names_the_snapshot_as_the_caller_knows_it(tmp_path: Path) -> None:
    path = snapshot(tmp_path, b"a" * 10_000)
    path.write_bytes(path.read_bytes()[:5_000])
    with pytest.raises(SnapshotInvalid, match="s3://bucket/key"):
        verify_snapshot_file(str(path), where="s3://bucket/key")


def test_a_growing_snapshot_re_read_after_a_seek_back_is_digested_once(tmp_path: Path) -> None:
    """An upload retrying a chunk seeks back and reads it again: the SHA-256 stays the file's."""
    from concurrent.futures import Future

    from etcd_common.etcd.snapshot_integrity import GrowingSnapshot
    path = snapshot(tmp_path, b"0123456789" * 10)
    saved: Future[None] = Future()
    saved.set_result(None)
    completed: list[str] = []
    stream = GrowingSnapshot(f"{path}.part", str(path), saved, completed.append, lambda: None)
    first = stream.read(40)
    stream.seek(10)
    assert stream.read(30) == first[10:] and stream.tell() == 40
    rest = stream.read(1000)
    assert first + rest == path.read_bytes() and stream.read(10) == b""
    assert completed == [hashlib.sha256(path.read_bytes()).hexdigest()] == [stream.sha256]
    with pytest.raises(OSError):
        stream.seek(len(first + rest) + 1)
    stream.close()
