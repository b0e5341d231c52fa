"""CoreOS's static TLS layout (issue 41, finding 13) against real etcd 3.5.35 and 3.6.16 processes:
peer certificates signed by peer-ca.crt; `server.crt` signed by a CA other than `server-ca.crt`,
which is the CA of the clients (`--trusted-ca-file` verifies clients with it); the operator's
`etcd-client-ca.crt` is the CA that signed `server.crt`.

etcd's JSON gateway dials its own gRPC port with `server.crt` and checks it against
`server-ca.crt`, so etcd refuses its own gateway on both versions (measured: "remote error: tls:
unknown certificate authority"), while gRPC clients with the same files are served. The
operator's probe must still read member list, status and health, and a cluster grow past its
seed as the operator grows it (learner add, start, promote), deciding from the probe."""
from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from etcd_common.etcd.etcdctl import ClusterUnhealthy, Etcdctl, EtcdctlError, LearnerNotReady
from etcd_common.etcd.probe import EtcdProbe, gateway_cannot_dial_itself, gateway_request
from etcd_common.etcd.types import ClientTLS
from tests.integration.etcdctl.etcd_processes import EtcdCluster, EtcdMember, etcd_dir, wait_for

VERSIONS = ("3.5.35", "3.6.16")
T = TypeVar("T")
TLSCluster = tuple[str, EtcdCluster, list[EtcdMember], ClientTLS]  # version, cluster, its members (not started), client files
NOW = datetime.datetime.now(datetime.UTC)
SERVING = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _ca(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key, subject = _key(), x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(NOW - datetime.timedelta(hours=1))
            .not_valid_after(NOW + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    return cert, key


def _leaf(ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], name: str, usages: list[x509.ObjectIdentifier],
          ips: list[str]) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
               .issuer_name(ca[0].subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW - datetime.timedelta(hours=1)).not_valid_after(NOW + datetime.timedelta(days=1))
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
    if ips:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]), critical=False)
    return builder.sign(ca[1], hashes.SHA256()), key


def coreos_layout(directory: Path, ips: list[str]) -> ClientTLS:
    """The three CoreOS secrets' files in `directory`; the operator's client files returned."""
    peer_ca, server_signer, client_ca = _ca("peer-ca"), _ca("server-signer"), _ca("client-ca")
    files = {
        "peer-ca.crt": peer_ca[0], **dict(zip(("peer.crt", "peer.key"), _leaf(peer_ca, "peer", SERVING, ips))),
        "server-ca.crt": client_ca[0],  # verifies clients; did NOT sign server.crt
        **dict(zip(("server.crt", "server.key"), _leaf(server_signer, "server", SERVING, ips))),
        "etcd-client-ca.crt": server_signer[0],
        **dict(zip(("etcd-client.crt", "etcd-client.key"),
                   _leaf(client_ca, "etcd-client", [ExtendedKeyUsageOID.CLIENT_AUTH], []))),
    }
    directory.mkdir(parents=True, exist_ok=True)
    for name, item in files.items():
        data = item.public_bytes(serialization.Encoding.PEM) if isinstance(item, x509.Certificate) else \
            item.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())
        (directory / name).write_bytes(data)
    return ClientTLS(ca_file=str(directory / "etcd-client-ca.crt"), cert_file=str(directory / "etcd-client.crt"),
                     key_file=str(directory / "etcd-client.key"))


def _flags(directory: Path) -> tuple[str, ...]:
    """etcd's TLS flags as the operator sets them (manifests.py)."""
    return ("--client-cert-auth=true", f"--trusted-ca-file={directory}/server-ca.crt",
            f"--cert-file={directory}/server.crt", f"--key-file={directory}/server.key",
            "--peer-client-cert-auth=true", f"--peer-trusted-ca-file={directory}/peer-ca.crt",
            f"--peer-cert-file={directory}/peer.crt", f"--peer-key-file={directory}/peer.key")


@pytest.fixture(params=VERSIONS, ids=lambda version: f"etcd-{version}")
def tls_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TLSCluster]:
    version: str = request.param
    cluster = EtcdCluster(binary=str(etcd_dir(version) / "etcd"), workdir=tmp_path, token=f"tls-{version}")
    members = [cluster.new_member(f"m{n}") for n in (1, 2, 3)]
    tls = coreos_layout(tmp_path / "tls", [m.address for m in members] + ["127.0.0.1"])
    for member in members:
        member.scheme, member.flags = "https", _flags(tmp_path / "tls")
    yield version, cluster, members, tls
    cluster.stop()


