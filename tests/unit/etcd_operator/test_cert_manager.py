"""spec.TLS.certManager (issue 24): the spec, the Certificates the operator asks cert-manager for
(the names the operator's own certificates carry), the planner's rule (a missing issuer reported
and nothing changed; Certificates requested, corrected, waited for), the executor's writes, the
member pods' key mapping and the client certificate read from cert-manager's keys."""
from __future__ import annotations

import base64
import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.cert_manager_tls import CertManagerTLS, IssuerRef, secret_file
from etcd_common.api.fields import SpecError
from etcd_common.etcd.access import EtcdAccess
from etcd_operator import actions as a
from etcd_operator.acting import ActionExecutor
from etcd_operator.manifests import build_member_pod
from etcd_operator.observed import ObservedCertManager, ObservedCluster
from etcd_operator.observing import observe_cluster
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_cluster_spec, parse_etcd_cluster
from etcd_operator.status import compute_status
from etcd_operator.tls import cert_manager as cm
from etcd_operator.tls import certificates as certs
from kube_adapter.errors import KubeError
from tests.unit.etcd_operator.etcd_cluster_builders import (
    NAMESPACE,
    T0,
    UID,
    healthy_cluster,
    nothing_yet,
    raw_cluster,
)

ISSUER: dict[str, Any] = {"issuerRef": {"name": "etcd-ca"}}
CERT_MANAGER: dict[str, Any] = {"TLS": {"certManager": ISSUER}}
IDENTITY = certs.Identity("example", NAMESPACE)
TLS = CertManagerTLS(IssuerRef("etcd-ca"))
OWNER = {"apiVersion": c.API_GROUP_VERSION, "kind": c.KIND, "name": "example", "uid": UID}


# ---------------------------------------------------------------------------------------------
# The spec


def test_cert_manager_defaults_and_the_secret_names() -> None:
    spec = parse_cluster_spec({"size": 3, **CERT_MANAGER})
    assert spec.cert_manager_tls == CertManagerTLS(IssuerRef("etcd-ca", "Issuer", "cert-manager.io"))
    custom = parse_cluster_spec({"size": 3, "TLS": {"certManager": {
        "issuerRef": {"name": "corp", "kind": "ClusterIssuer"}, "duration": "24h", "renewBefore": "8h"}}})
    assert custom.cert_manager_tls == CertManagerTLS(IssuerRef("corp", "ClusterIssuer"), "24h", "8h")
    cluster = parse_etcd_cluster(raw_cluster(CERT_MANAGER))
    tls = cluster.require_spec().tls
    assert (tls.member_peer_secret, tls.member_server_secret, tls.operator_secret) == \
        ("example-certmanager-peer", "example-certmanager-server", "example-certmanager-operator")
    assert tls.peer_tls and tls.client_tls


@pytest.mark.parametrize(("tls", "named"), [
    ({"certManager": {}}, "spec.TLS.certManager.issuerRef.name is required"),
    ({"certManager": {"issuerRef": {"name": ""}}}, "spec.TLS.certManager.issuerRef.name is required"),
    ({"certManager": {"issuerRef": {"name": "x", "kind": "Vault"}}}, "must be one of Issuer, ClusterIssuer"),
    ({"certManager": {**ISSUER, "duration": "30m"}}, "at least 1h"),
    ({"certManager": {**ISSUER, "duration": "2h", "renewBefore": "2h"}}, "less than duration"),
    ({"certManager": {**ISSUER, "duration": "a day"}}, "is not a duration"),
    ({"certManager": ISSUER, "issued": {}}, "cannot both be set"),
    ({"certManager": ISSUER, "static": {}}, "cannot both be set"),
])
def test_cert_manager_spec_errors_say_what_to_fix(tls: dict[str, Any], named: str) -> None:
    with pytest.raises(SpecError, match=named):
        parse_cluster_spec({"size": 3, "TLS": tls})


# ---------------------------------------------------------------------------------------------
# The Certificates


