"""spec.TLS.issued (issue 24): the spec, the names each certificate carries, the Secrets' contents
(CoreOS file names, signed by the cluster CA, validity), what is wrong with a Secret, when the
planner issues (rule 2c: before anything else, again near the end or when a name is missing), the
executor's writes, status.tls and the not-after gauge."""
from __future__ import annotations

import base64
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from etcd_common.api import constants as c
from etcd_common.api.fields import SpecError
from etcd_common.api.issued_tls import DEFAULT_CA_VALIDITY, IssuedTLS
from etcd_common.etcd.access import EtcdAccess
from etcd_common.etcd.endpoints import cluster_client_access
from etcd_operator import actions as a
from etcd_operator.acting import ActionExecutor
from etcd_operator.manifests import build_member_pod
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_cluster_spec, parse_etcd_cluster
from etcd_operator.status import compute_status, static_tls_event
from etcd_operator.tls import certificates as certs
from tests.unit.etcd_operator.etcd_cluster_builders import (
    NAMESPACE,
    T0,
    healthy_cluster,
    issued_secret,
    name,
    nothing_yet,
    raw_cluster,
    with_issued_certificates,
)

ISSUED: dict[str, Any] = {"TLS": {"issued": {}}}
DAY = 24 * 3600
IDENTITY = certs.Identity("example", NAMESPACE)
POLICY = IssuedTLS(validity_seconds=90 * DAY, renew_before_seconds=30 * DAY, ca_validity_seconds=3650 * DAY)


def _cert(secret: dict[str, Any], key: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(secret["data"][key]))


# ---------------------------------------------------------------------------------------------
# The spec


def test_issued_defaults_and_renew_before_a_third_of_validity() -> None:
    spec = parse_cluster_spec({"size": 3, **ISSUED})
    assert spec.issued_tls == IssuedTLS(validity_seconds=2160 * 3600, renew_before_seconds=720 * 3600,
                                        ca_validity_seconds=87600 * 3600)
    custom = parse_cluster_spec({"size": 3, "TLS": {"issued": {"validity": "24h", "renewBefore": "2h",
                                                                "caValidity": "48h"}}})
    assert custom.issued_tls == IssuedTLS(24 * 3600, 2 * 3600, 48 * 3600)
    assert parse_cluster_spec({"size": 3, "TLS": {"issued": {"validity": "30h"}}}).issued_tls == \
        IssuedTLS(30 * 3600, 10 * 3600, 87600 * 3600)


@pytest.mark.parametrize(("tls", "named"), [
    ({"static": {"member": {"peerSecret": "p"}}, "issued": {}}, "cannot both be set"),
    ({"static": {}, "issued": {}}, "cannot both be set"),
    ({"issued": {"validity": "90d"}}, "spec.TLS.issued.validity: '90d' is not a duration"),
    ({"issued": {"validity": "30m"}}, "spec.TLS.issued.validity must be at least 1h"),
    ({"issued": {"validity": "24h", "renewBefore": "24h"}}, "spec.TLS.issued.renewBefore must be more than 0s"),
    ({"issued": {"renewBefore": "0s"}}, "spec.TLS.issued.renewBefore must be more than 0s"),
    ({"issued": {"validity": "24h", "caValidity": "23h"}}, "spec.TLS.issued.caValidity must be at least validity"),
    ({"issued": {"validity": 24}}, "spec.TLS.issued.validity must be a string"),
    ({"issued": "yes"}, "spec.TLS.issued must be an object"),
])
def test_issued_spec_errors_say_what_to_fix(tls: dict[str, Any], named: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_cluster_spec({"size": 3, "TLS": tls})
    assert named in str(error.value)


def test_an_issued_cluster_reads_like_a_static_one_with_the_operators_secrets() -> None:
    """Member pods, the operator's client and backups by etcdCluster.name need nothing new."""
    cluster = parse_etcd_cluster(raw_cluster(ISSUED, status={}))
    tls = cluster.require_spec().tls
    assert (tls.member_peer_secret, tls.member_server_secret, tls.operator_secret) == \
        ("example-tls-peer", "example-tls-server", "example-tls-operator")
    assert tls.peer_tls and tls.client_tls
    pod = build_member_pod(cluster, "example-abcde", state="new", initial_cluster=[])
    mounted = {v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v}
    assert mounted == {"example-tls-peer", "example-tls-server"}
    access = cluster_client_access(cluster)
    assert access.url.startswith("https://") and access.tls_secret == "example-tls-operator"


def test_a_static_cluster_is_unchanged() -> None:
    static = {"TLS": {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}, "operatorSecret": "o"}}}
    spec = parse_etcd_cluster(raw_cluster(static)).require_spec()
    assert spec.issued_tls is None and spec.tls.member_peer_secret == "p" and spec.tls.operator_secret == "o"


