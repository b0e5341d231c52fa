"""Certificates for CoreOS-style `spec.TLS.static` clusters, made with the openssl CLI (as the
sandbox makes its own, kube_sandbox/certs.py): one CA, and the peer, server and operator (client)
certificates with the names the CoreOS etcd-operator documents, stored as Secrets with the CoreOS
file names inside. And what the TLS cluster tests (static and issued certificates) ask of a
cluster over TLS: its members' URLs, etcdctl with client certificate flags, the certificate a
port serves."""
from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509

from etcd_common.api import constants as c
from etcd_common.api.cert_manager_tls import secret_file
from tests.integration.etcd_operator.operator_clusters import Clusters

CERT_DAYS = 2
HANDSHAKE_TIMEOUT_SECONDS = 5.0
# EC keys: generated in milliseconds, where 2048-bit RSA takes a noticeable share of 2 slow cores.
_KEY_ARGS = ("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
_CA_CONFIG = """[req]
distinguished_name = dn
prompt = no
x509_extensions = ca
[dn]
CN = {common_name}
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
"""


@dataclass(frozen=True)
class KeyPair:
    cert_file: Path
    key_file: Path

    @property
    def cert_pem(self) -> bytes:
        return self.cert_file.read_bytes()

    @property
    def key_pem(self) -> bytes:
        return self.key_file.read_bytes()


@dataclass(frozen=True)
class CertificateAuthority:
    directory: Path
    pair: KeyPair
    # How long it and the certificates it issues last.
    days: int = CERT_DAYS

    @property
    def cert_file(self) -> Path:
        return self.pair.cert_file

    @property
    def cert_pem(self) -> bytes:
        return self.pair.cert_pem

    @classmethod
    def create(cls, directory: Path, common_name: str, days: int = CERT_DAYS) -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "ca.cnf"
        config.write_text(_CA_CONFIG.format(common_name=common_name))
        _openssl(*_KEY_ARGS, "-out", "ca.key", cwd=directory)
        _openssl("req", "-x509", "-new", "-key", "ca.key", "-config", "ca.cnf", "-days", str(days),
                 "-out", "ca.crt", cwd=directory)
        return cls(directory, KeyPair(directory / "ca.crt", directory / "ca.key"), days)

    def issue(self, name: str, common_name: str, *, dns_names: Sequence[str] = (),
              ip_addresses: Sequence[str] = (), server: bool = True, client: bool = True) -> KeyPair:
        """A leaf certificate `<name>.crt`/`<name>.key` for TLS server and/or client use."""
        usages = [usage for usage, wanted in (("serverAuth", server), ("clientAuth", client)) if wanted]
        extensions = [
            "basicConstraints = critical,CA:FALSE",
            "keyUsage = critical,digitalSignature,keyEncipherment",
            f"extendedKeyUsage = {','.join(usages)}",
            "subjectKeyIdentifier = hash",
            "authorityKeyIdentifier = keyid",
        ]
        alt_names = [f"DNS:{dns}" for dns in dns_names] + [f"IP:{ip}" for ip in ip_addresses]
        if alt_names:
            extensions.append(f"subjectAltName = {','.join(alt_names)}")
        (self.directory / f"{name}.ext").write_text("\n".join(extensions) + "\n")
        _openssl(*_KEY_ARGS, "-out", f"{name}.key", cwd=self.directory)
        _openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={common_name}", "-out", f"{name}.csr",
                 cwd=self.directory)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", str(self.days), "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=self.directory)
        return KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")


