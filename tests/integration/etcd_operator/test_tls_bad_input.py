"""Bad spec.TLS.static input is reported, not acted on: secrets with cert-manager's key names
instead of CoreOS's, and a CA file of a CA that did not sign the certificate, each give a reason in
status.tls and one Warning event; the running cluster is left as it is, and the problem clears
once the secret is fixed."""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from etcd_common.api import constants as c
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.tls_certs import CertificateAuthority, coreos_static_tls

REASON = "CertificateProblem"
# Long enough not to be reported as ending soon (within 30 days), which is a problem, too.
DAYS = 90


def _problem(clusters: Clusters, name: str, role: str) -> str:
    return str(((clusters.status(name).get("tls") or {}).get(role) or {}).get("problem") or "")


def _certificate_events(clusters: Clusters, name: str) -> list[str]:
    return [str(e.message) for e in clusters.events(name) if e.reason == REASON]


def _replace_data(clusters: Clusters, secret: str, data: dict[str, bytes]) -> None:
    body: dict[str, Any] = {"data": {key: base64.b64encode(value).decode() for key, value in data.items()}}
    clusters.core.replace_namespaced_secret(secret, clusters.namespace, {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret, "namespace": clusters.namespace}, **body})


def test_bad_static_secrets_are_reported_once_and_change_nothing(clusters: Clusters, tmp_path: Path) -> None:
    ns = clusters.namespace
    # A cluster whose peer secret has cert-manager's key names: reported before any member runs.
    keys = coreos_static_tls(tmp_path / "keys", "tlskeys", ns, DAYS)
    secrets = {str(s["metadata"]["name"]): s for s in keys.secrets()}  # type: ignore[index]
    secrets[keys.peer_secret]["data"] = {
        "tls.crt": base64.b64encode(keys.peer.cert_pem).decode(),
        "tls.key": base64.b64encode(keys.peer.key_pem).decode(),
        "ca.crt": base64.b64encode(keys.ca.cert_pem).decode()}
    for secret in secrets.values():
        clusters.core.create_namespaced_secret(ns, secret)
    clusters.create(etcd_cluster("tlskeys", size=1, TLS=keys.spec()))

    # A running cluster whose server secret gets the CA file of another CA.
    tls = coreos_static_tls(tmp_path / "pki", "tlsca", ns, DAYS)
    for secret in tls.secrets():
        clusters.core.create_namespaced_secret(ns, secret)
    clusters.create(etcd_cluster("tlsca", size=3, TLS=tls.spec()))

    wait_for(lambda: "has no key peer.crt" in _problem(clusters, "tlskeys", "peer"), timeout=120,
             what="status.tls.peer naming the missing CoreOS key names")
    assert _problem(clusters, "tlskeys", "peer") == (
        "has no key peer.crt, peer.key, peer-ca.crt (CoreOS's key names: peer.crt, peer.key, peer-ca.crt)")
    events = wait_for(lambda: _certificate_events(clusters, "tlskeys"), timeout=60, what="a CertificateProblem event")
    assert len(events) == 1 and f"secret {keys.peer_secret} (peer): has no key peer.crt" in events[0], events

    clusters.wait_running("tlsca", ready=3, timeout=240)
    before = {p.metadata.name: p.metadata.uid for p in clusters.live_pods("tlsca")}
    stranger = CertificateAuthority.create(tmp_path / "stranger", "stranger-ca", DAYS)
    _replace_data(clusters, tls.server_secret, {c.SERVER_CERT_FILE: tls.server.cert_pem,
                                                c.SERVER_KEY_FILE: tls.server.key_pem,
                                                c.SERVER_CA_FILE: stranger.cert_pem})
    wait_for(lambda: _problem(clusters, "tlsca", "server") == "server.crt is not signed by the CA in server-ca.crt",
             timeout=120, what="status.tls.server naming the CA that did not sign the certificate")
    wait_for(lambda: _certificate_events(clusters, "tlsca"), timeout=60, what="a CertificateProblem event")
    # Fixed: the problem goes; and in all that time the operator changed no member.
    for secret in tls.secrets():
        if secret["metadata"]["name"] == tls.server_secret:  # type: ignore[index]
            clusters.core.replace_namespaced_secret(tls.server_secret, ns, secret)
    wait_for(lambda: not _problem(clusters, "tlsca", "server"), timeout=120,
             what="the problem cleared once the secret was fixed")
    events = _certificate_events(clusters, "tlsca")
    assert len(events) == 1 and "server.crt is not signed by the CA in server-ca.crt" in events[0], events
    status = clusters.wait_running("tlsca", ready=3, timeout=60)
    after = {p.metadata.name: p.metadata.uid for p in clusters.live_pods("tlsca")}
    assert after == before, f"members changed: {before} -> {after} ({status.get('message')})"