# ---------------------------------------------------------------------------------------------
# Names


def test_peer_names_cover_every_member_and_the_sandbox_source_address() -> None:
    names = certs.required_names(IDENTITY, "peer")
    assert names.dns == ("*.example.default.svc", "*.example.default.svc.cluster.local")
    assert names.ips == ("127.0.0.1",)


def test_server_names_add_the_client_service_and_localhost() -> None:
    names = certs.required_names(IDENTITY, "server")
    assert names.dns == ("*.example.default.svc", "*.example.default.svc.cluster.local", "example-client",
                         "example-client.default", "example-client.default.svc",
                         "example-client.default.svc.cluster.local", "localhost")
    assert certs.required_names(IDENTITY, "operator") == certs.Names()


def test_cluster_domain_names_the_member_and_service_hosts() -> None:
    identity = certs.Identity("example", NAMESPACE, ".corp.example")
    assert identity.member_host("example-abcde") == "example-abcde.example.default.svc.corp.example"
    assert "*.example.default.svc.corp.example" in certs.required_names(identity, "peer").dns
    assert "example-client.default.svc.corp.example" in certs.required_names(identity, "server").dns


def test_wildcards_cover_one_label_only() -> None:
    ca = certs.issue_ca(IDENTITY, T0, POLICY.ca_validity_seconds)
    peer = certs.issue_leaf(ca, IDENTITY, "peer", T0, POLICY.validity_seconds).certificate
    assert certs.names_host(peer, "example-abcde.example.default.svc")
    assert certs.names_host(peer, "example-abcde.example.default.svc.cluster.local")
    assert not certs.names_host(peer, "a.b.example.default.svc")
    assert not certs.names_host(peer, "example-abcde.other.default.svc")


# ---------------------------------------------------------------------------------------------
# Issued certificates and Secrets


def test_secrets_have_the_coreos_file_names_and_the_cluster_ca() -> None:
    ca = certs.issue_ca(IDENTITY, T0, POLICY.ca_validity_seconds)
    assert set(certs.secret_data("ca", ca, ca)) == {"ca.crt", "ca.key"}
    expected = {"peer": {c.PEER_CERT_FILE, c.PEER_KEY_FILE, c.PEER_CA_FILE},
                "server": {c.SERVER_CERT_FILE, c.SERVER_KEY_FILE, c.SERVER_CA_FILE},
                "operator": {c.OPERATOR_CERT_FILE, c.OPERATOR_KEY_FILE, c.OPERATOR_CA_FILE}}
    for role, keys in expected.items():
        pair = certs.issue_leaf(ca, IDENTITY, role, T0, POLICY.validity_seconds)  # type: ignore[arg-type]
        data = certs.secret_data(role, pair, ca)  # type: ignore[arg-type]
        assert set(data) == keys
        cert_key, _, ca_key = certs.LEAF_KEYS[role]  # type: ignore[index]
        assert base64.b64decode(data[ca_key]) == ca.cert_pem
        assert certs.signed_by(x509.load_pem_x509_certificate(base64.b64decode(data[cert_key])), ca.certificate)


def test_ca_and_leaf_extensions_and_validity() -> None:
    ca = certs.issue_ca(IDENTITY, T0, POLICY.ca_validity_seconds)
    ca_cert = ca.certificate
    assert ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca_cert.not_valid_after_utc == T0 + timedelta(days=3650)
    for role, usages in (("peer", {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}),
                         ("server", {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}),
                         ("operator", {ExtendedKeyUsageOID.CLIENT_AUTH})):
        leaf = certs.issue_leaf(ca, IDENTITY, role, T0, POLICY.validity_seconds).certificate  # type: ignore[arg-type]
        assert set(leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == usages
        assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        assert leaf.not_valid_after_utc == T0 + timedelta(days=90)
        assert leaf.not_valid_before_utc < T0  # backdated for clocks that lag
    operator = certs.issue_leaf(ca, IDENTITY, "operator", T0, POLICY.validity_seconds).certificate
    assert operator.subject.rfc4514_string() == "CN=etcd-operator"


def test_a_leaf_never_outlives_its_ca() -> None:
    ca = certs.issue_ca(IDENTITY, T0, 10 * DAY)
    leaf = certs.issue_leaf(ca, IDENTITY, "peer", T0, 90 * DAY).certificate
    assert leaf.not_valid_after_utc == ca.certificate.not_valid_after_utc


# ---------------------------------------------------------------------------------------------
# What is wrong with a Secret


def _secrets(at: datetime = T0, validity: int = POLICY.validity_seconds) -> dict[str, Any]:
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=at, validity_seconds=validity)
    return dict(observed.issued_secrets)


