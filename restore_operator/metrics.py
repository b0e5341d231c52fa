"""The restore operator's Prometheus metrics (prefix `etcd_restore_operator_`)."""
from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from etcd_common.etcd.etcdctl import EtcdctlError
from etcd_common.storage.objects import StorageError
from kube_adapter.errors import KubeError

DURATION_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)
# The errors metric's `reason`: what failed a pass, from this fixed set (never an exception's name).
ERROR_KUBE_API: Final = "kube_api"
ERROR_OBJECT_STORE: Final = "object_store"
ERROR_ETCD_TOOL: Final = "etcd_tool"  # etcdctl / etcdutl
ERROR_CRASH: Final = "crash"  # anything else: a bug
ERROR_KINDS: Final = (ERROR_KUBE_API, ERROR_OBJECT_STORE, ERROR_ETCD_TOOL, ERROR_CRASH)


def error_kind(error: BaseException) -> str:
    """The errors metric's label for `error`: one of ERROR_KINDS."""
    if isinstance(error, KubeError):
        return ERROR_KUBE_API
    if isinstance(error, StorageError):
        return ERROR_OBJECT_STORE
    if isinstance(error, EtcdctlError):
        return ERROR_ETCD_TOOL
    return ERROR_CRASH


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
        self.errors = Counter("etcd_restore_operator_errors_total",
                              f"Failed passes, by reason ({', '.join(ERROR_KINDS)})", ["reason"],
                              registry=self.registry)
        self.is_leader = Gauge("etcd_restore_operator_is_leader", "1 while this replica holds the Lease",
                               registry=self.registry)
        # Both results show as 0 from the start, so increase() and alerts see the first failure.
        for result in ("succeeded", "failed"):
            self.restores.labels(result=result)
        for kind in ERROR_KINDS:
            self.errors.labels(reason=kind)

    def count_restore(self, result: str, seconds: float | None) -> None:
        self.restores.labels(result=result).inc()
        if seconds is not None:
            self.restore_duration.labels(result=result).observe(seconds)
