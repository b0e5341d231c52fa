"""When an EtcdBackup's next backup is due: a pure function of its spec, what its status
recorded, and the time, said as the action for now (TakeBackup, Wait, or Done until the spec
changes). Nothing lives in memory, so an operator restart neither skips nor repeats a backup.

- Periodic: the first backup at once; then one `backupIntervalInSecond` (at least the operator's
  `--min-backup-interval-seconds`: a smaller one is raised to it) after the last success;
  after a failure, a retry after min(interval, backoff), the backoff doubling with each failure in
  a row. A spec change (new generation) takes a backup at once.
- One-shot: one backup per spec generation (an object CoreOS marked succeeded counts as done).
  Failures are retried with backoff: transient ones (network, servers) within `timeoutInSecond`
  of the first attempt, then given up; ones a person must fix (secret, bucket, credentials, the
  EtcdCluster) keep being retried at the backoff's cap, so fixing them recovers by itself.
- A spec that cannot be acted on waits for a spec change.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from backup_operator import reasons
from backup_operator.actions import Done, TakeBackup, Wait
from backup_operator.observed import RecordedBackup
from etcd_common.api.etcd_backup import BackupSpec

DEFAULT_TIMEOUT_SECONDS: Final = 1800  # a multi-GB database over a modest link
RETRY_INITIAL_SECONDS: Final = 5.0
RETRY_MAX_SECONDS: Final = 300.0
# How long to sleep when nothing is due (a resync wakes us anyway).
IDLE_SECONDS: Final = 3600.0


def timeout_seconds(spec: BackupSpec) -> int:
    return spec.policy.timeout_seconds if spec.policy.timeout_seconds > 0 else DEFAULT_TIMEOUT_SECONDS


def retry_backoff_seconds(failures: int) -> float:
    """After the `failures`-th failure in a row: 5 s doubling, at most 5 min."""
    return min(RETRY_MAX_SECONDS, RETRY_INITIAL_SECONDS * 2.0 ** max(0, failures - 1))


def effective_interval_seconds(spec: BackupSpec, min_interval_seconds: float = 0) -> float:
    """The periodic interval the schedule keeps: `backupIntervalInSecond`, at least the minimum."""
    return max(float(spec.policy.backup_interval_seconds), float(min_interval_seconds))


def next_backup(spec: BackupSpec, generation: int, recorded: RecordedBackup,
                now: datetime, min_interval_seconds: float = 0) -> TakeBackup | Wait | Done:
    if _coreos_done(spec, recorded):
        return Done("one-shot backup done (recorded before observedGeneration was)")
    if recorded.last_attempt_time is None:
        return TakeBackup("first backup")
    if recorded.observed_generation != generation:
        return TakeBackup("spec changed")
    last = recorded.last_attempt_time
    failures = recorded.consecutive_failures
    if spec.policy.periodic:
        interval = effective_interval_seconds(spec, min_interval_seconds)
        wait = interval if failures == 0 else min(interval, retry_backoff_seconds(failures))
        due = last + timedelta(seconds=wait)
        why = "next periodic backup" if failures == 0 else f"retry after {failures} failure(s)"
        return _due_in(due, now, why)
    if failures == 0:
        return Done("one-shot backup done")
    if recorded.last_reason in reasons.SPEC_REASONS:
        return Done("waiting for the spec to be fixed")
    if reasons.is_transient(recorded.last_reason):
        started = recorded.first_attempt_time or last
        if now >= started + timedelta(seconds=timeout_seconds(spec)):
            return Done(f"gave up: no success within timeoutInSecond ({timeout_seconds(spec)}s)")
        due = last + timedelta(seconds=retry_backoff_seconds(failures))
    else:
        due = last + timedelta(seconds=RETRY_MAX_SECONDS if failures > 6 else retry_backoff_seconds(failures))
    return _due_in(due, now, f"retry after {failures} failure(s)")


def _due_in(due: datetime, now: datetime, why: str) -> TakeBackup | Wait:
    """Due now (or overdue): TakeBackup; later: Wait that long."""
    seconds = (due - now).total_seconds()
    return TakeBackup(why, due) if seconds <= 0 else Wait(seconds, why)


def _coreos_done(spec: BackupSpec, recorded: RecordedBackup) -> bool:
    """A one-shot the CoreOS operator completed (no observedGeneration recorded): not taken again."""
    return not spec.policy.periodic and recorded.observed_generation == 0 and recorded.succeeded
