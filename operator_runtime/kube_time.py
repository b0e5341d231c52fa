"""Times as Kubernetes writes them (RFC 3339, UTC, whole seconds: `2024-05-01T10:00:00Z`), for
every operator's status, annotations and conditions; and conditions whose lastTransitionTime
moves only when their status flips."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def as_utc(moment: datetime) -> datetime:
    """`moment` with a time zone: a naive one (a time written without an offset) is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with whole seconds, as Kubernetes writes times (what `parse_timestamp`
    reads); a naive `moment` is UTC."""
    return as_utc(moment).astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def parse_timestamp(value: Any) -> datetime | None:
    """A time as the API writes it (`2024-05-01T10:00:00Z`, or with an offset); None when absent or
    unreadable. Always timezone-aware: a time written without an offset is UTC."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return as_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


def condition(type_: str, status: str, reason: str, message: str, *, now: datetime,
              previous: Mapping[str, Any] | None = None) -> dict[str, str]:
    """A status condition; its lastTransitionTime is `previous`'s while the status stays the same
    (and `previous` has one), else now."""
    since = format_timestamp(now)
    if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
        since = str(previous["lastTransitionTime"])
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}


def find_condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The condition of `type_` in `status` (an object's .status as the API has it), None when absent."""
    return next((c for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type") == type_),
                None)
