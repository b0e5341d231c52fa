"""The Helm chart (charts/etcd-operator/) lints, renders by default exactly the objects of the plain
manifests in deploy/ plus the recommended labels (one behaviour, two ways to install it), and its
switches do what values.yaml says: namespaced RBAC, operators turned off, the alert rules as a
PrometheusRule, PodMonitors (honorLabels on the operators', one for the etcd members), the usual
chart conventions (pull secrets, ServiceAccounts, pod annotations and labels, priority class,
topology spread, extra env); values.schema.json refuses values of the wrong type; NOTES.txt and the
chart's README say what a user needs."""
from __future__ import annotations

import json
import os
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
OPERATORS = ("etcd-operator", "etcd-backup-operator", "etcd-restore-operator")
# The recommended labels the chart puts on every object and pod; deploy/ carries only
# app.kubernetes.io/name (on Deployments, Services and pods, where selectors use it).
CHART_LABELS = ("app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/component",
                "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "helm.sh/chart")
RECOMMENDED_LABELS = ("app.kubernetes.io/name", *CHART_LABELS)


def helm(*args: str) -> str:
    result = subprocess.run([str(go_tool("helm")), *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(*values: str, release: str = "etcd-operator", namespace: str = "etcd-operator") -> list[dict[str, Any]]:
    args = [f"--set={v}" for v in values]
    out = helm("template", release, str(CHART), f"--namespace={namespace}", *args)
    return [d for d in yaml.safe_load_all(out) if d]


def render_json(release: str = "etcd-operator", namespace: str = "etcd-operator",
                **values: Any) -> list[dict[str, Any]]:
    """Render with structured values, each top-level key as --set-json."""
    args = [f"--set-json={name}={json.dumps(value)}" for name, value in values.items()]
    out = helm("template", release, str(CHART), f"--namespace={namespace}", *args)
    return [d for d in yaml.safe_load_all(out) if d]


def refused(*args: str) -> str:
    """stderr of a `helm template` that must fail."""
    result = subprocess.run([str(go_tool("helm")), "template", "x", str(CHART), *args], capture_output=True, text=True)
    assert result.returncode != 0, f"helm accepted {args}"
    return result.stderr


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def without_recommended_labels(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as deploy/ writes it: no recommended labels on its metadata, none but
    app.kubernetes.io/name on its pod template (selectors are left as they are)."""
    obj = json.loads(json.dumps(obj))
    labels = obj["metadata"].get("labels", {})
    for name in RECOMMENDED_LABELS:
        labels.pop(name, None)
    if not labels:
        obj["metadata"].pop("labels", None)
    template = obj.get("spec", {}).get("template")
    if template is not None:
        for name in CHART_LABELS:
            template["metadata"]["labels"].pop(name, None)
    return obj


def deployment(rendered: list[dict[str, Any]], base: str) -> dict[str, Any]:
    """The Deployment of one operator (its container is named after it)."""
    return next(d for d in rendered if d["kind"] == "Deployment"
                and d["spec"]["template"]["spec"]["containers"][0]["name"] == base)


def pod_spec(rendered: list[dict[str, Any]], base: str) -> dict[str, Any]:
    spec: dict[str, Any] = deployment(rendered, base)["spec"]["template"]["spec"]
    return spec


def test_chart_lints() -> None:
    helm("lint", "--strict", str(CHART))


def test_default_values_render_the_plain_manifests() -> None:
    plain = [d for name in PLAIN_MANIFESTS for d in yaml.safe_load_all((REPO / "deploy" / name).read_text()) if d]
    rendered = render()
    assert sorted(map(key, rendered)) == sorted(map(key, plain))
    by_key = {key(d): without_recommended_labels(d) for d in rendered}
    for obj in plain:
        assert by_key[key(obj)] == without_recommended_labels(obj), f"{key(obj)} differs between the chart and deploy/"


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
    monitors = {d["metadata"]["name"]: d["spec"]["selector"]["matchLabels"] for d in rendered if d["kind"] == "PodMonitor"}
    assert monitors == {**{base: {"app.kubernetes.io/name": base} for base in OPERATORS}, "etcd-members": {"app": "etcd"}}


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
    rendered = {key(d): without_recommended_labels(d) for d in render("metrics.podMonitor.enabled=true")
                if d["kind"] == "PodMonitor"}
    assert sorted(rendered) == sorted(map(key, plain))
    for obj in plain:
        assert rendered[key(obj)] == without_recommended_labels(obj), f"{key(obj)} differs between the chart and deploy/prometheus/podmonitor.yaml"


def test_operator_podmonitors_keep_the_metrics_own_namespace_label() -> None:
    """honorLabels: the operators' `namespace` label is an EtcdCluster's (or EtcdBackup's)
    namespace; prometheus-operator's target label `namespace` (the operator pod's) must not
    replace it."""
    monitors = [d for d in render("metrics.podMonitor.enabled=true", release="blue") if d["kind"] == "PodMonitor"]
    operators = [d for d in monitors if "app.kubernetes.io/name" in d["spec"]["selector"]["matchLabels"]]
    assert len(operators) == len(OPERATORS)
    for monitor in operators:
        assert [e.get("honorLabels") for e in monitor["spec"]["podMetricsEndpoints"]] == [True], key(monitor)


def members_monitors(*values: str, release: str = "etcd-operator", namespace: str = "etcd-operator") -> list[dict[str, Any]]:
    return [d for d in render("metrics.podMonitor.enabled=true", *values, release=release, namespace=namespace)
            if d["kind"] == "PodMonitor" and d["spec"]["selector"]["matchLabels"] == {"app": "etcd"}]


def test_members_podmonitor_scrapes_every_etcd_member_on_its_metrics_port() -> None:
    """What deploy/prometheus/scrape-config.yaml's etcd-members job keeps: pods labelled app=etcd
    (etcd_operator/manifests.py), port `metrics`, every namespace; etcd_cluster as a target label."""
    (monitor,) = members_monitors(release="blue")
    assert monitor["metadata"]["name"] == "blue-etcd-members"
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    assert monitor["spec"]["podTargetLabels"] == ["etcd_cluster"]
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    assert members_monitors("metrics.podMonitor.interval=10s")[0]["spec"]["podMetricsEndpoints"][0]["interval"] == "10s"


def test_members_podmonitor_follows_the_watched_namespaces_and_can_be_turned_off() -> None:
    (scoped,) = members_monitors("rbac.scope=namespace", namespace="team-a")
    assert scoped["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}
    (watching,) = members_monitors("rbac.scope=namespace", "watchNamespace=team-b", namespace="team-a")
    assert watching["spec"]["namespaceSelector"] == {"matchNames": ["team-b"]}
    assert not members_monitors("metrics.podMonitor.members.enabled=false")
    assert not members_monitors("etcdOperator.enabled=false")
    assert not [d for d in render("metrics.podMonitor.members.enabled=true") if d["kind"] == "PodMonitor"]


@pytest.mark.parametrize("crd", sorted(p.name for p in (REPO / "crds").glob("*.yaml")))
def test_chart_ships_the_crds(crd: str) -> None:
    assert (CHART / "crds" / crd).read_text() == (REPO / "crds" / crd).read_text()


def test_namespaced_scope_renders_deploy_rbac_namespaced() -> None:
    """`rbac.scope=namespace` for the etcd operator alone is deploy/rbac-namespaced.yaml."""
    plain = [d for d in yaml.safe_load_all((REPO / "deploy" / "rbac-namespaced.yaml").read_text()) if d]
    rendered = {key(d): without_recommended_labels(d) for d in render("rbac.scope=namespace", "backupOperator.enabled=false",
                                          "restoreOperator.enabled=false") if d["kind"] != "Deployment"
                and d["kind"] != "Service"}
    assert sorted(rendered) == sorted(map(key, plain))
    for obj in plain:
        assert rendered[key(obj)] == without_recommended_labels(obj), (
            f"{key(obj)} differs between the chart and deploy/rbac-namespaced.yaml")


# ---------------------------------------------------------------------------------------------
# Chart conventions


@pytest.mark.parametrize("release", ["etcd-operator", "blue"])
def test_every_object_carries_the_recommended_labels_and_selectors_stay_as_in_deploy(release: str) -> None:
    rendered = render("metrics.podMonitor.enabled=true", "metrics.prometheusRule.enabled=true", release=release)
    for obj in rendered:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == release, key(obj)
        assert labels["app.kubernetes.io/managed-by"] == "Helm" and labels["app.kubernetes.io/part-of"] == "etcd-operator"
        assert labels["app.kubernetes.io/version"] == "0.1.0" and labels["helm.sh/chart"] == "etcd-operator-0.1.0"
        assert labels["app.kubernetes.io/name"] in OPERATORS, key(obj)
    for base in OPERATORS:
        spec = deployment(rendered, base)["spec"]
        assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/name": base}}
        pod_labels = spec["template"]["metadata"]["labels"]
        assert {name: pod_labels[name] for name in RECOMMENDED_LABELS} == {
            name: deployment(rendered, base)["metadata"]["labels"][name] for name in RECOMMENDED_LABELS}


@pytest.mark.parametrize("args, complaint", [
    (["--set=etcdOperator.replicas=two"], "/etcdOperator/replicas"),
    (["--set=serviceAccount.create=maybe"], "/serviceAccount/create"),
    (["--set-json=imagePullSecrets=\"regcred\""], "/imagePullSecrets"),
    (["--set-json=extraEnv=[{\"value\":\"x\"}]"], "/extraEnv/0"),
    (["--set-json=podLabels={\"team\":1}"], "/podLabels/team"),
    (["--set=image.pullPolicy=Sometimes"], "/image/pullPolicy"),
    (["--set=backupOperator.replicaz=2"], "replicaz"),
])
def test_values_of_the_wrong_type_are_refused_by_the_schema(args: list[str], complaint: str) -> None:
    stderr = refused(*args)
    assert "values don't meet the specifications of the schema" in stderr and complaint in stderr, stderr


def test_schema_describes_every_value_of_values_yaml() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        if not isinstance(value, dict) or "properties" not in node:
            return
        for name, child in value.items():
            assert name in node["properties"], f"{path}{name} is not in values.schema.json"
            walk(child, node["properties"][name], f"{path}{name}.")
    walk(values, schema, "")


def test_image_pull_secrets_priority_class_and_extra_env_reach_every_operator() -> None:
    rendered = render_json(imagePullSecrets=[{"name": "regcred"}], priorityClassName="etcd-critical",
                           extraEnv=[{"name": "AWS_REGION", "value": "eu-west-1"}])
    for base in OPERATORS:
        spec = pod_spec(rendered, base)
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert spec["priorityClassName"] == "etcd-critical"
        assert spec["containers"][0]["env"][-1] == {"name": "AWS_REGION", "value": "eu-west-1"}
        assert [e["name"] for e in spec["containers"][0]["env"]][:3] == ["POD_NAME", "POD_NAMESPACE", "POD_IP"]
    for base in OPERATORS:
        assert "imagePullSecrets" not in pod_spec(render(), base) and "priorityClassName" not in pod_spec(render(), base)


def test_pod_annotations_and_labels_join_the_charts_own() -> None:
    rendered = render_json(podAnnotations={"team": "storage", "prometheus.io/path": "/other"},
                           podLabels={"team": "storage", "app.kubernetes.io/name": "not-the-selector"})
    for base in OPERATORS:
        template = deployment(rendered, base)["spec"]["template"]["metadata"]
        assert template["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "8080",
                                           "prometheus.io/path": "/other", "team": "storage"}
        assert template["labels"]["team"] == "storage"
        assert template["labels"]["app.kubernetes.io/name"] == base  # the selector's label is the chart's
    quiet = render_json(podAnnotations={"team": "storage"}, metrics={"annotations": False})
    assert deployment(quiet, "etcd-operator")["spec"]["template"]["metadata"]["annotations"] == {"team": "storage"}


def test_service_accounts_take_names_and_workload_identity_annotations() -> None:
    rendered = render_json(serviceAccount={"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/etcd"}},
                           backupOperator={"serviceAccount": {"name": "backups",
                                                              "annotations": {"iam.gke.io/gcp-service-account": "b@p"}}})
    accounts = {d["metadata"]["name"]: d["metadata"].get("annotations", {}) for d in rendered if d["kind"] == "ServiceAccount"}
    assert accounts == {
        "etcd-operator": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/etcd"},
        "backups": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/etcd", "iam.gke.io/gcp-service-account": "b@p"},
        "etcd-restore-operator": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/etcd"},
    }
    assert pod_spec(rendered, "etcd-backup-operator")["serviceAccountName"] == "backups"
    bindings = [d for d in rendered if d["kind"].endswith("Binding") and "backup" in d["metadata"]["name"]]
    assert len(bindings) == 2 and all(b["subjects"][0]["name"] == "backups" for b in bindings)


def test_service_accounts_made_elsewhere_are_used_not_created() -> None:
    rendered = render_json(serviceAccount={"create": False}, etcdOperator={"serviceAccount": {"name": "mine"}})
    assert not [d for d in rendered if d["kind"] == "ServiceAccount"]
    assert pod_spec(rendered, "etcd-operator")["serviceAccountName"] == "mine"
    assert pod_spec(rendered, "etcd-backup-operator")["serviceAccountName"] == "etcd-backup-operator"
    assert {d["kind"] for d in rendered} >= {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    nothing = render_json(serviceAccount={"create": False}, rbac={"create": False})
    assert {d["kind"] for d in nothing} == {"Deployment", "Service"}


def test_topology_spread_constraints_default_to_the_operators_own_pods() -> None:
    zone = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
    host = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"tier": "etcd"}}}
    rendered = render_json(restoreOperator={"replicas": 2, "topologySpreadConstraints": [zone, host]})
    assert pod_spec(rendered, "etcd-restore-operator")["topologySpreadConstraints"] == [
        {**zone, "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "etcd-restore-operator"}}}, host]
    assert "topologySpreadConstraints" not in pod_spec(rendered, "etcd-operator")


def install_notes(*values: str) -> str:
    """NOTES.txt as `helm install` prints it (a client-side dry run: no cluster needed)."""
    env = {**os.environ, "KUBECONFIG": os.devnull}
    result = subprocess.run([str(go_tool("helm")), "install", "demo", str(CHART), "--namespace=ops", "--dry-run=client",
                             *(f"--set={v}" for v in values)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout[result.stdout.index("NOTES:"):]


def test_notes_say_how_to_check_run_a_cluster_and_upgrade_the_crds() -> None:
    notes = install_notes()
    assert "etcd-operator, etcd-backup-operator, etcd-restore-operator" in notes and "every namespace" in notes
    assert "kubectl -n ops get deployments -l app.kubernetes.io/instance=demo" in notes
    assert "kubectl -n ops apply -f examples/example-etcd-cluster.yaml" in notes
    assert "kubectl apply -f crds/" in notes and "never updates them" in notes
    assert "is not published" in notes  # the default image
    scoped = install_notes("rbac.scope=namespace", "watchNamespace=team-a", "backupOperator.enabled=false",
                           "image.repository=registry.example.com/etcd-operator-py")
    assert "watching namespace team-a" in scoped and "etcd-backup-operator" not in scoped
    assert "kubectl -n team-a get etcd example-etcd-cluster" in scoped and "is not published" not in scoped


def test_chart_readme_lists_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def leaves(value: Any, path: str) -> list[str]:
        if isinstance(value, dict) and value and not path.endswith(("Context", "resources")):
            return [leaf for name, child in value.items() for leaf in leaves(child, f"{path}.{name}" if path else name)]
        return [path]
    missing = [leaf for leaf in leaves(values, "") if f"`{leaf}`" not in readme]
    assert not missing, f"charts/etcd-operator/README.md does not list {missing}"


def test_the_backup_limit_is_a_value() -> None:
    container = pod_spec(render("backupOperator.maxConcurrentBackups=5"), "etcd-backup-operator")["containers"][0]
    assert {"name": "BACKUP_MAX_CONCURRENT_BACKUPS", "value": "5"} in container["env"]


def test_pod_identity_is_off_by_default_and_a_value_turns_on_the_backup_operators_flag() -> None:
    flag = {"name": "BACKUP_ALLOW_POD_IDENTITY", "value": "true"}
    default = render()
    assert all(flag not in pod_spec(default, base)["containers"][0].get("env", []) for base in OPERATORS)
    rendered = render_json(podIdentity={"enabled": True},
                           backupOperator={"serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:r"}}})
    assert flag in pod_spec(rendered, "etcd-backup-operator")["containers"][0]["env"]
    # Only the backup operator lends its identity: restores need a secret (the seed pod borrows none).
    assert flag not in pod_spec(rendered, "etcd-restore-operator")["containers"][0]["env"]
    accounts = {d["metadata"]["name"]: d["metadata"].get("annotations", {}) for d in rendered if d["kind"] == "ServiceAccount"}
    assert accounts["etcd-backup-operator"] == {"eks.amazonaws.com/role-arn": "arn:r"}
    assert "podIdentity" in refused("--set-json=podIdentity={\"enabled\":\"yes\"}")


def test_the_work_directory_size_limit_reaches_the_backup_operator_as_its_volumes() -> None:
    spec = pod_spec(render("backupOperator.workDirSizeLimit=3Gi"), "etcd-backup-operator")
    work = next(v for v in spec["volumes"] if v["name"] == "work")
    assert work["emptyDir"]["sizeLimit"] == "3Gi"
    assert {"name": "BACKUP_WORK_DIR_SIZE_LIMIT", "value": "3Gi"} in spec["containers"][0]["env"]


@pytest.mark.parametrize("values, image", [
    ((), "etcd-operator-py:0.1.0"),
    (("image.repository=registry.example.com/team/etcd-operator-py", "image.tag=1.2.3"),
     "registry.example.com/team/etcd-operator-py:1.2.3"),
])
def test_the_operators_own_image_is_passed_to_the_operators_that_start_it(values: tuple[str, ...],
                                                                          image: str) -> None:
    """The restore and etcd operators trust their own image's repository (the fetch image), relocated or not."""
    rendered = render(*values)
    for base in ("etcd-operator", "etcd-restore-operator"):
        container = pod_spec(rendered, base)["containers"][0]
        assert container["image"] == image
        assert {"name": "OPERATOR_IMAGE", "value": image} in container["env"]


def _secret_rules(rendered: list[dict[str, Any]], kind: str, name: str) -> list[list[str]]:
    role = next(d for d in rendered if d["kind"] == kind and d["metadata"]["name"] == name)
    return [r["verbs"] for r in role["rules"] if "secrets" in r["resources"]]


def test_secret_writes_are_granted_apart_and_can_be_narrowed_to_named_namespaces() -> None:
    """The etcd operator's Secret create/patch and the restore operator's patch are never in the
    ClusterRoles that read everything; bound cluster-wide by default, or in the namespaces named."""
    default = render()
    assert _secret_rules(default, "ClusterRole", "etcd-operator") == [["get"]]
    assert _secret_rules(default, "ClusterRole", "etcd-restore-operator") == [["get"]]
    assert _secret_rules(default, "ClusterRole", "etcd-operator-secret-writer") == [["create", "patch"]]
    assert _secret_rules(default, "ClusterRole", "etcd-restore-operator-secret-writer") == [["patch"]]
    assert {d["metadata"]["name"] for d in default if d["kind"] == "ClusterRoleBinding"} >= {
        "etcd-operator-secret-writer", "etcd-restore-operator-secret-writer"}
    narrowed = render_json(rbac={"create": True, "scope": "cluster", "secretWriteNamespaces": ["team-a", "team-b"]})
    bindings = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in narrowed
                if d["kind"] in ("RoleBinding", "ClusterRoleBinding") and "secret-writer" in d["metadata"]["name"]}
    assert sorted(bindings) == sorted(("RoleBinding", ns, name) for name in ("etcd-operator-secret-writer",
                                                                             "etcd-restore-operator-secret-writer")
                                      for ns in ("team-a", "team-b"))
    binding = bindings[("RoleBinding", "team-a", "etcd-restore-operator-secret-writer")]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "etcd-restore-operator-secret-writer"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "etcd-restore-operator",
                                    "namespace": "etcd-operator"}]
    # Namespace scope: the Roles hold the writes, nothing cluster-wide.
    namespaced = render("rbac.scope=namespace")
    assert _secret_rules(namespaced, "Role", "etcd-operator") == [["get", "create", "patch"]]
    assert _secret_rules(namespaced, "Role", "etcd-restore-operator") == [["get", "patch"]]
    assert not [d for d in namespaced if "secret-writer" in d["metadata"]["name"]]


def test_the_backup_operator_may_read_services_to_resolve_etcd_endpoints() -> None:
    rules = next(d for d in render() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "etcd-backup-operator")
    assert {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]} in rules["rules"]
