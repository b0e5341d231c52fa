"""Operator-issued TLS (`spec.TLS.issued`, issue 24): the names each certificate carries, issuing
the cluster's CA and its peer, server and operator certificates as Secrets in the CoreOS layout
`spec.TLS.static` reads, and what is wrong with a Secret (status, and what to issue again).

Pure functions on the `cryptography` package; only `issue_*` are not deterministic (new keys).

The names (for cluster `<c>` in namespace `<ns>`, `<domain>` = spec.pod.ClusterDomain or, when
unset, `cluster.local`):
 - peer: `*.<c>.<ns>.svc` (the peer URL members advertise, `<member>.<c>.<ns>.svc`, manifests.py,
   with no ClusterDomain), `*.<c>.<ns>.svc.<domain>` (that URL with a ClusterDomain; and the PTR
   record of a pod IP on Kubernetes: etcd checks a peer's client certificate against the reverse
   DNS of the address it dials from), and IP 127.0.0.1 (members on the host network, as in the
   local sandbox, dial their peers from it). Wildcards: scaling never needs a new certificate.
 - server: the peer names (the operator and clients reach members at `<member>.<c>.<ns>.svc`),
   the client Service `<c>-client`, `<c>-client.<ns>`, `<c>-client.<ns>.svc`,
   `<c>-client.<ns>.svc.<domain>`, and `localhost` / 127.0.0.1 (etcdctl inside a member pod).
   Server and peer certificates are for both server and client use: members dial each other with
   the peer one, and etcd's gRPC gateway dials its own client port with the server one.
 - operator: common name `etcd-operator`, client use only, no names.
Every Secret also holds the CA certificate (`*-ca.crt`), which members and the operator trust.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from etcd_common.api import constants as c
from etcd_common.api.cert_manager_tls import cert_manager_secret_names, secret_file
from etcd_common.api.issued_tls import (
    CA_CERT_KEY,
    CA_KEY_KEY,
    NEXT_CA_CERT_KEY,
    NEXT_CA_KEY_KEY,
    PREVIOUS_CA_CERT_KEY,
    IssuedTLS,
    issued_secret_names,
)
from etcd_operator.manifests import cluster_labels
from etcd_operator.observed import ObservedCluster, format_timestamp
from etcd_operator.ownership import is_owned_by

Role = Literal["ca", "peer", "server", "operator"]
ROLES: Final[tuple[Role, ...]] = ("ca", "peer", "server", "operator")
LEAF_ROLES: Final[tuple[Role, ...]] = ("peer", "server", "operator")
OPERATOR_COMMON_NAME: Final = "etcd-operator"
COMMON_NAME_MAX_LENGTH: Final = 64  # X.509's upper bound (RFC 5280, ub-common-name)
DEFAULT_DOMAIN: Final = "cluster.local"
LOOPBACK: Final = "127.0.0.1"
# A certificate starts this long before it is issued: clocks of other machines may lag.
BACKDATE_SECONDS: Final = 300
# (certificate, key, CA) file names in each leaf Secret: the CoreOS layout (constants.py).
LEAF_KEYS: Final[Mapping[Role, tuple[str, str, str]]] = {
    "peer": (c.PEER_CERT_FILE, c.PEER_KEY_FILE, c.PEER_CA_FILE),
    "server": (c.SERVER_CERT_FILE, c.SERVER_KEY_FILE, c.SERVER_CA_FILE),
    "operator": (c.OPERATOR_CERT_FILE, c.OPERATOR_KEY_FILE, c.OPERATOR_CA_FILE),
}
SECRET_KEYS: Final[Mapping[Role, tuple[str, ...]]] = {"ca": (CA_CERT_KEY, CA_KEY_KEY), **LEAF_KEYS}


@dataclass(frozen=True)
class Names:
    """The subjectAltNames a certificate must carry."""

    dns: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()


@dataclass(frozen=True)
class Identity:
    """Where a cluster's certificates are used: its name, namespace and ClusterDomain ("" or
    ".example.org", as `PodPolicy.cluster_domain` holds it)."""

    cluster: str
    namespace: str
    cluster_domain: str = ""

    @property
    def domain(self) -> str:
        return self.cluster_domain.lstrip(".") or DEFAULT_DOMAIN

    def secret_name(self, role: Role) -> str:
        names = issued_secret_names(self.cluster)
        return {"ca": names.ca, "peer": names.peer, "server": names.server, "operator": names.operator}[role]

    def member_host(self, member: str) -> str:
        """As manifests.member_host names it."""
        return f"{member}.{self.cluster}.{self.namespace}.svc{self.cluster_domain}"


def required_names(identity: Identity, role: Role) -> Names:
    """The names a certificate of `role` carries (see the module docstring)."""
    members_under = f"{identity.cluster}.{identity.namespace}.svc"
    members = (f"*.{members_under}", f"*.{members_under}.{identity.domain}")
    if role == "peer":
        return Names(dns=members, ips=(LOOPBACK,))
    if role == "server":
        client = f"{identity.cluster}{c.CLIENT_SERVICE_SUFFIX}"
        services = (client, f"{client}.{identity.namespace}", f"{client}.{identity.namespace}.svc",
                    f"{client}.{identity.namespace}.svc.{identity.domain}")
        return Names(dns=(*members, *services, "localhost"), ips=(LOOPBACK,))
    return Names()


# ---------------------------------------------------------------------------------------------
# Issuing


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)


def common_name(text: str) -> str:
    """`text` as a certificate's common name, which X.509 bounds to 64 characters: a longer one (a
    long cluster and namespace name) is cut, and a digest of the whole keeps it distinct."""
    if len(text) <= COMMON_NAME_MAX_LENGTH:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[:COMMON_NAME_MAX_LENGTH - len(digest) - 1]}~{digest}"


def issue_ca(identity: Identity, now: datetime, validity_seconds: int) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    name = common_name(f"{identity.cluster}.{identity.namespace} etcd CA")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(seconds=BACKDATE_SECONDS))
        .not_valid_after(now + timedelta(seconds=validity_seconds))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    return KeyPair(_pem(builder.sign(key, hashes.SHA256())), _key_pem(key))


def issue_leaf(ca: KeyPair, identity: Identity, role: Role, now: datetime, validity_seconds: int) -> KeyPair:
    """A certificate of `role` signed by `ca`, valid `validity_seconds` but never past the CA."""
    ca_cert = ca.certificate
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey), "the issued CA key is an EC key"
    key = ec.generate_private_key(ec.SECP256R1())
    names = required_names(identity, role)
    leaf_name = OPERATOR_COMMON_NAME if role == "operator" else common_name(f"{identity.cluster}-{role}")
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if role == "operator" else \
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    not_after = min(now + timedelta(seconds=validity_seconds), ca_cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, leaf_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(seconds=BACKDATE_SECONDS))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if names.dns or names.ips:
        alt_names: list[x509.GeneralName] = [x509.DNSName(name) for name in names.dns]
        alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in names.ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return KeyPair(_pem(builder.sign(ca_key, hashes.SHA256())), _key_pem(key))


def secret_data(role: Role, pair: KeyPair, ca: KeyPair, trust: bytes | None = None) -> dict[str, str]:
    """A Secret's `data` (base64): the CA's certificate and key for "ca", else the leaf's
    certificate, key and the CAs to trust (`trust`, default the CA's certificate) under the
    CoreOS file names."""
    if role == "ca":
        files = {CA_CERT_KEY: pair.cert_pem, CA_KEY_KEY: pair.key_pem}
    else:
        cert_key, key_key, ca_key = LEAF_KEYS[role]
        files = {cert_key: pair.cert_pem, key_key: pair.key_pem, ca_key: trust or ca.cert_pem}
    return encode(files)


def encode(files: Mapping[str, bytes]) -> dict[str, str]:
    return {name: base64.b64encode(value).decode() for name, value in files.items()}


def ca_from_secret(secret: Mapping[str, Any]) -> KeyPair:
    """The CA of a CA Secret `ca_problem` found nothing wrong with (the one that signs; its key
    b"" while a lost CA is recovered: tls/lost_ca.py, only its certificate is left)."""
    files = decoded_files(secret)
    return KeyPair(files[CA_CERT_KEY], files.get(CA_KEY_KEY, b""))


# ---------------------------------------------------------------------------------------------
# Trust: the CA file of every leaf Secret (what members, the operators and clients trust)


def next_ca_from_secret(secret: Mapping[str, Any] | None) -> KeyPair | None:
    """The incoming CA of a rotation (ca_rotation.py) before it signs anything, if the CA Secret
    holds a readable one."""
    files = secret_files(secret)
    cert, key = files.get(NEXT_CA_CERT_KEY), files.get(NEXT_CA_KEY_KEY)
    if not cert or not key or not certificates_in(cert):
        return None
    return KeyPair(cert, key)


def previous_ca_pem(secret: Mapping[str, Any] | None) -> bytes | None:
    """The outgoing CA of a rotation once the new one signs (trusted until dropped)."""
    pem = secret_files(secret).get(PREVIOUS_CA_CERT_KEY)
    return pem if pem and certificates_in(pem) else None


def trust_bundle(ca_secret: Mapping[str, Any] | None) -> bytes:
    """The CAs every leaf Secret's CA file holds: the signing CA, plus the incoming CA of a
    rotation (before it signs) or the outgoing one (until it is dropped). b"" without a CA."""
    files = secret_files(ca_secret)
    signing = files.get(CA_CERT_KEY, b"")
    extra = next_ca_from_secret(ca_secret)
    other = extra.cert_pem if extra is not None else previous_ca_pem(ca_secret) or b""
    return signing.strip() + b"\n" + other.strip() + b"\n" if other else signing


def certificates_in(pem: bytes) -> tuple[x509.Certificate, ...]:
    """The certificates of a PEM bundle (none when it is not one)."""
    try:
        return tuple(x509.load_pem_x509_certificates(pem))
    except ValueError:
        return ()


def trust_fingerprint(pem: bytes) -> str:
    """A short name for a set of CA certificates (order and PEM layout do not matter)."""
    ders = sorted(cert.public_bytes(serialization.Encoding.DER) for cert in certificates_in(pem))
    return hashlib.sha256(b"".join(ders)).hexdigest()[:16] if ders else ""


def same_certificates(a: bytes, b: bytes) -> bool:
    return bool(trust_fingerprint(a)) and trust_fingerprint(a) == trust_fingerprint(b)


def mounted_trust_fingerprint(secrets: Mapping[str, Mapping[str, Any] | None]) -> str:
    """The fingerprint of the CAs a member pod created now mounts: the peer and server Secrets'
    CA files, "mixed" when they differ (a publication half done), "" without them."""
    prints = set()
    for role in ("peer", "server"):
        pem = secret_files(secrets.get(role)).get(LEAF_KEYS[role][2])
        prints.add(trust_fingerprint(pem) if pem else "")
    if len(prints) != 1:
        return "mixed"
    return prints.pop()


def secret_files(secret: Mapping[str, Any] | None) -> dict[str, bytes]:
    if secret is None:
        return {}
    try:
        return decoded_files(secret)
    except UnreadableCertificate:
        return {}


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=not ca, content_commitment=False, key_encipherment=not ca,
                         data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                         encipher_only=False, decipher_only=False)


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


# ---------------------------------------------------------------------------------------------
# Checking: what is wrong with a Secret


@dataclass(frozen=True)
class Checked:
    """One Secret as checked: its certificate's end (None: none could be read) and what is wrong
    with it ("" when nothing: it is kept)."""

    role: Role
    secret: str
    not_after: datetime | None = None
    problem: str = ""
    # The only problem is the CA file: it is written again alone (PublishCATrust), the
    # certificate and key kept.
    trust_only: bool = False


def ca_problem(secret: Mapping[str, Any] | None, now: datetime | None) -> Checked | str:
    """The CA Secret's certificate end, or what is wrong with it (a reason for status)."""
    if secret is None:
        return "missing"
    try:
        files = decoded_files(secret)
        missing = [key for key in SECRET_KEYS["ca"] if key not in files]
        if missing and not (missing == [CA_KEY_KEY] and next_ca_from_secret(secret) is not None):
            return f"has no key {', '.join(missing)} (it needs {', '.join(SECRET_KEYS['ca'])})"
        cert = read_certificate(files[CA_CERT_KEY], CA_CERT_KEY)
        if not missing:  # else a lost CA recovered (tls/lost_ca.py): its certificate, a new CA coming in
            check_key_matches(cert, files[CA_KEY_KEY], CA_KEY_KEY)
    except UnreadableCertificate as e:
        return str(e)
    constraints = _extension(cert, x509.BasicConstraints)
    if constraints is None or not constraints.ca:
        return f"{CA_CERT_KEY} is not a CA certificate"
    expired = expiry_problem(cert, now)
    return expired or Checked("ca", "", cert.not_valid_after_utc)


def leaf_problem(role: Role, secret: Mapping[str, Any] | None, ca: KeyPair | None, identity: Identity,
                 hosts: Sequence[str], issued: IssuedTLS, now: datetime | None, trust: bytes | None = None) -> Checked:
    """What is wrong with a leaf Secret of `role` (`problem` "" when nothing): missing, wrong key
    names, unreadable, a key that is not the certificate's, not signed by the cluster CA, lacking a
    name it needs or a member's host (`hosts`), expired, or within renewBefore of its end (when
    issuing again would end it later: a certificate ends with its CA at the latest); last, a CA
    file other than `trust` (default the CA's certificate; `trust_only`)."""
    name = identity.secret_name(role)
    if secret is None:
        return Checked(role, name, problem="missing")
    cert_key, key_key, ca_key = LEAF_KEYS[role]
    try:
        files = decoded_files(secret)
        missing = [key for key in LEAF_KEYS[role] if key not in files]
        if missing:
            return Checked(role, name, problem=f"has no key {', '.join(missing)} (it needs {', '.join(LEAF_KEYS[role])})")
        cert = read_certificate(files[cert_key], cert_key)
        check_key_matches(cert, files[key_key], key_key)
    except UnreadableCertificate as e:
        return Checked(role, name, problem=str(e))
    end = cert.not_valid_after_utc
    if ca is None:
        return Checked(role, name, end, "the cluster CA is missing or invalid")
    ca_cert = ca.certificate
    if not signed_by(cert, ca_cert):
        return Checked(role, name, end, f"{cert_key} is not signed by the cluster CA")
    lacking = missing_names(cert, required_names(identity, role))
    if lacking:
        return Checked(role, name, end, f"{cert_key} does not name {', '.join(lacking)}")
    if role != "operator":
        uncovered = [host for host in hosts if not names_host(cert, host)]
        if uncovered:
            return Checked(role, name, end, f"{cert_key} does not name member host {', '.join(uncovered)}")
    expired = expiry_problem(cert, now)
    if expired:
        return Checked(role, name, end, expired)
    if now is not None and end - now < timedelta(seconds=issued.renew_before_seconds) \
            and end < ca_cert.not_valid_after_utc:
        return Checked(role, name, end, f"ends at {format_timestamp(end)}, within renewBefore")
    if not same_certificates(files[ca_key], trust or ca.cert_pem):
        what = "the cluster CA's certificate" if trust is None or len(certificates_in(trust)) == 1 else \
            "the cluster's CAs (a CA rotation: the CA that signs and the one coming in or going out)"
        return Checked(role, name, end, f"{ca_key} is not {what}", trust_only=True)
    return Checked(role, name, end)


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def alt_names(cert: x509.Certificate) -> Names:
    extension = _extension(cert, x509.SubjectAlternativeName)
    if extension is None:
        return Names()
    return Names(dns=tuple(extension.get_values_for_type(x509.DNSName)),
                 ips=tuple(str(ip) for ip in extension.get_values_for_type(x509.IPAddress)))


def missing_names(cert: x509.Certificate, wanted: Names) -> list[str]:
    """The wanted names (DNS names, then IP addresses) the certificate lacks."""
    present = alt_names(cert)
    return [name for name in wanted.dns if name not in present.dns] + \
        [ip for ip in wanted.ips if ip not in present.ips]


def names_host(cert: x509.Certificate, host: str) -> bool:
    """Would a TLS client accept the certificate for `host` (a wildcard covers one label)?"""
    for name in alt_names(cert).dns:
        if name == host:
            return True
        if name.startswith("*.") and "." in host and host.split(".", 1)[1] == name[2:]:
            return True
    return False


class UnreadableCertificate(Exception):
    pass


def decoded_files(secret: Mapping[str, Any]) -> dict[str, bytes]:
    data = secret.get("data") or {}
    try:
        return {str(key): base64.b64decode(value, validate=True) for key, value in data.items()}
    except (binascii.Error, TypeError, ValueError) as e:
        raise UnreadableCertificate(f"its data is not base64: {e}") from e


def leaf_files(role: Role, secret: Mapping[str, Any]) -> dict[str, bytes]:
    """A leaf Secret's files under the CoreOS names, also when cert-manager wrote it (tls.crt,
    tls.key, ca.crt: spec.TLS.certManager)."""
    files = decoded_files(secret)
    for name in LEAF_KEYS[role]:
        found = secret_file(files, name)
        if found is not None:
            files[name] = found
    return files


def read_certificate(pem: bytes, key: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as e:
        raise UnreadableCertificate(f"{key} is not a PEM certificate") from e


def check_key_matches(cert: x509.Certificate, pem: bytes, key: str) -> None:
    try:
        private = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        raise UnreadableCertificate(f"{key} is not an unencrypted PEM private key") from e
    if _public_der(private.public_key()) != _public_der(cert.public_key()):
        raise UnreadableCertificate(f"{key} is not the key of the certificate beside it")


def _public_der(key: Any) -> bytes:
    der: bytes = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return der


def _extension(cert: x509.Certificate, kind: type[Any]) -> Any:
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


def expiry_problem(cert: x509.Certificate, now: datetime | None) -> str:
    if now is None:
        return ""
    if cert.not_valid_after_utc <= now:
        return f"expired at {format_timestamp(cert.not_valid_after_utc)}"
    if cert.not_valid_before_utc > now:
        return f"not valid before {format_timestamp(cert.not_valid_before_utc)}"
    return ""


# ---------------------------------------------------------------------------------------------
# The whole picture: what to issue


@dataclass(frozen=True)
class IssuanceCheck:
    """Every issued Secret of a cluster, checked. `to_issue`: the roles whose Secret is written
    next (all of them when the CA is)."""

    checked: tuple[Checked, ...]
    # The CA Secret is lost under members that run trusting its CA: nothing is issued (a new CA
    # would lock them out); tls/lost_ca.py recovers it through a CA rotation or refuses.
    ca_lost: bool = False
    # The CA cannot sign (a lost CA recovered, its key gone): leaves wait for the new CA.
    ca_signs: bool = True

    @property
    def to_issue(self) -> tuple[Role, ...]:
        if self.ca_lost or not self.ca_signs:
            return ()
        return tuple(check.role for check in self.checked if check.problem and not check.trust_only)

    @property
    def to_publish(self) -> tuple[Role, ...]:
        """Leaf Secrets whose only problem is their CA file."""
        return tuple(check.role for check in self.checked if check.trust_only)

    def describe(self) -> str:
        return "; ".join(f"secret {check.secret} {check.problem}" for check in self.checked if check.problem)


def check_issued(secrets: Mapping[Role, Mapping[str, Any] | None], identity: Identity, issued: IssuedTLS,
                 hosts: Sequence[str], now: datetime | None, members_run: bool = False) -> IssuanceCheck:
    """Check the CA Secret, then each leaf against it. A CA with a problem is issued again, and
    every leaf with it (a new CA signed none of them), unless `members_run` (member pods that
    started trusting the CA run) and the CA did not expire: then it is lost (`ca_lost`), and
    nothing is issued (etcd reads its trusted CAs only at start: members would refuse the new
    leaves, and the operator be locked out)."""
    ca_name = identity.secret_name("ca")
    ca_result = ca_problem(secrets.get("ca"), now)
    if isinstance(ca_result, str) and members_run and not _ca_expired(secrets.get("ca"), now):
        kept = tuple(leaf_problem(role, secrets.get(role), None, identity, hosts, issued, now) for role in LEAF_ROLES)
        return IssuanceCheck((Checked("ca", ca_name, problem=ca_result), *kept), ca_lost=True)
    if isinstance(ca_result, str):
        reissued = [Checked(role, identity.secret_name(role), problem=f"is issued again with the CA ({ca_result})")
                    for role in LEAF_ROLES]
        return IssuanceCheck((Checked("ca", ca_name, problem=ca_result), *reissued))
    ca_secret = secrets.get("ca")
    assert ca_secret is not None
    ca = ca_from_secret(ca_secret)
    trust = trust_bundle(ca_secret)
    leaves = tuple(leaf_problem(role, secrets.get(role), ca, identity, hosts, issued, now, trust)
                   for role in LEAF_ROLES)
    if not ca.key_pem:  # a lost CA recovered: nothing is issued before the new CA signs, but trust comes first
        leaves = tuple(_publish_first(leaf, secrets.get(leaf.role), trust) for leaf in leaves)
    return IssuanceCheck((Checked("ca", ca_name, ca_result.not_after), *leaves), ca_signs=bool(ca.key_pem))


def _publish_first(leaf: Checked, secret: Mapping[str, Any] | None, trust: bytes) -> Checked:
    """A leaf the keyless CA cannot issue again: its CA file still gets both CAs (trust_only)."""
    if not leaf.problem or leaf.trust_only or leaf.role == "ca":
        return leaf
    ca_file = secret_files(secret).get(LEAF_KEYS[leaf.role][2])
    if secret is None or ca_file is None or same_certificates(ca_file, trust):
        return leaf
    return Checked(leaf.role, leaf.secret, leaf.not_after,
                   f"{leaf.problem} (issued from the new CA once every member trusts it)", trust_only=True)


def _ca_expired(secret: Mapping[str, Any] | None, now: datetime | None) -> bool:
    """The CA Secret's certificate is readable and expired (or not valid yet): so are the leaves
    it signed, the members cannot use them, and a new CA loses nothing."""
    found = certificates_in(secret_files(secret).get(CA_CERT_KEY, b""))
    return bool(found) and bool(expiry_problem(found[0], now))


# ---------------------------------------------------------------------------------------------
# The checks planning/tls.py decides from


REASON_SECRET_NAME_TAKEN: Final = "SecretNameTaken"
REASON_CERTIFICATE_ISSUE_FAILED: Final = "CertificateIssueFailed"  # Warning event: a write of the Secrets failed


def identity_of(observed: ObservedCluster) -> Identity:
    cluster = observed.cluster
    return Identity(cluster.name, cluster.namespace, cluster.require_spec().pod.cluster_domain)


def member_hosts(observed: ObservedCluster) -> list[str]:
    """The hosts members are reached at (listed members and member pods)."""
    names = {m.member_name for m in observed.members or () if m.member_name} | {p.name for p in observed.live_pods}
    identity = identity_of(observed)
    return [identity.member_host(name) for name in sorted(names)]


def check_observed(observed: ObservedCluster) -> IssuanceCheck | None:
    """The issued Secrets of the cluster, checked (None: it does not use spec.TLS.issued)."""
    spec = observed.cluster.require_spec()
    if spec.issued_tls is None:
        return None
    secrets: dict[Role, Mapping[str, Any] | None] = {role: observed.issued_secrets.get(role) for role in ROLES}
    identity = identity_of(observed)
    return check_issued(secrets, identity, spec.issued_tls, member_hosts(observed), observed.observed_at,
                        members_run=bool(pods_trusting_issued_ca(observed, identity)))


def pods_trusting_issued_ca(observed: ObservedCluster, identity: Identity) -> tuple[str, ...]:
    """Member pods that ran with the issued certificates mounted, so trust the CA they were issued
    from: deleting ones too (a pod marked deleted on a node cut off from the control plane still
    runs); a member still on plaintext (a cluster moving to TLS) trusts no CA."""
    leaves = {identity.secret_name(role) for role in LEAF_ROLES}
    return tuple(sorted(pod.name for pod in observed.pods if not pod.never_ran and pod.secret_volumes & leaves))




def source_switch_problem(observed: ObservedCluster) -> str | None:
    """Switching a running cluster between spec.TLS.static, issued and certManager would roll
    members onto certificates of another CA, which the members not rolled yet do not trust (nor
    the operator, whose client certificate switches at once): refused, like switching TLS on or
    off. Told by the secrets a member pod that ran mounts."""
    cluster = observed.cluster
    spec = cluster.require_spec()
    wanted = tls_source(spec.issued_tls is not None, spec.cert_manager_tls is not None)
    for pod in observed.live_pods:
        if pod.never_ran or not pod.secret_volumes:
            continue
        runs = _source_of(pod.secret_volumes, cluster.name)
        if runs == wanted or (wanted == "static" and spec.tls.member_peer_secret in pod.secret_volumes | {""}):
            continue  # static may name any secrets (those of another source too); no TLS: tls_change_problem
        return (f"spec.TLS cannot switch from {runs} to {wanted} on a running cluster (member {pod.name} runs "
                f"with {'the ' + runs + ' ' if runs != 'static' else ''}secrets {', '.join(sorted(pod.secret_volumes))}): "
                f"members on the new CA and on the old would not trust each other; put spec.TLS.{runs} back")
    return None


def kept_ca(observed: ObservedCluster) -> str | None:
    """The name of the CA Secret when it is one a restore kept for this cluster (no owner, the
    cluster's labels, a CA in it), else None. Anything else not ours is never touched."""
    secret = observed.issued_secrets.get("ca")
    if secret is None or is_owned_by(secret, observed.cluster.uid):
        return None
    metadata = secret.get("metadata") or {}
    labels = metadata.get("labels") or {}
    ours = cluster_labels(observed.cluster.name)
    if metadata.get("ownerReferences") or any(labels.get(key) != value for key, value in ours.items()):
        return None
    if isinstance(ca_problem(secret, observed.observed_at), str):
        return None
    return str(metadata.get("name") or identity_of(observed).secret_name("ca"))


def tls_source(issued: bool, cert_manager: bool) -> str:
    """The spec.TLS field the certificates come from."""
    return "issued" if issued else "certManager" if cert_manager else "static"


def _source_of(secret_volumes: frozenset[str], cluster: str) -> str:
    issued = issued_secret_names(cluster)
    managed = cert_manager_secret_names(cluster)
    if secret_volumes <= {issued.peer, issued.server, issued.operator}:
        return "issued"
    if secret_volumes <= {managed.peer, managed.server, managed.operator}:
        return "certManager"
    return "static"


