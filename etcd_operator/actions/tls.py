"""TLS actions: certificates issued, adopted and published, CA rotation steps, cert-manager Certificates
(etcd_operator/planning/tls.py plans these)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from etcd_operator import reasons
from etcd_operator.actions.base import _Action


@dataclass(frozen=True)
class IssueCertificates(_Action):
    """spec.TLS.issued: write the Secrets of `roles` ("ca", "peer", "server", "operator"; with
    "ca", every role) with new certificates, because of `reason` (tls/certificates.py)."""

    roles: tuple[str, ...]
    reason: str

    KIND: ClassVar[str] = "issue-certificates"
    event_reason: ClassVar[str | None] = reasons.CERTIFICATES_ISSUED

    def describe(self) -> str:
        return f"issue certificates ({', '.join(self.roles)}): {self.reason}"


@dataclass(frozen=True)
class PublishCATrust(_Action):
    """spec.TLS.issued: write again only the CA file of the leaf Secrets of `roles`, with the CAs
    the cluster trusts now (certificates.trust_bundle; a CA rotation adds or drops one)."""

    roles: tuple[str, ...]
    reason: str

    KIND: ClassVar[str] = "publish-ca-trust"
    event_reason: ClassVar[str | None] = reasons.CA_TRUST_PUBLISHED

    def describe(self) -> str:
        return f"publish the trusted CAs ({', '.join(self.roles)}): {self.reason}"


@dataclass(frozen=True)
class AdoptCA(_Action):
    """spec.TLS.issued: the CA Secret `<cluster>-tls-ca` exists with no owner and the cluster's
    labels: the CA of the cluster this one replaced, kept by the restore operator so clients keep
    trusting the restored cluster. It becomes this cluster's (owner reference); the leaves are
    then issued from it."""

    secret_name: str

    KIND: ClassVar[str] = "issue-certificates"
    event_reason: ClassVar[str | None] = reasons.CA_ADOPTED

    def describe(self) -> str:
        return (f"adopt secret {self.secret_name}: the CA of the cluster this one replaced, so its clients "
                f"keep trusting it")


@dataclass(frozen=True)
class StartCARotation(_Action):
    """spec.TLS.issued: a new CA goes into the CA Secret beside the one that signs (it signs
    nothing yet); `request` is the rotate-ca annotation's value acted on ("" when the CA is near
    its end) (tls/ca_rotation.py). `recovered_ca`: the CA Secret is lost under running members
    (tls/lost_ca.py): it is written again with this PEM certificate of the lost CA (found in the
    leaf Secrets; its key is gone) beside the new CA, and the rotation goes on from there."""

    reason: str
    request: str = ""
    recovered_ca: str = ""

    KIND: ClassVar[str] = "start-ca-rotation"
    event_reason: ClassVar[str | None] = reasons.CA_ROTATION_STARTED

    def describe(self) -> str:
        return f"start a CA rotation: {self.reason}"


@dataclass(frozen=True)
class ReissueFromNewCA(_Action):
    """spec.TLS.issued, CA rotation: every member trusts the new CA; it now signs (the old one is
    kept as previous, still trusted) and every leaf is issued again from it."""

    reason: str

    KIND: ClassVar[str] = "reissue-from-new-ca"
    event_reason: ClassVar[str | None] = reasons.CA_LEAVES_REISSUED

    def describe(self) -> str:
        return f"issue every certificate from the new CA: {self.reason}"


@dataclass(frozen=True)
class DropOldCA(_Action):
    """spec.TLS.issued, CA rotation: every member serves a certificate of the new CA; the old CA
    leaves the CA Secret, then the leaf Secrets' CA files."""

    reason: str

    KIND: ClassVar[str] = "drop-old-ca"
    event_reason: ClassVar[str | None] = reasons.OLD_CA_DROPPED

    def describe(self) -> str:
        return f"drop the old CA: {self.reason}"


@dataclass(frozen=True)
class ApplyCertManagerCertificates(_Action):
    """spec.TLS.certManager: create the cert-manager Certificates of `roles` ("peer", "server",
    "operator"), owned by the cluster, or patch their spec to what it should be (tls/cert_manager.py)."""

    roles: tuple[str, ...]
    reason: str

    KIND: ClassVar[str] = "apply-certificates"
    event_reason: ClassVar[str | None] = reasons.CERTIFICATES_REQUESTED

    def describe(self) -> str:
        return f"request certificates from cert-manager ({', '.join(self.roles)}): {self.reason}"


@dataclass(frozen=True)
class ReportCertificateProblem(_Action):
    """spec.TLS.certManager cannot get certificates (its issuer does not exist, or a Certificate
    of its name is someone else's): nothing is changed; `reason` goes into status and one Warning
    event (cert_manager.REASON_*)."""

    reason: str
    message: str

    KIND: ClassVar[str] = "certificate-problem"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    @property
    def event_reason(self) -> str:  # type: ignore[override]
        return self.reason

    def describe(self) -> str:
        return self.message
