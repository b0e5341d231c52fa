"""Where the benchmarks run: the sandbox (started here or reused), the deployed operator, and a
namespace of its own per figure, deleted afterwards."""
from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kube_sandbox import cli
from kube_sandbox.config import CHECKOUT_DIR, SandboxConfig
from kube_sandbox.testing import Sandbox, wait_for

log = logging.getLogger(__name__)

OPERATOR_NAMESPACE = "etcd-operator"
OPERATOR_DEPLOYMENT = "etcd-operator"
OPERATOR_CONTAINER = "etcd-operator"
OPERATOR_SELECTOR = "app.kubernetes.io/name=etcd-operator"
CLUSTER_GROUP, CLUSTER_VERSION, CLUSTER_PLURAL = "etcd.database.coreos.com", "v1beta2", "etcdclusters"
CRD_NAME = f"{CLUSTER_PLURAL}.{CLUSTER_GROUP}"
ETCD_POD_SELECTOR = "app=etcd"
BENCH_NAMESPACE_LABEL = "etcd-operator-bench"
ROLLOUT_TIMEOUT_SECONDS = 120.0
LEADER_TIMEOUT_SECONDS = 90.0
NAMESPACE_GONE_TIMEOUT_SECONDS = 180.0


@contextlib.contextmanager
def sandbox_session(config: SandboxConfig | None = None) -> Iterator[Sandbox]:
    """The running sandbox; started here and stopped afterwards unless it was already up."""
    config = config or SandboxConfig.from_env()
    started_here = not cli.is_up(config)
    if started_here:
        log.info("starting the sandbox")
        seconds = cli.up(config)
        log.info("sandbox up in %.1fs", seconds)
    else:
        log.info("reusing the running sandbox (left running afterwards)")
    try:
        yield Sandbox(config)
    finally:
        if started_here:
            log.info("stopping the sandbox this run started")
            cli.down(config)


class OperatorDeployment:
    """The operator as the shipped manifests deploy it, plus what the figures need from it."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.core = k8s.CoreV1Api(sandbox.api_client())

    def deploy(self, restart: bool = False) -> None:
        """Apply CRDs and manifests (idempotent); optionally restart to run this checkout's code."""
        root = Path(CHECKOUT_DIR)
        self.sandbox.kubectl("apply", "-f", str(root / "crds"))
        self.sandbox.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")
        for manifest in ("namespace.yaml", "rbac.yaml", "operator.yaml"):
            self.sandbox.kubectl("apply", "-f", str(root / "deploy" / manifest))
        if restart:
            self.sandbox.kubectl("-n", OPERATOR_NAMESPACE, "rollout", "restart", f"deployment/{OPERATOR_DEPLOYMENT}")
        self.wait_leading()

    def wait_leading(self) -> str:
        """Wait for the rollout and for the (only) operator pod to hold the lease; its name."""
        self.sandbox.kubectl("-n", OPERATOR_NAMESPACE, "rollout", "status", f"deployment/{OPERATOR_DEPLOYMENT}",
                             f"--timeout={ROLLOUT_TIMEOUT_SECONDS:.0f}s", timeout=ROLLOUT_TIMEOUT_SECONDS + 10)

        def leading_pod() -> str:
            pods = self.operator_pods()
            if len(pods) != 1:
                return ""
            name: str = pods[0].metadata.name
            logs = self.sandbox.kubectl("-n", OPERATOR_NAMESPACE, "logs", name, check=False).stdout
            return name if "became leader" in logs else ""

        return wait_for(leading_pod, timeout=LEADER_TIMEOUT_SECONDS, what="one operator pod, leading")

    def operator_pods(self) -> list[Any]:
        """Operator pods, terminating ones included."""
        return list(self.core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=OPERATOR_SELECTOR).items)

    def scale(self, replicas: int) -> None:
        """Scale the Deployment; returns once the pods are gone (0) or one leads (1)."""
        self.sandbox.kubectl("-n", OPERATOR_NAMESPACE, "scale", f"deployment/{OPERATOR_DEPLOYMENT}",
                             f"--replicas={replicas}")
        if replicas == 0:
            wait_for(lambda: not self.operator_pods(), timeout=ROLLOUT_TIMEOUT_SECONDS, what="operator pods gone")
        else:
            self.wait_leading()

    def pid(self) -> int:
        """Host pid of the operator container's process (the process kubelet runs it locally)."""
        pod = self.wait_leading()
        pid = self.sandbox.faults.pod_pid(OPERATOR_NAMESPACE, pod, OPERATOR_CONTAINER)
        if pid is None:
            raise RuntimeError(f"the sandbox knows no process for {OPERATOR_NAMESPACE}/{pod}")
        return pid

    def logs(self) -> str:
        return self.sandbox.kubectl("-n", OPERATOR_NAMESPACE, "logs", f"deploy/{OPERATOR_DEPLOYMENT}",
                                    "--tail=-1", check=False).stdout


@contextlib.contextmanager
def bench_namespace(sandbox: Sandbox, figure: str) -> Iterator[str]:
    """A fresh namespace for one figure; deleted (and waited for) afterwards, whatever happened."""
    core = k8s.CoreV1Api(sandbox.api_client())
    name = f"bench-{figure}-{secrets.token_hex(3)}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name,
                                                                    labels={BENCH_NAMESPACE_LABEL: figure})))
    try:
        yield name
    finally:
        save_operator_log(sandbox, name)
        delete_namespace(core, name)


def save_operator_log(sandbox: Sandbox, namespace: str) -> Path | None:
    """Keep the operator's log lines about one figure's namespace (for "where did the time go"),
    in the sandbox's logs directory, which outlives the operator pod."""
    result = sandbox.kubectl("-n", OPERATOR_NAMESPACE, "logs", f"deploy/{OPERATOR_DEPLOYMENT}", "--tail=-1",
                             check=False)
    lines = [line for line in result.stdout.splitlines() if f"{namespace}/" in line or f"{namespace}." in line]
    if not lines:
        return None
    directory = sandbox.config.logs_dir / "bench"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{namespace}.operator.log"
    path.write_text("\n".join(lines) + "\n")
    log.info("operator log lines about %s: %s", namespace, path)
    return path


def delete_namespace(core: k8s.CoreV1Api, name: str) -> None:
    """Delete and wait until it is gone, so its pods no longer load the machine for the next figure.
    EtcdClusters go first and their pods are awaited, so the operator is done with them before
    the namespace starts terminating (it then refuses even the operator's events)."""
    custom = k8s.CustomObjectsApi(core.api_client)
    try:
        custom.delete_collection_namespaced_custom_object(CLUSTER_GROUP, CLUSTER_VERSION, name, CLUSTER_PLURAL)
        wait_for(lambda: not core.list_namespaced_pod(name, label_selector=ETCD_POD_SELECTOR).items,
                 timeout=NAMESPACE_GONE_TIMEOUT_SECONDS, interval=0.5, what=f"etcd pods in {name} gone")
    except (ApiException, AssertionError) as e:
        log.warning("cleaning up EtcdClusters in %s: %s; deleting the namespace anyway", name, e)
    try:
        core.delete_namespace(name)
    except ApiException as e:
        if e.status != 404:
            raise

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    try:
        wait_for(gone, timeout=NAMESPACE_GONE_TIMEOUT_SECONDS, interval=0.5, what=f"namespace {name} deleted")
    except AssertionError as e:
        log.warning("%s; continuing", e)
