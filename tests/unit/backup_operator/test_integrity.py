"""The SHA-256 trailer check that keeps truncated or corrupt snapshots out of S3."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from backup_operator.integrity import verify_snapshot_file
from etcd_common.etcdctl import SnapshotInvalid


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


def test_stale_snapshot_directories_are_removed_and_nothing_else(tmp_path: Path) -> None:
    import logging

    from backup_operator.taking import WORK_PREFIX, remove_stale_snapshots

    (tmp_path / f"{WORK_PREFIX}ns_b_x1").mkdir()
    (tmp_path / f"{WORK_PREFIX}ns_b_x1" / "snapshot.db.part").write_bytes(b"partial")
    (tmp_path / "someone-elses").mkdir()
    remove_stale_snapshots(str(tmp_path), logging.getLogger("test"))
    assert [p.name for p in tmp_path.iterdir()] == ["someone-elses"]