HOSTS = ["example-mem01.example.default.svc"]


def _check(secrets: dict[str, Any], now: datetime | None = T0 + timedelta(days=1)) -> certs.IssuanceCheck:
    return certs.check_issued(secrets, IDENTITY, POLICY, HOSTS, now)


def test_fresh_secrets_have_no_problem() -> None:
    check = _check(_secrets())
    assert check.to_issue == () and [x.problem for x in check.checked] == ["", "", "", ""]
    assert {x.role: x.not_after for x in check.checked}["peer"] == T0 + timedelta(days=90)


def _problem(check: certs.IssuanceCheck, role: str) -> str:
    return next(x.problem for x in check.checked if x.role == role)


def test_a_missing_ca_issues_everything_again() -> None:
    secrets = _secrets()
    secrets["ca"] = None
    check = _check(secrets)
    assert check.to_issue == ("ca", "peer", "server", "operator")
    assert _problem(check, "ca") == "missing" and "issued again with the CA (missing)" in _problem(check, "peer")


def _without_ca_key(secrets: dict[str, Any]) -> None:
    secrets["ca"] = {**secrets["ca"], "data": {"ca.crt": secrets["ca"]["data"]["ca.crt"]}}


def _ca_garbage(secrets: dict[str, Any]) -> None:
    secrets["ca"] = {**secrets["ca"], "data": {"ca.crt": "eA=="}}


def _ca_deleted(secrets: dict[str, Any]) -> None:
    secrets["ca"] = None


@pytest.mark.parametrize("lose", [_ca_deleted, _ca_garbage, _without_ca_key])
@pytest.mark.parametrize("members_run, days, lost", [
    (True, 1, True),  # members trust only the lost CA: nothing is issued (tls/lost_ca.py recovers it)
    (False, 1, False),  # nothing runs that trusts it: everything is issued again
    (True, 3651, False),  # the CA itself expired (so did its leaves): everything is issued again
])
def test_a_lost_ca_under_running_members_issues_nothing(lose: Any, members_run: bool, days: int, lost: bool) -> None:
    secrets = _secrets()
    lose(secrets)
    check = certs.check_issued(secrets, IDENTITY, POLICY, HOSTS, T0 + timedelta(days=days), members_run=members_run)
    expired_unknown = lose is not _without_ca_key and days > 1  # no readable CA certificate: not known to be expired
    if lost or expired_unknown:
        assert check.ca_lost and check.to_issue == ()
        assert _problem(check, "peer") in ("the cluster CA is missing or invalid", "expired at 2024-07-30T12:00:00Z")
    else:
        assert not check.ca_lost and check.to_issue == ("ca", "peer", "server", "operator")


def test_a_ca_without_its_key_signs_nothing_while_a_new_ca_comes_in() -> None:
    """A lost CA recovered (tls/lost_ca.py): its certificate and the incoming CA; a leaf near its
    end waits for the new CA (ReissueFromNewCA), it is not issued from a key that is gone."""
    secrets = _secrets()
    _without_ca_key(secrets)
    incoming = certs.issue_ca(IDENTITY, T0, POLICY.ca_validity_seconds)
    secrets["ca"]["data"].update(certs.encode({"next-ca.crt": incoming.cert_pem, "next-ca.key": incoming.key_pem}))
    check = _check(secrets, T0 + timedelta(days=70))
    assert _problem(check, "ca") == "" and not check.ca_signs
    assert "within renewBefore" in _problem(check, "peer") and check.to_issue == ()
    assert check.to_publish == ("peer", "server", "operator")  # both CAs trusted first


def test_wrong_key_names_are_named() -> None:
    secrets = _secrets()
    data = dict(secrets["server"]["data"])
    data["tls.crt"] = data.pop(c.SERVER_CERT_FILE)
    secrets["server"] = {**secrets["server"], "data": data}
    check = _check(secrets)
    assert check.to_issue == ("server",)
    assert _problem(check, "server") == "has no key server.crt (it needs server.crt, server.key, server-ca.crt)"


