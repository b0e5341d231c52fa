"""A spec.TLS.issued cluster's CA Secret loses the cluster's owner reference right before a
restore replaces the cluster, so the garbage collector keeps it for the restored cluster; nothing
else is touched."""
from __future__ import annotations

from typing import Any

from kube_adapter.errors import NotFound
from restore_operator.acting import keep_issued_ca

UID = "old-uid"
ISSUED: dict[str, Any] = {"size": 3, "TLS": {"issued": {}}}


class Secrets:
    def __init__(self, secrets: dict[str, dict[str, Any]]) -> None:
        self.secrets = secrets
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        if name not in self.secrets:
            raise NotFound(f"secret {name}")
        return self.secrets[name]

    def patch(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((name, body))
        return body


def _ca(owner: str) -> dict[str, dict[str, Any]]:
    return {"example-tls-ca": {"metadata": {"name": "example-tls-ca", "resourceVersion": "9",
                                            "ownerReferences": [{"kind": "EtcdCluster", "uid": owner}]}}}


def test_the_ca_of_the_replaced_issued_cluster_is_kept() -> None:
    secrets = Secrets(_ca(UID))
    assert keep_issued_ca(secrets, "ns", "example", ISSUED, UID) == "example-tls-ca"  # type: ignore[arg-type]
    assert secrets.patches == [("example-tls-ca", {"metadata": {"resourceVersion": "9", "ownerReferences": None}})]


def test_nothing_is_kept_without_issued_tls_a_ca_secret_or_the_clusters_ownership() -> None:
    for spec, present, owner in (({"size": 3}, True, UID), ({"size": 3, "TLS": {"static": {}}}, True, UID),
                                 (ISSUED, False, UID), (ISSUED, True, "someone-else")):
        secrets = Secrets(_ca(owner) if present else {})
        assert keep_issued_ca(secrets, "ns", "example", spec, UID) == ""  # type: ignore[arg-type]
        assert secrets.patches == []
