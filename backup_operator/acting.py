"""Carries out an EtcdBackup's actions (`ActionExecutor`): a backup (`taking.py`: snapshot, check,
upload, retention, within the spec's timeout), a trial restore (`trial_restore.py`), a rejected
spec; each writes its outcome to status, an event and metrics, and returns the delay before the
next pass. A status write that fails is kept (`unwritten`) for the next pass to write first."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from backup_operator import actions as a
from backup_operator import reasons, trial_restore
from backup_operator.endpoint_policy import DEFAULT_POLICY, EndpointPolicy
from backup_operator.metrics import BackupMetrics
from backup_operator.observed import BackupResult, ObservedBackup, RecordedBackup
from backup_operator.observing import parse_last_backup, parse_recorded, parse_recorded_trial
from backup_operator.planning import plan_next_action
from backup_operator.reasons import BackupFailed
from backup_operator.schedule import IDLE_SECONDS, timeout_seconds
from backup_operator.slots import DEFAULT_MAX_CONCURRENT_BACKUPS, BackupSlots
from backup_operator.status import (
    attempt_started_status,
    failure_status,
    success_status,
    trial_failed_status,
    trial_verified_status,
)
from backup_operator.taking import BackupEnvironment, BackupRequest, Logger, take_backup
from etcd_common.api.etcd_backup import EtcdBackup
from kube_adapter.errors import KubeError, NotFound
from kube_adapter.events import NORMAL, WARNING, EventRecorder
from kube_adapter.patching import status_merge_patch
from kube_adapter.resources import ResourceClient
from operator_runtime import actions as runtime
from operator_runtime.actions import Effect
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.running import MayAct, always_may_act
from operator_runtime.worker import short_error

# Never sleep less than this between passes (a schedule due "now" after a failure, clock skew).
MIN_DELAY_SECONDS = 0.5


def take(backup: EtcdBackup, environment: BackupEnvironment, log: Logger, now: Callable[[], datetime]) -> BackupResult:
    """One backup of the EtcdBackup's spec, within the spec's timeout. Raises `BackupFailed` with the reason."""
    assert backup.spec is not None
    request = BackupRequest.from_spec(backup.namespace, backup.name, backup.spec,
                                      timeout_seconds=timeout_seconds(backup.spec))
    return take_backup(request, environment, log, now=now)


@dataclass(frozen=True)
class SupervisorContext:
    """What every backup supervisor and its executor share."""

    backups: ObjectCache
    backup_api: ResourceClient
    environment: BackupEnvironment
    events: EventRecorder
    metrics: BackupMetrics
    stop: threading.Event
    may_act: MayAct = always_may_act  # the lease: asked before a backup or trial restore starts
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


@dataclass(frozen=True)
class BackupPass:
    """What one pass read: the EtcdBackup as the API has it (or as this pass last wrote it) and what was observed."""

    raw: dict[str, Any]
    observed: ObservedBackup


class ActionExecutor(runtime.ActionExecutor[BackupPass, float]):
    """One EtcdBackup's effects (`_EFFECTS`); `unwritten` is the status a failed write left out."""

    def __init__(self, key: Key, context: SupervisorContext, log: Logger) -> None:
        self.key = key
        self.context = context
        self.log = log
        self.unwritten: UnwrittenStatus | None = None

    def effects(self) -> Mapping[type[Any], Effect[BackupPass, float]]:
        return _EFFECTS

    def _reject(self, action: a.RejectSpec, p: BackupPass) -> float:
        self.log.warning("cannot back up: %s: %s", action.reason, action.message)
        self._write_failure(p.raw, p.observed.backup, action.reason, action.message, p.observed.now, seconds=None)
        return IDLE_SECONDS

    def _take_backup(self, action: a.TakeBackup, p: BackupPass) -> float:
        return self._take(p.raw, p.observed, action)

    def _trial(self, action: a.RestoreOnTrial, p: BackupPass) -> float:
        return self._restore_on_trial(p.raw, p.observed)

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
        """Record the attempt's start, take the backup (holding a slot), write its outcome; the
        delay until the next pass. A start that cannot be written raises (KubeError): not started."""
        ctx = self.context
        backup, now = observed.backup, observed.now
        recorded = parse_recorded(raw.get("status"))  # before this attempt: its outcome counts from it
        marked = self._record_start(raw, backup.generation, now)
        if marked is None:
            return IDLE_SECONDS
        raw = marked
        self.log.info("taking a backup (%s)", action.why)
        started = time.monotonic()
        try:
            result = take(backup, ctx.environment, self.log, now=ctx.clock)
        except BackupFailed as failure:
            self.log.warning("backup failed: %s: %s", failure.reason, failure.message)
            updated = self._write_failure(raw, backup, failure.reason, failure.message, now,
                                          seconds=time.monotonic() - started, recorded=recorded)
        except Exception as error:  # a bug must show in status too, not only in the log
            self.log.exception("backup crashed")
            updated = self._write_failure(raw, backup, reasons.INTERNAL_ERROR, short_error(error), now,
                                          seconds=time.monotonic() - started, recorded=recorded)
        else:
            updated = self._write_success(raw, backup, result)
        return self._delay_after(updated or raw, observed)

    def _record_start(self, raw: dict[str, Any], generation: int, now: datetime) -> dict[str, Any] | None:
        """Write `attemptStarted` before the backup starts (a crash or an eviction mid-backup then
        still counts as an attempt); the object as written, None when it was deleted meanwhile."""
        current = raw.get("status") or {}
        marked = attempt_started_status(current, generation, now)
        try:  # only the new field: the rest of the status stays as it is
            updated = self.context.backup_api.patch_status(self.key[0], self.key[1],
                                                           {"attemptStarted": marked["attemptStarted"]})
        except NotFound:
            self.log.info("EtcdBackup deleted meanwhile; no backup taken")
            return None
        except KubeError as error:
            self.log.warning("cannot record the attempt's start: %s; the backup is not started (retried next pass)",
                             short_error(error))
            raise
        if not updated:
            return {**raw, "status": marked}
        self.context.backups.upsert(updated)
        return updated

    def _delay_after(self, raw: dict[str, Any], observed: ObservedBackup) -> float:
        """Until the next backup (or trial restore) is due, by the status just written (the spec as this pass read it)."""
        status = raw.get("status")
        after = replace(observed, recorded=parse_recorded(status), last_backup=parse_last_backup(status),
                        trial=parse_recorded_trial(status), now=self.context.clock())
        return next_pass_delay(plan_next_action(after, self.context.endpoint_policy, self.context.min_interval_seconds))

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
                       *, seconds: float | None, recorded: RecordedBackup | None = None) -> dict[str, Any] | None:
        """The failure's status, counted from `recorded` (the status before the attempt's start
        was written; by default what `raw` records)."""
        ctx = self.context
        ctx.metrics.observe_failure(backup.namespace, backup.name, reason, seconds=seconds)
        ctx.events.record(raw, WARNING, reason, message)
        current = raw.get("status") or {}
        status = failure_status(current, backup.generation, parse_recorded(current) if recorded is None else recorded,
                                reason, message, attempt, ctx.clock())
        return self._patch_status(raw, current, status)

    def _patch_status(self, raw: dict[str, Any], current: dict[str, Any],
                      status: dict[str, Any]) -> dict[str, Any] | None:
        ctx = self.context
        self.unwritten = UnwrittenStatus(uid_of(raw), status)
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


# Each kind of action with something to carry out, and the method that does (Wait and Done: none).
_EFFECTS: dict[type[Any], Effect[BackupPass, float]] = {
    a.RejectSpec: ActionExecutor._reject,
    a.TakeBackup: ActionExecutor._take_backup,
    a.RestoreOnTrial: ActionExecutor._trial,
}


def uid_of(raw: dict[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("uid") or "")


def next_pass_delay(action: a.Action) -> float:
    """How long to sleep before the next pass after `action`."""
    if isinstance(action, a.Wait):
        return max(MIN_DELAY_SECONDS, action.seconds)
    if isinstance(action, a.TakeBackup):
        return MIN_DELAY_SECONDS
    return IDLE_SECONDS
