"""Every Prometheus metric the etcd operator exports, defined in one place.

Metrics live on a registry of their own (not the client library's global one), so each test
and each operator instance counts separately. Label values are small fixed sets: namespace
and cluster name, a result, a kind of change, an error reason from `ERROR_REASONS`.
"""
from __future__ import annotations

import logging
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

logger = logging.getLogger(__name__)

PREFIX: Final = "etcd_operator"

# Why a reconcile or a supervisor failed; anything else is counted as "other".
ERROR_REASONS: Final = (
    "kube_api",  # a Kubernetes API call failed
    "etcdctl",  # an etcd membership or health call failed
    "invalid_spec",  # the EtcdCluster spec cannot be acted on
    "quorum_lost",  # the cluster lost quorum (reported, never repaired destructively)
    "supervisor_crash",  # a cluster's supervisor thread died and was restarted
    "other",
)
# The `kind` of every action with an effect (etcd_operator/actions.py).
MEMBERSHIP_CHANGE_KINDS: Final = (
    "seed", "add", "promote", "remove", "replace", "upgrade", "move-leader", "recreate",
    "services", "delete-pod", "delete-pvc", "clear-leaving-mark", "serving", "defragment", "compact", "disarm", "stop",
    "issue-certificates", "publish-ca-trust", "start-ca-rotation", "reissue-from-new-ca", "drop-old-ca",
    "apply-certificates",
)
# The `certificate` label of `etcd_operator_certificate_not_after_seconds` (spec.TLS.issued or static).
CERTIFICATE_ROLES: Final = ("ca", "peer", "server", "operator")
RECONCILE_RESULTS: Final = ("ok", "error")
# The `phase` label of `etcd_operator_cluster_phase` (the status phases, etcd_operator/status.py).
CLUSTER_PHASES: Final = ("Creating", "Running", "Failed")
RECONCILE_BUCKETS_SECONDS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RECHECK_LAG_BUCKETS_SECONDS: Final = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0)
MAINTENANCE_RESULTS: Final = ("succeeded", "failed")
ALARM_KINDS: Final = ("NOSPACE", "CORRUPT")
MAINTENANCE_BUCKETS_SECONDS: Final = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