@dataclass(frozen=True)
class ClusterCertificates:
    """A cluster's CA and its three certificates, and the spec.TLS that names their Secrets."""

    cluster: str
    namespace: str
    ca: CertificateAuthority
    peer: KeyPair
    server: KeyPair
    operator: KeyPair
    # The CA that signed server.crt when it is not `ca` (CoreOS's TLS guide allows it: server-ca.crt
    # then verifies clients only, and the operator's etcd-client-ca.crt is this one).
    server_signer: CertificateAuthority | None = None

    @property
    def server_ca(self) -> CertificateAuthority:
        """The CA clients verify the members' client port with."""
        return self.server_signer or self.ca

    @property
    def peer_secret(self) -> str:
        return f"{self.cluster}-peer-tls"

    @property
    def server_secret(self) -> str:
        return f"{self.cluster}-server-tls"

    @property
    def operator_secret(self) -> str:
        return f"{self.cluster}-operator-tls"

    def spec(self) -> dict[str, object]:
        """`spec.TLS` of the EtcdCluster, CoreOS layout."""
        return {"static": {"member": {"peerSecret": self.peer_secret, "serverSecret": self.server_secret},
                           "operatorSecret": self.operator_secret}}

    def secrets(self) -> list[dict[str, object]]:
        """The three Secrets, each with the file names CoreOS expects inside."""
        files = {
            self.peer_secret: {c.PEER_CERT_FILE: self.peer.cert_pem, c.PEER_KEY_FILE: self.peer.key_pem,
                               c.PEER_CA_FILE: self.ca.cert_pem},
            self.server_secret: {c.SERVER_CERT_FILE: self.server.cert_pem, c.SERVER_KEY_FILE: self.server.key_pem,
                                 c.SERVER_CA_FILE: self.ca.cert_pem},
            self.operator_secret: {c.OPERATOR_CERT_FILE: self.operator.cert_pem,
                                   c.OPERATOR_KEY_FILE: self.operator.key_pem,
                                   c.OPERATOR_CA_FILE: self.server_ca.cert_pem},
        }
        return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": name, "namespace": self.namespace},
                 "data": {key: base64.b64encode(value).decode() for key, value in data.items()}}
                for name, data in files.items()]

    def client_flags(self, pair: KeyPair | None = None) -> list[str]:
        """etcdctl flags trusting the CA and presenting `pair` (default: the operator's certificate)."""
        pair = pair or self.operator
        return [f"--cacert={self.server_ca.cert_file}", f"--cert={pair.cert_file}", f"--key={pair.key_file}"]

    def ca_only_flags(self) -> list[str]:
        """etcdctl flags trusting the CA but presenting no client certificate."""
        return [f"--cacert={self.server_ca.cert_file}"]


# etcd checks a peer's client certificate against the address the connection comes from (reverse
# DNS of the source IP must match a SAN). Sandbox pods share the host's network namespace, so a
# member dials its peers from 127.0.0.1, not from its pod IP; on Kubernetes the source is the pod
# IP, whose PTR record is `<member>.<cluster>.<ns>.svc.cluster.local`, covered by the wildcard.
SANDBOX_PEER_SOURCE_IPS = ("127.0.0.1",)


def coreos_static_tls(directory: Path, cluster: str, namespace: str, days: int = CERT_DAYS, *,
                      separate_server_signer: bool = False) -> ClusterCertificates:
    """A CA and the certificates the CoreOS etcd-operator's TLS guide asks for:
    peer `*.<cluster>.<ns>.svc[.cluster.local]` (plus SANDBOX_PEER_SOURCE_IPS); server the same
    names plus the client service (`<cluster>-client[.<ns>.svc[.cluster.local]]`) and `localhost`;
    operator a client certificate. `separate_server_signer`: server.crt signed by a second CA, not
    the one in server-ca.crt (which then only verifies clients), as CoreOS's guide lays it out; etcd's
    own JSON gateway refuses that server certificate (issue 41, finding 13)."""
    ca = CertificateAuthority.create(directory, f"{cluster}-ca", days)
    signer = (CertificateAuthority.create(directory / "server-signer", f"{cluster}-server-signer", days)
              if separate_server_signer else None)
    members = [f"*.{cluster}.{namespace}.svc", f"*.{cluster}.{namespace}.svc.cluster.local"]
    client_service = [f"{cluster}-client", f"{cluster}-client.{namespace}.svc",
                      f"{cluster}-client.{namespace}.svc.cluster.local"]
    peer = ca.issue("peer", f"{cluster}-peer", dns_names=members, ip_addresses=SANDBOX_PEER_SOURCE_IPS)
    server = (signer or ca).issue("server", f"{cluster}-server", dns_names=[*members, *client_service, "localhost"])
    operator = ca.issue("operator", "etcd-operator", server=False)
    return ClusterCertificates(cluster, namespace, ca, peer, server, operator, signer)