def test_a_leaf_another_ca_signed_is_issued_again() -> None:
    secrets = _secrets()
    other = _secrets()
    secrets["peer"] = other["peer"]
    check = _check(secrets)
    assert check.to_issue == ("peer",) and _problem(check, "peer") == "peer.crt is not signed by the cluster CA"
    # Even with the cluster CA's certificate beside it.
    data = {**other["peer"]["data"], c.PEER_CA_FILE: secrets["ca"]["data"]["ca.crt"]}
    secrets["peer"] = {**other["peer"], "data": data}
    assert _problem(_check(secrets), "peer") == "peer.crt is not signed by the cluster CA"


def test_a_key_that_is_not_the_certificates() -> None:
    secrets = _secrets()
    data = {**secrets["operator"]["data"], c.OPERATOR_KEY_FILE: _secrets()["operator"]["data"][c.OPERATOR_KEY_FILE]}
    secrets["operator"] = {**secrets["operator"], "data": data}
    assert _problem(_check(secrets), "operator") == "etcd-client.key is not the key of the certificate beside it"


def test_garbage_is_reported_not_raised() -> None:
    secrets = _secrets()
    secrets["server"] = {**secrets["server"], "data": {**secrets["server"]["data"], c.SERVER_CERT_FILE: "!!"}}
    secrets["peer"] = {**secrets["peer"], "data": {**secrets["peer"]["data"],
                                                   c.PEER_CERT_FILE: base64.b64encode(b"nope").decode()}}
    check = _check(secrets)
    assert _problem(check, "server").startswith("its data is not base64")
    assert _problem(check, "peer") == "peer.crt is not a PEM certificate"


def test_a_name_set_that_changed_issues_again() -> None:
    """A ClusterDomain set later: the certificates lack the new names."""
    secrets = _secrets()
    identity = certs.Identity("example", NAMESPACE, ".corp.example")
    check = certs.check_issued(secrets, identity, POLICY, [], T0)
    assert check.to_issue == ("peer", "server")
    assert _problem(check, "peer") == "peer.crt does not name *.example.default.svc.corp.example"


def test_a_member_host_the_certificate_does_not_cover_is_named() -> None:
    check = certs.check_issued(_secrets(), IDENTITY, POLICY, ["example-x.elsewhere.default.svc"], T0)
    assert _problem(check, "peer") == "peer.crt does not name member host example-x.elsewhere.default.svc"
    assert _problem(check, "operator") == ""  # a client certificate names no host


@pytest.mark.parametrize(("days", "problem"), [
    (59, ""),
    (61, "ends at 2024-07-30T12:00:00Z, within renewBefore"),
    (91, "expired at 2024-07-30T12:00:00Z"),
])
def test_renewal_within_renew_before_and_expiry(days: int, problem: str) -> None:
    check = _check(_secrets(), now=T0 + timedelta(days=days))
    assert [_problem(check, role) for role in ("peer", "server", "operator")] == [problem] * 3
    assert _problem(check, "ca") == ""


def test_no_time_no_expiry_checks() -> None:
    assert _check(_secrets(), now=None).to_issue == ()


def test_a_leaf_that_ends_with_its_ca_is_not_issued_again_and_again() -> None:
    """Issuing again would not end it later: the CA ends first (CA rotation is not automatic)."""
    policy = dataclasses.replace(POLICY, ca_validity_seconds=POLICY.validity_seconds)
    observed = with_issued_certificates(healthy_cluster(3, spec={"TLS": {"issued": {"caValidity": "2160h"}}}),
                                        now=T0)
    check = certs.check_issued(dict(observed.issued_secrets), IDENTITY, policy, HOSTS, T0 + timedelta(days=80))
    assert check.to_issue == (), check.describe()
    expired = certs.check_issued(dict(observed.issued_secrets), IDENTITY, policy, HOSTS, T0 + timedelta(days=91))
    assert _problem(expired, "ca") == "expired at 2024-07-30T12:00:00Z" and len(expired.to_issue) == 4


def test_a_ca_secret_without_a_ca() -> None:
    secrets = _secrets()
    leaf = secrets["peer"]["data"]
    secrets["ca"] = {**secrets["ca"], "data": {"ca.crt": leaf[c.PEER_CERT_FILE], "ca.key": leaf[c.PEER_KEY_FILE]}}
    assert _problem(_check(secrets), "ca") == "ca.crt is not a CA certificate"


# ---------------------------------------------------------------------------------------------
# The planner (rule 2c)


