"""The real Kubernetes control plane of the sandbox: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler."""
from __future__ import annotations

import logging
import ssl
import threading
import urllib.error
import urllib.request

from kube_sandbox import binaries
from kube_sandbox.certs import admin_token
from kube_sandbox.config import HOST_IP, SERVICE_CIDR, SandboxConfig
from kube_sandbox.processes import ManagedProcess

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_SECONDS = 90.0
POLL_SECONDS = 0.25

# The controllers our tests and operators rely on. No endpoints/endpointslice controllers (they
# reject loopback pod IPs; the process kubelet resolves Services itself) and no node-ipam (pod
# ranges are the process kubelet's, per node).
CONTROLLERS = (
    "garbage-collector-controller", "namespace-controller", "serviceaccount-controller",
    "serviceaccount-token-controller", "root-ca-certificate-publisher-controller", "deployment-controller",
    "replicaset-controller", "statefulset-controller", "job-controller", "cronjob-controller",
    "ttl-after-finished-controller", "disruption-controller", "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller", "node-lifecycle-controller", "taint-eviction-controller",
    "pod-garbage-collector-controller",
)
# A node whose kubelet stops heartbeating (its Lease renews every few seconds) is NotReady after
# this long; the real default is 50 s, shortened so node-loss tests finish in reasonable time.
NODE_MONITOR_GRACE_PERIOD = "20s"
NODE_MONITOR_PERIOD = "2s"


class ComponentFailed(RuntimeError):
    """A control-plane process exited or never became ready; the message carries its log tail."""


class ControlPlane:
    def __init__(self, config: SandboxConfig, stop: threading.Event) -> None:
        self.config = config
        self.stop_event = stop
        self.lock = threading.Lock()  # held while a component is deliberately restarted
        logs = config.logs_dir
        pki = config.pki_dir
        kube = binaries.kube_bin_dir()
        self.etcd = ManagedProcess("storage-etcd", [
            str(binaries.etcd_for_storage()),
            "--name=storage", f"--data-dir={config.state_dir / 'storage-etcd'}",
            f"--listen-client-urls=http://{HOST_IP}:{config.storage_etcd_client_port}",
            f"--advertise-client-urls=http://{HOST_IP}:{config.storage_etcd_client_port}",
            f"--listen-peer-urls=http://{HOST_IP}:{config.storage_etcd_peer_port}",
            f"--initial-advertise-peer-urls=http://{HOST_IP}:{config.storage_etcd_peer_port}",
            f"--initial-cluster=storage=http://{HOST_IP}:{config.storage_etcd_peer_port}",
            "--quota-backend-bytes=4294967296",
        ], logs / "storage-etcd.log")
        self.apiserver = ManagedProcess("kube-apiserver", [
            str(kube / "kube-apiserver"),
            f"--etcd-servers=http://{HOST_IP}:{config.storage_etcd_client_port}",
            f"--bind-address={HOST_IP}", f"--advertise-address={HOST_IP}",
            f"--secure-port={config.apiserver_port}",
            f"--cert-dir={pki / 'apiserver-generated'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--endpoint-reconciler-type=none",  # Endpoints refuse loopback addresses
            f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            "--allow-privileged=true", "--profiling=false", "--event-ttl=1h",
        ], logs / "kube-apiserver.log")
        self.controller_manager = ManagedProcess("kube-controller-manager", [
            str(kube / "kube-controller-manager"),
            f"--kubeconfig={config.kubeconfig}",
            f"--authentication-kubeconfig={config.kubeconfig}",
            f"--authorization-kubeconfig={config.kubeconfig}",
            f"--bind-address={HOST_IP}", f"--secure-port={config.controller_manager_port}",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--node-monitor-grace-period={NODE_MONITOR_GRACE_PERIOD}", f"--node-monitor-period={NODE_MONITOR_PERIOD}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false", "--leader-elect=false",
            "--kube-api-qps=100", "--kube-api-burst=200", "--profiling=false",
        ], logs / "kube-controller-manager.log")
        self.scheduler = ManagedProcess("kube-scheduler", [
            str(kube / "kube-scheduler"),
            f"--kubeconfig={config.kubeconfig}",
            f"--authentication-kubeconfig={config.kubeconfig}",
            f"--authorization-kubeconfig={config.kubeconfig}",
            f"--bind-address={HOST_IP}", f"--secure-port={config.scheduler_port}",
            "--leader-elect=false", "--profiling=false",
        ], logs / "kube-scheduler.log")

    def start(self) -> None:
        self.etcd.start()
        self._wait_ready(self.etcd, f"http://{HOST_IP}:{self.config.storage_etcd_client_port}/health")
        self.start_apiserver()
        self.controller_manager.start()
        self.scheduler.start()

    def start_apiserver(self) -> None:
        self.apiserver.start()
        self._wait_ready(self.apiserver, f"{self.config.apiserver_url}/readyz")

    def restart_apiserver(self) -> None:
        log.info("restarting kube-apiserver")
        with self.lock:
            self.apiserver.stop()
            self.start_apiserver()

    def stop(self) -> None:
        for process in (self.scheduler, self.controller_manager, self.apiserver, self.etcd):
            process.stop()

    def processes(self) -> tuple[ManagedProcess, ...]:
        """Every control-plane process, in start order."""
        return (self.etcd, self.apiserver, self.controller_manager, self.scheduler)

    def _wait_ready(self, process: ManagedProcess, url: str) -> None:
        context = ssl.create_default_context(cafile=str(self.config.ca_cert))
        headers = {"Authorization": f"Bearer {admin_token(self.config)}"}
        deadline_ticks = int(STARTUP_TIMEOUT_SECONDS / POLL_SECONDS)
        last_error = ""
        for _ in range(deadline_ticks):
            if not process.running():
                raise ComponentFailed(f"{process.name} exited during start-up:\n{process.tail()}")
            try:
                request = urllib.request.Request(url, headers=headers)
                with urllib.request.urlopen(request, timeout=2, context=context if url.startswith("https") else None) as r:
                    if r.status == 200:
                        log.info("%s is ready", process.name)
                        return
            except (urllib.error.URLError, OSError) as e:
                last_error = str(e)
            if self.stop_event.wait(POLL_SECONDS):
                raise ComponentFailed(f"stopped while waiting for {process.name}")
        raise ComponentFailed(f"{process.name} not ready after {STARTUP_TIMEOUT_SECONDS}s ({last_error}):\n{process.tail()}")
