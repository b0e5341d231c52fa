"""The operator's client-certificate Secret as the etcd access tests read it: the Secret, a store
that answers reads of it and counts them, a clock to age it, and the TLS flags etcdctl is given."""
from __future__ import annotations

import base64
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd.access import EtcdAccess
from kube_adapter.errors import NotFound
from tests.unit.etcd_operator.etcd_cluster_builders import make_cluster

TLS_SPEC = {"TLS": {"static": {"member": {"peerSecret": "peer", "serverSecret": "server"},
                               "operatorSecret": "operator"}}}


def operator_secret(ca: bytes = b"CA", cert: bytes = b"CERT", key: bytes = b"KEY") -> dict[str, Any]:
    files = {c.OPERATOR_CA_FILE: ca, c.OPERATOR_CERT_FILE: cert, c.OPERATOR_KEY_FILE: key}
    return {"data": {name: base64.b64encode(content).decode() for name, content in files.items() if content}}


class SecretStore:
    """Answers secret reads from a dict (or raises the queued error) and counts them."""

    def __init__(self, secret: dict[str, Any] | None) -> None:
        self.secret = secret
        self.error: Exception | None = None
        self.reads: list[tuple[str, str]] = []

    def __call__(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads.append((namespace, name))
        if self.error is not None:
            raise self.error
        if self.secret is None:
            raise NotFound(f'secrets "{name}" not found', status=404, reason="NotFound")
        return self.secret


class Clock:
    """Monotonic seconds that move only when the test sets `now`."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tls_cluster() -> EtcdCluster:
    return make_cluster(TLS_SPEC)


def tls_flags(access: EtcdAccess, cluster: EtcdCluster) -> dict[str, str]:
    command = access.client(cluster, ["https://m:2379"]).command_line(["member", "list"])
    return {flag: command[command.index(flag) + 1] for flag in ("--cacert", "--cert", "--key")}
