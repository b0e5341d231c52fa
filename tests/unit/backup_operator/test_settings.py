"""The backup operator's bounds from flags and the environment: backups at once, the minimum interval."""
from __future__ import annotations

import pytest

from backup_operator.settings import parse_settings


def test_defaults_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BACKUP_MAX_CONCURRENT_BACKUPS", raising=False)
    monkeypatch.delenv("BACKUP_MIN_INTERVAL_SECONDS", raising=False)
    settings = parse_settings([])
    assert (settings.max_concurrent_backups, settings.min_backup_interval_seconds) == (2, 60.0)
    settings = parse_settings(["--max-concurrent-backups", "5", "--min-backup-interval-seconds", "1"])
    assert (settings.max_concurrent_backups, settings.min_backup_interval_seconds) == (5, 1.0)
    monkeypatch.setenv("BACKUP_MAX_CONCURRENT_BACKUPS", "3")
    monkeypatch.setenv("BACKUP_MIN_INTERVAL_SECONDS", "30")
    settings = parse_settings([])
    assert (settings.max_concurrent_backups, settings.min_backup_interval_seconds) == (3, 30.0)


@pytest.mark.parametrize("argv", [["--max-concurrent-backups", "0"], ["--max-concurrent-backups", "x"]])
def test_a_limit_below_one_is_refused_at_start(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_settings(argv)


def test_a_bad_limit_in_the_environment_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKUP_MAX_CONCURRENT_BACKUPS", "0")
    with pytest.raises(SystemExit):
        parse_settings([])


@pytest.mark.parametrize("value, expected", [("20Gi", 20 * 1024**3), ("500M", 500 * 10**6), ("4096", 4096),
                                             ("", None), ("0", None)])
def test_the_work_directory_size_limit_is_a_quantity(monkeypatch: pytest.MonkeyPatch, value: str,
                                                     expected: int | None) -> None:
    monkeypatch.setenv("BACKUP_WORK_DIR_SIZE_LIMIT", value)
    assert parse_settings([]).work_dir_size_limit_bytes == expected
    assert parse_settings(["--work-dir-size-limit", value]).work_dir_size_limit_bytes == expected