def test_a_new_issued_cluster_gets_its_certificates_before_its_services_and_seed() -> None:
    fresh = dataclasses.replace(nothing_yet(spec=ISSUED), services=frozenset(), observed_at=T0,
                                issued_secrets={role: None for role in certs.ROLES})
    action = plan_next_action(fresh)
    assert isinstance(action, a.IssueCertificates)
    assert action.roles == ("ca", "peer", "server", "operator")
    assert "secret example-tls-ca missing" in action.reason
    issued = with_issued_certificates(dataclasses.replace(fresh, issued_secrets={}), now=T0)
    assert isinstance(plan_next_action(issued), a.CreateServices)
    with_services = dataclasses.replace(issued, services=frozenset({"example", "example-client"}))
    assert isinstance(plan_next_action(with_services), a.CreateSeedMember)


def test_a_running_cluster_renews_near_the_end_and_otherwise_converges() -> None:
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0)
    assert isinstance(plan_next_action(observed), a.NoOp)
    later = dataclasses.replace(observed, observed_at=T0 + timedelta(days=61))
    action = plan_next_action(later)
    assert isinstance(action, a.IssueCertificates) and action.roles == ("peer", "server", "operator")
    assert "within renewBefore" in action.reason


def test_one_broken_secret_is_the_only_one_written() -> None:
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0)
    secrets = dict(observed.issued_secrets)
    secrets["server"] = None
    action = plan_next_action(dataclasses.replace(observed, issued_secrets=secrets))
    assert action == a.IssueCertificates(("server",), "secret example-tls-server missing")


def test_a_secret_someone_else_owns_is_never_overwritten() -> None:
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0)
    secrets = dict(observed.issued_secrets)
    secrets["ca"] = issued_secret(observed.cluster, "ca", {"ca.crt": ""}, owner_uid="someone-else")
    action = plan_next_action(dataclasses.replace(observed, issued_secrets=secrets))
    assert isinstance(action, a.RefuseNames) and action.reason == certs.REASON_SECRET_NAME_TAKEN
    assert "secret example-tls-ca exists and is not owned by EtcdCluster example" in action.message


def _kept(secret: dict[str, Any], *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The CA Secret as a restore keeps it: no owner reference (labels: default the cluster's)."""
    metadata = {key: value for key, value in secret["metadata"].items() if key != "ownerReferences"}
    metadata["labels"] = {c.LABEL_APP: c.LABEL_APP_VALUE, c.LABEL_CLUSTER: "example"} if labels is None else labels
    return {**secret, "metadata": metadata}


def test_a_ca_a_restore_kept_is_adopted_and_signs_the_new_leaves() -> None:
    """A restore replaces the cluster (same name, a new uid); the old leaves went with the old
    cluster, its CA Secret was kept without an owner: adopted, then leaves issued from it."""
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0)
    kept = _kept(observed.issued_secrets["ca"])
    restored = dataclasses.replace(observed, issued_secrets={"ca": kept, "peer": None, "server": None,
                                                             "operator": None})
    assert plan_next_action(restored) == a.AdoptCA("example-tls-ca")
    api = SecretsApi()
    _executor(api).execute(a.AdoptCA("example-tls-ca"), restored)
    assert api.patched == [("example-tls-ca", {"metadata": {"resourceVersion": "7", "ownerReferences": [
        {"apiVersion": c.API_GROUP_VERSION, "kind": c.KIND, "name": "example", "uid": observed.cluster.uid,
         "controller": True, "blockOwnerDeletion": True}]}})]
    adopted = dataclasses.replace(restored, issued_secrets={
        **restored.issued_secrets, "ca": issued_secret(observed.cluster, "ca", kept["data"])})
    action = plan_next_action(adopted)
    assert isinstance(action, a.IssueCertificates) and action.roles == ("peer", "server", "operator"), action


def test_only_an_unowned_ca_with_the_clusters_labels_is_adopted() -> None:
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0)
    ca = observed.issued_secrets["ca"]
    for secret in (_kept(ca, labels={}), _kept(ca, labels={c.LABEL_APP: c.LABEL_APP_VALUE, c.LABEL_CLUSTER: "other"}),
                   _kept({**ca, "data": {"ca.crt": ""}})):
        action = plan_next_action(dataclasses.replace(observed, issued_secrets={**observed.issued_secrets,
                                                                                "ca": secret}))
        assert isinstance(action, a.RefuseNames) and action.reason == certs.REASON_SECRET_NAME_TAKEN, action


STATIC = {"TLS": {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}, "operatorSecret": "o"}}}