def test_certificates_carry_the_names_of_the_operators_own_certificates() -> None:
    for role in certs.LEAF_ROLES:
        spec = cm.certificate_spec(IDENTITY, role, TLS)
        names = certs.required_names(IDENTITY, role)
        assert spec.get("dnsNames", []) == list(names.dns), role
        assert spec.get("ipAddresses", []) == list(names.ips), role
        assert spec["secretName"] == f"example-certmanager-{role}"
        assert spec["issuerRef"] == {"name": "etcd-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert "*.example.default.svc" in cm.certificate_spec(IDENTITY, "peer", TLS)["dnsNames"]
    server = cm.certificate_spec(IDENTITY, "server", TLS)
    assert "example-client.default.svc" in server["dnsNames"] and "server auth" in server["usages"]
    operator = cm.certificate_spec(IDENTITY, "operator", TLS)
    assert operator["commonName"] == "etcd-operator" and "server auth" not in operator["usages"]


def test_a_new_certificate_is_owned_and_leaves_unset_durations_to_cert_manager() -> None:
    manifest = cm.certificate_manifest(IDENTITY, "peer", TLS, OWNER)
    assert manifest["metadata"]["ownerReferences"] == [OWNER]
    assert manifest["metadata"]["name"] == "example-certmanager-peer"
    assert "duration" not in manifest["spec"] and "renewBefore" not in manifest["spec"]
    timed = cm.certificate_manifest(IDENTITY, "peer", CertManagerTLS(IssuerRef("x"), "2h", "1h"), OWNER)
    assert (timed["spec"]["duration"], timed["spec"]["renewBefore"]) == ("2h", "1h")


# ---------------------------------------------------------------------------------------------
# The planner


def _certificate(role: certs.Role, *, owner_uid: str = UID, **spec: Any) -> dict[str, Any]:
    manifest = cm.certificate_manifest(IDENTITY, role, TLS, {**OWNER, "uid": owner_uid})
    manifest["metadata"]["resourceVersion"] = "7"
    manifest["spec"].update(spec)
    return manifest


def _secret(role: certs.Role) -> dict[str, Any]:
    data = {key: base64.b64encode(b"pem").decode() for key in ("tls.crt", "tls.key", "ca.crt")}
    return {"metadata": {"name": f"example-certmanager-{role}"}, "data": data}


def _observed(base: ObservedCluster, *, issuer_exists: bool | None = True, certificates: bool = True,
              secrets: bool = True, **changed: dict[str, Any]) -> ObservedCluster:
    found = {role: (_certificate(role, **changed.get(role, {})) if certificates else None)
             for role in certs.LEAF_ROLES}
    return dataclasses.replace(base, cert_manager=ObservedCertManager(found, issuer_exists),
                               static_secrets={role: _secret(role) if secrets else None for role in certs.LEAF_ROLES})


def test_a_new_cluster_requests_its_certificates_then_waits_for_them_before_anything_else() -> None:
    fresh = dataclasses.replace(nothing_yet(spec=CERT_MANAGER), services=frozenset(), observed_at=T0)
    action = plan_next_action(_observed(fresh, certificates=False, secrets=False))
    assert action == a.ApplyCertManagerCertificates(
        ("peer", "server", "operator"),
        "example-certmanager-peer: missing; example-certmanager-server: missing; example-certmanager-operator: missing")
    waiting = plan_next_action(_observed(fresh, secrets=False))
    assert isinstance(waiting, a.Wait) and "waiting for cert-manager to issue example-certmanager-peer" in waiting.reason
    assert isinstance(plan_next_action(_observed(fresh)), a.CreateServices)


def test_a_missing_issuer_is_reported_and_nothing_changes() -> None:
    for base in (nothing_yet(spec=CERT_MANAGER), healthy_cluster(3, spec=CERT_MANAGER)):
        action = plan_next_action(_observed(base, issuer_exists=False, certificates=False, secrets=False))
        assert isinstance(action, a.ReportCertificateProblem) and not action.has_effect
        assert action.reason == "IssuerNotFound" and action.event_reason == "IssuerNotFound"
        assert action.event_type == "Warning"
        assert "Issuer etcd-ca not found in namespace default" in action.message


def test_the_status_of_a_running_cluster_whose_issuer_is_missing_says_why_and_stays_running() -> None:
    observed = _observed(healthy_cluster(3, spec=CERT_MANAGER), issuer_exists=False)
    action = plan_next_action(observed)
    status = compute_status(observed, action, now=T0)
    assert status["phase"] == "Running" and status["reason"] == "IssuerNotFound", status
    assert "Issuer etcd-ca not found" in status["message"]


def test_an_issuer_that_cannot_be_told_does_not_block() -> None:
    observed = _observed(healthy_cluster(3, spec=CERT_MANAGER), issuer_exists=None)
    assert isinstance(plan_next_action(observed), a.NoOp)


def test_a_certificate_someone_else_owns_is_never_taken_over() -> None:
    observed = _observed(healthy_cluster(3, spec=CERT_MANAGER))
    assert observed.cert_manager is not None
    found = dict(observed.cert_manager.certificates)
    found["server"] = _certificate("server", owner_uid="someone-else")
    action = plan_next_action(dataclasses.replace(observed, cert_manager=ObservedCertManager(found, True)))
    assert isinstance(action, a.ReportCertificateProblem) and action.reason == "CertificateNameTaken"
    assert "example-certmanager-server" in action.message


def test_an_outdated_certificate_is_corrected_and_a_converged_cluster_does_nothing() -> None:
    running = healthy_cluster(3, spec=CERT_MANAGER)
    assert isinstance(plan_next_action(_observed(running)), a.NoOp)
    action = plan_next_action(_observed(running, server={"issuerRef": {"name": "old", "kind": "Issuer"}}))
    assert action == a.ApplyCertManagerCertificates(("server",), "example-certmanager-server: issuerRef")


# ---------------------------------------------------------------------------------------------
# The executor


class CertificatesApi:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        return body

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patched.append((name, patch))
        return patch


def test_the_executor_creates_missing_certificates_and_patches_only_what_differs() -> None:
    api = CertificatesApi()
    executor = ActionExecutor(None, None, None, EtcdAccess(lambda ns, n: {}), certificates=api)  # type: ignore[arg-type]
    observed = _observed(healthy_cluster(3, spec=CERT_MANAGER), server={"issuerRef": {"name": "old"}})
    assert observed.cert_manager is not None
    found = dict(observed.cert_manager.certificates)
    found["peer"] = None
    observed = dataclasses.replace(observed, cert_manager=ObservedCertManager(found, True))
    executor.execute(a.ApplyCertManagerCertificates(("peer", "server"), "test"), observed)
    assert [body["metadata"]["name"] for body in api.created] == ["example-certmanager-peer"]
    assert api.created[0]["metadata"]["ownerReferences"][0]["uid"] == UID
    assert api.patched == [("example-certmanager-server", {
        "metadata": {"resourceVersion": "7"},
        "spec": {"issuerRef": {"name": "etcd-ca", "kind": "Issuer", "group": "cert-manager.io"}}})]


# ---------------------------------------------------------------------------------------------
# Member pods and the client certificate


def test_member_pods_map_cert_managers_keys_onto_the_coreos_file_names() -> None:
    cluster = parse_etcd_cluster(raw_cluster(CERT_MANAGER))
    pod = build_member_pod(cluster, "example-abcde", state="new", initial_cluster=(("example-abcde", "u"),))
    volumes = {v["name"]: v["secret"] for v in pod["spec"]["volumes"] if "secret" in v}
    assert volumes[c.PEER_TLS_VOLUME]["secretName"] == "example-certmanager-peer"
    assert volumes[c.PEER_TLS_VOLUME]["items"] == [
        {"key": "tls.crt", "path": c.PEER_CERT_FILE}, {"key": "tls.key", "path": c.PEER_KEY_FILE},
        {"key": "ca.crt", "path": c.PEER_CA_FILE}]
    assert volumes[c.SERVER_TLS_VOLUME]["items"][0] == {"key": "tls.crt", "path": c.SERVER_CERT_FILE}
    static = build_member_pod(parse_etcd_cluster(raw_cluster({"TLS": {"static": {"member": {"peerSecret": "p"}}}})),
                              "example-abcde", state="new", initial_cluster=(("example-abcde", "u"),))
    assert all("items" not in v["secret"] for v in static["spec"]["volumes"] if "secret" in v)


def test_the_coreos_names_are_found_under_cert_managers_keys() -> None:
    assert secret_file({"tls.crt": "A", "ca.crt": "C"}, c.OPERATOR_CERT_FILE) == "A"
    assert secret_file({"tls.crt": "A", "ca.crt": "C"}, c.SERVER_CA_FILE) == "C"
    assert secret_file({c.PEER_CERT_FILE: "P", "tls.crt": "A"}, c.PEER_CERT_FILE) == "P"
    assert secret_file({}, c.PEER_KEY_FILE) is None


def _issued_secret(role: certs.Role, ca: certs.KeyPair, validity_seconds: int) -> dict[str, Any]:
    leaf = certs.issue_leaf(ca, IDENTITY, role, T0, validity_seconds)
    files = {"tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem, "ca.crt": ca.cert_pem}
    return {"metadata": {"name": f"example-certmanager-{role}"}, "data": certs.encode(files)}


@pytest.mark.parametrize(("validity_hours", "problem"), [(24, ""), (1, "cert-manager did not renew it")])
def test_status_tls_reads_cert_managers_keys_and_leaves_renewal_to_it(validity_hours: int, problem: str) -> None:
    """A 24h certificate is no problem (cert-manager renews it); one it let end is."""
    ca = certs.issue_ca(IDENTITY, T0, 3650 * 24 * 3600)
    observed = dataclasses.replace(
        _observed(healthy_cluster(3, spec=CERT_MANAGER)), observed_at=T0 + timedelta(hours=2),
        static_secrets={role: _issued_secret(role, ca, validity_hours * 3600) for role in certs.LEAF_ROLES})
    tls = compute_status(observed, plan_next_action(observed), now=T0 + timedelta(hours=2))["tls"]
    assert sorted(tls) == ["ca", "operator", "peer", "server"], tls
    assert tls["server"]["secret"] == "example-certmanager-server" and tls["server"]["notAfter"], tls
    for role in certs.LEAF_ROLES:
        assert problem in tls[role].get("problem", ""), tls[role]
        assert bool(tls[role].get("problem")) == bool(problem), tls[role]


def _running_with(observed: ObservedCluster, secrets: set[str]) -> ObservedCluster:
    pods = tuple(dataclasses.replace(pod, secret_volumes=frozenset(secrets)) for pod in observed.pods)
    return dataclasses.replace(observed, pods=pods)


CERT_MANAGER_SECRETS = {"example-certmanager-peer", "example-certmanager-server"}


@pytest.mark.parametrize(("spec", "mounted", "switch"), [
    (CERT_MANAGER, {"p", "s"}, "from static to certManager"),
    (CERT_MANAGER, {"example-tls-peer", "example-tls-server"}, "from issued to certManager"),
    ({"TLS": {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}, "operatorSecret": "o"}}},
     CERT_MANAGER_SECRETS, "from certManager to static"),
    ({"TLS": {"issued": {}}}, CERT_MANAGER_SECRETS, "from certManager to issued"),
])
def test_switching_a_running_cluster_to_or_from_cert_manager_is_refused(
        spec: dict[str, Any], mounted: set[str], switch: str) -> None:
    action = plan_next_action(_running_with(_observed(healthy_cluster(3, spec=spec)), mounted))
    assert isinstance(action, a.RejectSpec) and switch in action.reason, action


