"""Helpers for operator tests: create EtcdClusters, wait for their status, talk to their etcd."""
from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.testing import Sandbox, wait_for

GROUP, VERSION, PLURAL = "etcd.database.coreos.com", "v1beta2", "etcdclusters"
# The operator's default version: the newest 3.6.x the sandbox has built.
DEFAULT_VERSION = newest_etcd_version("3.6")


def etcd_cluster(name: str, size: int, version: str = DEFAULT_VERSION, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EtcdCluster", "metadata": {"name": name},
            "spec": {"size": size, "version": version, **spec}}


class Clusters:
    """EtcdClusters of one test namespace."""

    def __init__(self, sandbox: Sandbox, namespace: str) -> None:
        self.sandbox = sandbox
        self.namespace = namespace
        api = sandbox.api_client()
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body)
        return result

    def get(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        return result

    def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, {"spec": spec})

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)

    def status(self, name: str) -> dict[str, Any]:
        return self.get(name).get("status") or {}

    def wait_running(self, name: str, ready: int, timeout: float = 120) -> dict[str, Any]:
        def running() -> dict[str, Any] | None:
            status = self.status(name)
            ok = status.get("phase") == "Running" and status.get("readyCount") == ready and status.get("size") == ready
            return status if ok else None
        return wait_for(running, timeout=timeout, what=f"{self.namespace}/{name} Running with {ready} ready members")

    def wait_status(self, name: str, predicate: Any, what: str, timeout: float = 120) -> dict[str, Any]:
        return wait_for(lambda: (lambda s: s if predicate(s) else None)(self.status(name)),
                        timeout=timeout, what=f"{self.namespace}/{name}: {what}")

    def pods(self, name: str) -> list[Any]:
        selector = f"app=etcd,etcd_cluster={name}"
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def live_pods(self, name: str) -> list[Any]:
        return [p for p in self.pods(name) if p.metadata.deletion_timestamp is None]

    def client_url(self, name: str) -> str:
        return f"http://{name}-client.{self.namespace}.svc:2379"

    def member_urls(self, name: str) -> list[str]:
        return [f"http://{p.metadata.name}.{name}.{self.namespace}.svc:2379" for p in self.live_pods(name)]

    def etcdctl(self, name: str, *args: str) -> str:
        result = self.sandbox.etcdctl(self.member_urls(name), *args)
        if result.returncode != 0:
            raise AssertionError(f"etcdctl {' '.join(args)} failed: {result.stderr.strip()[-500:]}")
        return result.stdout

    def put(self, name: str, key: str, value: str) -> None:
        self.etcdctl(name, "put", key, value)

    def get_value(self, name: str, key: str) -> str | None:
        lines = self.etcdctl(name, "get", key, "--print-value-only").splitlines()
        return lines[0] if lines else None

    def member_list(self, name: str) -> list[dict[str, Any]]:
        import json

        members: list[dict[str, Any]] = json.loads(self.etcdctl(name, "member", "list", "-w", "json")).get("members", [])
        return members

    def events(self, name: str) -> list[Any]:
        selector = f"involvedObject.name={name},involvedObject.kind=EtcdCluster"
        return list(self.core.list_namespaced_event(self.namespace, field_selector=selector).items)
