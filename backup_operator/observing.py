"""One pass's observation of an EtcdBackup: the object as cached (its spec parsed once, here) and
what its status recorded, read back leniently so a hand-edited or CoreOS-written status never
stops the schedule."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from backup_operator import reasons
from backup_operator.observed import ObservedBackup, RecordedBackup, RecordedTrial
from backup_operator.status import RESULT_SUCCEEDED
from etcd_common.api.etcd_backup import LastBackup, parse_etcd_backup, parse_snapshot_fingerprint
from operator_runtime.kube_time import parse_timestamp


def observe_backup(raw: dict[str, Any], now: datetime) -> ObservedBackup:
    status = raw.get("status")
    return ObservedBackup(parse_etcd_backup(raw), parse_recorded(status), now,
                          last_backup=parse_last_backup(status), trial=parse_recorded_trial(status))


def _integer(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_recorded(status: Any) -> RecordedBackup:
    """What the status records; an attempt it says was started (`attemptStarted`) after the last
    attempt whose outcome it records counts as a failed attempt, reason BackupInterrupted (its
    outcome was never written: the operator stopped mid-backup), so the schedule backs off from it."""
    if not isinstance(status, Mapping):
        return RecordedBackup()
    last_result = status.get("lastResult")
    recorded = RecordedBackup(
        observed_generation=_integer(status.get("observedGeneration")),
        succeeded=status.get("succeeded") is True,
        last_attempt_time=parse_timestamp(status.get("lastAttemptTime")),
        first_attempt_time=parse_timestamp(status.get("firstAttemptTime")),
        consecutive_failures=_integer(status.get("consecutiveFailures")),
        last_reason=last_result if isinstance(last_result, str) and last_result != RESULT_SUCCEEDED else "",
    )
    started = status.get("attemptStarted")
    started_time = parse_timestamp(started.get("time")) if isinstance(started, Mapping) else None
    if started_time is None or (recorded.last_attempt_time is not None and started_time <= recorded.last_attempt_time):
        return recorded
    assert isinstance(started, Mapping)
    generation = _integer(started.get("observedGeneration"))
    same_run = recorded.observed_generation == generation and recorded.consecutive_failures > 0
    return RecordedBackup(
        observed_generation=generation, succeeded=False, last_attempt_time=started_time,
        first_attempt_time=(recorded.first_attempt_time or started_time) if same_run else started_time,
        consecutive_failures=recorded.consecutive_failures + 1 if same_run else 1,
        last_reason=reasons.INTERRUPTED,
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


def _integer_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_last_backup(status: Any) -> LastBackup | None:
    """status.lastBackup, or None when there is none (or it lacks a key or a time)."""
    raw = status.get("lastBackup") if isinstance(status, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    key, taken = raw.get("key"), parse_timestamp(raw.get("time"))
    if not isinstance(key, str) or not key or taken is None:
        return None
    sha256 = raw.get("sha256")
    return LastBackup(key=key, taken=taken, sha256=sha256 if isinstance(sha256, str) else "",
                      etcd_revision=_integer_or_none(raw.get("etcdRevision")) or 0,
                      fingerprint=parse_snapshot_fingerprint(raw))


def parse_recorded_trial(status: Any) -> RecordedTrial:
    raw = status.get("trialRestore") if isinstance(status, Mapping) else None
    if not isinstance(raw, Mapping):
        return RecordedTrial()
    result = raw.get("lastResult")
    return RecordedTrial(
        last_attempt_time=parse_timestamp(raw.get("lastAttemptTime")),
        last_result=result if isinstance(result, str) else "",
        last_verified_time=parse_timestamp(raw.get("lastVerifiedTime")),
        verified_backup_time=parse_timestamp(raw.get("verifiedBackupTime")),
    )
