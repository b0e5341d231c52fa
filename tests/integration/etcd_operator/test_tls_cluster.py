"""A cluster with CoreOS `spec.TLS.static` secrets: members speak TLS to each other and to clients,
accept only clients with a certificate from the cluster's CA, and a lost member is replaced over TLS.
And CoreOS's layout with a server certificate that server-ca.crt did not sign (issue 41, finding
13) reaches Running 3/3 on etcd 3.5 and 3.6, although etcd's own JSON gateway refuses it."""
from __future__ import annotations

import ssl
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.etcd_data import describe_members, read_prefix, started
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.tls_certs import (
    CERT_DAYS,
    CertificateAuthority,
    ClusterCertificates,
    common_name,
    coreos_static_tls,
    etcdctl,
    member_list,
    member_url,
    served_certificate,
)


def _member_url(tls: ClusterCertificates, member: str, port: int) -> str:
    return member_url(tls.cluster, tls.namespace, member, port)


def _member_list(clusters: Clusters, tls: ClusterCertificates, endpoints: list[str]) -> list[dict[str, Any]]:
    return member_list(clusters, endpoints, tls.client_flags())


def _served_certificate(address: str, port: int, tls: ClusterCertificates) -> dict[str, Any]:
    """Handshake with `address:port` as the operator, a client of the cluster's CA."""
    return served_certificate(address, port, ca_file=tls.ca.cert_file, cert_file=tls.operator.cert_file,
                              key_file=tls.operator.key_file)


def _failed_mounts(clusters: Clusters, name: str) -> list[str]:
    """Messages of FailedMount events of the cluster's pods (a secret volume that cannot be set up)."""
    pods = {p.metadata.name for p in clusters.pods(name)}
    events = clusters.core.list_namespaced_event(clusters.namespace, field_selector="reason=FailedMount").items
    return [str(e.message) for e in events if e.involved_object.name in pods]


