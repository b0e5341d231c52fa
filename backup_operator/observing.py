"""One pass's observation of an EtcdBackup: the object as cached (its spec parsed once, here) and
what its status recorded, read back leniently so a hand-edited or CoreOS-written status never
stops the schedule."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from backup_operator.observed import ObservedBackup, RecordedBackup
from backup_operator.status import RESULT_SUCCEEDED
from etcd_common.api.etcd_backup import parse_etcd_backup


def observe_backup(raw: dict[str, Any], now: datetime) -> ObservedBackup:
    return ObservedBackup(parse_etcd_backup(raw), parse_recorded(raw.get("status")), now)


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _integer(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_recorded(status: Any) -> RecordedBackup:
    if not isinstance(status, Mapping):
        return RecordedBackup()
    last_result = status.get("lastResult")
    return RecordedBackup(
        observed_generation=_integer(status.get("observedGeneration")),
        succeeded=status.get("succeeded") is True,
        last_attempt_time=parse_time(status.get("lastAttemptTime")),
        first_attempt_time=parse_time(status.get("firstAttemptTime")),
        consecutive_failures=_integer(status.get("consecutiveFailures")),
        last_reason=last_result if isinstance(last_result, str) and last_result != RESULT_SUCCEEDED else "",
    )


def records_attempt(status: Any, attempt: Mapping[str, Any]) -> bool:
    """Whether `status` already records the attempt that `attempt` (a status this operator computed)
    describes, or a later one: then there is nothing left to write."""
    recorded, wanted = parse_recorded(status), parse_recorded(attempt)
    if recorded.last_attempt_time is None or wanted.last_attempt_time is None:
        return False
    if recorded.last_attempt_time != wanted.last_attempt_time:
        return recorded.last_attempt_time > wanted.last_attempt_time
    return (recorded.succeeded, recorded.last_reason) == (wanted.succeeded, wanted.last_reason)
