"""EtcdClusters of one benchmark namespace: create, patch, delete, and time how long until their
status says what a figure waits for (status polled every STATUS_POLL_SECONDS)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kube_sandbox import binaries
from kube_sandbox.testing import Sandbox, wait_for

GROUP, VERSION, PLURAL = "etcd.database.coreos.com", "v1beta2", "etcdclusters"
ETCD_VERSION = binaries.newest_etcd_version()  # the operator's default; the floors run it too
STATUS_POLL_SECONDS = 0.1
CONVERGE_TIMEOUT_SECONDS = 240.0
GONE_TIMEOUT_SECONDS = 120.0

Status = dict[str, Any]


def etcd_cluster(name: str, size: int, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """An EtcdCluster of `size` members of ETCD_VERSION; `spec`: further spec fields."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EtcdCluster", "metadata": {"name": name},
            "spec": {"size": size, "version": ETCD_VERSION, **(spec or {})}}


class BenchClusters:
    """EtcdClusters in one namespace, as the benchmark figures drive them."""

    def __init__(self, sandbox: Sandbox, namespace: str) -> None:
        self.namespace = namespace
        api = sandbox.api_client()
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    # --- the API

    def create(self, name: str, size: int, spec: dict[str, Any] | None = None) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL,
                                                    etcd_cluster(name, size, spec))

    def get(self, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace,
                                                                             PLURAL, name))

    def patch_size(self, name: str, size: int) -> int:
        """Set spec.size; returns the generation that carries it."""
        result = cast(dict[str, Any], self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name, {"spec": {"size": size}}))
        return int(result["metadata"]["generation"])

    def delete(self, name: str) -> None:
        """Delete the cluster and wait until its pods are gone (so they do not load the next step)."""
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        except ApiException as e:
            if e.status != 404:
                raise
        wait_for(lambda: not self.pods(name), timeout=GONE_TIMEOUT_SECONDS, interval=0.5,
                 what=f"{self.namespace}/{name}: pods gone")

    def pods(self, name: str) -> list[Any]:
        """Pods of the cluster, terminating ones included."""
        selector = f"app=etcd,etcd_cluster={name}"
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def delete_pod(self, pod_name: str) -> None:
        self.core.delete_namespaced_pod(pod_name, self.namespace)

    # --- conditions on what the operator reports

    def running(self, name: str, size: int, generation: int = 0) -> Status | None:
        """The status if it says Running with `size` members all ready (for `generation` or later)."""
        status: Status = self.get(name).get("status") or {}
        ok = (status.get("phase") == "Running" and status.get("readyCount") == size and status.get("size") == size
              and int(status.get("observedGeneration") or 0) >= generation)
        return status if ok else None

    def running_with_pods(self, name: str, size: int, generation: int = 0) -> Status | None:
        """Running with `size` ready members and exactly `size` pods (no surplus, none terminating)."""
        status = self.running(name, size, generation)
        return status if status is not None and len(self.pods(name)) == size else None

    def seconds_until(self, started: float, condition: Callable[[], Status | None], what: str,
                      timeout: float = CONVERGE_TIMEOUT_SECONDS) -> float:
        """Seconds from `started` (time.monotonic()) until `condition` holds, polled every 0.1 s."""
        wait_for(condition, timeout=timeout, interval=STATUS_POLL_SECONDS, what=f"{self.namespace}/{what}")
        return time.monotonic() - started