def test_cert_manager_pods_on_a_cert_manager_spec_are_fine() -> None:
    observed = _running_with(_observed(healthy_cluster(3, spec=CERT_MANAGER)), CERT_MANAGER_SECRETS)
    assert isinstance(plan_next_action(observed), a.NoOp)
    pod = build_member_pod(parse_etcd_cluster(raw_cluster(CERT_MANAGER, status={})), "example-abcde", state="new",
                           initial_cluster=(("example-abcde", "u"),))
    from etcd_operator.observed import parse_pod

    assert parse_pod(pod).secret_volumes == CERT_MANAGER_SECRETS


# ---------------------------------------------------------------------------------------------
# The observation


class CertManagerLookups:
    """The lookups a cert-manager cluster's observation makes, answered from what the test put in."""

    def __init__(self, *, certificates: dict[str, dict[str, Any]], issuers: dict[tuple[str, str], dict[str, Any]],
                 issuer_error: Exception | None = None) -> None:
        self.certificates, self.issuers, self.issuer_error = certificates, issuers, issuer_error
        self.asked: list[tuple[str, str]] = []

    def neighbours(self, namespace: str) -> list[dict[str, Any]]:
        return [raw_cluster(CERT_MANAGER)]

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def disruption_budget(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def failed_mount_events(self, namespace: str, pod_uid: str) -> list[dict[str, Any]]:
        return []

    def endpoint_slices(self, namespace: str, service: str) -> list[dict[str, Any]]:
        return []

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def backups(self, namespace: str) -> list[dict[str, Any]]:
        return []

    def certificate(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.asked.append(("certificate", name))
        return self.certificates.get(name)

    def issuer(self, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
        self.asked.append((kind, name))
        if self.issuer_error is not None:
            raise self.issuer_error
        return self.issuers.get((kind, name))


def _observe(lookups: CertManagerLookups, spec: dict[str, Any] = CERT_MANAGER) -> ObservedCluster:
    return observe_cluster(parse_etcd_cluster(raw_cluster(spec, status={})), pods=[], services=[], pvcs=[],
                           etcd=EtcdAccess(lambda ns, name: {}), lookups=lookups, now=T0,
                           connectable=lambda urls: set())


def test_the_observation_reads_the_certificates_and_asks_whether_the_issuer_exists() -> None:
    peer = _certificate("peer")
    lookups = CertManagerLookups(certificates={"example-certmanager-peer": peer}, issuers={})
    seen = _observe(lookups).cert_manager
    assert seen == ObservedCertManager({"peer": peer, "server": None, "operator": None}, False)
    assert ("Issuer", "etcd-ca") in lookups.asked
    found = CertManagerLookups(certificates={}, issuers={("ClusterIssuer", "corp"): {}})
    cluster_issuer = {"TLS": {"certManager": {"issuerRef": {"name": "corp", "kind": "ClusterIssuer"}}}}
    assert _observe(found, cluster_issuer).cert_manager == ObservedCertManager(
        {"peer": None, "server": None, "operator": None}, True)


def test_an_issuer_the_operator_may_not_read_or_of_another_group_is_not_told() -> None:
    forbidden = CertManagerLookups(certificates={}, issuers={}, issuer_error=KubeError("forbidden", status=403))
    seen = _observe(forbidden).cert_manager
    assert seen is not None and seen.issuer_exists is None and not seen.error
    external = CertManagerLookups(certificates={}, issuers={})
    spec = {"TLS": {"certManager": {"issuerRef": {"name": "x", "kind": "Issuer", "group": "example.com"}}}}
    assert _observe(external, spec).cert_manager == ObservedCertManager(
        {"peer": None, "server": None, "operator": None}, None)
    assert not [q for q in external.asked if q[0] == "Issuer"]


def test_clusters_without_cert_manager_ask_nothing_of_it() -> None:
    lookups = CertManagerLookups(certificates={}, issuers={})
    assert _observe(lookups, {"TLS": {"issued": {}}}).cert_manager is None
    assert lookups.asked == []
