"""Pieces of taking a backup that need no etcd or S3: stale work directories, the completion gate."""
from __future__ import annotations

from pathlib import Path

import pytest


def test_stale_snapshot_directories_are_removed_and_nothing_else(tmp_path: Path) -> None:
    import logging

    from backup_operator.taking import WORK_PREFIX, remove_stale_snapshots

    (tmp_path / f"{WORK_PREFIX}ns_b_x1").mkdir()
    (tmp_path / f"{WORK_PREFIX}ns_b_x1" / "snapshot.db.part").write_bytes(b"partial")
    (tmp_path / "someone-elses").mkdir()
    remove_stale_snapshots(str(tmp_path), logging.getLogger("test"))
    assert [p.name for p in tmp_path.iterdir()] == ["someone-elses"]


def test_completion_gate_holds_the_last_bytes_until_the_check_passed() -> None:
    from backup_operator.reasons import BackupFailed
    from backup_operator.taking import _CompletionGate

    checks: list[int] = []
    gate = _CompletionGate(100, lambda: checks.append(1), lambda: 1.0)
    gate(60)
    assert checks == []
    gate(-10)  # a part retried
    gate(50)
    assert checks == [1]
    gate(0)
    assert checks == [1]  # checked once

    def invalid() -> None:
        raise BackupFailed("SnapshotInvalid", "corrupt")
    failing = _CompletionGate(10, invalid, lambda: 1.0)
    with pytest.raises(BackupFailed):
        failing(10)
