"""An EtcdCluster's day-two settings (issue 21): etcd's auto-compaction, the backend quota, online
defragmentation and the alarm remedies, as frozen dataclasses; their parsing (shape only); and
the Go-duration and Kubernetes-quantity parsers they need.

The CRD schema holds the same patterns and ranges (crds/etcdclusters.yaml); what depends on two
fields at once (a bare number is a revision count, not a periodic retention) only the parser
checks. The etcd operator's own checks (the quota must fit the volume) are in etcd_operator.spec.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from etcd_common.api import constants as c
from etcd_common.api.fields import FieldReader

COMPACTION_PERIODIC: Final = "periodic"
COMPACTION_REVISION: Final = "revision"
COMPACTION_DISABLED: Final = "disabled"
COMPACTION_MODES: Final = (COMPACTION_PERIODIC, COMPACTION_REVISION, COMPACTION_DISABLED)
DEFAULT_PERIODIC_RETENTION: Final = "1h"
DEFAULT_REVISION_RETENTION: Final = "10000"
DEFAULT_DEFRAG_THRESHOLD_PERCENT: Final = 50
DEFAULT_DEFRAG_MINIMUM_FREE_BYTES: Final = 64 * c.MIB
SECONDS_PER_DAY: Final = 24 * 3600

# A Go duration with a unit on every part, as etcd's `--auto-compaction-retention` and the window
# take it ("5m", "1h30m", "1.5h"); the CRD schema holds the same pattern (a bare number too, for
# the revision mode).
DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"
# spec.compaction.retention in the CRD schema: a duration or a bare number (which mode decides).
RETENTION_PATTERN: Final = r"^([0-9]+|([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+)$"
_DURATION_PART_RE: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s|m|h)")
_DURATION_UNIT_SECONDS: Final = {
    "ns": Decimal("1e-9"), "us": Decimal("1e-6"), "ms": Decimal("1e-3"), "s": Decimal(1), "m": Decimal(60),
    "h": Decimal(3600),
}
# A Kubernetes quantity without sign or milli suffix ("16777216", "64Mi", "8Gi", "1.5G", "1e9");
# bytes are whole, so a fraction is rounded up as Kubernetes does.
QUANTITY_PATTERN: Final = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|[eE][0-9]+)?$"
_QUANTITY_RE: Final = re.compile(QUANTITY_PATTERN)
_QUANTITY_SUFFIXES: Final = {
    "": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}
# HH:MM, 00:00-23:59 (UTC).
WINDOW_START_PATTERN: Final = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
_WINDOW_START_RE: Final = re.compile(WINDOW_START_PATTERN)
_BINARY_UNITS: Final = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


@dataclass(frozen=True)
class Compaction:
    """`spec.compaction`: etcd's auto-compaction of old key revisions. `retention` is a Go
    duration (periodic), a positive revision count (revision), or "" (disabled)."""

    mode: str = COMPACTION_PERIODIC
    retention: str = DEFAULT_PERIODIC_RETENTION

    def etcd_flags(self) -> list[str]:
        """The etcd flags (etcd >= 3.3 has both); none when disabled (etcd's default is off)."""
        if self.mode == COMPACTION_DISABLED:
            return []
        return [f"--auto-compaction-mode={self.mode}", f"--auto-compaction-retention={self.retention}"]


@dataclass(frozen=True)
class DefragmentationWindow:
    """`spec.defragmentation.window`: a daily period in UTC."""

    start_minute: int  # minutes after 00:00 UTC
    duration_seconds: int

    def is_open(self, now: datetime) -> bool:
        """Whether `now` (aware, or naive meaning UTC) is inside the window; a window that
        starts before midnight and ends after it is open on both sides of it."""
        if now.tzinfo is not None:
            now = now.astimezone(UTC)
        second_of_day = now.hour * 3600 + now.minute * 60 + now.second
        since_start = (second_of_day - self.start_minute * 60) % SECONDS_PER_DAY
        return since_start < self.duration_seconds


@dataclass(frozen=True)
class Defragmentation:
    """`spec.defragmentation`: when the operator defragments a member (one at a time)."""

    enabled: bool = True
    threshold_percent: int = DEFAULT_DEFRAG_THRESHOLD_PERCENT
    minimum_free_bytes: int = DEFAULT_DEFRAG_MINIMUM_FREE_BYTES
    window: DefragmentationWindow | None = None

    def window_open(self, now: datetime) -> bool:
        """True when there is no window (any time will do) or `now` is inside it."""
        return self.window is None or self.window.is_open(now)


@dataclass(frozen=True)
class Alarms:
    """`spec.alarms`: which etcd alarms the operator remedies."""

    recover_no_space: bool = True
    replace_corrupt_members: bool = True


# ---------------------------------------------------------------------------------------------
# Durations and quantities


def parse_duration_seconds(text: str) -> Decimal | None:
    """A Go duration with units ("1h30m", "500ms") in seconds; None when it is not one."""
    if not re.fullmatch(DURATION_PATTERN, text):
        return None
    return sum(
        (Decimal(number) * _DURATION_UNIT_SECONDS[unit] for number, unit in _DURATION_PART_RE.findall(text)),
        Decimal(0),
    )


def parse_quantity_bytes(value: Any) -> int | None:
    """A Kubernetes quantity (an integer, or a string like "64Mi", "8Gi", "1.5G") as whole bytes,
    rounded up; None when it is not one this parser (and the CRD schema) accepts."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    if not isinstance(value, str):
        return None
    match = _QUANTITY_RE.match(value)
    if match is None:
        return None
    number, suffix = Decimal(match.group(1)), match.group(3) or ""
    if suffix[:1] in ("e", "E"):
        scaled = number * (Decimal(10) ** int(suffix[1:]))
    else:
        scaled = number * _QUANTITY_SUFFIXES[suffix]
    return math.ceil(scaled)


def format_bytes(size: int) -> str:
    """`size` as a quantity a user would write: "8Gi", "384Mi"; plain bytes when no binary unit
    divides it."""
    for unit, factor in _BINARY_UNITS:
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


# ---------------------------------------------------------------------------------------------
# Parsing (the API shape)


def parse_compaction(section: FieldReader, warnings: list[str]) -> Compaction:
    """`spec.compaction`; absent: periodic, 1h."""
    mode = section.string("mode") or COMPACTION_PERIODIC
    if mode not in COMPACTION_MODES:
        raise section.error(f"{section.path('mode')}: {_quoted(mode)} is not one of {', '.join(COMPACTION_MODES)}")
    raw = section.raw.get("retention")
    if mode == COMPACTION_DISABLED:
        if raw is not None:
            warnings.append(f"{section.path('retention')} is ignored: {section.path('mode')} is disabled")
        return Compaction(mode=mode, retention="")
    if raw is None:
        default = DEFAULT_PERIODIC_RETENTION if mode == COMPACTION_PERIODIC else DEFAULT_REVISION_RETENTION
        return Compaction(mode=mode, retention=default)
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise section.wrong("retention", "a string", raw)
    retention = str(raw).strip()
    if mode == COMPACTION_PERIODIC:
        _check_periodic_retention(section, retention)
    else:
        _check_revision_retention(section, retention)
    return Compaction(mode=mode, retention=retention)


def _check_periodic_retention(section: FieldReader, retention: str) -> None:
    where = section.path("retention")
    if retention.startswith("-"):
        raise section.error(f"{where}: {_quoted(retention)} is negative; keep revisions for a positive duration like 1h")
    if retention.isdigit():
        raise section.error(
            f"{where}: {_quoted(retention)} has no unit: with mode periodic it is a duration like 5m or 1h "
            f"(etcd would read a bare number as hours); for a number of revisions set "
            f"{section.path('mode')}: revision"
        )
    seconds = parse_duration_seconds(retention)
    if seconds is None:
        raise section.error(f"{where}: {_quoted(retention)} is not a duration like 5m or 1h")
    if seconds == 0:
        raise section.error(
            f"{where}: {_quoted(retention)} is zero, which etcd reads as compaction off; "
            f"to turn compaction off set {section.path('mode')}: disabled"
        )


def _check_revision_retention(section: FieldReader, retention: str) -> None:
    where = section.path("retention")
    if not retention.isdigit():
        raise section.error(
            f"{where}: {_quoted(retention)} is not a positive number of revisions like \"10000\" "
            f"(with mode revision it counts revisions)"
        )
    if int(retention) == 0:
        raise section.error(
            f"{where}: 0 is read by etcd as compaction off; to turn compaction off set {section.path('mode')}: disabled"
        )


def parse_backend_quota(spec: FieldReader) -> int | None:
    """`spec.backendQuota` in bytes; None when unset (etcd's default quota applies)."""
    raw = spec.raw.get("backendQuota")
    if raw is None:
        return None
    quota = parse_quantity_bytes(raw)
    where = spec.path("backendQuota")
    if quota is None:
        raise spec.error(f"{where}: {_quoted(raw)} is not a size like 8Gi, 512Mi or 16777216 (bytes)")
    if quota == 0:
        default = format_bytes(c.ETCD_DEFAULT_QUOTA_BACKEND_BYTES)
        raise spec.error(f"{where} must be more than 0; leave it unset for etcd's default ({default})")
    if quota > c.MAX_QUOTA_BACKEND_BYTES:
        raise spec.error(
            f"{where}: {_quoted(raw)} is more than {format_bytes(c.MAX_QUOTA_BACKEND_BYTES)}, the most this operator "
            f"runs (etcd suggests at most {format_bytes(c.SUGGESTED_MAX_QUOTA_BACKEND_BYTES)})"
        )
    return quota


# The variable CoreOS-era manifests set the quota with (spec.pod.etcdEnv); etcd honours it.
QUOTA_ENV_VARIABLE: Final = "ETCD_QUOTA_BACKEND_BYTES"
_GO_OCTAL_RE: Final = re.compile(r"[+-]?0[0-7_]+")


def env_sets_quota(etcd_env: Sequence[Mapping[str, Any]]) -> bool:
    """Does spec.pod.etcdEnv set ETCD_QUOTA_BACKEND_BYTES (by value or valueFrom)?"""
    return any(variable.get("name") == QUOTA_ENV_VARIABLE for variable in etcd_env)


def env_quota_bytes(etcd_env: Sequence[Mapping[str, Any]]) -> int | None:
    """The quota etcd runs with when spec.pod.etcdEnv sets ETCD_QUOTA_BACKEND_BYTES (the last entry
    counts, as in Kubernetes), read as etcd reads it (Go's strconv.ParseInt with base 0: decimal,
    0x, 0o, 0b, a leading 0 for octal); 0 is etcd's default quota. None: not set, set through
    valueFrom (not readable here), not a number etcd reads (it then refuses to start), or negative
    (etcd then runs without a quota)."""
    values = [variable.get("value") for variable in etcd_env if variable.get("name") == QUOTA_ENV_VARIABLE]
    if not values or not isinstance(values[-1], str):
        return None
    text = values[-1]  # as etcd reads it: no space trimmed
    try:
        quota = int(text, 8) if _GO_OCTAL_RE.fullmatch(text) else int(text, 0)
    except ValueError:
        return None
    if quota < 0:
        return None
    return quota or c.ETCD_DEFAULT_QUOTA_BACKEND_BYTES


def parse_defragmentation(section: FieldReader) -> Defragmentation:
    """`spec.defragmentation`; absent: enabled, 50%, 64Mi, any time."""
    enabled = section.boolean("enabled") if section.has("enabled") else True
    threshold = DEFAULT_DEFRAG_THRESHOLD_PERCENT
    if section.has("thresholdPercent"):
        threshold = section.integer("thresholdPercent", minimum=-(2**63))
        if not 1 <= threshold <= 100:
            raise section.error(f"{section.path('thresholdPercent')} must be from 1 to 100, got {threshold}")
    minimum_free = DEFAULT_DEFRAG_MINIMUM_FREE_BYTES
    if section.has("minimumFreeSize"):
        raw = section.raw["minimumFreeSize"]
        parsed = parse_quantity_bytes(raw)
        if parsed is None:
            raise section.error(
                f"{section.path('minimumFreeSize')}: {_quoted(raw)} is not a size like 64Mi, 1Gi or 67108864 (bytes)"
            )
        minimum_free = parsed
    window_section = section.child("window")
    window = None if window_section is None else _parse_window(window_section)
    return Defragmentation(enabled=enabled, threshold_percent=threshold, minimum_free_bytes=minimum_free,
                           window=window)


def _parse_window(window: FieldReader) -> DefragmentationWindow:
    start = window.string("start", required=True)
    if not _WINDOW_START_RE.match(start):
        raise window.error(f"{window.path('start')}: {_quoted(start)} is not a time of day HH:MM from 00:00 to 23:59 (UTC)")
    duration = window.string("duration", required=True)
    seconds = parse_duration_seconds(duration)
    if seconds is None:
        raise window.error(f"{window.path('duration')}: {_quoted(duration)} is not a duration like 30m or 4h")
    if not 0 < seconds <= SECONDS_PER_DAY or int(seconds) == 0:
        raise window.error(f"{window.path('duration')}: {_quoted(duration)} must be at least 1s and at most 24h")
    hours, minutes = start.split(":")
    return DefragmentationWindow(start_minute=int(hours) * 60 + int(minutes), duration_seconds=int(seconds))


def parse_alarms(section: FieldReader) -> Alarms:
    """`spec.alarms`; absent: both remedies on."""
    return Alarms(
        recover_no_space=section.boolean("recoverNoSpace") if section.has("recoverNoSpace") else True,
        replace_corrupt_members=(
            section.boolean("replaceCorruptMembers") if section.has("replaceCorruptMembers") else True
        ),
    )


def _quoted(value: Any) -> str:
    """A value in an error as the manifest would hold it: "abc", 12."""
    return json.dumps(value, ensure_ascii=False)
