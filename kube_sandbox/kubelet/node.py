"""One Node object and its heartbeats: registration, the node Lease, and the node status.

As a real kubelet: the Lease is renewed every LEASE_RENEW_SECONDS (the heartbeat the node-lifecycle
controller watches); the full status is sent at registration, at least every
NODE_STATUS_REPORT_SECONDS, and at once when the API shows the node other than Ready (the
controller marked it Unknown after missed heartbeats). A stopped node (fault injection) sends
nothing at all: the real node-lifecycle controller notices the stale Lease, marks the node Unknown,
taints it and marks its pods not ready.
"""
from __future__ import annotations

import logging
import platform
import threading
import time
from datetime import UTC, datetime
from typing import Any

from kube_sandbox.kubelet.ipam import node_pod_cidr
from kube_sandbox.kubelet.kube_api import MERGE_PATCH, ApiError, Conflict, KubeApi, NotFound, object_path
from kube_sandbox.kubelet.resources import NODE_CAPACITY
from kube_sandbox.kubelet.settings import KubeletSettings

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40  # the real kubelet's default
LEASE_RENEW_SECONDS = 5.0  # the real kubelet renews at 1/4 of the duration (10 s)
NODE_STATUS_REPORT_SECONDS = 60.0  # the real kubelet: 5 min when nothing changes
RETRY_SECONDS = 1.0
SANDBOX_INSTANCE_TYPE = "kube-sandbox"  # node.kubernetes.io/instance-type of every process-kubelet Node
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
REGION = "sandbox"
_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def architecture() -> str:
    machine = platform.machine()
    return _ARCHITECTURES.get(machine, machine.lower())


def ready_condition_status(node: dict[str, Any] | None) -> str | None:
    """The Ready condition's status ("True", "False", "Unknown") of a Node object, None if it has none."""
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None


def healthy_conditions(transition: str) -> list[dict[str, Any]]:
    now = _now()
    pressures = [("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                 ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                 ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available")]
    conditions = [{"type": kind, "status": "False", "reason": reason, "message": message,
                   "lastHeartbeatTime": now, "lastTransitionTime": transition}
                  for kind, reason, message in pressures]
    conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                       "lastTransitionTime": transition})
    return conditions


class NodeAgent:
    """Registers Node `name` (the `index`-th of the kubelet's nodes) and keeps its heartbeats going
    while `down` is clear."""

    def __init__(self, api: KubeApi, settings: KubeletSettings, name: str, index: int, stop: threading.Event,
                 down: threading.Event) -> None:
        self.api = api
        self.settings = settings
        self.name = name
        self.index = index
        self.stop = stop
        self.down = down
        self.registered = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._api_ready: str | None = None  # the Ready status the API last showed
        self._uid = ""
        self._transition = _now()
        self._next_report = 0.0
        self.thread = threading.Thread(target=self._run, name=f"kubelet-node-{name}", daemon=True)

    def node_object(self) -> dict[str, Any]:
        arch = architecture()
        cidr = node_pod_cidr(self.settings.pod_ip_prefix, self.index)
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": {
                "kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": arch,
                INSTANCE_TYPE_LABEL: SANDBOX_INSTANCE_TYPE,
                "topology.kubernetes.io/region": REGION,
                "topology.kubernetes.io/zone": f"{REGION}-{self.index + 1}",
            }},
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
        }

    def node_status(self) -> dict[str, Any]:
        uname = platform.uname()
        return {
            "capacity": dict(NODE_CAPACITY), "allocatable": dict(NODE_CAPACITY),
            "conditions": healthy_conditions(self._transition),
            "addresses": [{"type": "InternalIP", "address": self.settings.host_ip},
                          {"type": "Hostname", "address": self.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.settings.kubelet_port}},
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": uname.release,
                "osImage": "kube-sandbox process node", "containerRuntimeVersion": "process://kube-sandbox",
                "kubeletVersion": self.settings.kubelet_version, "operatingSystem": "linux",
                "architecture": architecture(),
            },
        }

    def start(self) -> None:
        self.thread.start()

    def wake(self) -> None:
        self._wake.set()

    def observe(self, node: dict[str, Any] | None) -> None:
        """The Node as the API shows it now (None: deleted). Called from the kubelet's node watch."""
        with self._lock:
            if node is None:
                self.registered.clear()
                self._api_ready = None
            else:
                self._api_ready = ready_condition_status(node)
            needs_report = self._api_ready != "True"
        if needs_report and not self.down.is_set():
            self.wake()

    def _run(self) -> None:
        while not self.stop.is_set():
            self._wake.clear()
            self._wake.wait(self.beat())

    def beat(self) -> float:
        """One heartbeat (nothing while the node is down); returns the seconds until the next one."""
        if self.down.is_set():
            return LEASE_RENEW_SECONDS
        try:
            if not self.registered.is_set():
                self.register()
            elif self._status_due():
                self.report_status()
            self.renew_lease()
        except ApiError as e:
            log.warning("node %s heartbeat failed (%s); retrying in %.0fs", self.name, e, RETRY_SECONDS)
            return RETRY_SECONDS
        except Exception:
            log.exception("node %s heartbeat failed; retrying in %.0fs", self.name, RETRY_SECONDS)
            return RETRY_SECONDS
        return LEASE_RENEW_SECONDS

    def _status_due(self) -> bool:
        with self._lock:
            return self._api_ready != "True" or time.monotonic() >= self._next_report

    def register(self) -> None:
        try:
            created = self.api.create(object_path("", "v1", "nodes"), self.node_object())
            self._uid = created["metadata"]["uid"]
            log.info("registered node %s (InternalIP %s, pod CIDR %s)", self.name, self.settings.host_ip,
                     created["spec"].get("podCIDR"))
        except Conflict:
            # podCIDR cannot change once set: take over the labels only.
            patched = self.api.patch(object_path("", "v1", "nodes", name=self.name),
                                     {"metadata": {"labels": self.node_object()["metadata"]["labels"]}})
            self._uid = patched["metadata"]["uid"]
            log.info("node %s already registered; taking it over", self.name)
        self.report_status()
        self.registered.set()

    def report_status(self) -> None:
        with self._lock:
            if self._api_ready != "True":
                self._transition = _now()
        path = object_path("", "v1", "nodes", name=self.name, subresource="status")
        try:
            node = self.api.patch(path, {"status": self.node_status()})
        except NotFound:
            self.registered.clear()
            raise
        with self._lock:
            was = self._api_ready
            self._api_ready = ready_condition_status(node)
            self._next_report = time.monotonic() + NODE_STATUS_REPORT_SECONDS
        if was != self._api_ready:
            log.info("node %s Ready=%s", self.name, self._api_ready)

    def renew_lease(self) -> None:
        path = object_path("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE, self.name)
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": _now_micro()}
        try:
            self.api.patch(path, {"spec": spec}, content_type=MERGE_PATCH)
        except NotFound:
            metadata: dict[str, Any] = {"name": self.name, "namespace": LEASE_NAMESPACE}
            if self._uid:  # deleted with its Node, as a real kubelet's Lease is
                metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": self.name,
                                                "uid": self._uid}]
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}
            self.api.create(object_path("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE), body)
