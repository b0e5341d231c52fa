"""The alert rules in deploy/prometheus/ are valid (`promtool check rules`), behave as their unit
tests say (`promtool test rules`), and name only metrics the operators export."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from backup_operator.metrics import BackupMetrics
from etcd_operator.metrics import OperatorMetrics
from kube_sandbox.binaries import go_tool
from restore_operator.metrics import RestoreMetrics

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULE_FILES = sorted(p for p in RULES_DIR.glob("*-rules.yaml"))
RULE_TESTS = sorted(RULES_DIR.glob("*-rules.test.yaml"))
# Our metric names in a PromQL expression (the operators' prefixes).
OUR_METRIC = re.compile(r"\b(etcd_(?:operator|backup|restore)_[a-z_]+)")


def _promtool() -> str:
    return str(go_tool("promtool"))


def _exported_metric_names() -> set[str]:
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
    exported = _exported_metric_names()
    named = {m for group in yaml.safe_load(rules.read_text())["groups"] for rule in group["rules"]
             for m in OUR_METRIC.findall(rule["expr"])}
    assert named, f"{rules.name} names none of our metrics"
    assert named <= exported, f"not exported: {sorted(named - exported)}"


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
