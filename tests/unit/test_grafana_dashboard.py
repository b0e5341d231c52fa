"""The Grafana dashboard (deploy/grafana/) is valid JSON, every query names only metrics the
operators export, each operator has a panel, and every query is valid PromQL (promtool)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kube_sandbox.binaries import go_tool
from tests.unit.test_prometheus_rules import OUR_METRIC, _exported_metric_names

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "etcd-operators.json"


def _queries() -> list[str]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return queries


def test_every_query_names_exported_metrics_only_and_every_operator_has_a_panel() -> None:
    exported = _exported_metric_names()
    named = {m for q in _queries() for m in OUR_METRIC.findall(q)}
    assert named <= exported, f"not exported: {sorted(named - exported)}"
    for prefix in ("etcd_operator_", "etcd_backup_", "etcd_restore_operator_"):
        assert any(m.startswith(prefix) for m in named), prefix


@pytest.mark.parametrize("query", [q for q in _queries() if not q.startswith("label_values")])
def test_every_panel_query_parses_as_promql(query: str, tmp_path: Path) -> None:
    # promtool checks expressions inside a rule file; Grafana's $variables become a regex match.
    expr = re.sub(r"\$\w+", ".*", query)
    rules = tmp_path / "dashboard.rules.yaml"
    rules.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": [{"record": "dashboard:query", "expr": expr}]}]}))
    result = subprocess.run([str(go_tool("promtool")), "check", "rules", str(rules)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
