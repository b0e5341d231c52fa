"""ProcessKubelet: the sandbox's only node. Binds pending pods to itself and runs them as processes.

Threads: node heartbeats, a pod watch (binding + one PodWorker per pod), a service watch, the
hosts-file writer, the cluster DNS server, an event sender and the optional log server; all share
one stop Event.
"""
from __future__ import annotations

import logging
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from kube_sandbox.kubelet.containers import ContainerProcess, reap_orphans
from kube_sandbox.kubelet.dns import HostsFile
from kube_sandbox.kubelet.dns_server import DnsServer
from kube_sandbox.kubelet.events import NORMAL, EventRecorder
from kube_sandbox.kubelet.images import ImageCatalog
from kube_sandbox.kubelet.ipam import IpAllocator
from kube_sandbox.kubelet.kube_api import ApiError, Conflict, KubeApi, NotFound, object_path, pod_path
from kube_sandbox.kubelet.node import NodeAgent
from kube_sandbox.kubelet.pods import TERMINAL_PHASES, PodServices, PodWorker
from kube_sandbox.kubelet.settings import KubeletSettings
from kube_sandbox.kubelet.volumes import VolumeManager
from kube_sandbox.kubelet.watching import list_and_watch

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 3.0  # SIGTERM -> SIGKILL when the kubelet itself stops
JOIN_SECONDS = 5.0
DNS_RESYNC_SECONDS = 5.0


class ContainerNotRunning(LookupError):
    """A fault was aimed at a container that has no running process on this node."""


