"""Key scheme and retention: CoreOS's `<path>_v<revision>_<time>`, ordered by the time a backup was
taken (then revision), never by revision first nor by string order; never touching foreign objects,
keys whose time cannot be read, or the backup just uploaded."""
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


# (why, keys, max_backups, keep, deleted)
RETENTION_CASES = [
    ("a revision gaining a digit: string order would call v100 the oldest",
     ["etcd.backup_v98_2024-01-02-03:04:05", "etcd.backup_v99_2024-01-02-03:05:05",
      "etcd.backup_v100_2024-01-02-03:06:05", "etcd.backup_v101_2024-01-02-03:07:05"], 2, "",
     ["etcd.backup_v98_2024-01-02-03:04:05", "etcd.backup_v99_2024-01-02-03:05:05"]),
    ("rewind: the cluster recreated under its name starts at revision 1; its backups are the newest",
     ["etcd.backup_v300_2024-01-02-03:04:05", "etcd.backup_v301_2024-01-02-03:04:10",
      "etcd.backup_v1_2024-01-02-03:05:00", "etcd.backup_v1_2024-01-02-03:05:05"], 2, "etcd.backup_v1_2024-01-02-03:05:05",
     ["etcd.backup_v300_2024-01-02-03:04:05", "etcd.backup_v301_2024-01-02-03:04:10"]),
    ("rewind, first new backup: one old one goes, not the new one",
     ["etcd.backup_v300_2024-01-02-03:04:05", "etcd.backup_v301_2024-01-02-03:04:10",
      "etcd.backup_v1_2024-01-02-03:05:00"], 2, "etcd.backup_v1_2024-01-02-03:05:00",
     ["etcd.backup_v300_2024-01-02-03:04:05"]),
    ("foreign objects under the same prefix are never named",
     ["etcd.backup", "etcd.backup_v1_2024-01-02-03:04:05", "etcd.backup_v2_2024-01-02-03:05:05",
      "etcd.backup_v3_2024-01-02-03:06:05", "etcd.backup-notes.txt", "etcd.backup_v0_foreign"], 1, "",
     ["etcd.backup_v1_2024-01-02-03:04:05", "etcd.backup_v2_2024-01-02-03:05:05"]),
    ("a time that cannot be read (13th month, 25th hour) says nothing about age: never deleted",
     ["b_v1_2024-13-02-03:04:05", "b_v2_2024-01-02-25:00:00", "b_v3_2024-01-02-03:04:05",
      "b_v4_2024-01-02-03:04:06"], 1, "", ["b_v3_2024-01-02-03:04:05"]),
    ("the same time orders by revision", ["b_v6_2024-01-02-03:04:05", "b_v5_2024-01-02-03:04:05"], 1, "",
     ["b_v5_2024-01-02-03:04:05"]),
    ("the same revision orders by time", ["b_v5_2024-01-02-03:06:05", "b_v5_2024-01-02-03:04:05"], 1, "",
     ["b_v5_2024-01-02-03:04:05"]),
    ("the operator's clock went back: the backup just uploaded looks oldest and is still kept",
     ["b_v7_2024-01-02-03:04:05", "b_v8_2024-01-02-03:04:06", "b_v9_2024-01-01-00:00:00"], 2,
     "b_v9_2024-01-01-00:00:00", ["b_v7_2024-01-02-03:04:05"]),
    ("maxBackups 1 keeps only the backup just uploaded",
     ["b_v7_2024-01-02-03:04:05", "b_v9_2024-01-01-00:00:00"], 1, "b_v9_2024-01-01-00:00:00",
     ["b_v7_2024-01-02-03:04:05"]),
    ("a `keep` that is not listed is no reason to delete one more",
     ["b_v7_2024-01-02-03:04:05", "b_v8_2024-01-02-03:04:06"], 2, "b_v9_2024-01-02-03:04:07", []),
    ("maxBackups 0 keeps everything", ["b_v1_2024-01-02-03:04:05", "b_v2_2024-01-02-03:04:06"], 0, "", []),
    ("under the limit", ["b_v1_2024-01-02-03:04:05", "b_v2_2024-01-02-03:04:06"], 5, "", []),
]


@pytest.mark.parametrize(("keys", "max_backups", "keep", "deleted"), [case[1:] for case in RETENTION_CASES],
                         ids=[case[0] for case in RETENTION_CASES])
def test_retention_deletes_the_oldest_by_time_taken(keys: list[str], max_backups: int, keep: str,
                                                    deleted: list[str]) -> None:
    assert keys_to_delete(keys[0].split("_v")[0], keys, max_backups, keep=keep) == deleted


def test_our_backups_oldest_first_by_time() -> None:
    keys = ["b_v10_2024-01-02-03:04:05", "b_v9_2024-01-02-03:04:06", "b_v1_2024-01-02-03:04:07"]
    assert [p.revision for p in our_backups("b", keys)] == [10, 9, 1]