def test_static_tls_cluster_serves_only_certified_clients_and_heals_over_tls(
        clusters: Clusters, tmp_path: Path) -> None:
    name = "secure"
    ns = clusters.namespace
    tls = coreos_static_tls(tmp_path / "pki", name, ns)
    # The cluster first, its secrets later (as `kubectl apply -f dir/` may well do): the seed pod
    # waits for its secret volumes, and the cluster comes up once they exist.
    clusters.create(etcd_cluster(name, size=3, TLS=tls.spec()))
    wait_for(lambda: _failed_mounts(clusters, name), timeout=60, what=f"{name}'s seed pod waiting for its secrets")
    for secret in tls.secrets():
        clusters.core.create_namespaced_secret(ns, secret)
    status = clusters.wait_running(name, ready=3, timeout=240)

    # Members advertise https for both peers and clients, under their DNS names.
    pods = {p.metadata.name: p for p in clusters.live_pods(name)}
    assert len(pods) == 3, sorted(pods)
    member_endpoints = [_member_url(tls, member, 2379) for member in sorted(pods)]
    members = _member_list(clusters, tls, member_endpoints)
    assert sorted(str(m.get("name")) for m in members) == sorted(pods), describe_members(members)
    for member in members:
        assert member["peerURLs"] == [_member_url(tls, member["name"], 2380)], describe_members(members)
        assert member["clientURLs"] == [_member_url(tls, member["name"], 2379)], describe_members(members)

    # Each port really serves TLS, with the certificate of its secret.
    for member, pod in pods.items():
        peer = _served_certificate(pod.status.pod_ip, 2380, tls)
        server = _served_certificate(pod.status.pod_ip, 2379, tls)
        assert common_name(peer) == f"{name}-peer", f"{member} peer port served {peer}"
        assert common_name(server) == f"{name}-server", f"{member} client port served {server}"

    # The operator reports when each of the user's certificates ends (status.tls, and the metric
    # the expiry alert reads), as the served certificate says.
    ends = clusters.wait_status(name, lambda s: "server" in (s.get("tls") or {}), "status.tls", timeout=60)["tls"]
    assert datetime.fromisoformat(ends["server"]["notAfter"]).timestamp() == ssl.cert_time_to_seconds(
        server["notAfter"]), ends
    assert sorted(ends) == ["ca", "operator", "peer", "server"], ends
    # These test certificates last CERT_DAYS (< 30): each is reported as ending soon.
    assert CERT_DAYS < 30
    assert all("in less than 30 days; put a renewed certificate" in e.get("problem", "") for e in ends.values()), ends

    # A client with the operator's certificate writes through the client service and reads on every member.
    service = [f"https://{name}-client.{ns}.svc:2379"]
    written = {f"tls/{i:02d}": f"value-{i}" for i in range(10)}
    for key, value in written.items():
        etcdctl(clusters, service, tls.client_flags(), "put", key, value)
    for endpoint in member_endpoints:
        local = read_prefix(clusters.sandbox, [endpoint], "tls/", serializable=True, flags=tls.client_flags())
        assert local == written, f"{endpoint} has {local}"

    # Clients without a certificate, with one from another CA, or speaking plain http are refused.
    stranger_ca = CertificateAuthority.create(tmp_path / "stranger", "stranger-ca")
    stranger = stranger_ca.issue("client", "stranger", server=False)
    # With TLS 1.3 the server checks the client's certificate after the client already finished
    # its side of the handshake, so a refused client sees either the server's alert or, when its
    # first write races that alert, the connection the server closed (EPIPE, or ECONNRESET when the
    # close reaches it as a reset; a server that was not there would be "connection refused").
    closed_after_handshake = ("write: broken pipe", "write: connection reset by peer")
    refused = {  # what -> (endpoints, etcdctl flags, why the server dropped the connection)
        "no client certificate": (service, tls.ca_only_flags(), ("tls: certificate required", *closed_after_handshake)),
        "certificate from another CA": (service, tls.client_flags(stranger),
                                        ("tls: bad certificate", "tls: unknown certificate authority",
                                         *closed_after_handshake)),
        "plain http": ([f"http://{name}-client.{ns}.svc:2379"], [],
                       ("connection closed", "error reading server preface")),
    }
    for what, (endpoints, flags, reasons) in refused.items():
        result = clusters.sandbox.etcdctl(endpoints, *flags, "put", "tls/intruder", what)
        assert result.returncode != 0, f"{what}: write accepted: {result.stdout}"
        assert any(reason in result.stderr for reason in reasons), \
            f"{what}: refused, but not for any of {reasons}: {result.stderr[-500:]}"
    assert read_prefix(clusters.sandbox, service, "tls/intruder", flags=tls.client_flags()) == {}

    # A deleted member is replaced by a new one that joins over TLS and gets every key.
    victim = next(member for member in sorted(pods) if member != status.get("leader"))
    clusters.core.delete_namespaced_pod(victim, ns)

    def replaced() -> list[dict[str, Any]] | None:
        live = {p.metadata.name for p in clusters.live_pods(name)}
        if len(live) != 3 or victim in live:
            return None
        current = _member_list(clusters, tls, [_member_url(tls, member, 2379) for member in sorted(live)])
        ok = sorted(str(m["name"]) for m in current if started(m)) == sorted(live) and len(current) == 3
        return current if ok and not any(m.get("isLearner") for m in current) else None
    members = wait_for(replaced, timeout=180, what=f"{victim} replaced by a new voting member")
    clusters.wait_running(name, ready=3, timeout=120)
    newcomer = next(m for m in members if m["name"] not in pods)
    assert newcomer["peerURLs"] == [_member_url(tls, newcomer["name"], 2380)], describe_members(members)
    local = read_prefix(clusters.sandbox, [_member_url(tls, newcomer["name"], 2379)], "tls/", serializable=True,
                        flags=tls.client_flags())
    assert local == written, f"new member {newcomer['name']} has {local}"


@pytest.mark.parametrize("minor", ["3.5", "3.6"])
def test_coreos_layout_with_a_separate_server_signer_reaches_running_3_of_3(
        clusters: Clusters, tmp_path: Path, minor: str) -> None:
    """server.crt signed by a CA other than server-ca.crt's (which verifies clients), the operator's
    etcd-client-ca.crt that other CA: the operator reads the members over gRPC where the gateway
    refuses its own server certificate, grows the cluster to 3 and reports it Running."""
    name, ns = f"split-{minor.replace('.', '-')}", clusters.namespace
    tls = coreos_static_tls(tmp_path / "pki", name, ns, separate_server_signer=True)
    for secret in tls.secrets():
        clusters.core.create_namespaced_secret(ns, secret)
    clusters.create(etcd_cluster(name, size=3, version=newest_etcd_version(minor), TLS=tls.spec()))
    status = clusters.wait_running(name, ready=3, timeout=240)
    assert status.get("currentVersion") == newest_etcd_version(minor), status

    pods = sorted(p.metadata.name for p in clusters.live_pods(name))
    endpoints = [_member_url(tls, member, 2379) for member in pods]
    members = _member_list(clusters, tls, endpoints)
    assert sorted(str(m.get("name")) for m in members) == pods, describe_members(members)
    assert all(started(m) and not m.get("isLearner") for m in members), describe_members(members)
    written = {f"split/{i}": f"value-{i}" for i in range(5)}
    for key, value in written.items():
        etcdctl(clusters, [f"https://{name}-client.{ns}.svc:2379"], tls.client_flags(), "put", key, value)
    for endpoint in endpoints:
        local = read_prefix(clusters.sandbox, [endpoint], "split/", serializable=True, flags=tls.client_flags())
        assert local == written, f"{endpoint} has {local}"
