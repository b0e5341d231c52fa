"""Where the sandbox keeps its state and which loopback addresses and ports it uses."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path

CHECKOUT_DIR = Path(__file__).resolve().parent.parent
# The process kubelet's Nodes; each owns a range of pod IPs (kubelet/ipam.py). At most 4.
NODE_NAMES = ("sandbox-node-1", "sandbox-node-2", "sandbox-node-3")
# Every address below is in 127.0.0.0/8: nothing the sandbox runs talks to anything else.
HOST_IP = "127.0.0.1"
POD_IP_PREFIX = "127.1"  # pod IPs are 127.1.x.y
SERVICE_CIDR = "127.96.0.0/16"
CLUSTER_DOMAIN = "cluster.local"
# Azurite's fixed development account (published in Azurite's README; not a secret): the only
# account its blob service (the sandbox's ABS) serves.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass(frozen=True)
class SandboxConfig:
    state_dir: Path
    apiserver_port: int = 16443
    storage_etcd_client_port: int = 16379
    storage_etcd_peer_port: int = 16380
    controller_manager_port: int = 16257
    scheduler_port: int = 16259
    kubelet_port: int = 16250
    control_api_port: int = 16480
    s3_port: int = 16333  # SeaweedFS also takes the five ports after it (and each + 10000, gRPC)
    abs_port: int = 16341  # Azurite's blob service
    gcs_port: int = 16342  # fake-gcs-server
    s3_access_key: str = "sandbox-access-key"
    s3_secret_key: str = "sandbox-secret-key"
    pod_ip_prefix: str = POD_IP_PREFIX

    @classmethod
    def from_env(cls) -> SandboxConfig:
        """$SANDBOX_DIR picks the state dir; $SANDBOX_PORT_OFFSET shifts every port and
        $SANDBOX_POD_IP_PREFIX (e.g. 127.2) moves the pod IPs, for a second sandbox beside the first."""
        state_dir = Path(os.environ.get("SANDBOX_DIR", str(CHECKOUT_DIR / ".sandbox"))).resolve()
        offset = int(os.environ.get("SANDBOX_PORT_OFFSET", "0"))
        defaults = cls(state_dir=state_dir)
        ports = {f.name: getattr(defaults, f.name) + offset for f in fields(cls) if f.name.endswith("_port")}
        pod_ip_prefix = os.environ.get("SANDBOX_POD_IP_PREFIX", POD_IP_PREFIX)
        if not pod_ip_prefix.startswith("127."):
            raise ValueError(f"SANDBOX_POD_IP_PREFIX must be in 127.0.0.0/8, not {pod_ip_prefix!r}")
        return cls(state_dir=state_dir, pod_ip_prefix=pod_ip_prefix, **ports)

    # --- addresses
    @property
    def apiserver_url(self) -> str:
        return f"https://{HOST_IP}:{self.apiserver_port}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{HOST_IP}:{self.s3_port}"

    @property
    def abs_endpoint(self) -> str:
        """Azurite's blob service URL of its development account (path-style)."""
        return f"http://{HOST_IP}:{self.abs_port}/{AZURITE_ACCOUNT}"

    @property
    def gcs_endpoint(self) -> str:
        """fake-gcs-server's JSON API (any credentials accepted)."""
        return f"http://{HOST_IP}:{self.gcs_port}"

    @property
    def dns_address(self) -> str:
        """The cluster DNS server (UDP 53): `<pod prefix>.0.0`, an address pod IPs never take (x.y, y >= 1)."""
        return f"{self.pod_ip_prefix}.0.0"

    @property
    def control_api_url(self) -> str:
        return f"http://{HOST_IP}:{self.control_api_port}"

    # --- paths
    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def ca_cert(self) -> Path:
        return self.pki_dir / "ca.crt"

    @property
    def admin_token_file(self) -> Path:
        return self.pki_dir / "admin-token"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def hosts_file(self) -> Path:
        return self.state_dir / "hosts"

    @property
    def resolv_conf(self) -> Path:
        return self.state_dir / "resolv.conf"

    @property
    def kubelet_dir(self) -> Path:
        return self.state_dir / "kubelet"

    @property
    def daemon_pid_file(self) -> Path:
        return self.state_dir / "daemon.pid"

    @property
    def venv_bin_dir(self) -> Path:
        return Path(sys.executable).parent


def shifted_sandbox_env(state_dir: Path, port_shift: int, octet_shift: int) -> dict[str, str]:
    """The variables that name another sandbox beside the one this environment names: its state
    directory, every port moved by `port_shift`, pod addresses `octet_shift` /16s of loopback on
    (127.1 -> 127.<1 + octet_shift>)."""
    offset = int(os.environ.get("SANDBOX_PORT_OFFSET", "0")) + port_shift
    octet = int(os.environ.get("SANDBOX_POD_IP_PREFIX", POD_IP_PREFIX).split(".")[1])
    return {"SANDBOX_DIR": str(state_dir), "SANDBOX_PORT_OFFSET": str(offset),
            "SANDBOX_POD_IP_PREFIX": f"127.{(octet + octet_shift) % 256}"}
