"""ProcessKubelet: the sandbox's Nodes. Runs the pods the scheduler binds to them as processes.

One kubelet serves all nodes (settings.node_names): each node has its own heartbeats, pod address
range and power switch (stop_node/start_node); the pod and service watches, the hosts file, the
cluster DNS server, the event sender and the log server are shared.

Threads: one heartbeat per node, a node watch, a pod watch (one PodWorker per pod on our nodes), a
claim watch (binding claims to volumes, provisioner.py), a service watch, the hosts-file writer, the
cluster DNS server, an event sender and the optional log server; all share one stop Event.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from kube_sandbox.kubelet.cgroups import CgroupsUnavailable, block_device_of, machine_layout, remove_leftovers
from kube_sandbox.kubelet.containers import ContainerProcess, reap_orphans
from kube_sandbox.kubelet.dns import HostsFile
from kube_sandbox.kubelet.dns_server import DnsServer
from kube_sandbox.kubelet.events import EventRecorder
from kube_sandbox.kubelet.images import ImageCatalog
from kube_sandbox.kubelet.ipam import IpAllocator, node_blocks
from kube_sandbox.kubelet.kube_api import ApiError, KubeApi, NotFound, object_path
from kube_sandbox.kubelet.node import INSTANCE_TYPE_LABEL, SANDBOX_INSTANCE_TYPE, NodeAgent
from kube_sandbox.kubelet.partitions import Partitions, PodAddress
from kube_sandbox.kubelet.pods import TERMINAL_PHASES, PodServices, PodWorker
from kube_sandbox.kubelet.provisioner import ClaimBinder
from kube_sandbox.kubelet.runc import LocalImages, delete_all
from kube_sandbox.kubelet.settings import KubeletSettings
from kube_sandbox.kubelet.volumes import VolumeManager
from kube_sandbox.kubelet.watching import list_and_watch

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 3.0  # SIGTERM -> SIGKILL when the kubelet itself stops
JOIN_SECONDS = 5.0
DNS_RESYNC_SECONDS = 5.0


class ContainerNotRunning(LookupError):
    """A fault was aimed at a container that has no running process on any node."""


class UnknownNode(LookupError):
    """A node fault named a node this kubelet does not run."""


@dataclass(frozen=True)
class LocalNode:
    """One of the kubelet's Nodes: its heartbeats, its power switch, and what its pod workers share."""

    name: str
    agent: NodeAgent
    down: threading.Event  # set between stop_node() and start_node()
    services: PodServices


