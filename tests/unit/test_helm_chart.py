"""The Helm chart (charts/etcd-operator/) lints, renders by default exactly the objects of the plain
manifests in deploy/ (one behaviour, two ways to install it), and its switches do what values.yaml
says: namespaced RBAC, operators turned off, the alert rules as a PrometheusRule."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_sandbox.binaries import go_tool

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "etcd-operator"
# The plain manifests the default values must reproduce (namespace.yaml is the user's, not the chart's).
PLAIN_MANIFESTS = ("rbac.yaml", "operator.yaml", "backup-operator.yaml", "restore-operator.yaml")


def helm(*args: str) -> str:
    result = subprocess.run([str(go_tool("helm")), *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(*values: str, release: str = "etcd-operator", namespace: str = "etcd-operator") -> list[dict[str, Any]]:
    args = [f"--set={v}" for v in values]
    out = helm("template", release, str(CHART), f"--namespace={namespace}", *args)
    return [d for d in yaml.safe_load_all(out) if d]


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def test_chart_lints() -> None:
    helm("lint", "--strict", str(CHART))


def test_default_values_render_the_plain_manifests() -> None:
    plain = [d for name in PLAIN_MANIFESTS for d in yaml.safe_load_all((REPO / "deploy" / name).read_text()) if d]
    rendered = render()
    assert sorted(map(key, rendered)) == sorted(map(key, plain))
    by_key = {key(d): d for d in rendered}
    for obj in plain:
        assert by_key[key(obj)] == obj, f"{key(obj)} differs between the chart and deploy/"


def test_namespaced_rbac_grants_nothing_cluster_wide_and_watches_one_namespace() -> None:
    rendered = render("rbac.scope=namespace", "watchNamespace=team-a", namespace="ops")
    kinds = {d["kind"] for d in rendered}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}
    role = next(d for d in rendered if d["kind"] == "Role" and "leader" not in d["metadata"]["name"])
    assert role["metadata"]["namespace"] == "team-a"
    deployment = next(d for d in rendered if d["kind"] == "Deployment")
    assert deployment["metadata"]["namespace"] == "ops"
    assert "--namespace=team-a" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_release_name_prefixes_every_name_so_releases_do_not_collide() -> None:
    names = {d["metadata"]["name"] for d in render(release="blue")}
    assert names and all(n.startswith("blue-etcd-") for n in names), names
    assert {"blue-etcd-operator", "blue-etcd-backup-operator", "blue-etcd-restore-operator"} <= names


def test_an_unknown_rbac_scope_is_refused() -> None:
    result = subprocess.run([str(go_tool("helm")), "template", "x", str(CHART), "--set=rbac.scope=everything"],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "rbac.scope must be cluster or namespace" in result.stderr


def test_operators_can_be_turned_off() -> None:
    def deployments(*values: str) -> set[str]:
        return {d["metadata"]["name"] for d in render(*values) if d["kind"] == "Deployment"}
    assert deployments() == {"etcd-operator", "etcd-backup-operator", "etcd-restore-operator"}
    assert deployments("backupOperator.enabled=false", "restoreOperator.enabled=false") == {"etcd-operator"}
    assert not deployments("etcdOperator.enabled=false", "backupOperator.enabled=false", "restoreOperator.enabled=false")


def test_prometheus_rule_carries_the_shipped_alert_rules() -> None:
    rendered = render("metrics.prometheusRule.enabled=true", "metrics.podMonitor.enabled=true")
    rule = next(d for d in rendered if d["kind"] == "PrometheusRule")
    shipped = [g for path in sorted((REPO / "deploy" / "prometheus").glob("*-rules.yaml"))
               for g in yaml.safe_load(path.read_text())["groups"]]
    assert rule["spec"]["groups"] == shipped
    monitors = {d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] for d in rendered if d["kind"] == "PodMonitor"}
    assert monitors == {"etcd-operator", "etcd-backup-operator", "etcd-restore-operator"}


@pytest.mark.parametrize("section, alert", [("etcdOperator", "EtcdOperatorDown"),
                                            ("backupOperator", "EtcdBackupOperatorDown"),
                                            ("restoreOperator", "EtcdRestoreOperatorDown")])
def test_prometheus_rule_leaves_out_the_down_alert_of_an_operator_turned_off(section: str, alert: str) -> None:
    def alerts(*values: str) -> set[str]:
        rule = next(d for d in render("metrics.prometheusRule.enabled=true", *values) if d["kind"] == "PrometheusRule")
        return {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    everything = alerts()
    assert alert in everything
    assert alerts(f"{section}.enabled=false") == everything - {alert}


def test_podmonitor_example_is_what_the_chart_renders() -> None:
    """deploy/prometheus/podmonitor.yaml: the chart's PodMonitors of a release named etcd-operator."""
    plain = [d for d in yaml.safe_load_all((REPO / "deploy" / "prometheus" / "podmonitor.yaml").read_text()) if d]
    rendered = {key(d): d for d in render("metrics.podMonitor.enabled=true") if d["kind"] == "PodMonitor"}
    assert sorted(rendered) == sorted(map(key, plain))
    for obj in plain:
        assert rendered[key(obj)] == obj, f"{key(obj)} differs between the chart and deploy/prometheus/podmonitor.yaml"


@pytest.mark.parametrize("crd", sorted(p.name for p in (REPO / "crds").glob("*.yaml")))
def test_chart_ships_the_crds(crd: str) -> None:
    assert (CHART / "crds" / crd).read_text() == (REPO / "crds" / crd).read_text()


def test_namespaced_scope_renders_deploy_rbac_namespaced() -> None:
    """`rbac.scope=namespace` for the etcd operator alone is deploy/rbac-namespaced.yaml."""
    plain = [d for d in yaml.safe_load_all((REPO / "deploy" / "rbac-namespaced.yaml").read_text()) if d]
    rendered = {key(d): d for d in render("rbac.scope=namespace", "backupOperator.enabled=false",
                                          "restoreOperator.enabled=false") if d["kind"] != "Deployment"
                and d["kind"] != "Service"}
    assert sorted(rendered) == sorted(map(key, plain))
    for obj in plain:
        assert rendered[key(obj)] == obj, f"{key(obj)} differs between the chart and deploy/rbac-namespaced.yaml"
