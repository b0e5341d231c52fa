"""The pass of one EtcdBackup: observe -> plan one action -> act -> write status (run by its
`operator_runtime.worker.ObjectWorker` thread): a backup taken when the schedule says one is due,
its outcome in status, an event and metrics, then sleep until the next one is due.

With spec.trialRestore, when no backup is due and a trial restore is (`verification.py`), the
newest backup is restored into a throwaway etcd and checked (`trial_restore.py`), holding a slot
as a backup does; its outcome goes to status.trialRestore and the condition Verified, a Warning
event each time the failure reason changes, and the metrics the EtcdBackupNotVerified alert reads.

A due backup is taken only with one of the operator's `--max-concurrent-backups` slots
(`slots.py`, shared by every supervisor); without one it waits its turn, oldest due first, says so
once in status (condition Queued) and is woken when a slot frees. A periodic interval below the
operator's minimum is raised to it (condition IntervalRaised, a Warning event).

Deleting the EtcdBackup stops its worker (the controller does), so a periodic schedule ends with
it; what is in S3 stays.

A status write that fails after an attempt (the API server busy, a webhook down) does not lose the
attempt: the status it computed is kept in memory and written first by the next pass (after the
worker's backoff), which then plans from it, so a backup that was uploaded is never taken again
for want of its status (before, each pass saw no record of it and took it again, about every 30 s).
It is level-triggered against the API: the kept status is only written while the object (same uid)
does not record that attempt or a later one, so a write that succeeded but whose answer was lost,
or another operator instance's newer record, is not overwritten. Finding the uploaded object in the
bucket instead was rejected: the bucket cannot tell our upload from another writer's to the same
path (a one-shot key is fixed; a CronJob or a second EtcdBackup may share a periodic path), and it
costs a listing per pass. Memory does not survive a restart: then at most one backup is taken
again, as after a crash during an upload.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from backup_operator import acting, reasons, trial_restore
from backup_operator import actions as a
from backup_operator.endpoint_policy import DEFAULT_POLICY, EndpointPolicy
from backup_operator.metrics import BackupMetrics
from backup_operator.observed import BackupResult, ObservedBackup
from backup_operator.observing import (
    observe_backup,
    parse_last_backup,
    parse_recorded,
    parse_recorded_trial,
    records_attempt,
)
from backup_operator.planning import plan_next_action
from backup_operator.reasons import BackupFailed
from backup_operator.schedule import IDLE_SECONDS, effective_interval_seconds
from backup_operator.slots import DEFAULT_MAX_CONCURRENT_BACKUPS, BackupSlots
from backup_operator.status import (
    CONDITION_INTERVAL_RAISED,
    CONDITION_QUEUED,
    failure_status,
    has_condition,
    interval_status,
    queued_status,
    success_status,
    trial_failed_status,
    trial_verified_status,
    without_queued,
)
from backup_operator.taking import BackupEnvironment
from etcd_common.api.etcd_backup import EtcdBackup
from kube_adapter.errors import KubeError, NotFound
from kube_adapter.events import NORMAL, WARNING, EventRecorder
from kube_adapter.patching import status_merge_patch
from kube_adapter.resources import ResourceClient
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.logs import object_logger
from operator_runtime.worker import ObjectWorker, short_error

SUPERVISOR_LOGGER_NAME = "backup_operator.backup"
# The worker's name in its log lines ("backup runner started", "... stopped"): kept as it was, for log searches.
WORKER_ROLE = "backup runner"
# Never sleep less than this between passes (a schedule due "now" after a failure, clock skew).
MIN_DELAY_SECONDS = 0.5
NOT_LEADING_DELAY_SECONDS = 1.0
# A backup waiting for a slot is woken when one frees up; this is only the safety net.
QUEUED_RECHECK_SECONDS = 60.0


@dataclass(frozen=True)
class SupervisorContext:
    """What every supervisor shares."""

    backups: ObjectCache
    backup_api: ResourceClient
    environment: BackupEnvironment
    events: EventRecorder
    metrics: BackupMetrics
    stop: threading.Event
    may_act: Callable[[], bool] = lambda: True
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    endpoint_policy: EndpointPolicy = DEFAULT_POLICY
    # The operator's limit on backups at once, shared by every supervisor (--max-concurrent-backups).
    slots: BackupSlots = field(default_factory=lambda: BackupSlots(DEFAULT_MAX_CONCURRENT_BACKUPS))
    # --min-backup-interval-seconds: a periodic backupIntervalInSecond below it is raised to it.
    min_interval_seconds: float = 0.0


@dataclass(frozen=True)
class UnwrittenStatus:
    """A status computed after an attempt whose write failed: written by the next pass."""

    uid: str
    status: dict[str, Any]


class BackupSupervisor:
    def __init__(self, key: Key, context: SupervisorContext) -> None:
        self.key = key
        self.context = context
        self.unwritten: UnwrittenStatus | None = None
        self.log = object_logger(*key, logging.getLogger(SUPERVISOR_LOGGER_NAME), field="backup")
        self.worker = ObjectWorker(key, self.reconcile_once, stop=context.stop, log=self.log, role=WORKER_ROLE,
                                   expected_errors=(KubeError,))

    def reconcile_once(self) -> float:
        ctx = self.context
        raw = ctx.backups.get(self.key)
        if raw is not None and self.unwritten is not None:
            raw = self._write_unwritten(raw)
        if raw is None:
            self.unwritten = None
            ctx.slots.leave(self.key)
            return IDLE_SECONDS
        observed = observe_backup(raw, ctx.clock())
        backup, recorded, now = observed.backup, observed.recorded, observed.now
        periodic = backup.spec is not None and backup.spec.policy.periodic
        ctx.metrics.observe_recorded(
            backup.namespace, backup.name, consecutive_failures=recorded.consecutive_failures,
            interval_seconds=round(effective_interval_seconds(backup.spec, ctx.min_interval_seconds))
            if backup.spec is not None and periodic else 0,
            last_success=backup.status.last_success_date)
        trial_policy = backup.spec.trial_restore if backup.spec is not None else None
        ctx.metrics.observe_trial_recorded(
            backup.namespace, backup.name, max_age_seconds=trial_policy.max_unverified_age_seconds if trial_policy
            else None, attempted=observed.trial.last_attempt_time is not None,
            verified_backup_time=observed.trial.verified_backup_time)
        if ctx.may_act():
            raw = self._report_interval(raw, backup)
        action = plan_next_action(observed, ctx.endpoint_policy, ctx.min_interval_seconds)
        if not isinstance(action, (a.TakeBackup, a.RestoreOnTrial)):
            ctx.slots.leave(self.key)
            if isinstance(action, a.RejectSpec):
                self.log.warning("cannot back up: %s: %s", action.reason, action.message)
                self._write_failure(raw, backup, action.reason, action.message, now, seconds=None)
                return IDLE_SECONDS
            if ctx.may_act() and has_condition(raw.get("status") or {}, CONDITION_QUEUED):
                self._write_note(raw, without_queued(raw.get("status") or {}))
            return _delay(action)
        if not ctx.may_act():
            self.log.warning("not backing up: leadership not confirmed within the renew deadline")
            return NOT_LEADING_DELAY_SECONDS
        position = ctx.slots.request(self.key, (action.due or now).timestamp(), self.worker.notify)
        if position:
            self._report_queued(raw, position)
            return QUEUED_RECHECK_SECONDS
        try:
            if isinstance(action, a.RestoreOnTrial):
                return self._restore_on_trial(raw, observed)
            return self._take(raw, observed, action)
        finally:
            ctx.slots.release(self.key)

    def _restore_on_trial(self, raw: dict[str, Any], observed: ObservedBackup) -> float:
        """Restore the newest backup on trial (holding a slot), write its outcome; the delay until the next pass."""
        ctx = self.context
        backup, last_backup, now = observed.backup, observed.last_backup, observed.now
        assert last_backup is not None
        self.log.info("trial restore of %s", last_backup.key)
        started = time.monotonic()
        current = raw.get("status") or {}
        try:
            result = trial_restore.restore_on_trial(backup, last_backup, ctx.environment, self.log)
        except BackupFailed as failure:
            reason, message = failure.reason, failure.message
        except Exception as error:  # a bug must show in status too, not only in the log
            self.log.exception("trial restore crashed")
            reason, message = reasons.INTERNAL_ERROR, short_error(error)
        else:
            ctx.metrics.observe_trial(backup.namespace, backup.name, verified=True, seconds=time.monotonic() - started)
            if observed.trial.last_result != reasons.VERIFIED:
                ctx.events.record(raw, NORMAL, reasons.VERIFIED, f"backup {last_backup.key} verified by a trial restore")
            status = trial_verified_status(current, now, last_backup, result.facts, result.hash_compared, ctx.clock())
            return self._delay_after(self._patch_status(raw, current, status) or raw, observed)
        self.log.warning("trial restore of %s failed: %s: %s", last_backup.key, reason, message)
        ctx.metrics.observe_trial(backup.namespace, backup.name, verified=False, seconds=time.monotonic() - started)
        if observed.trial.last_result != reason:  # one Warning event per change of reason
            ctx.events.record(raw, WARNING, reason, f"trial restore of {last_backup.key} failed: {message}")
        status = trial_failed_status(current, now, last_backup.key, reason, message, ctx.clock())
        return self._delay_after(self._patch_status(raw, current, status) or raw, observed)

    def _take(self, raw: dict[str, Any], observed: ObservedBackup, action: a.TakeBackup) -> float:
        """Take the backup (holding a slot), write its outcome; the delay until the next pass."""
        ctx = self.context
        backup, now = observed.backup, observed.now
        self.log.info("taking a backup (%s)", action.why)
        started = time.monotonic()
        try:
            result = acting.take(backup, ctx.environment, self.log, now=ctx.clock)
        except BackupFailed as failure:
            self.log.warning("backup failed: %s: %s", failure.reason, failure.message)
            updated = self._write_failure(raw, backup, failure.reason, failure.message, now,
                                          seconds=time.monotonic() - started)
        except Exception as error:  # a bug must show in status too, not only in the log
            self.log.exception("backup crashed")
            updated = self._write_failure(raw, backup, reasons.INTERNAL_ERROR, short_error(error), now,
                                          seconds=time.monotonic() - started)
        else:
            updated = self._write_success(raw, backup, result)
        return self._delay_after(updated or raw, observed)

    def _delay_after(self, raw: dict[str, Any], observed: ObservedBackup) -> float:
        """Until the next backup (or trial restore) is due, by the status just written (the spec as this pass read it)."""
        status = raw.get("status")
        after = replace(observed, recorded=parse_recorded(status), last_backup=parse_last_backup(status),
                        trial=parse_recorded_trial(status), now=self.context.clock())
        return _delay(plan_next_action(after, self.context.endpoint_policy, self.context.min_interval_seconds))

    def _report_queued(self, raw: dict[str, Any], position: int) -> None:
        """Say once (condition Queued) that the due backup waits for a slot; its position then."""
        ctx = self.context
        current = raw.get("status") or {}
        if has_condition(current, CONDITION_QUEUED):
            return
        slots = ctx.slots
        message = (f"due, waiting for a free backup slot: {slots.running()} of {slots.limit} running "
                   f"(--max-concurrent-backups), position {position} of {slots.queued()} in the queue "
                   "(oldest due first) when queued")
        self.log.info("%s", message)
        self._write_note(raw, queued_status(current, message, ctx.clock()))

    def _report_interval(self, raw: dict[str, Any], backup: EtcdBackup) -> dict[str, Any]:
        """Condition IntervalRaised (and a Warning event) while a periodic backupIntervalInSecond is
        below the operator's minimum; removed once it is not. The object to plan from."""
        ctx = self.context
        current = raw.get("status") or {}
        message: str | None = None
        if backup.spec is not None and backup.spec.policy.periodic:
            interval = backup.spec.policy.backup_interval_seconds
            if interval < ctx.min_interval_seconds:
                message = (f"backupIntervalInSecond {interval} is below this operator's minimum "
                           f"{ctx.min_interval_seconds:.0f} (--min-backup-interval-seconds): a backup is taken "
                           f"every {ctx.min_interval_seconds:.0f}s")
        if message is None and not has_condition(current, CONDITION_INTERVAL_RAISED):
            return raw
        if message is not None and has_condition(current, CONDITION_INTERVAL_RAISED, message):
            return raw
        if message is not None:
            self.log.warning("%s", message)
            ctx.events.record(raw, WARNING, reasons.INTERVAL_BELOW_MINIMUM, message)
        return self._write_note(raw, interval_status(current, message, ctx.clock()))

    def _write_note(self, raw: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """Write conditions that are not an attempt's outcome (Queued, IntervalRaised); a failed
        write is only logged (the next pass writes them again). The object as it is now."""
        ctx = self.context
        current = raw.get("status") or {}
        try:
            # Only the conditions change: every other field stays (a merge patch of `status` alone
            # would remove them, lastAttemptTime and lastBackup among them).
            updated = ctx.backup_api.patch_status(self.key[0], self.key[1],
                                                  status_merge_patch(current, {**current, **status}))
        except KubeError as error:
            self.log.warning("status write failed: %s; written by a later pass", short_error(error))
            return raw
        if updated:
            ctx.backups.upsert(updated)
            return updated
        return raw

    def _write_success(self, raw: dict[str, Any], backup: EtcdBackup, result: BackupResult) -> dict[str, Any] | None:
        ctx = self.context
        self.log.info("backup succeeded: %s (%d bytes, revision %d, %.1fs)", result.key, result.size,
                      result.etcd_revision, result.duration_seconds)
        ctx.metrics.observe_success(backup.namespace, backup.name, seconds=result.duration_seconds, size=result.size,
                                    finished_at=time.time(), retained=result.retained)
        ctx.events.record(raw, NORMAL, reasons.SUCCEEDED,
                          f"backup {result.key} taken: {result.size} bytes, etcd revision {result.etcd_revision}, "
                          f"{result.duration_seconds:.1f}s")
        if result.retention_error:
            ctx.events.record(raw, WARNING, reasons.RETENTION_FAILED, result.retention_error)
            ctx.metrics.failures_total.labels(reason=reasons.RETENTION_FAILED).inc()
        current = raw.get("status") or {}
        return self._patch_status(raw, current, success_status(current, backup.generation, result, ctx.clock()))

    def _write_failure(self, raw: dict[str, Any], backup: EtcdBackup, reason: str, message: str, attempt: datetime,
                       *, seconds: float | None) -> dict[str, Any] | None:
        ctx = self.context
        ctx.metrics.observe_failure(backup.namespace, backup.name, reason, seconds=seconds)
        ctx.events.record(raw, WARNING, reason, message)
        current = raw.get("status") or {}
        status = failure_status(current, backup.generation, parse_recorded(current), reason, message, attempt,
                                ctx.clock())
        return self._patch_status(raw, current, status)

    def _write_unwritten(self, raw: dict[str, Any]) -> dict[str, Any] | None:
        """Write the status a failed write left out, unless the API already records that attempt
        or a later one; the object to plan from (None: deleted meanwhile)."""
        unwritten, self.unwritten = self.unwritten, None
        assert unwritten is not None
        current = raw.get("status") or {}
        if unwritten.uid != _uid(raw) or records_attempt(current, unwritten.status):
            return raw
        self.log.info("writing the status of the last attempt (%s), which a failed write left out; "
                      "the attempt is not repeated", unwritten.status.get("lastResult"))
        return self._patch_status(raw, current, unwritten.status)

    def _patch_status(self, raw: dict[str, Any], current: dict[str, Any],
                      status: dict[str, Any]) -> dict[str, Any] | None:
        ctx = self.context
        self.unwritten = UnwrittenStatus(_uid(raw), status)
        try:
            updated = ctx.backup_api.patch_status(self.key[0], self.key[1], status_merge_patch(current, status))
        except NotFound:
            self.unwritten = None
            self.log.info("EtcdBackup deleted meanwhile; status not written")
            return None
        except KubeError as error:
            self.log.warning("status write failed: %s; kept, and written by the next pass (the backup is not "
                             "taken again)", short_error(error))
            raise
        self.unwritten = None
        if updated:
            # The next pass schedules from what we wrote, even before the watch brings it.
            ctx.backups.upsert(updated)
        return updated


def _uid(raw: dict[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("uid") or "")


def _delay(action: a.Action) -> float:
    """How long to sleep before the next pass after `action`."""
    if isinstance(action, a.Wait):
        return max(MIN_DELAY_SECONDS, action.seconds)
    if isinstance(action, a.TakeBackup):
        return MIN_DELAY_SECONDS
    return IDLE_SECONDS
