"""The backup operator's Deployment as tests handle it: deployed from this checkout's code (a hash
of the shipped sources on the pod template rolls a Deployment running other code), its logs, its
metrics, and stopping/killing it."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml
from kubernetes import client as k8s

from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.operator_deployment import SOURCES_ANNOTATION, pod_metric_samples, pod_ready
from tests.sandbox_sharing import require_alone

NAMESPACE = "etcd-operator"
DEPLOYMENT = "etcd-backup-operator"
POD_SELECTOR = "app.kubernetes.io/name=etcd-backup-operator"
SHIPPED_PACKAGES = ("backup_operator", "etcd_common", "operator_runtime", "kube_adapter")
START_TIMEOUT_SECONDS = 120.0
# The tests' periodic EtcdBackups run every few seconds: below the shipped minimum interval (60 s).
TEST_ENVIRONMENT = {"BACKUP_MIN_INTERVAL_SECONDS": "1"}
STOP_TIMEOUT_SECONDS = 90.0


def sources_hash() -> str:
    digest = hashlib.sha256()
    for package in SHIPPED_PACKAGES:
        for path in sorted((CHECKOUT_DIR / package).rglob("*.py")):
            digest.update(str(path.relative_to(CHECKOUT_DIR)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return "sha256-" + digest.hexdigest()[:16]  # never all digits: kubectl's YAML would read a number


def deploy_backup_operator(sandbox: Sandbox) -> str:
    """Apply deploy/backup-operator.yaml with this checkout's sources hash and TEST_ENVIRONMENT;
    wait for the rollout."""
    wanted = sources_hash()
    documents = list(yaml.safe_load_all((CHECKOUT_DIR / "deploy" / "backup-operator.yaml").read_text()))
    for document in documents:
        if document and document.get("kind") == "Deployment":
            metadata = document["spec"]["template"].setdefault("metadata", {})
            metadata.setdefault("annotations", {})[SOURCES_ANNOTATION] = wanted
            container = document["spec"]["template"]["spec"]["containers"][0]
            container.setdefault("env", []).extend({"name": k, "value": v} for k, v in TEST_ENVIRONMENT.items())
    sandbox.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    sandbox.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}",
                    f"--timeout={START_TIMEOUT_SECONDS:.0f}s")
    return f"backup operator running this checkout's sources {wanted}"


def backup_operator_logs(sandbox: Sandbox) -> str:
    return sandbox.kubectl("-n", NAMESPACE, "logs", f"deploy/{DEPLOYMENT}", "--tail=-1", check=False).stdout


def backup_operator_pods(sandbox: Sandbox) -> list[Any]:
    core = k8s.CoreV1Api(sandbox.api_client())
    return list(core.list_namespaced_pod(NAMESPACE, label_selector=POD_SELECTOR).items)


def running_backup_operator_pod(sandbox: Sandbox) -> Any:
    def single_ready() -> Any:
        live = [p for p in backup_operator_pods(sandbox) if p.metadata.deletion_timestamp is None]
        return live[0] if len(live) == 1 and live[0].status.pod_ip and pod_ready(live[0]) else None
    return wait_for(single_ready, timeout=START_TIMEOUT_SECONDS, what="one ready backup operator pod")


def backup_metric(sandbox: Sandbox, name: str, labels: dict[str, str]) -> float | None:
    values = pod_metric_samples(running_backup_operator_pod(sandbox), name, labels)
    return values[0] if values else None


def wait_backup_operator_leading(sandbox: Sandbox) -> None:
    wait_for(lambda: "became leader" in backup_operator_logs(sandbox), timeout=START_TIMEOUT_SECONDS,
             what="backup operator leading")


@contextmanager
def backup_operator_stopped(sandbox: Sandbox) -> Iterator[None]:
    """The backup operator scaled to zero inside the block, running and leading after it."""
    require_alone("stopping the backup operator")
    deployment = f"deployment/{DEPLOYMENT}"
    sandbox.kubectl("-n", NAMESPACE, "scale", deployment, "--replicas=0")
    try:
        wait_for(lambda: not backup_operator_pods(sandbox), timeout=STOP_TIMEOUT_SECONDS,
                 what="backup operator pod gone")
        yield
    finally:
        sandbox.kubectl("-n", NAMESPACE, "scale", deployment, "--replicas=1")
        sandbox.kubectl("-n", NAMESPACE, "rollout", "status", deployment, f"--timeout={START_TIMEOUT_SECONDS:.0f}s")
        wait_backup_operator_leading(sandbox)
