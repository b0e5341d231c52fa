"""The EtcdBackup `.status`: what the last attempt recorded (read back for the schedule) and the
status a success or a failure writes. Pure.

CoreOS's fields stay (`succeeded`, `Reason` with its capital R, `etcdVersion`, `etcdRevision`,
`lastSuccessDate`); a failure sets `succeeded: false`, `Reason`, `lastResult` and the `Succeeded`
condition, so it shows even after earlier successes (CoreOS kept the old success fields). The
last success's fields (`lastSuccessDate`, `lastBackup`, `etcdRevision`, `etcdVersion`) keep
describing that success.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final

from backup_operator import reasons

CONDITION_SUCCEEDED: Final = "Succeeded"
RESULT_SUCCEEDED: Final = "Succeeded"


@dataclass(frozen=True)
class RecordedBackup:
    """What the status says about earlier attempts (lenient: wrong types read as unset)."""

    observed_generation: int = 0
    succeeded: bool = False
    last_attempt_time: datetime | None = None
    first_attempt_time: datetime | None = None
    consecutive_failures: int = 0
    last_reason: str = ""


@dataclass(frozen=True)
class BackupResult:
    """One successful backup."""

    key: str
    size: int
    sha256: str
    etcd_revision: int
    etcd_version: str
    started: datetime
    duration_seconds: float
    endpoint: str = ""
    retained: int | None = None  # periodic backups of this path left after retention
    retention_error: str = ""


def format_time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _integer(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def recorded_backup(status: Any) -> RecordedBackup:
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


def _condition(current: Mapping[str, Any], status: str, reason: str, message: str, now: datetime) -> dict[str, Any]:
    """The Succeeded condition; lastTransitionTime moves only when its status flips."""
    previous = next((c for c in current.get("conditions") or [] if isinstance(c, Mapping)
                     and c.get("type") == CONDITION_SUCCEEDED), None)
    transition = format_time(now)
    if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
        transition = str(previous["lastTransitionTime"])
    return {"type": CONDITION_SUCCEEDED, "status": status, "reason": reason, "message": message[:1024],
            "lastTransitionTime": transition}


def _kept(current: Mapping[str, Any], *names: str) -> dict[str, Any]:
    return {name: current[name] for name in names if current.get(name) not in (None, "")}


def success_status(current: Mapping[str, Any], generation: int, result: BackupResult, now: datetime) -> dict[str, Any]:
    """The status after `result`; `current` is the status before."""
    message = f"backup {result.key} ({result.size} bytes, etcd revision {result.etcd_revision}) taken"
    if result.retention_error:
        message += f"; retention failed: {result.retention_error}"
    last_backup: dict[str, Any] = {
        "key": result.key, "size": result.size, "sha256": result.sha256,
        "durationSeconds": round(result.duration_seconds, 3), "time": format_time(result.started),
        "etcdRevision": result.etcd_revision,
    }
    if result.endpoint:
        last_backup["endpoint"] = result.endpoint
    status: dict[str, Any] = {
        "succeeded": True,
        "etcdVersion": result.etcd_version,
        "etcdRevision": result.etcd_revision,
        "lastSuccessDate": format_time(result.started),
        "observedGeneration": generation,
        "lastResult": RESULT_SUCCEEDED,
        "lastAttemptTime": format_time(result.started),
        "consecutiveFailures": 0,
        "lastBackup": last_backup,
        "conditions": [_condition(current, "True", reasons.SUCCEEDED, message, now)],
    }
    if result.retained is not None:
        status["backupsRetained"] = result.retained
    return status


def failure_status(current: Mapping[str, Any], generation: int, recorded: RecordedBackup, reason: str,
                   message: str, attempt_started: datetime, now: datetime) -> dict[str, Any]:
    """The status after a failed attempt (or a spec that cannot be acted on)."""
    same_run = recorded.observed_generation == generation and recorded.consecutive_failures > 0
    failures = recorded.consecutive_failures + 1 if same_run else 1
    first = (recorded.first_attempt_time or attempt_started) if same_run else attempt_started
    status = _kept(current, "etcdVersion", "etcdRevision", "lastSuccessDate", "lastBackup", "backupsRetained")
    status.update({
        "succeeded": False,
        "Reason": f"{reason}: {message}"[:1024],
        "observedGeneration": generation,
        "lastResult": reason,
        "lastAttemptTime": format_time(attempt_started),
        "firstAttemptTime": format_time(first),
        "consecutiveFailures": failures,
        "conditions": [_condition(current, "False", reason, message, now)],
    })
    return status
