"""The operator's metrics: names, labels, isolation per registry, forgetting deleted clusters."""
from __future__ import annotations

import pytest

from etcd_operator.metrics import ERROR_REASONS, OperatorMetrics


def sample(metrics: OperatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_each_instance_counts_on_its_own_registry() -> None:
    first, second = OperatorMetrics(), OperatorMetrics()
    first.count_error("etcdctl")
    assert sample(first, "etcd_operator_errors_total", reason="etcdctl") == 1
    assert sample(second, "etcd_operator_errors_total", reason="etcdctl") == 0


def test_every_error_reason_exists_from_the_start() -> None:
    metrics = OperatorMetrics()
    assert all(sample(metrics, "etcd_operator_errors_total", reason=reason) == 0 for reason in ERROR_REASONS)


def test_unknown_error_reasons_are_counted_as_other() -> None:
    metrics = OperatorMetrics()
    metrics.count_error("connection reset by peer at 10:32")
    assert sample(metrics, "etcd_operator_errors_total", reason="other") == 1


def test_reconcile_durations_by_result() -> None:
    metrics = OperatorMetrics()
    metrics.observe_reconcile(0.02, ok=True)
    metrics.observe_reconcile(3.0, ok=False)
    assert sample(metrics, "etcd_operator_reconcile_duration_seconds_count", result="ok") == 1
    assert sample(metrics, "etcd_operator_reconcile_duration_seconds_sum", result="error") == 3.0


def test_membership_changes_use_a_fixed_vocabulary() -> None:
    metrics = OperatorMetrics()
    metrics.count_membership_change("ns", "c1", "add")
    assert sample(metrics, "etcd_operator_membership_changes_total", namespace="ns", cluster="c1", kind="add") == 1
    with pytest.raises(ValueError):
        metrics.count_membership_change("ns", "c1", "resize")


def test_cluster_gauges_and_forgetting_a_cluster() -> None:
    metrics = OperatorMetrics()
    metrics.clusters_managed.set(2)
    metrics.is_leader.set(1)
    metrics.set_cluster_members("ns", "c1", members=3, ready=2, has_quorum=True)
    metrics.set_cluster_members("ns", "c2", members=3, ready=1, has_quorum=False)
    metrics.count_membership_change("ns", "c1", "remove")

    assert sample(metrics, "etcd_operator_cluster_members", namespace="ns", cluster="c1") == 3
    assert sample(metrics, "etcd_operator_cluster_ready_members", namespace="ns", cluster="c1") == 2
    assert sample(metrics, "etcd_operator_cluster_quorum", namespace="ns", cluster="c2") == 0
    assert sample(metrics, "etcd_operator_clusters_managed") == 2
    assert sample(metrics, "etcd_operator_is_leader") == 1

    metrics.forget_cluster("ns", "c1")
    metrics.forget_cluster("ns", "never-seen")
    assert sample(metrics, "etcd_operator_cluster_members", namespace="ns", cluster="c1") is None
    assert sample(metrics, "etcd_operator_membership_changes_total", namespace="ns", cluster="c1", kind="remove") is None
    assert sample(metrics, "etcd_operator_cluster_quorum", namespace="ns", cluster="c2") == 0


def test_cluster_phase_is_one_series_per_phase_with_the_current_one_at_1() -> None:
    metrics = OperatorMetrics()
    metrics.set_cluster_phase("ns", "c1", "Creating", desired_members=3)
    metrics.set_cluster_phase("ns", "c1", "Failed", desired_members=5)
    metrics.set_cluster_phase("ns", "c2", "Running", desired_members=None)  # spec unreadable: size unknown

    assert sample(metrics, "etcd_operator_cluster_phase", namespace="ns", cluster="c1", phase="Failed") == 1
    assert sample(metrics, "etcd_operator_cluster_phase", namespace="ns", cluster="c1", phase="Creating") == 0
    assert sample(metrics, "etcd_operator_cluster_phase", namespace="ns", cluster="c1", phase="Running") == 0
    assert sample(metrics, "etcd_operator_cluster_desired_members", namespace="ns", cluster="c1") == 5
    assert sample(metrics, "etcd_operator_cluster_desired_members", namespace="ns", cluster="c2") is None

    metrics.forget_cluster("ns", "c1")
    assert sample(metrics, "etcd_operator_cluster_phase", namespace="ns", cluster="c1", phase="Failed") is None
    assert sample(metrics, "etcd_operator_cluster_desired_members", namespace="ns", cluster="c1") is None
    assert sample(metrics, "etcd_operator_cluster_phase", namespace="ns", cluster="c2", phase="Running") == 1
def test_recheck_lag_keeps_the_worst_seen() -> None:
    metrics = OperatorMetrics()
    for seconds in (0.002, 0.5, 0.01):
        metrics.observe_recheck_lag(seconds)
    assert sample(metrics, "etcd_operator_recheck_lag_seconds_count") == 3
    assert sample(metrics, "etcd_operator_recheck_lag_max_seconds") == 0.5


def test_storage_and_maintenance_series_per_cluster() -> None:
    metrics = OperatorMetrics()
    metrics.set_storage("ns", "c", quota_bytes=16 << 20, alarms={"NOSPACE"},
                        members={"c-a": (10 << 20, 4 << 20), "c-b": (8 << 20, 8 << 20)})
    assert sample(metrics, "etcd_operator_backend_quota_bytes", namespace="ns", cluster="c") == 16 << 20
    assert sample(metrics, "etcd_operator_alarms_active", namespace="ns", cluster="c", alarm="NOSPACE") == 1
    assert sample(metrics, "etcd_operator_alarms_active", namespace="ns", cluster="c", alarm="CORRUPT") == 0
    assert sample(metrics, "etcd_operator_member_db_size_in_use_bytes", namespace="ns", cluster="c", member="c-a") == 4 << 20
    # Failures count from 0, so increase() over the first failure is 1 (the alerts rely on it).
    assert sample(metrics, "etcd_operator_defragmentations_total", namespace="ns", cluster="c", result="failed") == 0
    assert sample(metrics, "etcd_operator_alarm_recoveries_total", namespace="ns", cluster="c",
                  alarm="NOSPACE", result="failed") == 0
    metrics.set_storage("ns", "c", quota_bytes=16 << 20, alarms=set(), members={"c-a": (4 << 20, 4 << 20)})
    assert sample(metrics, "etcd_operator_member_db_size_bytes", namespace="ns", cluster="c", member="c-b") is None
    metrics.observe_defragmentation("ns", "c", 1.5, ok=True)
    metrics.observe_alarm_recovery("ns", "c", "NOSPACE", 12.0, ok=True)
    assert sample(metrics, "etcd_operator_defragmentation_duration_seconds_count", namespace="ns", cluster="c") == 1
    assert sample(metrics, "etcd_operator_alarm_recovery_duration_seconds_sum", namespace="ns", cluster="c",
                  alarm="NOSPACE") == 12.0
    metrics.forget_cluster("ns", "c")
    assert sample(metrics, "etcd_operator_backend_quota_bytes", namespace="ns", cluster="c") is None
    assert sample(metrics, "etcd_operator_defragmentations_total", namespace="ns", cluster="c", result="succeeded") is None
