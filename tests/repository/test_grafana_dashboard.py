"""The Grafana dashboard (deploy/grafana/) is valid JSON, every query names only metrics the
operators export or etcd serves, each operator and etcd itself have panels over the metrics the
alert rules and docs/monitoring.md name, and every query is valid PromQL (promtool)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kube_sandbox.binaries import go_tool
from tests.repository.metric_names import ETCD_METRIC, OUR_METRIC, RULES_DIR, alert_rules, readable_metric_names

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "etcd-operators.json"


def _dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def _queries() -> list[str]:
    dashboard = _dashboard()
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return queries


def test_every_query_names_exported_metrics_only_and_every_operator_has_a_panel() -> None:
    readable = readable_metric_names()
    named = {m for q in _queries() for m in OUR_METRIC.findall(q) + ETCD_METRIC.findall(q)}
    assert named <= readable, f"not exported: {sorted(named - readable)}"
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


def test_namespace_and_cluster_variables_filter_the_cluster_panels() -> None:
    variables = {v["name"] for v in _dashboard()["templating"]["list"]}
    assert {"datasource", "namespace", "cluster"} <= variables
    for query in _queries():
        if ETCD_METRIC.search(query):  # etcd's series: the scrape target's labels
            assert 'namespace=~"$namespace"' in query and 'etcd_cluster=~"$cluster"' in query, query


def test_etcd_panels_show_what_the_etcd_alerts_and_the_runbooks_read() -> None:
    """Each etcd metric of etcd-rules.yaml (and the database's in-use size, for fragmentation) has a
    panel, and every etcd metric a panel reads is one docs/monitoring.md explains."""
    queries = " ".join(_queries())
    panel_etcd = set(ETCD_METRIC.findall(queries))
    alerting = {m for rule in alert_rules(RULES_DIR / "etcd-rules.yaml") for m in ETCD_METRIC.findall(rule["expr"])}
    # Proposals fail in bursts an hourly alert catches; a panel adds nothing to the leader changes.
    assert alerting - {"etcd_server_has_leader", "etcd_server_proposals_failed_total"} <= panel_etcd
    assert "etcd_mvcc_db_total_size_in_use_in_bytes" in panel_etcd
    docs = (REPO / "docs" / "monitoring.md").read_text()
    undocumented = {m for m in panel_etcd if re.sub(r"_bucket$", "", m) not in docs}
    assert not undocumented, f"docs/monitoring.md does not name {sorted(undocumented)}"
    maintenance = {"etcd_operator_defragmentations_total", "etcd_operator_alarm_recoveries_total",
                   "etcd_operator_alarms_active"}
    assert maintenance <= set(OUR_METRIC.findall(queries))
