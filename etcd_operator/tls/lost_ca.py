"""A CA Secret of `spec.TLS.issued` lost (deleted, or unreadable) under members that run (issue 41):
recovered through the CA rotation, or refused with a reason. Pure; planning/tls.py decides from it.

etcd reads its trusted CA files only at start (ca_rotation.py), so members that run trust only the
lost CA: a new CA with new leaves at once would have every member refuse the operator and the
clients, and refuse each other once they dial with the new peer certificate. The old CA's key is
gone, but its certificate is still in every leaf Secret's CA file, beside the leaves it signed. So:

 - Recover (StartCARotation with `recovered_ca`): the CA Secret is written again with the old CA's
   certificate as `ca.crt` (no key: it signs nothing more) and a new CA as `next-ca.crt`/`.key`:
   a CA rotation in phase TrustingNewCA, which then runs as any (ca_rotation.py): both CAs
   published into every leaf Secret's CA file, members rolled to trust both, every leaf issued
   from the new CA, the old CA dropped.
 - Refuse (ReportCertificateProblem, reason CASecretLost), changing nothing, when the old CA
   cannot be found: a leaf Secret gone or unreadable too, or no CA certificate in their CA files
   that signed every leaf and is still valid.
A CA Secret lost before any member pod ran, or whose CA expired, is issued again with every leaf
(certificates.py, `check_issued`): nothing trusts it that a new CA would lock out.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from etcd_operator.observed import ObservedCluster
from etcd_operator.tls import certificates as certs

REASON_CA_LOST: Final = "CASecretLost"  # status reason and Warning event: a lost CA that cannot be recovered


@dataclass(frozen=True)
class LostCA:
    """The CA Secret is lost under running members: `old_ca_pem`, the lost CA's certificate found
    in the leaf Secrets (b"" when it cannot be: `why_not` says why)."""

    secret: str
    problem: str
    running: tuple[str, ...]
    old_ca_pem: bytes = b""
    why_not: str = ""

    def recovery_reason(self) -> str:
        return (f"secret {self.secret} {self.problem}, while member pod(s) {', '.join(self.running)} run trusting "
                f"only its CA (etcd reads trusted CAs only at start): a new CA comes in beside the old CA's "
                f"certificate kept in the leaf Secrets; members roll to trust both, then every certificate is "
                f"issued from the new CA")

    def refusal(self) -> str:
        return (f"the CA Secret {self.secret} is gone ({self.problem}); member pod(s) {', '.join(self.running)} "
                f"run and trust only the old CA, which cannot be recovered: {self.why_not}. A new CA now would "
                f"lock the operator and the clients out: restore the Secret {self.secret} from a backup, or "
                f"restore the cluster from a backup with an EtcdRestore (nothing was changed)")


def lost_ca(observed: ObservedCluster, check: certs.IssuanceCheck) -> LostCA | None:
    """The lost CA, when `check` (certificates.check_observed) found the CA Secret lost."""
    if not check.ca_lost:
        return None
    ca = next(checked for checked in check.checked if checked.role == "ca")
    identity = certs.identity_of(observed)
    running = certs.pods_trusting_issued_ca(observed, identity)
    old, why_not = old_signing_ca(observed.issued_secrets, identity, observed.observed_at)
    return LostCA(ca.secret, ca.problem, running, old, why_not)


def old_signing_ca(secrets: Mapping[str, Mapping[str, Any] | None], identity: certs.Identity,
                   now: datetime | None) -> tuple[bytes, str]:
    """(the PEM certificate of the CA, found in the leaf Secrets' CA files, that signed every leaf
    certificate and is valid at `now`, ""), or (b"", why there is none)."""
    leaves: list[x509.Certificate] = []
    pool: list[x509.Certificate] = []
    for role in certs.LEAF_ROLES:
        name = identity.secret_name(role)
        secret = secrets.get(role)
        if secret is None:
            return b"", f"secret {name} is gone too"
        files = certs.secret_files(secret)
        cert_key, _, ca_key = certs.LEAF_KEYS[role]
        found = certs.certificates_in(files.get(cert_key, b""))
        if not found:
            return b"", f"secret {name} holds no readable {cert_key}"
        leaves.append(found[0])
        pool.extend(certs.certificates_in(files.get(ca_key, b"")))
    for ca in pool:
        if not certs.expiry_problem(ca, now) and all(certs.signed_by(leaf, ca) for leaf in leaves):
            return ca.public_bytes(serialization.Encoding.PEM), ""
    return b"", "no CA certificate in the leaf Secrets' CA files signed all of their certificates and is still valid"
