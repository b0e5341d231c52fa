"""The Node object and its heartbeats: registration, the node Lease, and the Ready condition.

No node-lifecycle controller runs in the sandbox, so when the node is stopped (fault injection)
this module itself reports Ready=Unknown, the way that controller would after missed heartbeats.
"""
from __future__ import annotations

import logging
import platform
import threading
from datetime import datetime, timezone
from typing import Any

from kube_sandbox.kubelet.kube_api import ApiError, Conflict, KubeApi, NotFound, object_path
from kube_sandbox.kubelet.resources import NODE_CAPACITY
from kube_sandbox.kubelet.settings import KubeletSettings

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
HEARTBEAT_SECONDS = 5.0  # lease renewal; the node status is refreshed every NODE_STATUS_EVERY beats
NODE_STATUS_EVERY = 2
RETRY_SECONDS = 1.0
KUBELET_VERSION = "v1.20.2"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_micro() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ready_conditions(ready: str, reason: str, message: str, transition: str) -> list[dict[str, Any]]:
    now = _now()
    healthy = [("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
               ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
               ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available")]
    conditions = [{"type": kind, "status": "False" if ready == "True" else "Unknown", "reason": r,
                   "message": m, "lastHeartbeatTime": now, "lastTransitionTime": transition}
                  for kind, r, m in healthy]
    conditions.append({"type": "Ready", "status": ready, "reason": reason, "message": message,
                       "lastHeartbeatTime": now, "lastTransitionTime": transition})
    return conditions


class NodeAgent:
    def __init__(self, api: KubeApi, settings: KubeletSettings, stop: threading.Event,
                 node_down: threading.Event) -> None:
        self.api = api
        self.settings = settings
        self.stop = stop
        self.node_down = node_down
        self.registered = threading.Event()
        self._wake = threading.Event()
        self._transition = _now()
        self._reported_ready: str | None = None
        self.thread = threading.Thread(target=self._run, name="kubelet-node", daemon=True)

    @property
    def name(self) -> str:
        return self.settings.node_name

    def node_object(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": {
                "kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "kube-sandbox",
            }},
            "spec": {},
        }

    def node_status(self) -> dict[str, Any]:
        if self.node_down.is_set():
            ready = ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
        else:
            ready = ("True", "KubeletReady", "kubelet is posting ready status")
        if ready[0] != self._reported_ready:
            self._transition = _now()
        uname = platform.uname()
        return {
            "capacity": dict(NODE_CAPACITY), "allocatable": dict(NODE_CAPACITY),
            "conditions": ready_conditions(*ready, transition=self._transition),
            "addresses": [{"type": "InternalIP", "address": self.settings.host_ip},
                          {"type": "Hostname", "address": self.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.settings.kubelet_port}},
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": uname.release,
                "osImage": "kube-sandbox process node", "containerRuntimeVersion": "process://kube-sandbox",
                "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux", "architecture": "amd64",
            },
        }

    def start(self) -> None:
        self.thread.start()

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        beats = 0
        while not self.stop.is_set():
            self._wake.clear()
            try:
                if not self.registered.is_set():
                    self.register()
                down = self.node_down.is_set()
                if not down:
                    self.renew_lease()
                if beats % NODE_STATUS_EVERY == 0 or self._reported_ready != ("Unknown" if down else "True"):
                    self.report_status()
                beats += 1
                wait = HEARTBEAT_SECONDS
            except ApiError as e:
                log.warning("node %s heartbeat failed (%s); retrying in %.0fs", self.name, e, RETRY_SECONDS)
                wait = RETRY_SECONDS
            except Exception:
                log.exception("node %s heartbeat failed; retrying in %.0fs", self.name, RETRY_SECONDS)
                wait = RETRY_SECONDS
            self._wake.wait(wait)

    def register(self) -> None:
        try:
            self.api.create(object_path("", "v1", "nodes"), self.node_object())
            log.info("registered node %s (InternalIP %s)", self.name, self.settings.host_ip)
        except Conflict:
            self.api.patch(object_path("", "v1", "nodes", name=self.name), {"metadata": self.node_object()["metadata"]})
            log.info("node %s already registered; taking it over", self.name)
        self.report_status()
        self.registered.set()

    def report_status(self) -> None:
        status = self.node_status()
        try:
            self.api.patch(object_path("", "v1", "nodes", name=self.name, subresource="status"), {"status": status})
        except NotFound:
            self.registered.clear()
            raise
        ready = next(c["status"] for c in status["conditions"] if c["type"] == "Ready")
        if ready != self._reported_ready:
            log.info("node %s Ready=%s", self.name, ready)
        self._reported_ready = ready

    def renew_lease(self) -> None:
        path = object_path("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE, self.name)
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": _now_micro()}
        try:
            self.api.patch(path, {"spec": spec}, content_type="application/merge-patch+json")
        except NotFound:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE}, "spec": spec}
            self.api.create(object_path("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE), body)

    def mark_down(self) -> None:
        """Report Ready=Unknown now (the heartbeat loop stops renewing while the node is down)."""
        try:
            self.report_status()
        except ApiError as e:
            log.warning("could not report node %s down: %s", self.name, e)
        self.wake()
