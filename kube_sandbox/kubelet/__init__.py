"""The process kubelet: a Kubernetes node whose containers are local processes (see ProcessKubelet)."""
from kube_sandbox.kubelet.kubelet import ContainerNotRunning, ProcessKubelet
from kube_sandbox.kubelet.settings import KubeletSettings

__all__ = ["ContainerNotRunning", "KubeletSettings", "ProcessKubelet"]
