"""The alert rules in deploy/prometheus/ are valid (`promtool check rules`), behave as their unit
tests say (`promtool test rules`), name only metrics the operators export or etcd serves, and
carry a runbook_url to their section of docs/monitoring.md."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from backup_operator.metrics import BackupMetrics
from etcd_operator.metrics import OperatorMetrics
from kube_sandbox.binaries import go_tool
from restore_operator.metrics import RestoreMetrics
from tests.repository.metric_names import (
    ETCD_HISTOGRAMS,
    ETCD_METRIC,
    ETCD_METRICS,
    OUR_METRIC,
    RULES_DIR,
    alert_rules,
    readable_metric_names,
)

RULE_FILES = sorted(p for p in RULES_DIR.glob("*-rules.yaml"))
RULE_TESTS = sorted(RULES_DIR.glob("*-rules*.test.yaml"))
RUNBOOK_PAGE = "docs/monitoring.md"


def _promtool() -> str:
    return str(go_tool("promtool"))


def test_rule_files_and_their_tests_exist() -> None:
    assert RULE_FILES and RULE_TESTS
    for rules in RULE_FILES:
        assert rules.with_name(rules.name.replace(".yaml", ".test.yaml")) in RULE_TESTS, f"{rules.name} has no tests"


@pytest.mark.parametrize("rules", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(rules: Path) -> None:
    result = subprocess.run([_promtool(), "check", "rules", str(rules)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("tests", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_test_rules(tests: Path) -> None:
    result = subprocess.run([_promtool(), "test", "rules", tests.name], capture_output=True, text=True, cwd=RULES_DIR)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("rules", RULE_FILES, ids=lambda p: p.name)
def test_every_metric_in_an_alert_is_exported(rules: Path) -> None:
    readable = readable_metric_names()
    named = {m for rule in alert_rules(rules) for m in OUR_METRIC.findall(rule["expr"]) + ETCD_METRIC.findall(rule["expr"])}
    assert named, f"{rules.name} names none of our metrics"
    assert named <= readable, f"not exported: {sorted(named - readable)}"


def test_etcd_rules_read_etcd_and_the_operators_maintenance_metrics() -> None:
    exprs = " ".join(rule["expr"] for rule in alert_rules(RULES_DIR / "etcd-rules.yaml"))
    assert set(ETCD_METRIC.findall(exprs)) == ETCD_METRICS - {
        "etcd_mvcc_db_total_size_in_use_in_bytes", *(f"{name}{suffix}" for name in ETCD_HISTOGRAMS
                                                     for suffix in ("_sum", "_count"))}
    assert {"etcd_operator_alarms_active", "etcd_operator_defragmentations_total",
            "etcd_operator_alarm_recoveries_total"} <= set(OUR_METRIC.findall(exprs))


@pytest.mark.parametrize("rules", RULE_FILES, ids=lambda p: p.name)
def test_every_alert_has_a_runbook_url_to_its_section(rules: Path) -> None:
    """runbook_url is `docs/monitoring.md#<anchor of the alert's heading>` (that every alert has its
    `### <alert>` heading there is checked by tests/repository/test_docs.py)."""
    for rule in alert_rules(rules):
        if "alert" in rule:
            assert rule["annotations"].get("runbook_url") == f"{RUNBOOK_PAGE}#{rule['alert'].lower()}", rule["alert"]


@pytest.mark.parametrize("rules", RULE_FILES, ids=lambda p: p.name)
def test_every_alert_has_a_severity_and_names_where(rules: Path) -> None:
    for rule in alert_rules(rules):
        if "alert" not in rule:
            continue
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]


def test_every_operator_has_a_down_alert() -> None:
    """Each operator's `*_is_leader` gauge has an absent()-alert: `max(...) == 0` alone never fires
    when no replica is scraped at all."""
    leader_gauges = {family.name for registry in (OperatorMetrics().registry, BackupMetrics().registry,
                                                   RestoreMetrics().registry)
                     for family in registry.collect() if family.name.endswith("_is_leader")}
    exprs = {rule["expr"].strip() for rules in RULE_FILES for group in yaml.safe_load(rules.read_text())["groups"]
             for rule in group["rules"]}
    assert len(leader_gauges) == 3, leader_gauges
    missing = sorted(g for g in leader_gauges if f"absent({g})" not in exprs)
    assert not missing, f"no absent() alert on {missing}"
