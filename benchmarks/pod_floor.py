"""The floor with Kubernetes in it: the raw-etcdctl floor (benchmarks.floor) with each member's etcd
started as a bare Pod instead of a local process, so what an operator in Kubernetes cannot avoid
paying (the API write, kube-scheduler's binding, the kubelet starting the container) is in the
floor too, and nothing else is: no operator, no status, no services or DNS names (the pod uses the
host network and the floor's own loopback addresses), the same 50 ms polling as the raw floor.

A member pod runs the same etcd image the operator's members run (the sandbox's process kubelet
maps it to the same binary), with the raw floor's command line unchanged; stopping a member is
deleting its pod, and it has stopped once the pod object is gone (the kubelet removes it when the
process exited), as the operator's figures count their removed pods.
"""
from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from benchmarks.floor import Launcher, MemberProcess
from etcd_common.api import constants as c

FLOOR_POD_LABEL = "etcd-floor"  # app label of floor pods (not "etcd": the benchmark counts those as members)
IMAGE_BIN = "/usr/local/bin/etcd"  # the etcd image's binary; the kubelet maps it to the local one
GONE_POLL_SECONDS = 0.05
KILL_TIMEOUT_SECONDS = 60.0


class MemberPod:
    """A floor member's etcd running in a pod; the subprocess.Popen methods the floor uses."""

    def __init__(self, core: k8s.CoreV1Api, namespace: str, name: str) -> None:
        self.core = core
        self.namespace = namespace
        self.name = name

    def terminate(self) -> None:
        """Delete the pod gracefully (the kubelet sends SIGTERM), as a pod deletion does."""
        self._delete(None)

    def kill(self) -> None:
        self._delete(0)

    def wait(self, timeout: float | None = None) -> int | None:
        """Until the pod object is gone (its process exited); TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + (KILL_TIMEOUT_SECONDS if timeout is None else timeout)
        while True:
            try:
                self.core.read_namespaced_pod(self.name, self.namespace)
            except ApiException as e:
                if e.status == 404:
                    return 0
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"floor pod {self.namespace}/{self.name} still exists after {timeout}s")
            time.sleep(GONE_POLL_SECONDS)  # polling a condition with a deadline

    def _delete(self, grace_seconds: int | None) -> None:
        try:
            self.core.delete_namespaced_pod(self.name, self.namespace, grace_period_seconds=grace_seconds)
        except ApiException as e:
            if e.status != 404:
                raise


def floor_pod(name: str, argv: list[str], version: str) -> dict[str, Any]:
    """A bare pod running etcd with the floor's command line (argv[0], the local binary, becomes
    the image's own path)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": FLOOR_POD_LABEL}},
        "spec": {
            "hostNetwork": True,  # the floor's 127.0.70.x addresses, as the raw floor listens on them
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "etcd", "image": f"{c.DEFAULT_REPOSITORY}:v{version}",
                            "command": [IMAGE_BIN, *argv[1:]]}],
        },
    }


def pod_launcher(core: k8s.CoreV1Api, namespace: str, version: str) -> Launcher:
    """A `floor.Launcher` starting each member as a pod in `namespace` (names are made unique, as
    several floor clusters run one after another in the same namespace)."""
    run = secrets.token_hex(2)

    def launch(member: str, argv: list[str], log_path: Path) -> MemberProcess:
        name = f"floor-{run}-{member}"
        # The client serialises a plain dict as it is (typed for its V1Pod model only).
        core.create_namespaced_pod(namespace, cast(k8s.V1Pod, floor_pod(name, argv, version)))
        return MemberPod(core, namespace, name)

    return launch