class OperatorMetrics:
    """The operator's metrics on `registry` (a new one unless given)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._worst_lag_seconds = 0.0
        self.clusters_managed = Gauge(
            f"{PREFIX}_clusters_managed", "EtcdClusters this operator currently supervises.", registry=self.registry
        )
        self.reconcile_duration_seconds = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Time one reconcile pass (observe, decide, act) took.",
            ["result"],
            buckets=RECONCILE_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.membership_changes_total = Counter(
            f"{PREFIX}_membership_changes",
            "etcd membership changes made (member add, promote, remove, leadership move).",
            ["namespace", "cluster", "kind"],
            registry=self.registry,
        )
        self.cluster_ready_members = self._cluster_gauge("cluster_ready_members",
                                                         "Members that are started, healthy and voting.")
        self.cluster_members = self._cluster_gauge("cluster_members", "Members in the etcd member list.")
        self.cluster_quorum = self._cluster_gauge("cluster_quorum", "1 if the cluster has quorum, else 0.")
        self.cluster_desired_members = self._cluster_gauge("cluster_desired_members",
                                                           "spec.size: the members the cluster should have.")
        self.cluster_phase = Gauge(
            f"{PREFIX}_cluster_phase",
            "1 for the cluster's current status phase (" + ", ".join(CLUSTER_PHASES) + "), 0 for the others.",
            ["namespace", "cluster", "phase"],
            registry=self.registry,
        )
        self.errors_total = Counter(
            f"{PREFIX}_errors",
            "Failures by reason (" + ", ".join(ERROR_REASONS) + ").",
            ["reason"],
            registry=self.registry,
        )
        self.recheck_lag_seconds = Histogram(
            f"{PREFIX}_recheck_lag_seconds",
            "How late a cluster's scheduled re-check started against its schedule (not counting "
            "passes woken by an event).",
            buckets=RECHECK_LAG_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.recheck_lag_max_seconds = Gauge(
            f"{PREFIX}_recheck_lag_max_seconds",
            "The latest any cluster's scheduled re-check started since this process started.",
            registry=self.registry,
        )
        self.is_leader = Gauge(
            f"{PREFIX}_is_leader", "1 while this replica holds the leader lease, else 0.", registry=self.registry
        )
        self._define_maintenance_metrics()
        self._show_zeros()

    def _define_maintenance_metrics(self) -> None:
        """Compaction, defragmentation and alarms (etcd_operator/planning/maintenance.py)."""
        cluster_labels = ["namespace", "cluster"]
        self.defragmentations_total = Counter(
            f"{PREFIX}_defragmentations", "Member defragmentations the operator ran, by result.",
            [*cluster_labels, "result"], registry=self.registry)
        self.defragmentation_duration_seconds = Histogram(
            f"{PREFIX}_defragmentation_duration_seconds", "Time one member's defragmentation took.",
            cluster_labels, buckets=MAINTENANCE_BUCKETS_SECONDS, registry=self.registry)
        self.compactions_total = Counter(
            f"{PREFIX}_compactions", "History compactions the operator ran (NOSPACE recovery), by result.",
            [*cluster_labels, "result"], registry=self.registry)
        self.alarm_recoveries_total = Counter(
            f"{PREFIX}_alarm_recoveries", "Alarms the operator disarmed (result succeeded) or failed to.",
            [*cluster_labels, "alarm", "result"], registry=self.registry)
        self.alarm_recovery_duration_seconds = Histogram(
            f"{PREFIX}_alarm_recovery_duration_seconds",
            "From the alarm first reported in status to its disarming by the operator.",
            [*cluster_labels, "alarm"], buckets=MAINTENANCE_BUCKETS_SECONDS, registry=self.registry)
        self.alarms_active = Gauge(
            f"{PREFIX}_alarms_active", "1 while the cluster has this alarm raised (any member), else 0.",
            [*cluster_labels, "alarm"], registry=self.registry)
        self.member_db_size_bytes = Gauge(
            f"{PREFIX}_member_db_size_bytes", "Size of the member's database file, as it reports it.",
            [*cluster_labels, "member"], registry=self.registry)
        self.member_db_size_in_use_bytes = Gauge(
            f"{PREFIX}_member_db_size_in_use_bytes", "Bytes of the member's database file in use.",
            [*cluster_labels, "member"], registry=self.registry)
        self.backend_quota_bytes = self._cluster_gauge(
            "backend_quota_bytes", "The cluster's backend quota (spec.backendQuota, or etcd's default).")
        self.certificate_not_after_seconds = Gauge(
            f"{PREFIX}_certificate_not_after_seconds",
            "spec.TLS.issued or static: when the certificate in the cluster's Secret ends (Unix time; 0 while it has none "
            "the operator can read). Certificates: " + ", ".join(CERTIFICATE_ROLES) + ".",
            [*cluster_labels, "certificate"], registry=self.registry)

    def _cluster_gauge(self, name: str, documentation: str) -> Gauge:
        """A gauge per cluster (labels namespace, cluster)."""
        return Gauge(f"{PREFIX}_{name}", documentation, ["namespace", "cluster"], registry=self.registry)

    def _show_zeros(self) -> None:
        """Every reason shows as 0 from the start, so rate() and alerts work before the first error."""
        for reason in ERROR_REASONS:
            self.errors_total.labels(reason=reason)
        for result in RECONCILE_RESULTS:
            self.reconcile_duration_seconds.labels(result=result)

    def observe_reconcile(self, seconds: float, *, ok: bool) -> None:
        self.reconcile_duration_seconds.labels(result="ok" if ok else "error").observe(seconds)

    def observe_recheck_lag(self, seconds: float) -> None:
        self.recheck_lag_seconds.observe(seconds)
        if seconds > self._worst_lag_seconds:  # max(): a race loses only a near-equal value
            self._worst_lag_seconds = seconds
            self.recheck_lag_max_seconds.set(seconds)

    def count_membership_change(self, namespace: str, cluster: str, kind: str) -> None:
        if kind not in MEMBERSHIP_CHANGE_KINDS:
            raise ValueError(f"unknown membership change kind {kind!r}; one of {MEMBERSHIP_CHANGE_KINDS}")
        self.membership_changes_total.labels(namespace=namespace, cluster=cluster, kind=kind).inc()

    def observe_defragmentation(self, namespace: str, cluster: str, seconds: float, *, ok: bool) -> None:
        result = "succeeded" if ok else "failed"
        self.defragmentations_total.labels(namespace=namespace, cluster=cluster, result=result).inc()
        if ok:
            self.defragmentation_duration_seconds.labels(namespace=namespace, cluster=cluster).observe(seconds)

    def count_compaction(self, namespace: str, cluster: str, *, ok: bool) -> None:
        self.compactions_total.labels(namespace=namespace, cluster=cluster, result="succeeded" if ok else "failed").inc()

    def observe_alarm_recovery(self, namespace: str, cluster: str, alarm: str, seconds: float | None, *,
                               ok: bool) -> None:
        """An alarm disarmed (`ok`) or not; `seconds` since it was first reported, if known."""
        result = "succeeded" if ok else "failed"
        self.alarm_recoveries_total.labels(namespace=namespace, cluster=cluster, alarm=alarm, result=result).inc()
        if ok and seconds is not None:
            self.alarm_recovery_duration_seconds.labels(namespace=namespace, cluster=cluster, alarm=alarm).observe(seconds)

    def set_storage(self, namespace: str, cluster: str, *, quota_bytes: int, alarms: set[str],
                    members: dict[str, tuple[int, int]]) -> None:
        """Quota, raised alarms and each member's (database size, size in use) as last observed."""
        self.backend_quota_bytes.labels(namespace=namespace, cluster=cluster).set(quota_bytes)
        for result in MAINTENANCE_RESULTS:  # at 0 from the start: increase() then sees the first failure
            self.defragmentations_total.labels(namespace=namespace, cluster=cluster, result=result)
            self.compactions_total.labels(namespace=namespace, cluster=cluster, result=result)
            for kind in ALARM_KINDS:
                self.alarm_recoveries_total.labels(namespace=namespace, cluster=cluster, alarm=kind, result=result)
        for kind in ALARM_KINDS:
            self.alarms_active.labels(namespace=namespace, cluster=cluster, alarm=kind).set(1 if kind in alarms else 0)
        for labels in _series_of(self.member_db_size_bytes, namespace, cluster):
            if labels[2] not in members:
                self.member_db_size_bytes.remove(*labels)
                self.member_db_size_in_use_bytes.remove(*labels)
        for member, (size, in_use) in members.items():
            self.member_db_size_bytes.labels(namespace=namespace, cluster=cluster, member=member).set(size)
            self.member_db_size_in_use_bytes.labels(namespace=namespace, cluster=cluster, member=member).set(in_use)

    def count_error(self, reason: str) -> None:
        if reason not in ERROR_REASONS:
            logger.warning("unknown error reason %r counted as 'other'", reason)
            reason = "other"
        self.errors_total.labels(reason=reason).inc()

    def set_cluster_members(self, namespace: str, cluster: str, *, members: int, ready: int, has_quorum: bool) -> None:
        self.cluster_members.labels(namespace=namespace, cluster=cluster).set(members)
        self.cluster_ready_members.labels(namespace=namespace, cluster=cluster).set(ready)
        self.cluster_quorum.labels(namespace=namespace, cluster=cluster).set(1 if has_quorum else 0)

    def set_cluster_phase(self, namespace: str, cluster: str, phase: str, *, desired_members: int | None) -> None:
        """The phase just written to the cluster's status, and its spec.size (None: spec unreadable)."""
        for known in CLUSTER_PHASES:
            self.cluster_phase.labels(namespace=namespace, cluster=cluster, phase=known).set(1 if known == phase else 0)
        if desired_members is not None:
            self.cluster_desired_members.labels(namespace=namespace, cluster=cluster).set(desired_members)

    def set_certificates(self, namespace: str, cluster: str, not_after: dict[str, float]) -> None:
        """spec.TLS.issued or static: each certificate's end (Unix seconds), 0 for one not readable."""
        for role in CERTIFICATE_ROLES:
            self.certificate_not_after_seconds.labels(namespace=namespace, cluster=cluster, certificate=role).set(
                not_after.get(role, 0.0))

    def forget_cluster(self, namespace: str, cluster: str) -> None:
        """Drop every series of a deleted cluster, so dashboards do not show it forever."""
        for phase in CLUSTER_PHASES:
            try:
                self.cluster_phase.remove(namespace, cluster, phase)
            except KeyError:
                pass
        for gauge in (self.cluster_members, self.cluster_ready_members, self.cluster_quorum,
                      self.cluster_desired_members):
            try:
                gauge.remove(namespace, cluster)
            except KeyError:
                pass
        for kind in MEMBERSHIP_CHANGE_KINDS:
            try:
                self.membership_changes_total.remove(namespace, cluster, kind)
            except KeyError:
                pass
        self._forget_maintenance(namespace, cluster)

    def _forget_maintenance(self, namespace: str, cluster: str) -> None:
        for metric in (self.defragmentations_total, self.defragmentation_duration_seconds, self.compactions_total,
                       self.alarm_recoveries_total, self.alarm_recovery_duration_seconds, self.alarms_active,
                       self.member_db_size_bytes, self.member_db_size_in_use_bytes, self.backend_quota_bytes,
                       self.certificate_not_after_seconds):
            for labels in _series_of(metric, namespace, cluster):
                metric.remove(*labels)


def _series_of(metric: Counter | Gauge | Histogram, namespace: str, cluster: str) -> list[tuple[str, ...]]:
    """The label values of `metric`'s series for one cluster (namespace, cluster first)."""
    return [tuple(labels) for labels in list(metric._metrics) if tuple(labels[:2]) == (namespace, cluster)]
