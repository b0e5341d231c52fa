"""A cluster with `spec.TLS.issued` (issue 24): the operator issues a CA and the peer, server and
operator certificates into Secrets it owns (CoreOS file names), the members speak TLS with them
to each other and to clients, the cluster scales 3 -> 5 -> 3 on the same certificates (their
names are wildcards), and the Secrets go with the cluster. Mirrors test_tls_cluster.py."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.etcd_data import describe_members, read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.tls_certs import (
    IssuedClient,
    common_name,
    etcdctl,
    member_list,
    member_url,
    secret_files,
)

ROLES = ("ca", "peer", "server", "operator")
# The CoreOS file names in each leaf Secret, as spec.TLS.static reads them.
LEAF_KEYS = {
    "peer": {"peer.crt", "peer.key", "peer-ca.crt"},
    "server": {"server.crt", "server.key", "server-ca.crt"},
    "operator": {"etcd-client.crt", "etcd-client.key", "etcd-client-ca.crt"},
}


def _issued_secrets(clusters: Clusters, name: str) -> list[Any]:
    return [s for s in clusters.core.list_namespaced_secret(clusters.namespace).items
            if s.metadata.name in {f"{name}-tls-{role}" for role in ROLES}]


def _wait_holding(clusters: Clusters, endpoint: str, written: dict[str, str], flags: list[str]) -> None:
    """The member at `endpoint` holds exactly `written` in its own copy (a serializable read): a
    follower applies the last write a moment after the quorum acknowledged it."""
    seen: list[dict[str, str]] = []
    try:
        wait_for(lambda: seen.append(read_prefix(clusters.sandbox, [endpoint], "issued/", serializable=True,
                                                 flags=flags)) or seen[-1] == written,
                 timeout=15, interval=0.2, what=f"{endpoint} holding every write")
    except AssertionError as e:
        raise AssertionError(f"{e}; it has {seen[-1] if seen else None}") from None


def test_issued_tls_cluster_bootstraps_serves_over_tls_and_scales(clusters: Clusters, tmp_path: Path) -> None:
    name = "issued"
    ns = clusters.namespace
    created = clusters.create(etcd_cluster(name, size=3, TLS={"issued": {"validity": "720h"}}))
    status = clusters.wait_running(name, ready=3, timeout=240)

    # Four Secrets, owned by the cluster, with the CoreOS file names (what spec.TLS.static reads).
    secrets = {s.metadata.name: s for s in _issued_secrets(clusters, name)}
    assert sorted(secrets) == sorted(f"{name}-tls-{role}" for role in ROLES), sorted(secrets)
    for secret in secrets.values():
        owners = [(ref.kind, ref.name, ref.uid) for ref in secret.metadata.owner_references or ()]
        assert owners == [("EtcdCluster", name, created["metadata"]["uid"])], owners
    assert set(secrets[f"{name}-tls-ca"].data) == {"ca.crt", "ca.key"}
    for role, keys in LEAF_KEYS.items():
        assert set(secrets[f"{name}-tls-{role}"].data) == keys, (role, sorted(secrets[f"{name}-tls-{role}"].data))

    # status.tls: when each certificate ends (validity 720h), nothing wrong.
    tls_status = status.get("tls") or {}
    assert sorted(tls_status) == sorted(ROLES), status
    now = datetime.now(UTC)
    for role in ("peer", "server", "operator"):
        entry = tls_status[role]
        assert "problem" not in entry, (role, entry)
        not_after = datetime.fromisoformat(entry["notAfter"].replace("Z", "+00:00"))
        assert now + timedelta(days=29) < not_after <= now + timedelta(days=30, minutes=5), (role, entry)

    # Members advertise https for both peers and clients, under their DNS names.
    client = IssuedClient(clusters, name, tmp_path / "client")
    pods = {p.metadata.name: p for p in clusters.live_pods(name)}
    assert len(pods) == 3, sorted(pods)
    member_endpoints = [member_url(name, ns, member, 2379) for member in sorted(pods)]
    members = member_list(clusters, member_endpoints, client.flags())
    assert sorted(str(m.get("name")) for m in members) == sorted(pods), describe_members(members)
    for member in members:
        assert member["peerURLs"] == [member_url(name, ns, member["name"], 2380)], describe_members(members)
        assert member["clientURLs"] == [member_url(name, ns, member["name"], 2379)], describe_members(members)

    # Each port serves the certificate the operator issued for it.
    for member, pod in pods.items():
        peer = client.served_certificate(pod.status.pod_ip, 2380)
        server = client.served_certificate(pod.status.pod_ip, 2379)
        assert common_name(peer) == f"{name}-peer", f"{member} peer port served {peer}"
        assert common_name(server) == f"{name}-server", f"{member} client port served {server}"

    # Writes through the client service over TLS, read on every member.
    service = [f"https://{name}-client.{ns}.svc:2379"]
    written = {f"issued/{i:02d}": f"value-{i}" for i in range(10)}
    for key, value in written.items():
        etcdctl(clusters, service, client.flags(), "put", key, value)
    for endpoint in member_endpoints:
        _wait_holding(clusters, endpoint, written, client.flags())

    # No client certificate: refused.
    refused = clusters.sandbox.etcdctl(service, f"--cacert={client.ca}", "put", "issued/intruder", "x")
    assert refused.returncode != 0, f"write without a client certificate accepted: {refused.stdout}"

    # Scale 3 -> 5 -> 3: new members join over TLS on the same (wildcard) certificates.
    certificates_before = {secret: secret_files(clusters, secret) for secret in secrets}
    clusters.patch_spec(name, {"size": 5})
    clusters.wait_running(name, ready=5, timeout=300)
    live = sorted(p.metadata.name for p in clusters.live_pods(name))
    members = member_list(clusters, [member_url(name, ns, member, 2379) for member in live], client.flags())
    assert len(members) == 5 and not any(m.get("isLearner") for m in members), describe_members(members)
    for member in live:
        _wait_holding(clusters, member_url(name, ns, member, 2379), written, client.flags())
    clusters.patch_spec(name, {"size": 3})
    clusters.wait_running(name, ready=3, timeout=240)
    wait_for(lambda: len(clusters.live_pods(name)) == 3, timeout=60, what="surplus pods deleted")
    assert read_prefix(clusters.sandbox, service, "issued/", flags=client.flags()) == written
    assert {secret: secret_files(clusters, secret) for secret in secrets} == certificates_before, \
        "scaling re-issued certificates"
    reasons = [e.reason for e in clusters.events(name)]
    assert reasons.count("CertificatesIssued") == 1, reasons

    # The Secrets go with the cluster (owner references: the garbage collector deletes them).
    clusters.delete(name)
    wait_for(lambda: not _issued_secrets(clusters, name), timeout=90, what=f"{name}'s secrets garbage-collected")
