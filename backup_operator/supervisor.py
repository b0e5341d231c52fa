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
from typing import Any

from backup_operator import reasons
from backup_operator.acting import (
    ActionExecutor,
    BackupPass,
    SupervisorContext,
    UnwrittenStatus,
    next_pass_delay,
    uid_of,
)
from backup_operator.observing import observe_backup, records_attempt
from backup_operator.planning import plan_next_action
from backup_operator.schedule import IDLE_SECONDS, effective_interval_seconds
from backup_operator.status import (
    CONDITION_INTERVAL_RAISED,
    CONDITION_QUEUED,
    has_condition,
    interval_status,
    queued_status,
    without_queued,
)
from etcd_common.api.etcd_backup import EtcdBackup
from kube_adapter.errors import KubeError
from kube_adapter.events import WARNING
from kube_adapter.patching import status_merge_patch
from operator_runtime.cache import Key
from operator_runtime.logs import object_logger
from operator_runtime.worker import ObjectWorker, short_error

__all__ = ["BackupSupervisor", "SupervisorContext"]

SUPERVISOR_LOGGER_NAME = "backup_operator.backup"
# The worker's name in its log lines ("backup runner started", "... stopped"): kept as it was, for log searches.
WORKER_ROLE = "backup runner"
NOT_LEADING_DELAY_SECONDS = 1.0
# A backup or trial restore starts only while the lease stays surely ours this long (its snapshot
# begun, its first bytes uploaded): a deposed leader's late backup would race its successor's.
START_LEASE_SECONDS = 10.0
# A backup waiting for a slot is woken when one frees up; this is only the safety net.
QUEUED_RECHECK_SECONDS = 60.0


class BackupSupervisor:
    def __init__(self, key: Key, context: SupervisorContext) -> None:
        self.key = key
        self.context = context
        self.log = object_logger(*key, logging.getLogger(SUPERVISOR_LOGGER_NAME), field="backup")
        self.executor = ActionExecutor(key, context, self.log)
        self.worker = ObjectWorker(key, self.reconcile_once, stop=context.stop, log=self.log, role=WORKER_ROLE,
                                   expected_errors=(KubeError,))

    def reconcile_once(self) -> float:
        ctx = self.context
        raw = ctx.backups.get(self.key)
        if raw is not None and self.unwritten is not None:
            raw = self._write_unwritten(raw)
        if raw is None:
            self.executor.unwritten = None
            ctx.slots.leave(self.key)
            return IDLE_SECONDS
        observed = observe_backup(raw, ctx.clock())
        backup, recorded = observed.backup, observed.recorded
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
        step = BackupPass(raw, observed)
        if not action.has_effect:
            ctx.slots.leave(self.key)
            reported = self.executor.execute(action, step)  # a rejected spec: its status and event
            if reported is not None:
                return reported
            if ctx.may_act() and has_condition(raw.get("status") or {}, CONDITION_QUEUED):
                self._write_note(raw, without_queued(raw.get("status") or {}))
            return next_pass_delay(action)
        if not ctx.may_act(START_LEASE_SECONDS):
            self.log.warning("not starting (%s): leadership not confirmed for the next %.0fs", action.describe(),
                             START_LEASE_SECONDS)
            return NOT_LEADING_DELAY_SECONDS
        position = ctx.slots.request(self.key, (action.due_since() or observed.now).timestamp(), self.worker.notify)
        if position:
            self._report_queued(raw, position)
            return QUEUED_RECHECK_SECONDS
        try:
            delay = self.executor.execute(action, step)
        finally:
            ctx.slots.release(self.key)
        assert delay is not None
        return delay

    @property
    def unwritten(self) -> UnwrittenStatus | None:
        """The status a failed write left out (the executor's): written first by the next pass."""
        return self.executor.unwritten

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

    def _write_unwritten(self, raw: dict[str, Any]) -> dict[str, Any] | None:
        """Write the status a failed write left out, unless the API already records that attempt
        or a later one; the object to plan from (None: deleted meanwhile)."""
        unwritten, self.executor.unwritten = self.executor.unwritten, None
        assert unwritten is not None
        current = raw.get("status") or {}
        if unwritten.uid != uid_of(raw) or records_attempt(current, unwritten.status):
            return raw
        self.log.info("writing the status of the last attempt (%s), which a failed write left out; "
                      "the attempt is not repeated", unwritten.status.get("lastResult"))
        return self.executor._patch_status(raw, current, unwritten.status)