def _etcdctl(members: list[EtcdMember], tls: ClientTLS) -> Etcdctl:
    """etcdctl 3.6 (the operator image's) with the operator's client files."""
    return Etcdctl([m.client_url for m in members], binary=str(etcd_dir("3.6.16") / "etcdctl"), tls=tls)


def _serving(etcdctl: Etcdctl) -> bool:
    try:
        return all(health.healthy for health in etcdctl.endpoint_health())
    except EtcdctlError:
        return False


def _probe(members: list[EtcdMember], tls: ClientTLS) -> EtcdProbe:
    return EtcdProbe([m.client_url for m in members], tls=tls, etcdctl_binary=str(etcd_dir("3.6.16") / "etcdctl"))


def _grow(cluster: EtcdCluster, member: EtcdMember, members: list[EtcdMember], tls: ClientTLS) -> None:
    """As the operator adds a member: learner add, start, promote once the probe sees it started."""
    running = [m for m in members if m.process is not None]
    etcdctl = _etcdctl(running, tls)
    added = wait_for(lambda: _unless(ClusterUnhealthy, lambda: etcdctl.member_add(member.name, [member.peer_url],
                                                                                  learner=True)),
                     timeout=30, what=f"member add {member.name}", interval=0.2, describe=cluster.describe)
    cluster.start_added_member(member, etcdctl.member_list())
    probe = _probe(running, tls)
    wait_for(lambda: any(m.id == added.id and m.name for m in probe.member_list()), timeout=30,
             what=f"the probe sees {member.name} started", describe=cluster.describe)
    wait_for(lambda: _unless(LearnerNotReady, lambda: etcdctl.member_promote(added.id) or True), timeout=30,
             what=f"promote {member.name}", interval=0.2, describe=cluster.describe)
    wait_for(lambda: _serving(_etcdctl([member], tls)), timeout=30, what=f"{member.name} serving",
             describe=cluster.describe)


def _unless(expected: type[Exception], action: Callable[[], T]) -> T | None:
    try:
        return action()
    except expected:
        return None


def test_the_probe_reads_a_cluster_in_coreos_static_tls_layout_and_it_grows_to_three(tls_cluster: TLSCluster) -> None:
    version, cluster, members, tls = tls_cluster
    seed = members[0]
    seed.start(f"{seed.name}={seed.peer_url}", "new", cluster.token)
    wait_for(lambda: _serving(_etcdctl([seed], tls)), timeout=30, what="seed serving over gRPC", describe=cluster.describe)
    # etcd refuses its own gateway in this layout, on 3.5 and 3.6 alike.
    with pytest.raises(EtcdctlError) as refused:  # "remote error: tls: unknown certificate authority", ...
        gateway_request(seed.client_url, "POST", "/v3/maintenance/status", {}, tls=tls, timeout_seconds=2.0)
    assert gateway_cannot_dial_itself(refused.value), refused.value.message

    probe = _probe([seed], tls)
    assert [m.name for m in probe.member_list()] == ["m1"]
    [status] = probe.endpoint_status()
    assert status.reachable and status.is_leader and status.version == version and status.db_size > 0
    [health] = probe.endpoint_health()
    assert (health.healthy, health.error) == (True, "") and health.cluster_id == status.cluster_id

    for member in members[1:]:
        _grow(cluster, member, members, tls)
    probe = _probe(members, tls)
    etcdctl = _etcdctl(members, tls)
    assert sorted(m.name for m in probe.member_list()) == ["m1", "m2", "m3"]
    assert sorted(probe.member_list(), key=lambda m: m.id) == sorted(etcdctl.member_list(), key=lambda m: m.id)
    statuses = probe.endpoint_status()
    assert all(s.reachable and not s.is_learner for s in statuses), statuses
    assert len({s.leader_id for s in statuses}) == 1 and len({s.member_id for s in statuses}) == 3
    assert [h.healthy for h in probe.endpoint_health()] == [True, True, True]
    assert [len(lists.members) for lists in probe.local_member_lists() if not isinstance(lists, EtcdctlError)] == [3] * 3
    assert all(not isinstance(answer, EtcdctlError) for answer in probe.hash_kvs(status.revision))
