"""`spec.TLS.issued` (issue 24, addition): certificates the etcd operator issues itself, from a CA
it keeps per cluster, into Secrets with the names and the CoreOS file names `spec.TLS.static`
would point at; their parsing (shape only) and the Secret names.

An issued cluster runs exactly like a static one whose three secrets are `issued_secret_names`:
`parse_etcd_cluster` fills `ClusterSpec.tls` with them, so member pods, the operators' etcd
clients and backups by `etcdCluster.name` need nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from etcd_common.api.fields import FieldReader
from etcd_common.api.maintenance import parse_duration_seconds

HOUR_SECONDS: Final = 3600
DEFAULT_VALIDITY: Final = "2160h"  # 90 days
DEFAULT_CA_VALIDITY: Final = "87600h"  # 10 years
MINIMUM_VALIDITY_SECONDS: Final = HOUR_SECONDS
# The Secret names are `<cluster>` plus these.
CA_SECRET_SUFFIX: Final = "-tls-ca"
PEER_SECRET_SUFFIX: Final = "-tls-peer"
SERVER_SECRET_SUFFIX: Final = "-tls-server"
OPERATOR_SECRET_SUFFIX: Final = "-tls-operator"
# The CA Secret's keys (the leaf Secrets have the CoreOS file names, constants.*_FILE).
CA_CERT_KEY: Final = "ca.crt"
CA_KEY_KEY: Final = "ca.key"
# During a CA rotation (etcd_operator/tls/ca_rotation.py) the CA Secret also holds the incoming CA
# (before it signs anything) or, once it signs, the outgoing one (trusted until it is dropped).
NEXT_CA_CERT_KEY: Final = "next-ca.crt"
NEXT_CA_KEY_KEY: Final = "next-ca.key"
PREVIOUS_CA_CERT_KEY: Final = "previous-ca.crt"


@dataclass(frozen=True)
class IssuedTLS:
    """`spec.TLS.issued`, in seconds: how long leaves and the CA are valid, and how long before
    its end a leaf is issued again."""

    validity_seconds: int
    renew_before_seconds: int
    ca_validity_seconds: int


@dataclass(frozen=True)
class IssuedSecretNames:
    """The four Secrets of an issued cluster."""

    ca: str
    peer: str
    server: str
    operator: str


def issued_secret_names(cluster: str) -> IssuedSecretNames:
    return IssuedSecretNames(
        ca=cluster + CA_SECRET_SUFFIX,
        peer=cluster + PEER_SECRET_SUFFIX,
        server=cluster + SERVER_SECRET_SUFFIX,
        operator=cluster + OPERATOR_SECRET_SUFFIX,
    )


def parse_issued_tls(section: FieldReader) -> IssuedTLS:
    """`spec.TLS.issued` (present, possibly empty: every field has a default). renewBefore
    defaults to a third of validity; it must be shorter than validity, and the CA must be valid
    at least as long as a leaf."""
    validity = _duration(section, "validity", DEFAULT_VALIDITY)
    ca_validity = _duration(section, "caValidity", DEFAULT_CA_VALIDITY)
    renew_before = _duration(section, "renewBefore", "") if section.has("renewBefore") else validity // 3
    if validity < MINIMUM_VALIDITY_SECONDS:
        raise section.error(f"{section.path('validity')} must be at least 1h")
    if not 0 < renew_before < validity:
        raise section.error(
            f"{section.path('renewBefore')} must be more than 0s and less than validity "
            f"({section.raw.get('validity', DEFAULT_VALIDITY)}): a certificate is issued again that long before it ends"
        )
    if ca_validity < validity:
        raise section.error(
            f"{section.path('caValidity')} must be at least validity "
            f"({section.raw.get('validity', DEFAULT_VALIDITY)}): no certificate outlives the CA that signed it"
        )
    return IssuedTLS(validity_seconds=validity, renew_before_seconds=renew_before, ca_validity_seconds=ca_validity)


def _duration(section: FieldReader, key: str, default: str) -> int:
    text = section.string(key) or default
    seconds = parse_duration_seconds(text)
    if seconds is None:
        raise section.error(f"{section.path(key)}: {text!r} is not a duration like 2160h (90 days) or 720h")
    return int(seconds)
