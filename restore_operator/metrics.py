"""The restore operator's Prometheus metrics (prefix `etcd_restore_operator_`)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

DURATION_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)


class RestoreMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.restores = Counter("etcd_restore_operator_restores_total",
                                "Restores finished, by result (succeeded, failed)", ["result"],
                                registry=self.registry)
        self.restore_duration = Histogram(
            "etcd_restore_operator_restore_duration_seconds",
            "From the first pass over an EtcdRestore to its end (restored data served, or failure)",
            ["result"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.verify_duration = Histogram(
            "etcd_restore_operator_snapshot_verify_duration_seconds",
            "Download and verification of a snapshot", buckets=DURATION_BUCKETS, registry=self.registry)
        self.restores_managed = Gauge("etcd_restore_operator_restores_managed",
                                      "EtcdRestores this operator watches", registry=self.registry)
        self.errors = Counter("etcd_restore_operator_errors_total", "Failed passes, by reason", ["reason"],
                              registry=self.registry)
        self.is_leader = Gauge("etcd_restore_operator_is_leader", "1 while this replica holds the Lease",
                               registry=self.registry)
        # Both results show as 0 from the start, so increase() and alerts see the first failure.
        for result in ("succeeded", "failed"):
            self.restores.labels(result=result)

    def count_restore(self, result: str, seconds: float | None) -> None:
        self.restores.labels(result=result).inc()
        if seconds is not None:
            self.restore_duration.labels(result=result).observe(seconds)
