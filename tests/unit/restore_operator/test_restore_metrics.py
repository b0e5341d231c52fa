"""The restore operator's errors metric is labelled from a fixed set of error kinds, never by an
exception's class name (an open set: every new exception would make a new series)."""
from __future__ import annotations

import pytest

from etcd_common.etcd.etcdctl import EtcdctlError
from etcd_common.storage.objects import StorageError
from kube_adapter.errors import Conflict, KubeError
from restore_operator.metrics import ERROR_KINDS, RestoreMetrics, error_kind


@pytest.mark.parametrize("error, kind", [
    (KubeError("apiserver down"), "kube_api"),
    (Conflict("changed meanwhile"), "kube_api"),
    (StorageError("S3 down"), "object_store"),
    (EtcdctlError("etcdutl failed"), "etcd_tool"),
    (KeyError("a bug"), "crash"),
    (AssertionError("another bug"), "crash"),
])
def test_each_error_has_a_kind_of_the_fixed_set(error: Exception, kind: str) -> None:
    assert error_kind(error) == kind and kind in ERROR_KINDS


def test_the_errors_metric_has_a_series_per_kind_and_no_other() -> None:
    """Broken by labelling with type(error).__name__: KeyError would be a series of its own."""
    metrics = RestoreMetrics()
    metrics.errors.labels(reason=error_kind(KeyError("x"))).inc()
    metrics.errors.labels(reason=error_kind(StorageError("x"))).inc()
    reasons = {sample.labels["reason"] for metric in metrics.registry.collect()
               if metric.name == "etcd_restore_operator_errors" for sample in metric.samples}
    assert reasons == set(ERROR_KINDS)