def _running_with(observed: Any, secrets: set[str]) -> Any:
    pods = tuple(dataclasses.replace(pod, secret_volumes=frozenset(secrets)) for pod in observed.pods)
    return dataclasses.replace(observed, pods=pods)


def test_switching_a_running_cluster_from_static_to_issued_is_refused() -> None:
    observed = _running_with(with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0), {"p", "s"})
    action = plan_next_action(observed)
    assert isinstance(action, a.RejectSpec)
    assert "cannot switch from static to issued" in action.reason and "example-mem01" in action.reason


def test_switching_a_running_cluster_from_issued_to_static_is_refused() -> None:
    observed = _running_with(healthy_cluster(3, spec=STATIC), {"example-tls-peer", "example-tls-server"})
    action = plan_next_action(observed)
    assert isinstance(action, a.RejectSpec) and "cannot switch from issued to static" in action.reason


def test_pods_on_their_own_source_are_fine() -> None:
    issued = _running_with(with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0),
                           {"example-tls-peer", "example-tls-server"})
    assert isinstance(plan_next_action(issued), a.NoOp)
    static = _running_with(healthy_cluster(3, spec=STATIC), {"p", "s"})
    assert isinstance(plan_next_action(static), a.NoOp)


def test_member_pods_record_their_secret_volumes() -> None:
    from etcd_operator.observed import parse_pod

    cluster = parse_etcd_cluster(raw_cluster(ISSUED, status={}))
    pod = build_member_pod(cluster, "example-abcde", state="new", initial_cluster=[])
    assert parse_pod(pod).secret_volumes == {"example-tls-peer", "example-tls-server"}


def test_static_and_paused_clusters_issue_nothing() -> None:
    assert isinstance(plan_next_action(healthy_cluster(3)), a.NoOp)
    paused = dataclasses.replace(healthy_cluster(3, spec={**ISSUED, "paused": True}),
                                 issued_secrets={role: None for role in certs.ROLES})
    assert isinstance(plan_next_action(paused), a.Pause)


# ---------------------------------------------------------------------------------------------
# The executor


