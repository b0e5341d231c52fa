"""Maintenance actions: defragmentation, compaction, alarms (etcd_operator/planning/maintenance.py plans these)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from etcd_common.etcd.alarms import NOSPACE, Alarm
from etcd_operator import reasons
from etcd_operator.actions.base import _Action

MaintenanceReason = Literal["fragmented", "no-space"]


@dataclass(frozen=True)
class Defragment(_Action):
    """Defragment one member (drained from the client service first: it serves nothing while
    its database file is rewritten); its pod records when (or that it failed)."""

    member_name: str
    member_id: int
    pod_name: str
    db_size: int
    db_size_in_use: int
    purpose: MaintenanceReason
    reason: str
    pod_uid: str = ""

    KIND: ClassVar[str] = "defragment"
    event_reason: ClassVar[str | None] = reasons.MEMBER_DEFRAGMENTING

    @property
    def reclaimable_bytes(self) -> int:
        return max(self.db_size - self.db_size_in_use, 0)

    def describe(self) -> str:
        return f"defragment member {self.member_name}: {self.reason}"


@dataclass(frozen=True)
class CompactHistory(_Action):
    """Compact the key history up to `revision` (under NOSPACE: the first step of the recovery)."""

    revision: int
    reason: str

    KIND: ClassVar[str] = "compact"
    event_reason: ClassVar[str | None] = reasons.HISTORY_COMPACTED

    def describe(self) -> str:
        return f"compact history up to revision {self.revision}: {self.reason}"


@dataclass(frozen=True)
class DisarmAlarm(_Action):
    """Deactivate one raised alarm (a recovered NOSPACE, or a CORRUPT of a member since removed)."""

    alarm: Alarm
    reason: str
    # Since the alarm was first reported in status (the recovery's duration), if known.
    raised_for_seconds: float | None = None

    KIND: ClassVar[str] = "disarm"
    event_reason: ClassVar[str | None] = reasons.ALARM_DISARMED

    def describe(self) -> str:
        return f"disarm alarm {self.alarm.describe()}: {self.reason}"


@dataclass(frozen=True)
class ReportAlarm(_Action):
    """An alarm the operator cannot (or may not) clear by itself: status and one Warning event
    say what it is and what a person must do; nothing is changed."""

    alarm_kind: str
    reason: str

    KIND: ClassVar[str] = "alarm"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    @property
    def event_reason(self) -> str:  # type: ignore[override]
        return reasons.NO_SPACE_ALARM if self.alarm_kind == NOSPACE else reasons.CORRUPT_ALARM

    def describe(self) -> str:
        return f"alarm {self.alarm_kind}: {self.reason}"