class ProcessKubelet:
    def __init__(self, api_client: k8s.ApiClient, settings: KubeletSettings) -> None:
        if not settings.node_names:
            raise ValueError("the process kubelet needs at least one node name")
        self.settings = settings
        self.api = KubeApi(api_client)
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._workers: dict[str, PodWorker] = {}
        self._pods: dict[str, dict[str, Any]] = {}  # every pod in the cluster, by uid (for DNS)
        self._services: dict[str, dict[str, Any]] = {}
        # Pod IPs handed out by our workers but maybe not yet in the watched pod (status in flight).
        self._assigned_ips: dict[str, str] = {}
        self._hosts_lock = threading.Lock()  # one hosts update at a time, each from a newer snapshot
        self._dns_dirty = threading.Event()
        self._first_pod_list = True
        self._first_node_list = True
        self.events = EventRecorder(self.api, self._stop)
        self.hosts = HostsFile(settings.hosts_file, settings.cluster_domain)
        # Local images (`localhost/...`, what `make image` builds) run in runc, which needs root.
        self.local_images = (LocalImages(prefix=f"ksb-{settings.instance}-")
                             if os.geteuid() == 0 and shutil.which("runc") and shutil.which("buildah") else None)
        images = ImageCatalog(settings.etcd_binaries, settings.venv_bin_dir, settings.images_dir,
                              settings.source_dir, self.local_images)
        volumes = VolumeManager(self.api, settings)
        layout = machine_layout() if settings.use_cgroups else None
        self.cgroups = replace(layout, group=f"kube-sandbox-{settings.instance}") if layout else None
        self.partitions = Partitions(name=f"KSB-{settings.instance.upper()}")
        self.nodes: dict[str, LocalNode] = {}
        for index, name in enumerate(settings.node_names):
            down = threading.Event()
            services = PodServices(
                api=self.api, settings=settings, node_name=name,
                ipam=IpAllocator(settings.pod_ip_prefix, node_blocks(index)), images=images, volumes=volumes,
                events=self.events, stop=self._stop, node_down=down, on_worker_done=self._worker_done,
                on_address_assigned=self._address_assigned, cgroups=self.cgroups, partitions=self.partitions,
                local_images=self.local_images,
            )
            agent = NodeAgent(self.api, settings, name, index, self._stop, down)
            self.nodes[name] = LocalNode(name, agent, down, services)
        self.claims = ClaimBinder(self.api, settings, self._stop)
        self._threads: list[threading.Thread] = []
        self._log_server: Any = None
        self._dns_server: DnsServer | None = None

    # ----------------------------------------------------------------- start / stop

    def start(self) -> None:
        """Start all threads and return; the node registers as soon as the API answers."""
        s = self.settings
        ranges = ", ".join(f"{n.name} {n.services.ipam.prefix}.{n.services.ipam.blocks.start}-"
                           f"{n.services.ipam.blocks.stop - 1}.y" for n in self.nodes.values())
        log.info("process kubelet starting: nodes %s (pod IPs %s), host IP %s, state %s, hosts file %s, "
                 "apiserver %s:%d, etcd versions %s, kubelet version %s", list(self.nodes), ranges, s.host_ip,
                 s.state_dir, s.hosts_file, s.apiserver_host, s.apiserver_port, sorted(s.etcd_binaries) or "none",
                 s.kubelet_version)
        for directory in (s.pods_dir, s.pvc_dir, s.logs_dir, s.images_dir, s.pids_dir):
            directory.mkdir(parents=True, exist_ok=True)
        reap_orphans(s.pids_dir)
        self._remove_local_containers()
        if self.cgroups is not None:
            self.partitions.reset()  # first: no rule may name a cgroup removed next
            remove_leftovers(self.cgroups)
        self.events.start()
        for node in self.nodes.values():
            node.agent.start()
        self._spawn("kubelet-nodes", lambda: list_and_watch(
            self.api, object_path("", "v1", "nodes"), self._stop, self._on_node_list, self._on_node_event, "nodes"))
        self._spawn("kubelet-pods", lambda: list_and_watch(
            self.api, object_path("", "v1", "pods"), self._stop, self._on_pod_list, self._on_pod_event, "pods"))
        self._spawn("kubelet-claims", self.claims.run)
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

    def wait_until_registered(self, timeout: float) -> bool:
        """Whether every node registered (and reported its first status) within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        return all(node.agent.registered.wait(max(deadline - time.monotonic(), 0.0)) for node in self.nodes.values())

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
        self._remove_local_containers()
        self.claims.unmount_all()
        if self.cgroups is not None:
            self.partitions.remove()
            remove_leftovers(self.cgroups)  # the processes are gone; a later kubelet makes new groups
        self.api.close()
        for thread in [*self._threads, *(w.thread for w in workers)]:
            if thread.is_alive():
                thread.join(JOIN_SECONDS)
        log.info("process kubelet stopped")

    def _remove_local_containers(self) -> None:
        """runc containers and their root filesystems not (or no longer) in use by a worker."""
        if self.local_images is not None:
            delete_all(self.settings.runc_root)
            self.local_images.remove_leftovers()

    # ----------------------------------------------------------------- nodes

    def _on_node_list(self, nodes: list[dict[str, Any]]) -> None:
        for listed in nodes:  # an absent node is re-registered when its next status update finds it gone
            local = self.nodes.get(listed["metadata"]["name"])
            if local is not None:
                local.agent.observe(listed)
        if self._first_node_list:
            self._first_node_list = False
            self._delete_stale_nodes(nodes)

    def _on_node_event(self, event_type: str, node: dict[str, Any]) -> None:
        local = self.nodes.get(node["metadata"]["name"])
        if local is not None:
            local.agent.observe(None if event_type == "DELETED" else node)

    def _delete_stale_nodes(self, nodes: list[dict[str, Any]]) -> None:
        """Nodes an earlier sandbox registered under other names would stay NotReady for ever."""
        for node in nodes:
            metadata = node["metadata"]
            if (metadata["name"] not in self.nodes
                    and (metadata.get("labels") or {}).get(INSTANCE_TYPE_LABEL) == SANDBOX_INSTANCE_TYPE):
                try:
                    self.api.delete(object_path("", "v1", "nodes", name=metadata["name"]))
                    log.info("deleted node %s, which no longer exists in this sandbox", metadata["name"])
                except NotFound:
                    pass
                except ApiError as e:
                    log.warning("could not delete stale node %s: %s", metadata["name"], e)

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
        ours = [p for p in pods if (p.get("spec") or {}).get("nodeName") in self.nodes]
        for pod in ours:
            status = pod.get("status") or {}
            ipam = self.nodes[pod["spec"]["nodeName"]].services.ipam
            if (status.get("podIP") and status.get("phase") not in TERMINAL_PHASES
                    and not (pod.get("spec") or {}).get("hostNetwork")):
                if not ipam.reserve(pod["metadata"]["uid"], status["podIP"]):
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
        node = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
        if node is None:
            return  # not scheduled yet (the scheduler binds it), or on a node that is not ours
        with self._lock:
            if self._stop.is_set():
                return
            worker = self._workers.get(uid)
            if worker is None:
                worker = PodWorker(pod, node.services)
                self._workers[uid] = worker
                worker.start()
                return
        worker.update(pod)

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
            raise ContainerNotRunning(f"pod {namespace}/{pod} is not running on any of the nodes {list(self.nodes)}")
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

    def pod_address(self, namespace: str, pod: str) -> PodAddress:
        """The address and v2 cgroup of a running pod, for the partition fault."""
        worker = self._worker_for(namespace, pod)
        if worker.cgroups is None:
            raise CgroupsUnavailable("pods run without cgroups on this machine: partitions cannot be made")
        if worker.ip is None:
            raise ContainerNotRunning(f"pod {namespace}/{pod} has no address yet")
        return PodAddress(namespace, pod, worker.uid, worker.ip, worker.cgroups.net_path)

    def partition(self, sources: list[tuple[str, str]], targets: list[tuple[str, str]], both_ways: bool) -> str:
        """Cut the `sources` pods from the `targets` pods ((namespace, name) each); the cut's id."""
        return self.partitions.cut([self.pod_address(*p) for p in sources], [self.pod_address(*p) for p in targets],
                                   both_ways)

    def isolate(self, namespace: str, pod: str) -> str:
        """Cut one pod from every other running pod, both ways; the cut's id."""
        with self._lock:
            others = [(w.namespace, w.name) for w in self._workers.values()
                      if w.cgroups is not None and w.ip is not None and not (w.namespace == namespace and w.name == pod)]
        return self.partition([(namespace, pod)], others, both_ways=True)

    def heal(self, cut_id: str | None = None) -> list[str]:
        return self.partitions.heal(cut_id)

    def slow_disk(self, namespace: str, pod: str, write_iops: int | None, write_bytes_per_second: int | None) -> str:
        """Throttle the pod's writes to the disk under the kubelet's state (where its volumes are);
        zero or None for both lifts the throttle. Returns the device throttled."""
        worker = self._worker_for(namespace, pod)
        if worker.cgroups is None:
            raise CgroupsUnavailable("pods run without cgroups on this machine: disks cannot be slowed")
        device = block_device_of(self.settings.state_dir)
        worker.cgroups.throttle_disk(device, write_iops, write_bytes_per_second)
        log.warning("%s/%s: fault: disk %s writes limited to %s IO/s, %s B/s", namespace, pod, device,
                    write_iops or "any", write_bytes_per_second or "any")
        return device

    def cap_memory(self, namespace: str, pod: str, container: str, limit_bytes: int | None) -> None:
        """The memory-squeeze fault (cgroups.PodCgroups.cap_memory); None lifts it."""
        worker = self._worker_for(namespace, pod)
        if worker.cgroups is None:
            raise CgroupsUnavailable("pods run without cgroups on this machine: memory cannot be capped")
        worker.cgroups.cap_memory(container, limit_bytes)
        log.warning("%s/%s: fault: container %s memory capped at %s from its next start", namespace, pod, container,
                    limit_bytes or "its own limit")

    def fill_volume(self, namespace: str, claim: str, leave_bytes: int | None) -> str:
        """The no-space fault of a sized claim (provisioner.ClaimBinder.fill); None lifts it."""
        return self.claims.fill(namespace, claim, leave_bytes)

    def _node(self, name: str) -> LocalNode:
        node = self.nodes.get(name)
        if node is None:
            raise UnknownNode(f"no node {name!r}; the nodes are {list(self.nodes)}")
        return node

    def _workers_on(self, node: LocalNode) -> list[PodWorker]:
        with self._lock:
            return [w for w in self._workers.values() if w.services is node.services]

    def stop_node(self, name: str) -> None:
        """Power cut of one node: kill its pod processes and stop its heartbeats; act on none of its
        pods until start_node(). The node-lifecycle controller then marks the node and its pods."""
        node = self._node(name)
        if node.down.is_set():
            return
        log.warning("fault: stopping node %s", name)
        node.down.set()
        threads = [threading.Thread(target=w.node_stopped, daemon=True) for w in self._workers_on(node)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def start_node(self, name: str) -> None:
        """Power back on: heartbeats resume (Ready again), containers restart per their restart policy."""
        node = self._node(name)
        if not node.down.is_set():
            return
        log.warning("fault: starting node %s again", name)
        node.down.clear()
        node.agent.wake()
        for worker in self._workers_on(node):
            worker.wake()

    def node_is_down(self, name: str) -> bool:
        return self._node(name).down.is_set()

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