def member_url(cluster: str, namespace: str, member: str, port: int) -> str:
    """The https URL a member advertises under its DNS name (2379: clients, 2380: peers)."""
    return f"https://{member}.{cluster}.{namespace}.svc:{port}"


def etcdctl(clusters: Clusters, endpoints: Sequence[str], flags: Sequence[str], *args: str) -> str:
    """etcdctl's output; AssertionError with its error when it fails."""
    result = clusters.sandbox.etcdctl(endpoints, *flags, *args)
    if result.returncode != 0:
        raise AssertionError(f"etcdctl {' '.join(args)} at {list(endpoints)} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


def member_list(clusters: Clusters, endpoints: Sequence[str], flags: Sequence[str]) -> list[dict[str, Any]]:
    """`etcdctl member list` as JSON, asked with `flags` (the client certificate's)."""
    members: list[dict[str, Any]] = json.loads(
        etcdctl(clusters, endpoints, flags, "member", "list", "-w", "json")).get("members", [])
    return members


def served_certificate(address: str, port: int, *, ca_file: Path, cert_file: Path, key_file: Path) -> dict[str, Any]:
    """Handshake with `address:port` as a client trusting `ca_file` and presenting `cert_file`;
    the certificate it served."""
    context = ssl.create_default_context(cafile=str(ca_file))
    context.check_hostname = False  # by IP: the names are checked by etcdctl and etcd themselves
    context.load_cert_chain(str(cert_file), str(key_file))
    with socket.create_connection((address, port), timeout=HANDSHAKE_TIMEOUT_SECONDS) as raw:
        with context.wrap_socket(raw) as conn:
            certificate: dict[str, Any] = conn.getpeercert() or {}
            return certificate


def secret_files(clusters: Clusters, secret: str) -> dict[str, bytes]:
    """A Secret's files (decoded `data`) in the test's namespace."""
    data = clusters.core.read_namespaced_secret(secret, clusters.namespace).data or {}
    return {key: base64.b64decode(value) for key, value in data.items()}


class IssuedClient:
    """The operator's certificate of a `spec.TLS.issued` cluster (Secret `<name>-tls-operator`),
    or of another Secret (`secret`: a spec.TLS.certManager cluster's, with cert-manager's keys),
    as files etcdctl and ssl read."""

    def __init__(self, clusters: Clusters, name: str, directory: Path, *, secret: str | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        files = secret_files(clusters, secret or f"{name}-tls-operator")
        self.ca = directory / "ca.crt"
        self.cert = directory / "client.crt"
        self.key = directory / "client.key"
        self.ca.write_bytes(secret_file(files, c.OPERATOR_CA_FILE))
        self.cert.write_bytes(secret_file(files, c.OPERATOR_CERT_FILE))
        self.key.write_bytes(secret_file(files, c.OPERATOR_KEY_FILE))
        self.key.chmod(0o600)

    def flags(self) -> list[str]:
        return [f"--cacert={self.ca}", f"--cert={self.cert}", f"--key={self.key}"]

    def served_certificate(self, address: str, port: int) -> dict[str, Any]:
        """The certificate `address:port` serves to this client."""
        return served_certificate(address, port, ca_file=self.ca, cert_file=self.cert, key_file=self.key)


def serial_of(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number


def member_pods(clusters: Clusters, name: str) -> dict[str, tuple[str, str, tuple[int, ...]]]:
    """member -> (pod uid, pod IP, restart counts of its containers)."""
    return {p.metadata.name: (p.metadata.uid, p.status.pod_ip,
                              tuple(s.restart_count for s in p.status.container_statuses or ()))
            for p in clusters.live_pods(name)}


# The ports whose certificates renewals are followed on: clients (server certificate), peers.
PORTS = {"server": 2379, "peer": 2380}


# etcd's log line and its client's error when a handshake read a renewed certificate with the old
# key (ServedCertificates.errors_but_etcds_reload_race).
RELOAD_RACE_LOG = "tls: private key does not match public key"
INTERNAL_ERROR_ALERT = "TLSV1_ALERT_INTERNAL_ERROR"


class ServedCertificates:
    """What the members' ports serve over time, against what is put into the Secrets: by default
    the operator's (spec.TLS.issued, `<name>-tls-<role>`); `secrets` gives (Secret, key) per role
    (spec.TLS.certManager: cert-manager's)."""

    def __init__(self, clusters: Clusters, name: str, client: IssuedClient,
                 pods: dict[str, tuple[str, str, tuple[int, ...]]], *,
                 secrets: Mapping[str, tuple[str, str]] | None = None) -> None:
        self.clusters = clusters
        self.name = name
        self.client = client
        self.pods = pods
        self.secrets = secrets or {role: (f"{name}-tls-{role}", f"{role}.crt") for role in PORTS}
        self.issued: dict[str, list[int]] = {role: [] for role in PORTS}  # serials in the Secrets, in order
        self.served: dict[tuple[str, str], list[tuple[int, float]]] = {
            (member, role): [] for member in pods for role in PORTS}  # (serial, notBefore), each change
        self.errors: list[str] = []
        self._failed_members: list[str] = []  # the member of each entry of `errors`

    def observe(self) -> None:
        for role in PORTS:
            secret, key = self.secrets[role]
            serial = serial_of(secret_files(self.clusters, secret)[key])
            if serial not in self.issued[role]:
                self.issued[role].append(serial)
        for member, (_, ip, _) in self.pods.items():
            for role, port in PORTS.items():
                try:
                    served = self.client.served_certificate(ip, port)
                except (OSError, ssl.SSLError) as e:
                    self.errors.append(f"{member} {role} port {port}: handshake failed: {e!r}")
                    self._failed_members.append(member)
                    continue
                seen = (int(served["serialNumber"], 16), ssl.cert_time_to_seconds(served["notBefore"]))
                history = self.served[(member, role)]
                if not history or history[-1] != seen:
                    history.append(seen)

    def errors_but_etcds_reload_race(self) -> list[str]:
        """The failed handshakes but those etcd itself explains: it reads its certificate and its key
        as two files at each new connection, so one made in the instant the kubelet swaps a renewed
        pair in can get the new certificate with the old key, which etcd refuses with an internal
        error alert and logs as RELOAD_RACE_LOG (docs/tls.md). Each such failure on a member needs
        a line of that member's log; any other failure, or one more than its log explains, stays."""
        explained = {member: self._reload_races_logged(member) for member in set(self._failed_members)}
        left = []
        for member, error in zip(self._failed_members, self.errors, strict=True):
            if INTERNAL_ERROR_ALERT in error and explained[member] > 0:
                explained[member] -= 1
            else:
                left.append(error)
        return left

    def _reload_races_logged(self, member: str) -> int:
        done = self.clusters.sandbox.kubectl("-n", self.clusters.namespace, "logs", member, "-c", "etcd",
                                             "--tail=-1", check=False)
        return done.stdout.count(RELOAD_RACE_LOG)

    def renewed_everywhere(self, renewals: int) -> bool:
        self.observe()
        return all(len(history) > renewals for history in self.served.values())

    def describe(self) -> str:
        return "; ".join(f"{member} {role}: {len(history)} certificates" for (member, role), history in
                         sorted(self.served.items())) + f"; issued {({r: len(s) for r, s in self.issued.items()})}"


def common_name(certificate: dict[str, Any]) -> str:
    """The subject's CN of a certificate as `ssl` hands it over ("" without one)."""
    return next((value for rdn in certificate.get("subject", ()) for key, value in rdn if key == "commonName"), "")


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {result.stderr.strip()}")
