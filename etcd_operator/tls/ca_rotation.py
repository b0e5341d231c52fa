"""CA rotation of `spec.TLS.issued` (issue 24) through an overlap, without a dropped request:
when it starts, which step comes next, and what status shows. Pure; planning/tls.py decides from it.

etcd reads its certificate and key files on every handshake, but its trusted CA files
(`--trusted-ca-file`, `--peer-trusted-ca-file`) only at start (client/pkg/transport/listener.go:
the CA pool is built once). So a member trusts a new CA only once its etcd starts with the new CA
in its mounted files: the rotation rolls the members, one at a time as any pod-policy change.

Every step is decided from the Secrets and pods alone (the operator may stop between any two):

 - Trigger: the cluster's annotation `etcd.database.coreos.com/rotate-ca` has a value the CA
   Secret does not record yet, or less than a third of caValidity is left of the CA.
 - StartCARotation: a new CA into the CA Secret as `next-ca.crt`/`next-ca.key` (it signs nothing)
   with the request and the start time as annotations. Phase TrustingNewCA.
 - PublishCATrust (planning/tls.py): every leaf Secret's CA file becomes old + new CA.
 - The roll (planning/membership.py, `upgrade_outdated`): a member pod created before that (its `trusted-ca` annotation, the
   fingerprint of the CAs its Secrets held at its creation, differs) is outdated, and is replaced
   or restarted like any outdated member: drained first, one at a time, health-gated, leader last.
 - ReissueFromNewCA, once the cluster is otherwise converged (every member healthy, every pod
   trusting both CAs) and the bundle has been published for the trust propagation time (the
   kubelet refreshes mounted Secrets within its sync period; the operators re-read their client
   Secret every 30 s): the new CA signs (`ca.crt`), the old one stays trusted as
   `previous-ca.crt`, and every leaf is issued again from the new CA. Phase ReissuingFromNewCA
   while a leaf is still the old CA's (planning/tls.py issues it), then DroppingOldCA.
 - DropOldCA, once the newest leaf was issued the trust propagation time ago (every member's
   files hold its new-CA certificate, which etcd serves at the next handshake): the old CA leaves
   the CA Secret, then (planning/tls.py, PublishCATrust) every leaf Secret's CA file.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from cryptography import x509

from etcd_common.api import constants as c
from etcd_operator.observed import ObservedCluster, ObservedPod, format_timestamp, parse_timestamp
from etcd_operator.tls import certificates as certs

PHASE_TRUSTING: Final = "TrustingNewCA"
PHASE_REISSUING: Final = "ReissuingFromNewCA"
PHASE_DROPPING: Final = "DroppingOldCA"
# The CA rotates by itself once less than this share of caValidity is left.
CA_RENEW_FRACTION: Final = 1 / 3
# How long a changed Secret takes to reach every mounted volume (a real kubelet: its sync period,
# one minute by default, plus its cache) and every operator's client (SECRET_REFRESH_SECONDS).
DEFAULT_TRUST_PROPAGATION_SECONDS: Final = 90.0


@dataclass(frozen=True)
class Rotation:
    phase: str
    started_at: str = ""
    request: str = ""

    def to_status(self) -> dict[str, str]:
        record = {"phase": self.phase, "startedAt": self.started_at, "request": self.request}
        return {key: value for key, value in record.items() if value}


def rotation_of(observed: ObservedCluster) -> Rotation | None:
    """The rotation the CA Secret shows in progress (None: none, or no valid CA to rotate)."""
    spec = observed.cluster.spec
    ca_secret = observed.issued_secrets.get("ca")
    if spec is None or spec.issued_tls is None or ca_secret is None:
        return None
    if isinstance(certs.ca_problem(ca_secret, observed.observed_at), str):
        return None  # a broken CA is issued again with everything (certificates.py), no overlap
    annotations = _annotations(ca_secret)
    started = str(annotations.get(c.ANNOTATION_CA_ROTATION_STARTED_AT) or "")
    request = str(annotations.get(c.ANNOTATION_CA_ROTATION_REQUEST) or "")
    if certs.next_ca_from_secret(ca_secret) is not None:
        return Rotation(PHASE_TRUSTING, started, request)
    if certs.previous_ca_pem(ca_secret) is None:
        return None
    signing = certs.ca_from_secret(ca_secret).certificate
    old_leaves = [role for role in certs.LEAF_ROLES if not _leaf_signed_by(observed, role, signing)]
    return Rotation(PHASE_REISSUING if old_leaves else PHASE_DROPPING, started, request)


def rotation_due(observed: ObservedCluster) -> tuple[str, str] | None:
    """(reason, request) when a rotation should start: asked for by an annotation value not acted
    on yet, or the CA within CA_RENEW_FRACTION of caValidity of its end."""
    cluster = observed.cluster
    issued = cluster.require_spec().issued_tls
    ca_secret = observed.issued_secrets.get("ca")
    if issued is None or ca_secret is None:
        return None
    recorded = _annotations(ca_secret).get(c.ANNOTATION_CA_ROTATION_REQUEST)
    if cluster.ca_rotation_request and cluster.ca_rotation_request != recorded:
        return (f"asked for by annotation {c.ANNOTATION_ROTATE_CA}={cluster.ca_rotation_request}",
                cluster.ca_rotation_request)
    checked = certs.ca_problem(ca_secret, observed.observed_at)
    if isinstance(checked, str) or checked.not_after is None or observed.observed_at is None:
        return None
    left = checked.not_after - observed.observed_at
    if left < timedelta(seconds=issued.ca_validity_seconds * CA_RENEW_FRACTION):
        return (f"the CA ends at {format_timestamp(checked.not_after)}, within a third of caValidity",
                str(recorded or ""))
    return None


def trust_outdated(observed: ObservedCluster, pod: ObservedPod) -> str | None:
    """While the new CA comes in: why the member pod must be rolled (its etcd trusts only the CAs
    its Secrets held when it started), or None."""
    rotation = rotation_of(observed)
    if rotation is None or rotation.phase != PHASE_TRUSTING:
        return None
    wanted = certs.trust_fingerprint(certs.trust_bundle(observed.issued_secrets.get("ca")))
    if pod.trusted_ca == wanted:
        return None
    return "a CA rotation: its etcd reads the trusted CAs only at start, and must trust the new CA"


def _leaf_signed_by(observed: ObservedCluster, role: certs.Role, ca: x509.Certificate) -> bool:
    cert = _leaf_certificate(observed, role)
    return cert is not None and certs.signed_by(cert, ca)


def _leaf_certificate(observed: ObservedCluster, role: certs.Role) -> x509.Certificate | None:
    pem = certs.secret_files(observed.issued_secrets.get(role)).get(certs.LEAF_KEYS[role][0])
    found = certs.certificates_in(pem) if pem else ()
    return found[0] if found else None


def _annotations(secret: Any) -> dict[str, Any]:
    return dict(((secret or {}).get("metadata") or {}).get("annotations") or {})


def newest_publication(observed: ObservedCluster) -> datetime | None:
    """When the leaf Secrets' CA files last changed (None: one was never published by a rotation)."""
    times = [parse_timestamp(_annotations(observed.issued_secrets.get(role)).get(c.ANNOTATION_TRUST_PUBLISHED_AT))
             for role in certs.LEAF_ROLES]
    known = [t for t in times if t is not None]
    return max(known) if len(known) == len(times) else None


def newest_leaf_start(observed: ObservedCluster) -> datetime | None:
    """When the newest leaf was issued (its notBefore is backdated by BACKDATE_SECONDS)."""
    starts = []
    for role in certs.LEAF_ROLES:
        cert = _leaf_certificate(observed, role)
        if cert is None:
            return None
        starts.append(cert.not_valid_before_utc + timedelta(seconds=certs.BACKDATE_SECONDS))
    return max(starts)
