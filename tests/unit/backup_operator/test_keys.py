"""Key scheme and retention: CoreOS's `<path>_v<revision>_<time>`, ordered by revision and time,
never by string order, and never touching foreign objects."""
from __future__ import annotations

from datetime import UTC, datetime, timezone

import pytest

from backup_operator.keys import keys_to_delete, our_backups, parse_periodic_key, periodic_key

T = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_periodic_key_is_the_coreos_format() -> None:
    assert periodic_key("dir/etcd.backup", 1234, T) == "dir/etcd.backup_v1234_2024-01-02-03:04:05"


def test_periodic_key_uses_utc() -> None:
    from datetime import timedelta
    local = T.astimezone(timezone(timedelta(hours=5)))
    assert periodic_key("b", 1, local) == "b_v1_2024-01-02-03:04:05"


def test_parse_round_trip() -> None:
    parsed = parse_periodic_key("etcd.backup", periodic_key("etcd.backup", 99, T))
    assert parsed is not None and (parsed.revision, parsed.time) == (99, T)


@pytest.mark.parametrize("key", [
    "etcd.backup",  # the one-shot key
    "etcd.backup_v12",  # no time
    "etcd.backup_v12_2024-01-02-03:04:05.tmp",  # something after the scheme
    "etcd.backup.old_v12_2024-01-02-03:04:05",  # another path sharing the prefix
    "etcd.backup_vx_2024-01-02-03:04:05",
    "etcd.backup_v12_2024-13-02-03:04:05",  # no 13th month
    "other/etcd.backup_v12_2024-01-02-03:04:05",
])
def test_foreign_keys_are_not_ours(key: str) -> None:
    assert parse_periodic_key("etcd.backup", key) is None


def test_path_with_regex_characters_is_matched_literally() -> None:
    assert parse_periodic_key("a.b+c", "a.b+c_v1_2024-01-02-03:04:05") is not None
    assert parse_periodic_key("a.b+c", "aXb+c_v1_2024-01-02-03:04:05") is None


def test_retention_across_a_revision_gaining_a_digit_keeps_the_newest() -> None:
    keys = [
        "etcd.backup_v98_2024-01-02-03:04:05",
        "etcd.backup_v99_2024-01-02-03:05:05",
        "etcd.backup_v100_2024-01-02-03:06:05",  # string order would call this the oldest
        "etcd.backup_v101_2024-01-02-03:07:05",
    ]
    assert keys_to_delete("etcd.backup", keys, 2) == keys[:2]


def test_retention_never_names_foreign_objects() -> None:
    keys = ["etcd.backup", "etcd.backup_v1_2024-01-02-03:04:05", "etcd.backup_v2_2024-01-02-03:05:05",
            "etcd.backup_v3_2024-01-02-03:06:05", "etcd.backup-notes.txt", "etcd.backup_v0_foreign"]
    assert keys_to_delete("etcd.backup", keys, 1) == ["etcd.backup_v1_2024-01-02-03:04:05",
                                                       "etcd.backup_v2_2024-01-02-03:05:05"]


def test_same_revision_orders_by_time() -> None:
    keys = ["b_v5_2024-01-02-03:06:05", "b_v5_2024-01-02-03:04:05"]
    assert keys_to_delete("b", keys, 1) == ["b_v5_2024-01-02-03:04:05"]


@pytest.mark.parametrize("max_backups", [0, 5])
def test_nothing_deleted_when_unlimited_or_under_the_limit(max_backups: int) -> None:
    keys = ["b_v1_2024-01-02-03:04:05", "b_v2_2024-01-02-03:04:06"]
    assert keys_to_delete("b", keys, max_backups) == []


def test_our_backups_oldest_first() -> None:
    keys = ["b_v10_2024-01-02-03:04:05", "b_v9_2024-01-02-03:04:06"]
    assert [p.revision for p in our_backups("b", keys)] == [9, 10]
