"""`spec.TLS.certManager` (issue 24, addition): cert-manager issues the cluster's certificates.
The operator creates one cert-manager `Certificate` per role (peer, server, operator) against the
Issuer or ClusterIssuer the spec names; cert-manager writes each into a Secret of the same name
with its own key names (tls.crt, tls.key, ca.crt). Parsing (shape only), the names, and where
each CoreOS file name is found in such a Secret.

A cert-manager cluster runs like a static one whose three secrets are `cert_manager_secret_names`
(`parse_etcd_cluster` fills `ClusterSpec.tls` with them); the member pods map the keys onto the
CoreOS file names, and the operators' etcd clients read either layout (`secret_file`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from etcd_common.api import constants as c
from etcd_common.api.fields import FieldReader
from etcd_common.api.maintenance import parse_duration_seconds

GROUP: Final = "cert-manager.io"
VERSION: Final = "v1"
CERTIFICATES: Final = "certificates"
ISSUER_KINDS: Final = ("Issuer", "ClusterIssuer")
# cert-manager refuses a Certificate shorter than this (its API validation).
MINIMUM_DURATION_SECONDS: Final = 3600
# The Certificate and its Secret are named `<cluster>` plus these.
PEER_SUFFIX: Final = "-certmanager-peer"
SERVER_SUFFIX: Final = "-certmanager-server"
OPERATOR_SUFFIX: Final = "-certmanager-operator"
# The keys cert-manager writes into a Secret (kubernetes.io/tls plus the CA).
CERT_KEY: Final = "tls.crt"
KEY_KEY: Final = "tls.key"
CA_KEY: Final = "ca.crt"
# Each CoreOS file name (constants.*_FILE) -> the cert-manager key holding it.
CERT_MANAGER_KEY: Final[Mapping[str, str]] = {
    c.PEER_CERT_FILE: CERT_KEY, c.PEER_KEY_FILE: KEY_KEY, c.PEER_CA_FILE: CA_KEY,
    c.SERVER_CERT_FILE: CERT_KEY, c.SERVER_KEY_FILE: KEY_KEY, c.SERVER_CA_FILE: CA_KEY,
    c.OPERATOR_CERT_FILE: CERT_KEY, c.OPERATOR_KEY_FILE: KEY_KEY, c.OPERATOR_CA_FILE: CA_KEY,
}


@dataclass(frozen=True)
class IssuerRef:
    name: str
    kind: str = "Issuer"
    group: str = GROUP


@dataclass(frozen=True)
class CertManagerTLS:
    """`spec.TLS.certManager`: the issuer, and the Certificates' duration and renewBefore as
    written ("" when unset: cert-manager's defaults, 90 days and a third of it)."""

    issuer: IssuerRef
    duration: str = ""
    renew_before: str = ""


@dataclass(frozen=True)
class CertManagerNames:
    """The three Certificates of a cluster, each with a Secret of the same name."""

    peer: str
    server: str
    operator: str


def cert_manager_secret_names(cluster: str) -> CertManagerNames:
    return CertManagerNames(peer=cluster + PEER_SUFFIX, server=cluster + SERVER_SUFFIX,
                            operator=cluster + OPERATOR_SUFFIX)


def secret_file(data: Mapping[str, Any], coreos_name: str) -> Any:
    """The value of CoreOS file `coreos_name` in a Secret's data: under that name (static,
    issued), else under the cert-manager key for it (None when neither is there)."""
    value = data.get(coreos_name)
    if value is None and coreos_name in CERT_MANAGER_KEY:
        value = data.get(CERT_MANAGER_KEY[coreos_name])
    return value


def parse_cert_manager_tls(section: FieldReader) -> CertManagerTLS:
    """`spec.TLS.certManager` (present): issuerRef.name is required, kind Issuer (default) or
    ClusterIssuer; durations at least 1h, renewBefore shorter than duration."""
    ref = section.section("issuerRef")
    name = ref.string("name", required=True)
    kind = ref.string("kind") or "Issuer"
    if kind not in ISSUER_KINDS:
        raise ref.error(f"{ref.path('kind')} must be one of {', '.join(ISSUER_KINDS)}, got {kind!r}")
    group = ref.string("group") or GROUP
    duration = _duration(section, "duration")
    renew_before = _duration(section, "renewBefore")
    if duration is not None and duration < MINIMUM_DURATION_SECONDS:
        raise section.error(f"{section.path('duration')} must be at least 1h (cert-manager's minimum)")
    if renew_before is not None and not 0 < renew_before < (duration or 90 * 24 * MINIMUM_DURATION_SECONDS):
        raise section.error(f"{section.path('renewBefore')} must be more than 0s and less than duration")
    return CertManagerTLS(issuer=IssuerRef(name=name, kind=kind, group=group),
                          duration=section.string("duration"), renew_before=section.string("renewBefore"))


def _duration(section: FieldReader, key: str) -> int | None:
    text = section.string(key)
    if not text:
        return None
    seconds = parse_duration_seconds(text)
    if seconds is None:
        raise section.error(f"{section.path(key)}: {text!r} is not a duration like 2160h (90 days) or 720h")
    return int(seconds)
