"""spec.compaction, spec.backendQuota, spec.defragmentation and spec.alarms: defaults, the values
accepted and refused (with the field's path), the etcd flags and the defragmentation window."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import ClusterSpec, parse_cluster_spec
from etcd_common.api.fields import SpecError
from etcd_common.api.maintenance import (
    Alarms,
    Compaction,
    Defragmentation,
    DefragmentationWindow,
    format_bytes,
    parse_duration_seconds,
    parse_quantity_bytes,
)

MIB = 1024 * 1024


def _spec(**fields: Any) -> ClusterSpec:
    return parse_cluster_spec({"size": 3, **fields})


def test_defaults_when_absent() -> None:
    spec = _spec()
    assert spec.compaction == Compaction("periodic", "1h")
    assert spec.compaction.etcd_flags() == ["--auto-compaction-mode=periodic", "--auto-compaction-retention=1h"]
    assert spec.backend_quota_bytes is None and spec.effective_quota_bytes == 2147483648
    assert spec.effective_quota_bytes == c.ETCD_DEFAULT_QUOTA_BACKEND_BYTES
    assert spec.defragmentation == Defragmentation(True, 50, 64 * MIB, None)
    assert spec.alarms == Alarms(recover_no_space=True, replace_corrupt_members=True)
    assert spec.warnings == ()


def test_dataclass_defaults_match_the_parsed_defaults() -> None:
    spec = ClusterSpec(size=1, version=_spec().version)
    parsed = _spec(compaction={}, defragmentation={}, alarms={})
    assert (spec.compaction, spec.defragmentation, spec.alarms) == (
        parsed.compaction, parsed.defragmentation, parsed.alarms)


@pytest.mark.parametrize("raw, mode, retention", [
    pytest.param({"retention": "5m"}, "periodic", "5m", id="periodic-minutes"),
    pytest.param({"retention": "1h30m"}, "periodic", "1h30m", id="periodic-compound"),
    pytest.param({"retention": "30s"}, "periodic", "30s", id="periodic-seconds"),
    pytest.param({"retention": "1.5h"}, "periodic", "1.5h", id="periodic-fraction"),
    pytest.param({"mode": "revision"}, "revision", "10000", id="revision-default"),
    pytest.param({"mode": "revision", "retention": "2500"}, "revision", "2500", id="revision-string"),
    pytest.param({"mode": "revision", "retention": 2500}, "revision", "2500", id="revision-integer"),
    pytest.param({"mode": "disabled"}, "disabled", "", id="disabled"),
])
def test_compaction_accepted(raw: dict[str, Any], mode: str, retention: str) -> None:
    compaction = _spec(compaction=raw).compaction
    assert (compaction.mode, compaction.retention) == (mode, retention)
    if mode == "disabled":
        assert compaction.etcd_flags() == []
    else:
        assert compaction.etcd_flags() == [f"--auto-compaction-mode={mode}", f"--auto-compaction-retention={retention}"]


def test_retention_with_compaction_disabled_is_a_warning() -> None:
    spec = _spec(compaction={"mode": "disabled", "retention": "1h"})
    assert spec.compaction.etcd_flags() == []
    assert spec.warnings == ("spec.compaction.retention is ignored: spec.compaction.mode is disabled",)


@pytest.mark.parametrize("fields, says", [
    pytest.param({"compaction": {"retention": "abc"}},
                 'spec.compaction.retention: "abc" is not a duration like 5m or 1h', id="retention-unparsable"),
    pytest.param({"compaction": {"retention": "-1h"}}, 'spec.compaction.retention: "-1h" is negative',
                 id="retention-negative"),
    pytest.param({"compaction": {"retention": "0s"}}, "spec.compaction.mode: disabled", id="retention-zero"),
    pytest.param({"compaction": {"retention": "0"}}, "has no unit", id="retention-bare-zero-periodic"),
    pytest.param({"compaction": {"retention": "10000"}}, "spec.compaction.mode: revision",
                 id="retention-bare-number-periodic"),
    pytest.param({"compaction": {"retention": 5}}, "has no unit", id="retention-integer-periodic"),
    pytest.param({"compaction": {"mode": "revision", "retention": "1h"}}, "not a positive number of revisions",
                 id="revision-duration"),
    pytest.param({"compaction": {"mode": "revision", "retention": "-5"}}, "not a positive number of revisions",
                 id="revision-negative"),
    pytest.param({"compaction": {"mode": "revision", "retention": "0"}}, "spec.compaction.mode: disabled",
                 id="revision-zero"),
    pytest.param({"compaction": {"mode": "hourly"}}, 'spec.compaction.mode: "hourly" is not one of', id="mode"),
    pytest.param({"compaction": {"retention": True}}, "spec.compaction.retention must be a string",
                 id="retention-bool"),
    pytest.param({"compaction": "on"}, "spec.compaction must be an object", id="compaction-not-object"),
    pytest.param({"backendQuota": "8GB"}, 'spec.backendQuota: "8GB" is not a size', id="quota-unit"),
    pytest.param({"backendQuota": "-1Gi"}, 'spec.backendQuota: "-1Gi" is not a size', id="quota-negative"),
    pytest.param({"backendQuota": -5}, "spec.backendQuota: -5 is not a size", id="quota-negative-integer"),
    pytest.param({"backendQuota": "lots"}, "spec.backendQuota", id="quota-words"),
    pytest.param({"backendQuota": 1.5}, "spec.backendQuota", id="quota-float"),
    pytest.param({"backendQuota": 0}, "spec.backendQuota must be more than 0", id="quota-zero"),
    pytest.param({"backendQuota": "101Gi"}, "more than 100Gi", id="quota-over-100Gi"),
    pytest.param({"defragmentation": {"thresholdPercent": 0}}, "spec.defragmentation.thresholdPercent must be from 1",
                 id="threshold-0"),
    pytest.param({"defragmentation": {"thresholdPercent": 101}}, "from 1 to 100, got 101", id="threshold-101"),
    pytest.param({"defragmentation": {"thresholdPercent": "50%"}}, "must be an integer", id="threshold-string"),
    pytest.param({"defragmentation": {"minimumFreeSize": "64MB"}}, "spec.defragmentation.minimumFreeSize",
                 id="minimum-free-unit"),
    pytest.param({"defragmentation": {"enabled": "yes"}}, "spec.defragmentation.enabled must be true or false",
                 id="enabled-string"),
    pytest.param({"defragmentation": {"window": {"start": "2:00", "duration": "4h"}}},
                 'spec.defragmentation.window.start: "2:00" is not a time of day HH:MM', id="window-start-short"),
    pytest.param({"defragmentation": {"window": {"start": "24:00", "duration": "4h"}}}, "window.start",
                 id="window-start-24"),
    pytest.param({"defragmentation": {"window": {"duration": "4h"}}}, "spec.defragmentation.window.start is required",
                 id="window-start-missing"),
    pytest.param({"defragmentation": {"window": {"start": "02:00"}}}, "window.duration is required",
                 id="window-duration-missing"),
    pytest.param({"defragmentation": {"window": {"start": "02:00", "duration": "4"}}}, "is not a duration",
                 id="window-duration-no-unit"),
    pytest.param({"defragmentation": {"window": {"start": "02:00", "duration": "25h"}}}, "at most 24h",
                 id="window-duration-over-a-day"),
    pytest.param({"defragmentation": {"window": {"start": "02:00", "duration": "0s"}}}, "at least 1s",
                 id="window-duration-zero"),
    pytest.param({"alarms": {"recoverNoSpace": "true"}}, "spec.alarms.recoverNoSpace must be true or false",
                 id="alarm-string"),
])
def test_refused_with_the_field_path(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError) as error:
        _spec(**fields)
    assert says in error.value.reason


@pytest.mark.parametrize("raw, size", [
    pytest.param(16777216, 16 * MIB, id="integer"),
    pytest.param("16777216", 16 * MIB, id="digits"),
    pytest.param("16Mi", 16 * MIB, id="Mi"),
    pytest.param("8Gi", 8 * 1024 * MIB, id="Gi"),
    pytest.param("1.5Gi", 1536 * MIB, id="fraction"),
    pytest.param("2G", 2 * 10**9, id="decimal-SI"),
    pytest.param("512k", 512000, id="kilo"),
    pytest.param("1e9", 10**9, id="exponent"),
    pytest.param("100Gi", 100 * 1024 * MIB, id="the-most"),
])
def test_quota_sizes(raw: Any, size: int) -> None:
    assert _spec(backendQuota=raw).backend_quota_bytes == size
    assert _spec(backendQuota=raw).effective_quota_bytes == size


def test_defragmentation_fields() -> None:
    defragmentation = _spec(defragmentation={
        "enabled": False, "thresholdPercent": 20, "minimumFreeSize": "1Gi",
        "window": {"start": "22:30", "duration": "4h"},
    }).defragmentation
    assert defragmentation == Defragmentation(False, 20, 1024 * MIB, DefragmentationWindow(22 * 60 + 30, 4 * 3600))
    assert _spec(defragmentation={"minimumFreeSize": 0}).defragmentation.minimum_free_bytes == 0


def test_alarms_fields() -> None:
    assert _spec(alarms={"recoverNoSpace": False}).alarms == Alarms(False, True)
    assert _spec(alarms={"replaceCorruptMembers": False}).alarms == Alarms(True, False)


def _at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2025, 3, 1, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize("start, duration, now, open_", [
    pytest.param("02:00", "4h", _at(1, 59, 59), False, id="before"),
    pytest.param("02:00", "4h", _at(2, 0), True, id="at-start"),
    pytest.param("02:00", "4h", _at(5, 59, 59), True, id="last-second"),
    pytest.param("02:00", "4h", _at(6, 0), False, id="at-end"),
    pytest.param("22:00", "4h", _at(23, 30), True, id="over-midnight-before"),
    pytest.param("22:00", "4h", _at(1, 59), True, id="over-midnight-after"),
    pytest.param("22:00", "4h", _at(2, 0), False, id="over-midnight-ended"),
    pytest.param("22:00", "4h", _at(21, 59), False, id="over-midnight-not-yet"),
    pytest.param("00:00", "24h", _at(13, 17), True, id="all-day"),
    pytest.param("23:59", "1m", _at(23, 59, 30), True, id="last-minute"),
    pytest.param("23:59", "1m", _at(0, 0), False, id="last-minute-over"),
])
def test_window_is_open(start: str, duration: str, now: datetime, open_: bool) -> None:
    defragmentation = _spec(defragmentation={"window": {"start": start, "duration": duration}}).defragmentation
    assert defragmentation.window is not None and defragmentation.window.is_open(now) is open_
    assert defragmentation.window_open(now) is open_


def test_window_is_in_utc_whatever_the_clock_says() -> None:
    window = DefragmentationWindow(start_minute=2 * 60, duration_seconds=3600)
    berlin = timezone(timedelta(hours=1))
    assert window.is_open(datetime(2025, 3, 1, 3, 30, tzinfo=berlin))  # 02:30 UTC
    assert not window.is_open(datetime(2025, 3, 1, 2, 30, tzinfo=berlin))  # 01:30 UTC
    assert window.is_open(datetime(2025, 3, 1, 2, 30))  # naive: UTC


def test_no_window_is_always_open() -> None:
    assert Defragmentation().window_open(_at(12, 0))


@pytest.mark.parametrize("text, seconds", [
    ("5m", Decimal(300)), ("1h30m", Decimal(5400)), ("1.5h", Decimal(5400)), ("500ms", Decimal("0.5")),
    ("30s", Decimal(30)), ("1", None), ("", None), ("-1h", None), ("1d", None), ("h", None),
])
def test_durations(text: str, seconds: Decimal | None) -> None:
    assert parse_duration_seconds(text) == seconds


@pytest.mark.parametrize("value, size", [
    ("0.5", 1), ("1Ki", 1024), (".5Ki", 512), ("64Mi", 64 * MIB), ("1M", 10**6),
    ("1m", None), ("+1Gi", None), ("1 Gi", None), ("1GiB", None), (True, None), (None, None), (-1, None),
])
def test_quantities(value: Any, size: int | None) -> None:
    assert parse_quantity_bytes(value) == size


@pytest.mark.parametrize("size, text", [
    (8 * 1024 * MIB, "8Gi"), (384 * MIB, "384Mi"), (1536 * MIB, "1536Mi"), (10**9, "1000000000"), (0, "0"),
])
def test_format_bytes(size: int, text: str) -> None:
    assert format_bytes(size) == text
