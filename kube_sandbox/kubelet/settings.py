"""What the process kubelet needs to know about its sandbox; built by the daemon from SandboxConfig."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path


def instance_of(state_dir: Path) -> str:
    """KubeletSettings.instance of a kubelet whose state is in `state_dir`."""
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:6]


@dataclass(frozen=True)
class KubeletSettings:
    """Fixed configuration of one process kubelet.

    node_names       the Nodes this kubelet registers and runs pods for (those the scheduler binds
                     to them); node i gets pod IPs `<prefix>.<64i..64i+63>.y` (ipam.py)
    host_ip          every Node's InternalIP and every pod's status.hostIP (loopback)
    pod_ip_prefix    first two octets of pod IPs: pods get `<prefix>.x.y` (loopback)
    state_dir        root of everything the kubelet writes: pods/ (per-pod volumes and working
                     dirs), pvc/ (claim directories that outlive pods), logs/ (container logs),
                     images/ (per-image bin dirs), pids/ (for reaping orphans after a crash),
                     runc/ (runc's state of local images' containers)
    hosts_file       the hosts file bind-mounted over /etc/hosts; rewritten in place
    apiserver_host   what pods get as KUBERNETES_SERVICE_HOST (loopback, never a service IP)
    apiserver_port   what pods get as KUBERNETES_SERVICE_PORT
    ca_cert          the cluster CA; written as ca.crt into service-account token volumes
    venv_bin_dir     bin dir of this checkout's virtualenv (python, etcd-operator, etcdctl)
    source_dir       this checkout: first on the import path of the operator image's programs
                     (None: whatever the virtualenv has installed)
    cluster_domain   DNS suffix of services and pods (`cluster.local`)
    kubelet_port     HTTPS port of the container-log server (`kubectl logs`); 0 disables it
    etcd_binaries    etcd version ("3.6.16") -> directory holding etcd, etcdctl (and etcdutl)
    dns_address      loopback address of the cluster DNS server (UDP port 53); "" runs none
    kubelet_version  what the Nodes report as status.nodeInfo.kubeletVersion (`v1.37.2`)
    use_cgroups      put each pod in its own cgroups (cgroups.py) when the machine allows it;
                     needed for resource limits and the partition and slow-disk faults
    """

    node_names: tuple[str, ...]
    state_dir: Path
    hosts_file: Path
    apiserver_port: int
    ca_cert: Path
    venv_bin_dir: Path
    source_dir: Path | None = None
    host_ip: str = "127.0.0.1"
    pod_ip_prefix: str = "127.1"
    apiserver_host: str = "127.0.0.1"
    cluster_domain: str = "cluster.local"
    kubelet_port: int = 0
    etcd_binaries: dict[str, Path] = field(default_factory=dict)
    dns_address: str = ""
    kubelet_version: str = "v0.0.0"
    use_cgroups: bool = False

    @property
    def instance(self) -> str:
        """Six hex digits naming this sandbox in what the machine shares (cgroups, iptables chains),
        so two sandboxes (another SANDBOX_DIR) never touch each other's."""
        return instance_of(self.state_dir)

    @property
    def pods_dir(self) -> Path:
        return self.state_dir / "pods"

    @property
    def pvc_dir(self) -> Path:
        return self.state_dir / "pvc"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def images_dir(self) -> Path:
        return self.state_dir / "images"

    @property
    def runc_root(self) -> Path:
        """runc's state of the containers of local images (runc.py)."""
        return self.state_dir / "runc"

    @property
    def pids_dir(self) -> Path:
        return self.state_dir / "pids"
