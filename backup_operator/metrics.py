"""Every Prometheus metric the backup operator exports, defined in one place (`etcd_backup_`
prefix), on a registry of its own. Labels: namespace and EtcdBackup name, a result, a reason from
`backup_operator.reasons`."""
from __future__ import annotations

import logging
from datetime import datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from backup_operator import reasons

logger = logging.getLogger(__name__)

PREFIX: Final = "etcd_backup"
RESULTS: Final = ("succeeded", "failed")
# Seconds: a small database takes well under one, a multi-GB one minutes.
DURATION_BUCKETS_SECONDS: Final = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class BackupMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.backups_managed = Gauge(f"{PREFIX}_backups_managed", "EtcdBackups this operator currently runs.",
                                     registry=r)
        self.backups_total = Counter(f"{PREFIX}_backups", "Backup attempts by result.",
                                     ["namespace", "backup", "result"], registry=r)
        self.duration_seconds = Histogram(f"{PREFIX}_duration_seconds",
                                          "Time one backup attempt took (snapshot, check, upload, retention).",
                                          ["result"], buckets=DURATION_BUCKETS_SECONDS, registry=r)
        self.last_success_timestamp_seconds = Gauge(
            f"{PREFIX}_last_success_timestamp_seconds", "Unix time of the last successful backup.",
            ["namespace", "backup"], registry=r)
        self.last_size_bytes = Gauge(f"{PREFIX}_last_size_bytes", "Size of the last successful backup.",
                                     ["namespace", "backup"], registry=r)
        self.objects_retained = Gauge(f"{PREFIX}_objects_retained",
                                      "Periodic backups of this EtcdBackup's path left in S3 after retention.",
                                      ["namespace", "backup"], registry=r)
        self.interval_seconds = Gauge(f"{PREFIX}_interval_seconds",
                                      "backupIntervalInSecond of a periodic EtcdBackup (no series for a one-shot).",
                                      ["namespace", "backup"], registry=r)
        self.consecutive_failures = Gauge(f"{PREFIX}_consecutive_failures",
                                          "Failed attempts since the last success, as the status records them.",
                                          ["namespace", "backup"], registry=r)
        self.failures_total = Counter(f"{PREFIX}_failures", "Failed backups by reason.", ["reason"], registry=r)
        self.is_leader = Gauge(f"{PREFIX}_is_leader", "1 while this replica holds the leader lease, else 0.",
                               registry=r)
        self.backups_running = Gauge(f"{PREFIX}_backups_running",
                                     "Backups being taken now (at most --max-concurrent-backups).", registry=r)
        self.backups_queued = Gauge(f"{PREFIX}_backups_queued",
                                    "Due backups waiting for a free slot (--max-concurrent-backups).", registry=r)
        self.max_concurrent_backups = Gauge(f"{PREFIX}_max_concurrent_backups",
                                            "--max-concurrent-backups: backups this operator takes at once.",
                                            registry=r)
        # spec.trialRestore (the EtcdBackupNotVerified alert compares the first two).
        self.last_verified_backup_timestamp_seconds = Gauge(
            f"{PREFIX}_last_verified_backup_timestamp_seconds",
            "Unix time the newest backup a trial restore verified was taken; 0 after trial restores that "
            "verified none. No series before the first trial restore or without spec.trialRestore.",
            ["namespace", "backup"], registry=r)
        self.max_unverified_age_seconds = Gauge(
            f"{PREFIX}_max_unverified_age_seconds",
            "spec.trialRestore.maxUnverifiedAgeInSecond: how old the newest verified backup may get.",
            ["namespace", "backup"], registry=r)
        self.trial_restores_total = Counter(f"{PREFIX}_trial_restores", "Trial restores by result.",
                                            ["namespace", "backup", "result"], registry=r)
        self.trial_restore_duration_seconds = Histogram(
            f"{PREFIX}_trial_restore_duration_seconds",
            "Time one trial restore took (download, decode, restore, throwaway etcd, checks).",
            ["result"], buckets=DURATION_BUCKETS_SECONDS, registry=r)
        for reason in reasons.FAILURE_REASONS:
            self.failures_total.labels(reason=reason)
        for result in RESULTS:
            self.duration_seconds.labels(result=result)
            self.trial_restore_duration_seconds.labels(result=result)

    def observe_slots(self, running: int, queued: int) -> None:
        self.backups_running.set(running)
        self.backups_queued.set(queued)

    def observe_success(self, namespace: str, backup: str, *, seconds: float, size: int, finished_at: float,
                        retained: int | None) -> None:
        self.backups_total.labels(namespace=namespace, backup=backup, result="succeeded").inc()
        self.duration_seconds.labels(result="succeeded").observe(seconds)
        self.last_success_timestamp_seconds.labels(namespace=namespace, backup=backup).set(finished_at)
        self.last_size_bytes.labels(namespace=namespace, backup=backup).set(size)
        if retained is not None:
            self.objects_retained.labels(namespace=namespace, backup=backup).set(retained)

    def observe_failure(self, namespace: str, backup: str, reason: str, *, seconds: float | None) -> None:
        if reason not in reasons.FAILURE_REASONS:
            logger.warning("unknown failure reason %r counted as %s", reason, reasons.INTERNAL_ERROR)
            reason = reasons.INTERNAL_ERROR
        self.backups_total.labels(namespace=namespace, backup=backup, result="failed").inc()
        self.failures_total.labels(reason=reason).inc()
        if seconds is not None:
            self.duration_seconds.labels(result="failed").observe(seconds)

    def observe_recorded(self, namespace: str, backup: str, *, interval_seconds: int, consecutive_failures: int,
                         last_success: datetime | None) -> None:
        """Every pass, from spec and status: so the schedule's health survives an operator restart
        (the alerts of deploy/prometheus/ compare the last success with the interval)."""
        if interval_seconds > 0:
            self.interval_seconds.labels(namespace=namespace, backup=backup).set(interval_seconds)
        else:
            _remove(self.interval_seconds, namespace, backup)
        self.consecutive_failures.labels(namespace=namespace, backup=backup).set(consecutive_failures)
        if last_success is not None:
            self.last_success_timestamp_seconds.labels(namespace=namespace, backup=backup).set(last_success.timestamp())

    def observe_trial_recorded(self, namespace: str, backup: str, *, max_age_seconds: int | None,
                               attempted: bool, verified_backup_time: datetime | None) -> None:
        """Every pass, from spec and status (spec.trialRestore; None: not asked for): the age the
        alert allows, and when the newest verified backup was taken (0: trials ran, none verified)."""
        if max_age_seconds is None:
            _remove(self.max_unverified_age_seconds, namespace, backup)
            _remove(self.last_verified_backup_timestamp_seconds, namespace, backup)
            return
        self.max_unverified_age_seconds.labels(namespace=namespace, backup=backup).set(max_age_seconds)
        if verified_backup_time is not None:
            self.last_verified_backup_timestamp_seconds.labels(namespace=namespace, backup=backup).set(
                verified_backup_time.timestamp())
        elif attempted:
            self.last_verified_backup_timestamp_seconds.labels(namespace=namespace, backup=backup).set(0)

    def observe_trial(self, namespace: str, backup: str, *, verified: bool, seconds: float) -> None:
        result = RESULTS[0] if verified else RESULTS[1]
        self.trial_restores_total.labels(namespace=namespace, backup=backup, result=result).inc()
        self.trial_restore_duration_seconds.labels(result=result).observe(seconds)

    def forget(self, namespace: str, backup: str) -> None:
        """Drop the series of a deleted EtcdBackup."""
        for gauge in (self.last_success_timestamp_seconds, self.last_size_bytes, self.objects_retained,
                      self.interval_seconds, self.consecutive_failures, self.last_verified_backup_timestamp_seconds,
                      self.max_unverified_age_seconds):
            try:
                gauge.remove(namespace, backup)
            except KeyError:
                pass
        for result in RESULTS:
            _remove(self.backups_total, namespace, backup, result)
            _remove(self.trial_restores_total, namespace, backup, result)


def _remove(gauge: Gauge | Counter, *labels: str) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