class ProcessKubelet:
    def __init__(self, api_client: k8s.ApiClient, settings: KubeletSettings) -> None:
        self.settings = settings
        self.api = KubeApi(api_client)
        self._stop = threading.Event()
        self._node_down = threading.Event()
        self._lock = threading.RLock()
        self._workers: dict[str, PodWorker] = {}
        self._pods: dict[str, dict[str, Any]] = {}  # every pod in the cluster, by uid (for DNS)
        self._services: dict[str, dict[str, Any]] = {}
        # Pod IPs handed out by our workers but maybe not yet in the watched pod (status in flight).
        self._assigned_ips: dict[str, str] = {}
        self._hosts_lock = threading.Lock()  # one hosts update at a time, each from a newer snapshot
        self._dns_dirty = threading.Event()
        self._first_pod_list = True
        self.ipam = IpAllocator(settings.pod_ip_prefix)
        self.events = EventRecorder(self.api, settings.node_name, self._stop)
        self.node = NodeAgent(self.api, settings, self._stop, self._node_down)
        self.hosts = HostsFile(settings.hosts_file, settings.cluster_domain)
        self.services = PodServices(
            api=self.api, settings=settings, ipam=self.ipam,
            images=ImageCatalog(settings.etcd_binaries, settings.venv_bin_dir, settings.images_dir),
            volumes=VolumeManager(self.api, settings), events=self.events, stop=self._stop,
            node_down=self._node_down, on_worker_done=self._worker_done,
            on_address_assigned=self._address_assigned,
        )
        self._threads: list[threading.Thread] = []
        self._log_server: Any = None
        self._dns_server: DnsServer | None = None

    # ----------------------------------------------------------------- start / stop

    def start(self) -> None:
        """Start all threads and return; the node registers as soon as the API answers."""
        s = self.settings
        log.info("process kubelet starting: node %s, host IP %s, pod IPs %s.x.y, state %s, hosts file %s, "
                 "apiserver %s:%d, etcd versions %s", s.node_name, s.host_ip, s.pod_ip_prefix, s.state_dir,
                 s.hosts_file, s.apiserver_host, s.apiserver_port, sorted(s.etcd_binaries) or "none")
        for directory in (s.pods_dir, s.pvc_dir, s.logs_dir, s.images_dir, s.pids_dir):
            directory.mkdir(parents=True, exist_ok=True)
        reap_orphans(s.pids_dir)
        self.events.start()
        self.node.start()
        self._spawn("kubelet-pods", lambda: list_and_watch(
            self.api, object_path("", "v1", "pods"), self._stop, self._on_pod_list, self._on_pod_event, "pods"))
        self._spawn("kubelet-services", lambda: list_and_watch(
            self.api, object_path("", "v1", "services"), self._stop, self._on_service_list, self._on_service_event,
            "services"))
        self._spawn("kubelet-dns", self._dns_loop)
        if s.dns_address:
            try:
                self._dns_server = DnsServer(self.hosts.lookup, s.dns_address)
                self._dns_server.start()
            except OSError:  # names still resolve from the hosts file, only up to 5 s late in Go programs
                log.exception("cluster DNS server could not start on %s", s.dns_address)
        if s.kubelet_port:
            from kube_sandbox.kubelet.logserver import LogServer

            try:
                self._log_server = LogServer(self, s.host_ip, s.kubelet_port, s.state_dir / "serving")
                self._log_server.start()
            except Exception:  # logs stay readable from files; everything else works
                log.exception("container log server could not start on port %d", s.kubelet_port)

    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        """Stop all threads and every container process (SIGTERM, SIGKILL after `grace_seconds`).

        Pod objects, volumes and addresses stay, so a new kubelet picks the pods up again."""
        log.info("process kubelet stopping")
        self._stop.set()
        with self._lock:
            workers = list(self._workers.values())
        stoppers = [threading.Thread(target=w.shutdown, args=(grace_seconds,), daemon=True) for w in workers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(grace_seconds + JOIN_SECONDS)
        if self._log_server is not None:
            self._log_server.stop()
        if self._dns_server is not None:
            self._dns_server.stop()
        self.api.close()
        for thread in [*self._threads, *(w.thread for w in workers)]:
            if thread.is_alive():
                thread.join(JOIN_SECONDS)
        log.info("process kubelet stopped")

    # ----------------------------------------------------------------- pods

    def _on_pod_list(self, pods: list[dict[str, Any]]) -> None:
        current = {p["metadata"]["uid"]: p for p in pods}
        with self._lock:
            gone = [uid for uid in self._pods if uid not in current]
            if self._first_pod_list:
                self._recover(pods)
        for uid in gone:
            self._on_pod_event("DELETED", self._pods[uid])
        for pod in pods:
            self._on_pod_event("MODIFIED", pod)

    def _recover(self, pods: list[dict[str, Any]]) -> None:
        """First list after start: keep the addresses of our live pods, drop directories of vanished ones."""
        self._first_pod_list = False
        ours = [p for p in pods if (p.get("spec") or {}).get("nodeName") == self.settings.node_name]
        for pod in ours:
            status = pod.get("status") or {}
            if (status.get("podIP") and status.get("phase") not in TERMINAL_PHASES
                    and not (pod.get("spec") or {}).get("hostNetwork")):
                if not self.ipam.reserve(pod["metadata"]["uid"], status["podIP"]):
                    log.warning("%s/%s: address %s is taken; it will get a new one", pod["metadata"]["namespace"],
                                pod["metadata"]["name"], status["podIP"])
        known = {p["metadata"]["uid"] for p in ours}
        for directory in self.settings.pods_dir.iterdir() if self.settings.pods_dir.is_dir() else []:
            if directory.name not in known:
                shutil.rmtree(directory, ignore_errors=True)

    def _on_pod_event(self, event_type: str, pod: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        uid = metadata["uid"]
        self._dns_dirty.set()
        if event_type == "DELETED":
            with self._lock:
                self._pods.pop(uid, None)
                worker = self._workers.get(uid)
            if worker is not None:
                worker.mark_deleted()
            return
        with self._lock:
            self._pods[uid] = pod
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            if not metadata.get("deletionTimestamp") and not self._node_down.is_set():
                self._bind(pod)
            return
        if node_name != self.settings.node_name:
            return
        with self._lock:
            if self._stop.is_set():
                return
            worker = self._workers.get(uid)
            if worker is None:
                worker = PodWorker(pod, self.services)
                self._workers[uid] = worker
                worker.start()
                return
        worker.update(pod)

    def _bind(self, pod: dict[str, Any]) -> None:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, "uid": pod["metadata"]["uid"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.settings.node_name}}
        try:
            self.api.create(pod_path(namespace, name, "binding"), body)
        except (Conflict, NotFound):
            return  # bound meanwhile, or gone
        except ApiError as e:
            log.warning("%s/%s: binding failed (%s); retrying on the next pod event", namespace, name, e)
            return
        log.info("%s/%s: bound to node %s", namespace, name, self.settings.node_name)
        self.events.record(pod, NORMAL, "Scheduled",
                           f"Successfully assigned {namespace}/{name} to {self.settings.node_name}",
                           component="default-scheduler")

    def _worker_done(self, uid: str) -> None:
        with self._lock:
            self._workers.pop(uid, None)
            self._assigned_ips.pop(uid, None)
        self._dns_dirty.set()

    def _address_assigned(self, uid: str, ip: str) -> None:
        """A worker gave its pod an IP and is about to start its containers: publish the pod's
        names now, as a real kubelet writes the pod's own /etc/hosts before starting it, so the
        pod's first lookup of its own name already succeeds."""
        with self._lock:
            self._assigned_ips[uid] = ip
        self._update_hosts()

    # ----------------------------------------------------------------- services and DNS

    def _on_service_list(self, services: list[dict[str, Any]]) -> None:
        with self._lock:
            self._services = {s["metadata"]["uid"]: s for s in services}
        self._dns_dirty.set()

    def _on_service_event(self, event_type: str, service: dict[str, Any]) -> None:
        with self._lock:
            if event_type == "DELETED":
                self._services.pop(service["metadata"]["uid"], None)
            else:
                self._services[service["metadata"]["uid"]] = service
        self._dns_dirty.set()

    def _dns_loop(self) -> None:
        while not self._stop.is_set():
            self._dns_dirty.wait(DNS_RESYNC_SECONDS)
            self._dns_dirty.clear()
            if self._stop.is_set():
                return
            try:
                self._update_hosts()
            except Exception:
                log.exception("hosts file update failed; retrying in %.0fs", DNS_RESYNC_SECONDS)

    def _update_hosts(self) -> None:
        with self._hosts_lock:
            with self._lock:
                pods = [_with_ip(pod, self._assigned_ips.get(uid)) for uid, pod in self._pods.items()]
                services = list(self._services.values())
            self.hosts.update(pods, services)

    # ----------------------------------------------------------------- faults

    def _worker_for(self, namespace: str, pod: str) -> PodWorker:
        with self._lock:
            candidates = [w for w in self._workers.values() if w.namespace == namespace and w.name == pod]
        if not candidates:
            raise ContainerNotRunning(f"pod {namespace}/{pod} is not running on node {self.settings.node_name}")
        live = [w for w in candidates if not (w.pod.get("metadata") or {}).get("deletionTimestamp")]
        return (live or candidates)[-1]

    def _process(self, namespace: str, pod: str, container: str) -> ContainerProcess:
        process = self._worker_for(namespace, pod).process_of(container)
        if process is None:
            raise ContainerNotRunning(f"container {container} of pod {namespace}/{pod} has no running process")
        return process

    def crash_container(self, namespace: str, pod: str, container: str) -> int:
        """SIGKILL the container's process group (the restart policy then applies); returns the pid."""
        process = self._process(namespace, pod, container)
        log.info("%s/%s: fault: crashing container %s (pid %s)", namespace, pod, container, process.pid)
        process.send(signal.SIGKILL)
        return int(process.pid or 0)

    def freeze_container(self, namespace: str, pod: str, container: str) -> int:
        """SIGSTOP the container's process group: it stays alive but does nothing."""
        process = self._process(namespace, pod, container)
        log.info("%s/%s: fault: freezing container %s (pid %s)", namespace, pod, container, process.pid)
        process.send(signal.SIGSTOP)
        return int(process.pid or 0)

    def thaw_container(self, namespace: str, pod: str, container: str) -> int:
        process = self._process(namespace, pod, container)
        log.info("%s/%s: fault: thawing container %s (pid %s)", namespace, pod, container, process.pid)
        process.send(signal.SIGCONT)
        return int(process.pid or 0)

    def pod_process_pid(self, namespace: str, pod: str, container: str) -> int | None:
        try:
            return self._process(namespace, pod, container).pid
        except ContainerNotRunning:
            return None

    def stop_node(self) -> None:
        """Power cut: kill every pod process, stop heartbeats, report the node and its pods not ready,
        and act on no pod until start_node()."""
        if self._node_down.is_set():
            return
        log.warning("fault: stopping node %s", self.settings.node_name)
        self._node_down.set()
        with self._lock:
            workers = list(self._workers.values())
        threads = [threading.Thread(target=w.node_stopped, daemon=True) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.node.mark_down()

    def start_node(self) -> None:
        """Back from the power cut: Ready again; containers restart per their pods' restart policy."""
        if not self._node_down.is_set():
            return
        log.warning("fault: starting node %s again", self.settings.node_name)
        self._node_down.clear()
        self.node.wake()
        with self._lock:
            workers = list(self._workers.values())
            pending = [p for p in self._pods.values() if not (p.get("spec") or {}).get("nodeName")]
        for worker in workers:
            worker.wake()
        for pod in pending:
            self._on_pod_event("MODIFIED", pod)

    def node_is_down(self) -> bool:
        return self._node_down.is_set()

    # ----------------------------------------------------------------- logs

    def container_log_path(self, namespace: str, pod: str, container: str, previous: bool = False) -> Path | None:
        """The log file of the container's current (or previous) run, if any."""
        with self._lock:
            uids = [uid for uid, p in self._pods.items()
                    if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == pod]
        if not uids:
            return None
        directory = self.settings.logs_dir / f"{namespace}_{pod}_{uids[-1]}" / container
        runs = sorted(directory.glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
        if previous:
            return runs[-2] if len(runs) >= 2 else None
        return runs[-1] if runs else None

    def container_running(self, namespace: str, pod: str, container: str) -> bool:
        return self.pod_process_pid(namespace, pod, container) is not None


def _with_ip(pod: dict[str, Any], ip: str | None) -> dict[str, Any]:
    """`pod` with status.podIP filled in from our own assignment when its status lacks one yet."""
    status = pod.get("status") or {}
    if ip is None or status.get("podIP"):
        return pod
    return {**pod, "status": {**status, "podIP": ip}}
