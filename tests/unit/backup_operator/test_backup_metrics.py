"""The schedule's health as metrics, from spec and status, so alerts survive an operator restart."""
from __future__ import annotations

from datetime import UTC, datetime

from backup_operator.metrics import BackupMetrics


def sample(metrics: BackupMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_recorded_schedule_interval_failures_and_last_success() -> None:
    metrics = BackupMetrics()
    last = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    metrics.observe_recorded("ns", "nightly", interval_seconds=3600, consecutive_failures=2, last_success=last)
    assert sample(metrics, "etcd_backup_interval_seconds", namespace="ns", backup="nightly") == 3600
    assert sample(metrics, "etcd_backup_consecutive_failures", namespace="ns", backup="nightly") == 2
    assert sample(metrics, "etcd_backup_last_success_timestamp_seconds", namespace="ns", backup="nightly") == last.timestamp()

    # Made one-shot, never succeeded: no interval series (the missed-schedule alert does not apply).
    metrics.observe_recorded("ns", "nightly", interval_seconds=0, consecutive_failures=0, last_success=None)
    assert sample(metrics, "etcd_backup_interval_seconds", namespace="ns", backup="nightly") is None
    assert sample(metrics, "etcd_backup_consecutive_failures", namespace="ns", backup="nightly") == 0

    metrics.forget("ns", "nightly")
    assert sample(metrics, "etcd_backup_consecutive_failures", namespace="ns", backup="nightly") is None
    assert sample(metrics, "etcd_backup_last_success_timestamp_seconds", namespace="ns", backup="nightly") is None
