"""Pieces of taking a backup that need no etcd or S3: stale work directories."""
from __future__ import annotations

from pathlib import Path


def test_stale_snapshot_directories_are_removed_and_nothing_else(tmp_path: Path) -> None:
    import logging

    from backup_operator.taking import WORK_PREFIX, remove_stale_snapshots

    (tmp_path / f"{WORK_PREFIX}ns_b_x1").mkdir()
    (tmp_path / f"{WORK_PREFIX}ns_b_x1" / "snapshot.db.part").write_bytes(b"partial")
    (tmp_path / "someone-elses").mkdir()
    remove_stale_snapshots(str(tmp_path), logging.getLogger("test"))
    assert [p.name for p in tmp_path.iterdir()] == ["someone-elses"]