class SecretsApi:
    """Stands in for the Secrets ResourceClient."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        return body

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patched.append((name, patch))
        return patch


def _executor(api: SecretsApi) -> ActionExecutor:
    return ActionExecutor(None, None, None, EtcdAccess(lambda ns, name: {}), secrets=api)  # type: ignore[arg-type]


def test_issuing_creates_four_owned_secrets_the_checks_accept() -> None:
    api = SecretsApi()
    fresh = dataclasses.replace(nothing_yet(spec=ISSUED), observed_at=T0,
                                issued_secrets={role: None for role in certs.ROLES})
    action = plan_next_action(fresh)
    _executor(api).execute(action, fresh)
    assert [s["metadata"]["name"] for s in api.created] == \
        ["example-tls-ca", "example-tls-peer", "example-tls-server", "example-tls-operator"]
    for secret in api.created:
        assert secret["metadata"]["ownerReferences"][0]["uid"] == fresh.cluster.uid
        assert secret["metadata"]["labels"] == {"app": "etcd", "etcd_cluster": "example"}
    written = dict(zip(certs.ROLES, api.created, strict=True))
    now = datetime.now(UTC)
    check = certs.check_issued(written, IDENTITY, certs_policy(fresh), HOSTS, now)  # type: ignore[arg-type]
    assert check.to_issue == (), check.describe()
    assert _cert(written["peer"], c.PEER_CERT_FILE).not_valid_after_utc > now + timedelta(days=89)


def certs_policy(observed: Any) -> IssuedTLS:
    issued = observed.cluster.require_spec().issued_tls
    assert issued is not None
    return issued


def test_renewing_one_leaf_keeps_the_ca_and_patches_against_the_version_read() -> None:
    api = SecretsApi()
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0)
    secrets = dict(observed.issued_secrets)
    secrets["peer"] = {**secrets["peer"], "data": {"tls.crt": "eA=="}}
    observed = dataclasses.replace(observed, issued_secrets=secrets)
    _executor(api).execute(a.IssueCertificates(("peer",), "wrong keys"), observed)
    assert api.created == []
    [(name, patch)] = api.patched
    assert name == "example-tls-peer" and patch["metadata"] == {"resourceVersion": "7"}
    assert patch["data"]["tls.crt"] is None  # the wrong key goes
    peer = x509.load_pem_x509_certificate(base64.b64decode(patch["data"][c.PEER_CERT_FILE]))
    ca = certs.ca_from_secret(secrets["ca"])
    assert certs.signed_by(peer, ca.certificate)


# ---------------------------------------------------------------------------------------------
# Status and metrics


def test_status_tls_says_when_each_certificate_ends_and_what_is_wrong() -> None:
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0)
    secrets = dict(observed.issued_secrets)
    secrets["operator"] = None
    observed = dataclasses.replace(observed, issued_secrets=secrets)
    status = compute_status(observed, plan_next_action(observed), now=T0)
    ca_end = (T0 + timedelta(hours=int(DEFAULT_CA_VALIDITY[:-1]))).isoformat().replace("+00:00", "Z")
    assert status["tls"] == {
        "ca": {"secret": "example-tls-ca", "notAfter": ca_end},
        "peer": {"secret": "example-tls-peer", "notAfter": "2024-07-30T12:00:00Z"},
        "server": {"secret": "example-tls-server", "notAfter": "2024-07-30T12:00:00Z"},
        "operator": {"secret": "example-tls-operator", "problem": "missing"},
    }
    assert "tls" not in compute_status(healthy_cluster(3), None, now=T0)


def test_not_after_gauge_starts_at_zero_for_each_certificate() -> None:
    metrics = OperatorMetrics()
    metrics.set_certificates(NAMESPACE, "example", {"peer": 1700000000.0})
    values = {s.labels["certificate"]: s.value for m in metrics.registry.collect()
              if m.name == "etcd_operator_certificate_not_after_seconds" for s in m.samples}
    assert values == {"ca": 0.0, "peer": 1700000000.0, "server": 0.0, "operator": 0.0}
    metrics.forget_cluster(NAMESPACE, "example")
    assert not [s for m in metrics.registry.collect() if m.name == "etcd_operator_certificate_not_after_seconds"
                for s in m.samples]


STATIC: dict[str, Any] = {"TLS": {"static": {"member": {"peerSecret": "my-peer", "serverSecret": "my-server"},
                                             "operatorSecret": "my-operator"}}}


def _static_cluster(validity_days: int, *, issued_at: datetime = T0) -> Any:
    """A cluster on spec.TLS.static whose three Secrets (CoreOS key names) hold certificates
    issued at `issued_at`, valid `validity_days`, from one CA."""
    observed = healthy_cluster(3, spec=STATIC)
    ca = certs.issue_ca(IDENTITY, issued_at, 3650 * DAY)
    secrets = {role: {"data": certs.secret_data(role, certs.issue_leaf(ca, IDENTITY, role, issued_at,
                                                                         validity_days * DAY), ca)}
               for role in certs.LEAF_ROLES}
    return dataclasses.replace(observed, static_secrets=secrets)


def test_static_certificates_are_reported_with_their_end_and_the_first_ca_to_end() -> None:
    observed = _static_cluster(90)
    status = compute_status(observed, plan_next_action(observed), now=T0)
    assert {role: entry["secret"] for role, entry in status["tls"].items()} == {
        "ca": "my-peer", "peer": "my-peer", "server": "my-server", "operator": "my-operator"}
    assert status["tls"]["peer"] == {"secret": "my-peer", "notAfter": "2024-07-30T12:00:00Z"}
    assert not any("problem" in entry for entry in status["tls"].values()), status["tls"]


@pytest.mark.parametrize(("validity_days", "problem"), [
    (20, "in less than 30 days; put a renewed certificate into the secret"),
    (0, "expired at"),
])
def test_a_static_certificate_near_or_past_its_end_is_a_problem_in_status(validity_days: int, problem: str) -> None:
    observed = _static_cluster(validity_days, issued_at=T0 - timedelta(days=1))
    tls = compute_status(observed, plan_next_action(observed), now=T0)["tls"]
    assert problem in tls["server"]["problem"] and problem in tls["peer"]["problem"], tls
    assert "problem" not in tls["ca"], "the CA is valid for ten years"


def test_a_missing_or_unreadable_static_secret_is_named() -> None:
    observed = _static_cluster(90)
    secrets = dict(observed.static_secrets)
    secrets["operator"] = None
    server_data = dict(secrets["server"]["data"])
    server_data["server.crt"] = base64.b64encode(b"not a certificate").decode()
    secrets["server"] = {"data": server_data}
    tls = compute_status(dataclasses.replace(observed, static_secrets=secrets), None, now=T0)["tls"]
    assert tls["operator"] == {"secret": "my-operator", "problem": "missing"}
    assert tls["server"] == {"secret": "my-server", "problem": "server.crt is not a PEM certificate"}


def test_long_cluster_and_namespace_names_still_give_a_ca_and_leaves() -> None:
    """X.509 bounds a common name to 64 characters; a 63-character namespace used to make the CA's
    name 66 long and every pass crash (cryptography refuses it)."""
    identity = certs.Identity("a-cluster-named-at-length-for-its-team", "n" * 63)
    ca = certs.issue_ca(identity, T0, POLICY.ca_validity_seconds)
    other = certs.issue_ca(certs.Identity("a-cluster-named-at-length-for-its-team", "m" * 63), T0, 10 * DAY)
    names = [c.certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value for c in (ca, other)]
    assert all(len(str(name)) <= 64 for name in names) and names[0] != names[1]
    for role in ("peer", "server"):
        leaf = certs.issue_leaf(ca, identity, role, T0, POLICY.validity_seconds)
        assert leaf.certificate.issuer == ca.certificate.subject


def _with_server_data(observed: Any, **replaced: bytes) -> Any:
    secrets = dict(observed.static_secrets)
    data = dict(secrets["server"]["data"])
    data.update({key: base64.b64encode(value).decode() for key, value in replaced.items()})
    return dataclasses.replace(observed, static_secrets={**secrets, "server": {"data": data}})


def test_static_secrets_with_wrong_key_names_a_foreign_ca_or_missing_names_are_problems_in_status() -> None:
    """Bad static input is reported with what to fix (the operator changes nothing for it)."""
    observed = _static_cluster(90)
    # cert-manager's key names instead of CoreOS's
    secrets = dict(observed.static_secrets)
    secrets["peer"] = {"data": {"tls.crt": "", "tls.key": "", "ca.crt": ""}}
    wrong_keys = dataclasses.replace(observed, static_secrets=secrets)
    tls = compute_status(wrong_keys, plan_next_action(wrong_keys), now=T0)["tls"]
    assert tls["peer"]["problem"] == ("has no key peer.crt, peer.key, peer-ca.crt "
                                      "(CoreOS's key names: peer.crt, peer.key, peer-ca.crt)"), tls
    # a CA file of another CA than the one that signed the certificate
    other_ca = certs.issue_ca(IDENTITY, T0, 3650 * DAY)
    foreign = _with_server_data(observed, **{"server-ca.crt": other_ca.cert_pem})
    tls = compute_status(foreign, plan_next_action(foreign), now=T0)["tls"]
    assert tls["server"]["problem"] == "server.crt is not signed by the CA in server-ca.crt", tls
    # a certificate for another cluster: no member's name, nor the client service's
    elsewhere = certs.Identity("other", IDENTITY.namespace)
    ca = certs.ca_from_secret({"data": certs.encode({certs.CA_CERT_KEY: other_ca.cert_pem,
                                                      certs.CA_KEY_KEY: other_ca.key_pem})})
    leaf = certs.issue_leaf(ca, elsewhere, "server", T0, 90 * DAY)
    unnamed = _with_server_data(observed, **{"server.crt": leaf.cert_pem, "server.key": leaf.key_pem,
                                              "server-ca.crt": other_ca.cert_pem})
    tls = compute_status(unnamed, plan_next_action(unnamed), now=T0)["tls"]
    problem = tls["server"]["problem"]
    assert problem.startswith(f"server.crt does not name {name(1)}.{IDENTITY.cluster}."), problem
    assert f"{IDENTITY.cluster}-client.{IDENTITY.namespace}.svc" in problem, problem
    assert "problem" not in tls["peer"], "the peer certificate is still the good one"
    # nothing is done about any of them: the user's secrets are the user's
    for bad in (wrong_keys, foreign, unnamed):
        assert isinstance(plan_next_action(bad), a.NoOp)


def test_a_new_static_certificate_problem_is_one_warning_event() -> None:
    observed = _static_cluster(90)
    other_ca = certs.issue_ca(IDENTITY, T0, 3650 * DAY)
    foreign = _with_server_data(observed, **{"server-ca.crt": other_ca.cert_pem})
    good = compute_status(observed, plan_next_action(observed), now=T0)
    bad = compute_status(foreign, plan_next_action(foreign), now=T0)
    assert static_tls_event(observed, good, good) is None
    assert static_tls_event(foreign, good, bad) == (
        "CertificateProblem", "secret my-server (server): server.crt is not signed by the CA in server-ca.crt")
    assert static_tls_event(foreign, bad, bad) is None, "the same problem, a later pass"
    issued = with_issued_certificates(healthy_cluster(3, spec=ISSUED))
    assert static_tls_event(issued, None, {"tls": {"peer": {"secret": "s", "problem": "missing"}}}) is None
