"""Helpers for tests against the sandbox: wait for a condition, run kubectl/etcdctl, inject faults."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kubernetes import client as k8s

from kube_sandbox import binaries
from kube_sandbox.cli import run_in_sandbox
from kube_sandbox.config import NODE_NAMES, SandboxConfig
from kube_sandbox.control_api import ControlClient

T = TypeVar("T")
POLL_SECONDS = 0.2


class WaitTimeout(AssertionError):
    pass


def wait_for(condition: Callable[[], T], *, timeout: float = 60.0, what: str = "condition",
             interval: float = POLL_SECONDS) -> T:
    """Poll `condition` until it returns something truthy; on timeout fail with what it last saw."""
    deadline = time.monotonic() + timeout
    last_value: object = None
    last_error: BaseException | None = None
    while True:
        try:
            last_value = condition()
            if last_value:
                return last_value
            last_error = None
        except Exception as e:  # a condition may fail while the system converges
            last_error = e
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}; "
                              f"last value: {last_value!r}; last error: {last_error!r}")
        time.sleep(interval)


@dataclass
class Sandbox:
    """A handle on the running sandbox, as the `sandbox` fixture gives it to tests."""

    config: SandboxConfig
    faults: ControlClient = field(init=False)

    def __post_init__(self) -> None:
        self.faults = ControlClient(self.config)

    @property
    def store_endpoints(self) -> dict[str, str]:
        """The object stores' URLs by name (`s3`: SeaweedFS, also OSS's S3 API; `abs`: Azurite's
        blob service of account config.AZURITE_ACCOUNT; `gcs`: fake-gcs-server), for
        sandbox.faults.stop_store/start_store."""
        return {"s3": self.config.s3_endpoint, "abs": self.config.abs_endpoint, "gcs": self.config.gcs_endpoint}

    @property
    def node_names(self) -> tuple[str, ...]:
        """The process kubelet's Nodes, for sandbox.faults.stop_node/start_node."""
        return NODE_NAMES

    def node_of(self, namespace: str, pod: str) -> str | None:
        """The node a pod is bound to (its spec.nodeName), None while it is not scheduled."""
        spec = k8s.CoreV1Api(self.api_client()).read_namespaced_pod(pod, namespace).spec
        return spec.node_name if spec is not None else None

    def api_client(self) -> k8s.ApiClient:
        from kube_sandbox.daemon import admin_api_client

        return admin_api_client(self.config)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        argv = [str(binaries.kubectl()), f"--kubeconfig={self.config.kubeconfig}", *args]
        result = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def exec(self, argv: Sequence[str], *, timeout: float = 60, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command inside the sandbox namespace, where pod DNS names resolve (`stdin`: its input)."""
        result: subprocess.CompletedProcess[str] = run_in_sandbox(
            self.config, list(argv), capture_output=True, timeout=timeout, input=stdin)
        return result

    def etcdctl(self, endpoints: Sequence[str], *args: str, version: str | None = None,
                timeout: float = 30, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """etcdctl of `version` (default: the newest built etcd) run where pod DNS names resolve."""
        etcdctl = binaries.etcd_dir(version or binaries.newest_etcd_version()) / "etcdctl"
        argv = [str(etcdctl), f"--endpoints={','.join(endpoints)}", "--dial-timeout=3s",
                "--command-timeout=10s", *args]
        return self.exec(argv, timeout=timeout, stdin=stdin)
