"""Loggers for lines about one EtcdCluster: JSON lines carry its `namespace/name` as `cluster`."""
from __future__ import annotations

import logging

from operator_runtime.logs import ObjectLoggerAdapter, object_logger

CLUSTER_LOGGER_NAME = "etcd_operator.cluster"


def cluster_logger(namespace: str, name: str, logger: logging.Logger | None = None) -> ObjectLoggerAdapter:
    """A logger for lines about one EtcdCluster (`logger`, or etcd_operator.cluster)."""
    return object_logger(namespace, name, logger or logging.getLogger(CLUSTER_LOGGER_NAME), field="cluster")
