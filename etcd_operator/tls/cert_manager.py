"""cert-manager mode (`spec.TLS.certManager`, issue 24): the cert-manager Certificates a cluster
needs (the same names and usages as the operator's own certificates, certificates.py), and the
planner's rule for them: report a missing issuer or a Certificate name taken, request what is
missing or outdated, and wait until cert-manager wrote every Secret. Pure functions.

cert-manager renews a certificate into the same Secret; the kubelet refreshes the members' secret
volumes and etcd reads the files again on new connections, so a renewal needs nothing here.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from etcd_common.api import cert_manager_tls as cm
from etcd_common.api.cert_manager_tls import CertManagerTLS, cert_manager_secret_names
from etcd_operator.manifests import cluster_labels
from etcd_operator.tls.certificates import OPERATOR_COMMON_NAME, Identity, Role, required_names

REASON_ISSUER_NOT_FOUND: Final = "IssuerNotFound"
REASON_CERTIFICATE_NAME_TAKEN: Final = "CertificateNameTaken"
# The Certificate spec fields the operator sets (others are cert-manager's or the user's).
MANAGED_FIELDS: Final = ("secretName", "issuerRef", "commonName", "dnsNames", "ipAddresses", "usages",
                         "privateKey", "duration", "renewBefore")
SERVER_USAGES: Final = ("digital signature", "key encipherment", "server auth", "client auth")
CLIENT_USAGES: Final = ("digital signature", "key encipherment", "client auth")


def certificate_name(cluster: str, role: Role) -> str:
    """The Certificate of `role`, and the Secret cert-manager writes, share this name."""
    names = cert_manager_secret_names(cluster)
    return {"peer": names.peer, "server": names.server, "operator": names.operator}[role]


def certificate_spec(identity: Identity, role: Role, tls: CertManagerTLS) -> dict[str, Any]:
    """The spec of the Certificate of `role`: the names `required_names` gives (peer and server
    certificates for server and client use, the operator's for client use, common name
    `etcd-operator`), an ECDSA P-256 key made anew at each renewal."""
    names = required_names(identity, role)
    issuer = tls.issuer
    spec: dict[str, Any] = {
        "secretName": certificate_name(identity.cluster, role),
        "issuerRef": {"name": issuer.name, "kind": issuer.kind, "group": issuer.group},
        "usages": list(CLIENT_USAGES if role == "operator" else SERVER_USAGES),
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "duration": tls.duration or None,
        "renewBefore": tls.renew_before or None,
    }
    if role == "operator":
        spec["commonName"] = OPERATOR_COMMON_NAME
    if names.dns:
        spec["dnsNames"] = list(names.dns)
    if names.ips:
        spec["ipAddresses"] = list(names.ips)
    return spec


def certificate_manifest(identity: Identity, role: Role, tls: CertManagerTLS,
                         owner: Mapping[str, Any]) -> dict[str, Any]:
    """A new Certificate of `role`, owned by the cluster (`owner`: its owner reference)."""
    spec = {key: value for key, value in certificate_spec(identity, role, tls).items() if value is not None}
    return {
        "apiVersion": f"{cm.GROUP}/{cm.VERSION}",
        "kind": "Certificate",
        "metadata": {
            "name": certificate_name(identity.cluster, role),
            "namespace": identity.namespace,
            "labels": cluster_labels(identity.cluster),
            "ownerReferences": [dict(owner)],
        },
        "spec": spec,
    }


def outdated_fields(certificate: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """The managed spec fields of `certificate` that differ from `wanted` (None: unset)."""
    spec = certificate.get("spec") or {}
    return [key for key in MANAGED_FIELDS if spec.get(key) != wanted.get(key)]


def ready_message(certificate: Mapping[str, Any] | None) -> str:
    """What cert-manager says of a Certificate that is not Ready (its Ready condition)."""
    if certificate is None:
        return "not created yet"
    for condition in (certificate.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return f"{condition.get('reason') or 'not ready'}: {condition.get('message') or ''}".rstrip(": ")
    return "not issued yet"


def secret_issued(secret: Mapping[str, Any] | None) -> bool:
    """Has cert-manager written the Secret (certificate, key and CA)?"""
    data = (secret or {}).get("data") or {}
    return all(data.get(key) for key in (cm.CERT_KEY, cm.KEY_KEY, cm.CA_KEY))
