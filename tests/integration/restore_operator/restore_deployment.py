"""The restore operator's Deployment as tests handle it: deployed from this checkout's code (a
sources hash on its pod template rolls a reused Deployment), its logs."""
from __future__ import annotations

import hashlib

import yaml

from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox
from tests.integration.packaging.built_image import name_image

NAMESPACE = "etcd-operator"
DEPLOYMENT = "etcd-restore-operator"
POD_SELECTOR = "app.kubernetes.io/name=etcd-restore-operator"
SHIPPED_PACKAGES = ("restore_operator", "etcd_common", "operator_runtime", "kube_adapter")
SOURCES_ANNOTATION = "etcd-operator-py.test/sources-sha256"
START_TIMEOUT_SECONDS = 120.0


def shipped_sources_hash() -> str:
    digest = hashlib.sha256()
    for package in SHIPPED_PACKAGES:
        for path in sorted((CHECKOUT_DIR / package).rglob("*.py")):
            digest.update(str(path.relative_to(CHECKOUT_DIR)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return "sha256-" + digest.hexdigest()[:16]  # never all digits: kubectl's YAML would read a number


def deploy_restore_operator(sandbox: Sandbox, image: str = "") -> None:
    """Apply deploy/restore-operator.yaml (every document) with this checkout's sources hash on
    the Deployment's pod template; wait for the rollout. `image`: where it names the operators'
    image (the container, the fetch image, OPERATOR_IMAGE), this one instead, as `make demo` does."""
    text = (CHECKOUT_DIR / "deploy" / "restore-operator.yaml").read_text()
    if image:
        text = name_image(text, image)
    documents = list(yaml.safe_load_all(text))
    for document in documents:
        if document["kind"] == "Deployment":
            template = document["spec"]["template"].setdefault("metadata", {})
            template.setdefault("annotations", {})[SOURCES_ANNOTATION] = shipped_sources_hash()
    sandbox.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    sandbox.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}",
                    f"--timeout={START_TIMEOUT_SECONDS:.0f}s")


def restore_operator_logs(sandbox: Sandbox) -> str:
    return sandbox.kubectl("-n", NAMESPACE, "logs", f"deploy/{DEPLOYMENT}", "--tail=-1", check=False).stdout


def restore_metric(sandbox: Sandbox, name: str, labels: dict[str, str]) -> float | None:
    """One sample of the (single, ready) restore operator pod's /metrics, or None."""
    from kubernetes import client as k8s

    from tests.integration.etcd_operator.operator_deployment import pod_metric, pod_ready

    pods = k8s.CoreV1Api(sandbox.api_client()).list_namespaced_pod(NAMESPACE, label_selector=POD_SELECTOR).items
    ready = [pod for pod in pods if pod.metadata.deletion_timestamp is None and pod_ready(pod)]
    return pod_metric(ready[0], name, labels) if len(ready) == 1 else None
