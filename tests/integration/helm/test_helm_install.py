"""The Helm chart against the sandbox's API server: its rendered output passes a server-side dry
run, `helm install` runs the three operators, the CoreOS example cluster reaches Running through it, and
`helm uninstall` leaves nothing of the release behind but the CRDs (which Helm never deletes). The
operators run from the image `make image` builds (image.repository/tag at localhost/etcd-operator-py,
which the sandbox runs in runc): what is tested is what ships."""
from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from kube_sandbox.binaries import go_tool
from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters
from tests.integration.etcd_operator.operator_deployment import forbidden_lines, operator_stopped
from tests.integration.packaging.built_image import local_image_reference, runc_evidence

CHART = CHECKOUT_DIR / "charts" / "etcd-operator"
EXAMPLE = CHECKOUT_DIR / "examples" / "example-etcd-cluster.yaml"
OPERATORS = ("etcd-operator", "etcd-backup-operator", "etcd-restore-operator")


def helm(sandbox: Sandbox, *args: str, timeout: float = 300) -> str:
    result = subprocess.run([str(go_tool("helm")), f"--kubeconfig={sandbox.config.kubeconfig}", *args],
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"helm {' '.join(args)}: {result.stderr}"
    return result.stdout


def built_image_values() -> list[str]:
    """The chart's image values naming the built image (built once per run)."""
    repository, tag = local_image_reference()
    return [f"--set=image.repository={repository}", f"--set=image.tag={tag}"]


def assert_operators_run_in_runc(sandbox: Sandbox, release: str, namespace: str) -> None:
    """Each operator's pod runs the built image in a real container (runc), not the checkout."""
    core = k8s.CoreV1Api(sandbox.api_client())
    repository, tag = local_image_reference()
    for base in OPERATORS:
        pods = core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/name={base}").items
        assert pods, f"no pod of {release}-{base}"
        for pod in pods:
            container = pod.spec.containers[0]
            status = (pod.status.container_statuses or [None])[0]
            assert container.image == f"{repository}:{tag}", container.image
            assert status is not None and status.container_id.startswith("runc://"), status
            pid = sandbox.faults.pod_pid(namespace, pod.metadata.name, container.name)
            assert pid is not None and runc_evidence(pid) == [], (pod.metadata.name, pid and runc_evidence(pid))


def release_objects(sandbox: Sandbox, release: str, namespace: str) -> list[str]:
    """What of the release exists: its namespaced objects (the operators' Leases, which they
    create at run time, included) and the cluster-wide RBAC named after it."""
    api = sandbox.api_client()
    core, apps, rbac = k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.RbacAuthorizationV1Api(api)
    coordination = k8s.CoordinationV1Api(api)
    found = [f"deployment/{d.metadata.name}" for d in apps.list_namespaced_deployment(namespace).items]
    found += [f"pod/{p.metadata.name}" for p in core.list_namespaced_pod(namespace).items]
    found += [f"service/{s.metadata.name}" for s in core.list_namespaced_service(namespace).items]
    found += [f"serviceaccount/{s.metadata.name}" for s in core.list_namespaced_service_account(namespace).items
              if s.metadata.name != "default"]
    found += [f"lease/{lease.metadata.name}" for lease in coordination.list_namespaced_lease(namespace).items]
    found += [f"role/{r.metadata.name}" for r in rbac.list_namespaced_role(namespace).items]
    found += [f"rolebinding/{r.metadata.name}" for r in rbac.list_namespaced_role_binding(namespace).items]
    found += [f"clusterrole/{r.metadata.name}" for r in rbac.list_cluster_role().items
              if r.metadata.name.startswith(f"{release}-")]
    found += [f"clusterrolebinding/{r.metadata.name}" for r in rbac.list_cluster_role_binding().items
              if r.metadata.name.startswith(f"{release}-")]
    return sorted(found)


def test_rendered_chart_passes_a_server_side_dry_run(operator: Sandbox, namespace: str) -> None:
    for values in ([], ["--set=rbac.scope=namespace"]):
        rendered = helm(operator, "template", "dryrun", str(CHART), f"--namespace={namespace}", *values)
        documents = [d for d in yaml.safe_load_all(rendered) if d]
        assert {d["kind"] for d in documents} >= {"Deployment", "ServiceAccount", "Service"}
        result = operator.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
        assert result.returncode == 0, result.stderr


@pytest.mark.alone
def test_helm_install_runs_the_example_cluster_and_uninstall_leaves_only_the_crds(
        operator: Sandbox, namespace: str, tmp_path: Path) -> None:
    release = f"helm{secrets.token_hex(2)}"
    release_ns = f"{release}-system"
    clusters = Clusters(operator, namespace)
    core = k8s.CoreV1Api(operator.api_client())
    # The operator the other tests use watches every namespace: stopped, so only the chart's acts.
    with operator_stopped(operator):
        core.create_namespace({"metadata": {"name": release_ns, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted", "sandbox-test": "true"}}})
        try:
            helm(operator, "install", release, str(CHART), f"--namespace={release_ns}", *built_image_values(), "--wait",
                 "--timeout=3m")
            assert_operators_run_in_runc(operator, release, release_ns)
            deployments = {f"deployment/{release}-{base}" for base in OPERATORS}
            assert deployments <= set(release_objects(operator, release, release_ns))
            operator.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
            name = yaml.safe_load(EXAMPLE.read_text())["metadata"]["name"]
            status = clusters.wait_running(name, ready=3, timeout=240)
            assert status["size"] == 3
            for base in OPERATORS:  # each leads, and the chart's RBAC forbade it nothing
                logs = operator.kubectl("-n", release_ns, "logs", f"deploy/{release}-{base}", "--tail=-1").stdout
                assert "became leader" in logs and not forbidden_lines(logs), f"{base}: {logs[-2000:]}"
            # Their leader-election Leases exist now; uninstall must leave none (released by deletion).
            assert {f"lease/{base}" for base in OPERATORS} <= set(release_objects(operator, release, release_ns))

            helm(operator, "uninstall", release, f"--namespace={release_ns}", "--wait", "--timeout=2m")
            wait_for(lambda: not release_objects(operator, release, release_ns), timeout=90,
                     what=f"nothing of release {release} left")
            crds = operator.kubectl("get", "crd", "-o", "name").stdout
            assert "etcdclusters.etcd.database.coreos.com" in crds
        finally:
            helm_result = subprocess.run([str(go_tool("helm")), f"--kubeconfig={operator.config.kubeconfig}",
                                          "uninstall", release, f"--namespace={release_ns}", "--ignore-not-found"],
                                         capture_output=True, text=True)
            print(helm_result.stdout + helm_result.stderr)
            core.delete_namespace(release_ns)


@pytest.mark.alone
def test_namespaced_rbac_runs_the_example_cluster_and_leaves_other_namespaces_alone(
        operator: Sandbox, namespace: str) -> None:
    """`rbac.scope=namespace`: the operators get a Role in the watched namespace only (and their
    Lease's in their own); everything the example cluster needs works with that."""
    release = f"helmns{secrets.token_hex(2)}"
    release_ns = f"{release}-system"
    clusters = Clusters(operator, namespace)
    core = k8s.CoreV1Api(operator.api_client())
    rbac = k8s.RbacAuthorizationV1Api(operator.api_client())
    with operator_stopped(operator):
        core.create_namespace({"metadata": {"name": release_ns, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted", "sandbox-test": "true"}}})
        try:
            helm(operator, "install", release, str(CHART), f"--namespace={release_ns}", "--set=rbac.scope=namespace",
                 f"--set=watchNamespace={namespace}", *built_image_values(), "--wait", "--timeout=3m")
            assert_operators_run_in_runc(operator, release, release_ns)
            assert not [r.metadata.name for r in rbac.list_cluster_role().items if r.metadata.name.startswith(f"{release}-")]
            # A cluster outside the watched namespace, created first: never touched.
            unwatched = Clusters(operator, release_ns)
            unwatched.create({"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdCluster",
                              "metadata": {"name": "unwatched"}, "spec": {"size": 1}})
            operator.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
            name = yaml.safe_load(EXAMPLE.read_text())["metadata"]["name"]
            status = clusters.wait_running(name, ready=3, timeout=240)
            assert status["size"] == 3
            clusters.put(name, "namespaced", "yes")
            assert clusters.get_value(name, "namespaced") == "yes"
            for base in OPERATORS:
                logs = operator.kubectl("-n", release_ns, "logs", f"deploy/{release}-{base}", "--tail=-1").stdout
                assert "became leader" in logs and not forbidden_lines(logs), f"{base}: {logs[-2000:]}"
            assert unwatched.pods("unwatched") == [] and not unwatched.get("unwatched").get("status")
            helm(operator, "uninstall", release, f"--namespace={release_ns}", "--wait", "--timeout=2m")
        finally:
            subprocess.run([str(go_tool("helm")), f"--kubeconfig={operator.config.kubeconfig}", "uninstall", release,
                            f"--namespace={release_ns}", "--ignore-not-found"], capture_output=True, text=True)
            core.delete_namespace(release_ns)
