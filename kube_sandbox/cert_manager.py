"""cert-manager for the sandbox's TLS.certManager tests: its CRDs, and its controller (built from
its Go module by scripts/install-tool-binaries.sh, scripts/tool-build/cert-manager/) run out of
cluster against the sandbox's apiserver with the admin kubeconfig. No webhook and no cainjector:
the CA and self-signed issuers need neither. A controller acts in one namespace only, so tests
running at the same time each start their own and never act on each other's objects; one acting in
every namespace (ClusterIssuers too) is for a test that runs alone."""
from __future__ import annotations

from pathlib import Path

from kube_sandbox import binaries
from kube_sandbox.config import CHECKOUT_DIR, SandboxConfig
from kube_sandbox.processes import ManagedProcess

CONTROLLER = "cert-manager-controller"
# The kinds the CA issuer path uses (the ACME CRDs are applied too: they cost nothing).
CRD_NAMES = ("certificates.cert-manager.io", "certificaterequests.cert-manager.io",
             "issuers.cert-manager.io", "clusterissuers.cert-manager.io")


def controller_binary() -> Path:
    """The controller `make deps` built (MissingBinary saying how to build it when it did not)."""
    return binaries.emulator(CONTROLLER, "cert-manager")


def crd_directory() -> Path:
    """cert-manager's CRDs, copied beside the controller's bin/ from its Go module."""
    directory = controller_binary().resolve().parent.parent / "crds"
    if not (directory / "cert-manager.io_certificates.yaml").is_file():
        raise binaries.MissingBinary(f"cert-manager's CRDs are missing from {directory}: run "
                                     f"`bash {CHECKOUT_DIR / 'scripts/install-tool-binaries.sh'}`")
    return directory


def controller_argv(config: SandboxConfig, namespace: str, cluster_resource_namespace: str = "") -> list[str]:
    argv = [str(controller_binary()), f"--kubeconfig={config.kubeconfig}", f"--namespace={namespace}", "--v=2"]
    if cluster_resource_namespace:
        argv.append(f"--cluster-resource-namespace={cluster_resource_namespace}")
    return argv


def start_controller(config: SandboxConfig, namespace: str, log_file: Path, *,
                     cluster_resource_namespace: str = "") -> ManagedProcess:
    """The controller acting in `namespace` ("": every namespace, and ClusterIssuers, whose
    secrets it reads in `cluster_resource_namespace`), its log in `log_file`; stop it with `.stop()`."""
    label = namespace or "every namespace"
    process = ManagedProcess(f"{CONTROLLER} ({label})",
                             controller_argv(config, namespace, cluster_resource_namespace), log_file)
    process.start()
    return process
