"""The metric names the alert rules (deploy/prometheus/) and the Grafana dashboard (deploy/grafana/)
may read: what the operators export and what etcd serves, and how to find them in PromQL."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from backup_operator.metrics import BackupMetrics
from etcd_operator.metrics import OperatorMetrics
from restore_operator.metrics import RestoreMetrics

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
# Our metric names in a PromQL expression (the operators' prefixes).
OUR_METRIC = re.compile(r"\b(etcd_(?:operator|backup|restore)_[a-z_]+)")
# etcd's own metric names (its subsystems' prefixes).
ETCD_METRIC = re.compile(r"\b(etcd_(?:server|mvcc|disk|network|debugging|snap|cluster)_[a-z_]+)")
# The etcd metrics the rules and the dashboard read, named as both etcd 3.5.35 and 3.6.16 serve them
# on --listen-metrics-urls (server/etcdserver/metrics.go, storage/metrics.go, mvcc/metrics.go,
# wal/metrics.go, backend/metrics.go of go.etcd.io/etcd/server/v3): a misspelt name fails here.
ETCD_HISTOGRAMS = ("etcd_disk_wal_fsync_duration_seconds", "etcd_disk_backend_commit_duration_seconds")
ETCD_METRICS = frozenset({
    "etcd_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_use_in_bytes", "etcd_server_quota_backend_bytes",
    "etcd_server_has_leader", "etcd_server_leader_changes_seen_total", "etcd_server_proposals_failed_total",
    *(f"{name}{suffix}" for name in ETCD_HISTOGRAMS for suffix in ("_bucket", "_sum", "_count")),
})


def exported_metric_names() -> set[str]:
    """Every sample name the operators can export (counters as `_total`, histograms' series)."""
    names: set[str] = set()
    for registry in (OperatorMetrics().registry, BackupMetrics().registry, RestoreMetrics().registry):
        for family in registry.collect():
            names.add(family.name)
            if family.type == "counter":
                names.add(f"{family.name}_total")
            if family.type == "histogram":
                names.update(f"{family.name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return names


def readable_metric_names() -> set[str]:
    """What a query may name: our exported metrics and etcd's."""
    return exported_metric_names() | ETCD_METRICS


def alert_rules(path: Path) -> list[dict[str, Any]]:
    """Every rule (alerting and recording) of one rule file."""
    return [rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]
