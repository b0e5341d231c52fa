"""spec.TLS.static and spec.TLS.certManager Secrets: when the user's (or cert-manager's) certificates
end and what is wrong with them. Nothing is issued for them; they are reported in status."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Final
from urllib.parse import urlsplit

from cryptography import x509

from etcd_common.etcd.endpoints import client_service_url
from etcd_operator.observed import ObservedCluster, format_timestamp
from etcd_operator.tls.certificates import (
    LEAF_KEYS,
    LEAF_ROLES,
    Checked,
    Role,
    UnreadableCertificate,
    alt_names,
    certificates_in,
    check_key_matches,
    decoded_files,
    expiry_problem,
    leaf_files,
    member_hosts,
    names_host,
    read_certificate,
    signed_by,
)

# A static certificate ending sooner than this is a problem in status (the alert fires at 14 days).
STATIC_ENDING_SECONDS: Final = 30 * 24 * 3600


STATIC_RENEW_HINT: Final = "put a renewed certificate into the secret"


CERT_MANAGER_RENEW_HINT: Final = "cert-manager did not renew it: see its Certificate's conditions"


def static_leaf(role: Role, name: str, secret: Mapping[str, Any] | None, now: datetime | None,
                hosts: Sequence[str] = (), cert_manager: bool = False) -> Checked:
    """A static Secret's certificate end, and what is wrong: missing, wrong key names, unreadable,
    a key that is not the certificate's, not signed by a CA of its CA file, lacking one of `hosts`
    (the names members and clients reach it by), expired or ending within STATIC_ENDING_SECONDS.
    Reported only: the operator never changes a user's certificates nor the cluster for them."""
    if secret is None:
        return Checked(role, name, problem="missing")
    cert_key, key_key, ca_key = LEAF_KEYS[role]
    try:
        files = leaf_files(role, secret) if cert_manager else decoded_files(secret)
        # cert-manager's issuers other than CA issuers may write no ca.crt
        needed = (cert_key, key_key) if cert_manager else LEAF_KEYS[role]
        missing = [key for key in needed if key not in files]
        if missing:
            names = "cert-manager's keys: tls.crt, tls.key, ca.crt" if cert_manager else \
                f"CoreOS's key names: {', '.join(LEAF_KEYS[role])}"
            return Checked(role, name, problem=f"has no key {', '.join(missing)} ({names})")
        cert = read_certificate(files[cert_key], cert_key)
        check_key_matches(cert, files[key_key], key_key)
        authorities = certificates_in(files[ca_key]) if ca_key in files else ()
        if ca_key in files and not authorities:
            raise UnreadableCertificate(f"{ca_key} is not a PEM certificate")
    except UnreadableCertificate as e:
        return Checked(role, name, problem=str(e))
    end = cert.not_valid_after_utc
    # A chain in the certificate file (intermediates after the leaf) may sign it, too.
    if authorities and not any(signed_by(cert, authority) for authority in (*authorities, *certificates_in(files[cert_key])[1:])):
        return Checked(role, name, end, f"{cert_key} is not signed by the CA in {ca_key}")
    uncovered = [host for host in hosts if not names_host(cert, host)]
    if uncovered:
        return Checked(role, name, end, f"{cert_key} does not name {', '.join(uncovered)} "
                                        f"(its names: {', '.join(alt_names(cert).dns) or 'none'})")
    return Checked(role, name, end, _static_end_problem(cert, now))


def static_hosts(observed: ObservedCluster, role: Role) -> list[str]:
    """The host names a static certificate of `role` is checked for: each member's (peers dial
    it, and the operator reaches members by it), and for the server the client service's, as
    `<cluster>-client.<namespace>.svc` (what the backup and restore operators dial)."""
    if role == "operator":
        return []
    hosts = member_hosts(observed)
    if role == "server":
        hosts.append(urlsplit(client_service_url(observed.cluster)).hostname or "")
    return hosts


def static_ca(secrets: Mapping[Role, tuple[str, Mapping[str, Any] | None]], now: datetime | None) -> Checked | None:
    """The CA certificate (`*-ca.crt`) that ends first among the static Secrets (name, secret) by
    role; None when none can be read."""
    found: list[tuple[x509.Certificate, str]] = []
    for role, (name, secret) in secrets.items():
        if secret is None or role not in LEAF_KEYS:
            continue
        ca_key = LEAF_KEYS[role][2]
        try:
            files = leaf_files(role, secret)
            if ca_key in files:
                found.append((read_certificate(files[ca_key], ca_key), name))
        except UnreadableCertificate:
            continue  # the leaf's own check says what is wrong with this Secret
    if not found:
        return None
    cert, name = min(found, key=lambda pair: pair[0].not_valid_after_utc)
    return Checked("ca", name, cert.not_valid_after_utc, _static_end_problem(cert, now))


def _static_end_problem(cert: x509.Certificate, now: datetime | None) -> str:
    expired = expiry_problem(cert, now)
    if expired:
        return f"{expired}; {STATIC_RENEW_HINT}"
    end = cert.not_valid_after_utc
    if now is not None and end - now < timedelta(seconds=STATIC_ENDING_SECONDS):
        return f"ends at {format_timestamp(end)}, in less than 30 days; {STATIC_RENEW_HINT}"
    return ""


def check_static(observed: ObservedCluster) -> tuple[Checked, ...] | None:
    """spec.TLS.static: each named Secret's certificate, and the first CA to end (None: the
    cluster has no static TLS, or its Secrets were not read)."""
    spec = observed.cluster.require_spec()
    if spec.issued_tls is not None or not observed.static_secrets:
        return None
    tls = spec.tls
    names: dict[Role, str] = {"peer": tls.member_peer_secret, "server": tls.member_server_secret,
                              "operator": tls.operator_secret}
    secrets = {role: (names[role], observed.static_secrets.get(role)) for role in LEAF_ROLES if names[role]}
    now = observed.observed_at
    leaves = tuple(static_leaf(role, name, secret, now, static_hosts(observed, role), spec.cert_manager_tls is not None)
                   for role, (name, secret) in secrets.items())
    ca = static_ca(secrets, now)
    checked = ((ca,) if ca is not None else ()) + leaves
    if spec.cert_manager_tls is None:
        return checked
    # spec.TLS.certManager: cert-manager renews before the end; only an end it let pass (or a
    # Secret it has not written) is a problem, and the fix is cert-manager's.
    return tuple(replace(entry, problem=_cert_manager_problem(entry.problem)) for entry in checked)


def _cert_manager_problem(static_problem: str) -> str:
    if not static_problem or static_problem.startswith("ends at "):
        return ""
    return static_problem.replace(STATIC_RENEW_HINT, CERT_MANAGER_RENEW_HINT)
