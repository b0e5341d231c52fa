"""CA rotation of spec.TLS.issued (issue 24, ca_rotation.py): each step from the Secrets and pods
(trigger, new CA, trust bundle, the roll of pods trusting only the old CA, the propagation waits,
reissue, drop), the executor's writes, status.tls.caRotation, and resumption after a stop between
any two writes of a step."""
from __future__ import annotations

import base64
import copy
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from cryptography import x509

from etcd_common.api import constants as c
from etcd_common.api.issued_tls import CA_CERT_KEY, NEXT_CA_CERT_KEY, PREVIOUS_CA_CERT_KEY
from etcd_common.etcd.access import EtcdAccess
from etcd_operator import actions as a
from etcd_operator.acting import ActionExecutor
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import PlanningPolicy, plan_next_action
from etcd_operator.planning.tls import plan_rotation_start
from etcd_operator.status import compute_status
from etcd_operator.tls import ca_rotation
from etcd_operator.tls import certificates as certs
from tests.unit.etcd_operator.etcd_cluster_builders import T0, healthy_cluster, with_issued_certificates

ISSUED: dict[str, Any] = {"TLS": {"issued": {}}}
POLICY = PlanningPolicy(trust_propagation_seconds=60.0)
NAMES = {"ca": "example-tls-ca", "peer": "example-tls-peer", "server": "example-tls-server",
         "operator": "example-tls-operator"}


class Secrets:
    """The Secrets API: stores the Secrets and applies merge patches (None deletes a key)."""

    def __init__(self, secrets: dict[str, Any]) -> None:
        self.by_name = {NAMES[role]: copy.deepcopy(secret) for role, secret in secrets.items()}
        self.writes: list[str] = []

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        body["metadata"]["resourceVersion"] = "1"
        self.by_name[body["metadata"]["name"]] = body
        self.writes.append(body["metadata"]["name"])
        return body

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        secret = self.by_name[name]
        assert patch["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"], "a stale write"
        for field, target in (("data", secret.setdefault("data", {})),
                              ("annotations", secret["metadata"].setdefault("annotations", {}))):
            changes = patch["metadata"].get("annotations", {}) if field == "annotations" else patch.get("data", {})
            for key, value in changes.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
        secret["metadata"]["resourceVersion"] = str(int(secret["metadata"]["resourceVersion"]) + 1)
        self.writes.append(name)
        return secret

    def by_role(self) -> dict[str, Any]:
        return {role: copy.deepcopy(self.by_name[name]) for role, name in NAMES.items()}


def _executor(api: Secrets) -> ActionExecutor:
    return ActionExecutor(None, None, None, EtcdAccess(lambda ns, name: {}), secrets=api)  # type: ignore[arg-type]


def _running(annotation: str = "") -> ObservedCluster:
    observed = with_issued_certificates(healthy_cluster(3, spec=ISSUED), now=T0)
    if annotation:
        cluster = dataclasses.replace(observed.cluster, ca_rotation_request=annotation)
        observed = dataclasses.replace(observed, cluster=cluster)
    return observed


def _seen(observed: ObservedCluster, api: Secrets, *, after_seconds: float = 1.0,
          trusting: str | None = None) -> ObservedCluster:
    """The next pass: the Secrets as written, `after_seconds` later; `trusting`: every member pod
    now trusts the CAs of that fingerprint (the roll is done)."""
    pods = observed.pods
    if trusting is not None:
        pods = tuple(dataclasses.replace(pod, trusted_ca=trusting) for pod in pods)
    assert observed.observed_at is not None
    return dataclasses.replace(observed, issued_secrets=api.by_role(), pods=pods,
                               observed_at=observed.observed_at + timedelta(seconds=after_seconds))


def _file(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


def _subjects(pem: bytes) -> list[str]:
    return sorted(cert.serial_number.to_bytes(20, "big").hex() for cert in certs.certificates_in(pem))


def _ca_serial(secret: dict[str, Any], key: str = CA_CERT_KEY) -> str:
    return _subjects(_file(secret, key))[0]


def _step(observed: ObservedCluster, api: Secrets) -> a.Action:
    action = plan_next_action(observed, POLICY)
    _executor(api).execute(action, observed)
    return action


# ---------------------------------------------------------------------------------------------
# The trigger


def test_the_annotation_starts_one_rotation_per_value() -> None:
    assert isinstance(plan_next_action(_running(), POLICY), a.NoOp)
    observed = _running("2024-05-01")
    api = Secrets(observed.issued_secrets)
    action = _step(observed, api)
    assert action == a.StartCARotation(f"asked for by annotation {c.ANNOTATION_ROTATE_CA}=2024-05-01", "2024-05-01")
    ca = api.by_name[NAMES["ca"]]
    assert ca["metadata"]["annotations"][c.ANNOTATION_CA_ROTATION_REQUEST] == "2024-05-01"
    assert ca["metadata"]["annotations"][c.ANNOTATION_CA_ROTATION_STARTED_AT]
    new = x509.load_pem_x509_certificate(_file(ca, NEXT_CA_CERT_KEY))
    assert new.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert _ca_serial(ca) == _ca_serial(observed.issued_secrets["ca"])  # the old one still signs
    # The value acted on is never acted on again, also once the rotation is over.
    finished = dict(api.by_role())
    finished["ca"]["data"].pop(NEXT_CA_CERT_KEY)
    assert ca_rotation.rotation_due(dataclasses.replace(observed, issued_secrets=finished)) is None


def test_a_ca_within_a_third_of_its_validity_rotates_by_itself() -> None:
    observed = _running()
    validity = observed.cluster.require_spec().issued_tls.ca_validity_seconds  # type: ignore[union-attr]
    early = dataclasses.replace(observed, observed_at=T0 + timedelta(seconds=validity * 0.6))
    assert plan_rotation_start(early) is None
    late = dataclasses.replace(observed, observed_at=T0 + timedelta(seconds=validity * 0.7))
    action = plan_rotation_start(late)
    assert action is not None and "within a third of caValidity" in action.reason


# ---------------------------------------------------------------------------------------------
# The steps, in order


def _trusting(api: Secrets, observed: ObservedCluster) -> ObservedCluster:
    """Started and the bundle published: returns the pass after."""
    _step(observed, api)
    observed = _seen(observed, api)
    action = _step(observed, api)
    assert action == a.PublishCATrust(("peer", "server", "operator"), action.reason)
    return _seen(observed, api)


def test_the_new_ca_is_trusted_everywhere_before_it_signs_anything() -> None:
    observed = _running("1")
    api = Secrets(observed.issued_secrets)
    observed = _trusting(api, observed)
    old = _ca_serial(api.by_name[NAMES["ca"]])
    new = _ca_serial(api.by_name[NAMES["ca"]], NEXT_CA_CERT_KEY)
    for role in certs.LEAF_ROLES:
        secret = api.by_name[NAMES[role]]
        cert_key, _, ca_key = certs.LEAF_KEYS[role]
        assert _subjects(_file(secret, ca_key)) == sorted([old, new])
        assert secret["metadata"]["annotations"][c.ANNOTATION_TRUST_PUBLISHED_AT]
        # Only the CA file changed: the certificate is the one the members serve.
        assert secret["data"][cert_key] == observed.issued_secrets[role]["data"][cert_key]
    status = compute_status(observed, None, now=T0)
    assert status["tls"]["caRotation"]["phase"] == ca_rotation.PHASE_TRUSTING
    assert status["tls"]["caRotation"]["request"] == "1"


def test_members_that_started_trusting_only_the_old_ca_are_rolled_one_at_a_time() -> None:
    observed = _running("1")
    api = Secrets(observed.issued_secrets)
    observed = _trusting(api, observed)
    action = plan_next_action(observed, POLICY)
    # emptyDir: a member trusting both CAs joins first, then an outdated one leaves (rule 16).
    assert isinstance(action, a.AddMember) and action.purpose == "upgrade"
    assert "CA rotation" in action.reason
    # The pod the executor creates says which CAs it trusts.
    bundle = certs.trust_fingerprint(certs.trust_bundle(observed.issued_secrets["ca"]))
    assert certs.mounted_trust_fingerprint(observed.issued_secrets) == bundle
    pvc = dataclasses.replace(observed, cluster=observed.cluster)
    one_done = dataclasses.replace(pvc, pods=(dataclasses.replace(pvc.pods[0], trusted_ca=bundle), *pvc.pods[1:]))
    assert ca_rotation.trust_outdated(one_done, one_done.pods[0]) is None
    assert ca_rotation.trust_outdated(one_done, one_done.pods[1]) is not None


def test_the_new_ca_signs_only_once_every_member_trusts_it_and_the_bundle_propagated() -> None:
    observed = _running("1")
    api = Secrets(observed.issued_secrets)
    observed = _trusting(api, observed)
    bundle = certs.trust_fingerprint(certs.trust_bundle(observed.issued_secrets["ca"]))
    rolled = _seen(observed, api, after_seconds=10, trusting=bundle)
    waiting = plan_next_action(rolled, POLICY)
    assert isinstance(waiting, a.Wait) and "published" in waiting.reason
    later = _seen(rolled, api, after_seconds=60)
    action = _step(later, api)
    assert isinstance(action, a.ReissueFromNewCA)
    ca = api.by_name[NAMES["ca"]]
    assert NEXT_CA_CERT_KEY not in ca["data"]
    new = x509.load_pem_x509_certificate(_file(ca, CA_CERT_KEY))
    assert _ca_serial(ca, PREVIOUS_CA_CERT_KEY) == _ca_serial(observed.issued_secrets["ca"])
    for role in certs.LEAF_ROLES:
        cert_key, _, ca_key = certs.LEAF_KEYS[role]
        leaf = x509.load_pem_x509_certificate(_file(api.by_name[NAMES[role]], cert_key))
        assert certs.signed_by(leaf, new)
        assert len(certs.certificates_in(_file(api.by_name[NAMES[role]], ca_key))) == 2  # both still trusted
    after = _seen(later, api)
    assert compute_status(after, None, now=T0)["tls"]["caRotation"]["phase"] == ca_rotation.PHASE_DROPPING


def _reissued(api: Secrets) -> ObservedCluster:
    observed = _running("1")
    api.by_name = Secrets(observed.issued_secrets).by_name
    observed = _trusting(api, observed)
    bundle = certs.trust_fingerprint(certs.trust_bundle(observed.issued_secrets["ca"]))
    later = _seen(observed, api, after_seconds=61, trusting=bundle)
    assert isinstance(_step(later, api), a.ReissueFromNewCA)
    return _seen(later, api)


def test_the_old_ca_is_dropped_last_once_the_new_certificates_propagated() -> None:
    api = Secrets({})
    observed = _reissued(api)
    waiting = plan_next_action(observed, POLICY)
    assert isinstance(waiting, a.Wait) and "certificates of the new CA" in waiting.reason
    # Leaves are backdated BACKDATE_SECONDS; the wait counts from their issue.
    later = _seen(observed, api, after_seconds=60)
    assert isinstance(_step(later, api), a.DropOldCA)
    ca = api.by_name[NAMES["ca"]]
    assert PREVIOUS_CA_CERT_KEY not in ca["data"]
    for role in certs.LEAF_ROLES:
        ca_file = _file(api.by_name[NAMES[role]], certs.LEAF_KEYS[role][2])
        assert certs.same_certificates(ca_file, _file(ca, CA_CERT_KEY))
    done = _seen(later, api)
    assert isinstance(plan_next_action(done, POLICY), a.NoOp)
    assert "caRotation" not in compute_status(done, None, now=T0)["tls"]


# ---------------------------------------------------------------------------------------------
# Resumption: the operator stops between two writes of a step


class StopAfter(Secrets):
    """Writes `count` more Secrets, then fails (the operator stops there)."""

    def __init__(self, base: Secrets, count: int) -> None:
        self.by_name = base.by_name
        self.writes = []
        self.left = count

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        if self.left == 0:
            raise RuntimeError("operator stopped")
        self.left -= 1
        return super().patch(namespace, name, patch)


def test_a_publication_cut_short_is_finished_and_no_pod_counts_as_trusting_meanwhile() -> None:
    observed = _running("1")
    api = Secrets(observed.issued_secrets)
    _step(observed, api)
    observed = _seen(observed, api)
    try:
        _executor(StopAfter(api, 1)).execute(plan_next_action(observed, POLICY), observed)
    except RuntimeError:
        pass
    observed = _seen(observed, api)
    assert certs.mounted_trust_fingerprint(observed.issued_secrets) == "mixed"
    action = plan_next_action(observed, POLICY)
    assert action == a.PublishCATrust(("server", "operator"), action.reason)


def test_a_reissue_cut_short_after_the_ca_secret_issues_the_leaves_from_the_new_ca() -> None:
    observed = _running("1")
    api = Secrets(observed.issued_secrets)
    observed = _trusting(api, observed)
    bundle = certs.trust_fingerprint(certs.trust_bundle(observed.issued_secrets["ca"]))
    later = _seen(observed, api, after_seconds=61, trusting=bundle)
    try:
        _executor(StopAfter(api, 1)).execute(plan_next_action(later, POLICY), later)
    except RuntimeError:
        pass
    resumed = _seen(later, api)
    assert compute_status(resumed, None, now=T0)["tls"]["caRotation"]["phase"] == ca_rotation.PHASE_REISSUING
    action = _step(resumed, api)
    assert isinstance(action, a.IssueCertificates) and action.roles == ("peer", "server", "operator")
    ca = api.by_name[NAMES["ca"]]
    for role in certs.LEAF_ROLES:
        cert_key, _, ca_key = certs.LEAF_KEYS[role]
        secret = api.by_name[NAMES[role]]
        assert certs.signed_by(x509.load_pem_x509_certificate(_file(secret, cert_key)),
                               x509.load_pem_x509_certificate(_file(ca, CA_CERT_KEY)))
        assert len(certs.certificates_in(_file(secret, ca_key))) == 2, "the old CA is still trusted"


def test_a_drop_cut_short_after_the_ca_secret_publishes_the_new_ca_alone() -> None:
    api = Secrets({})
    observed = _seen(_reissued(api), api, after_seconds=60)
    try:
        _executor(StopAfter(api, 1)).execute(plan_next_action(observed, POLICY), observed)
    except RuntimeError:
        pass
    resumed = _seen(observed, api)
    action = _step(resumed, api)
    assert action == a.PublishCATrust(("peer", "server", "operator"), action.reason)
    assert isinstance(plan_next_action(_seen(resumed, api), POLICY), a.NoOp)


def test_an_operator_restart_mid_rotation_reads_the_phase_from_the_secrets() -> None:
    observed = _running("1")
    api = Secrets(observed.issued_secrets)
    observed = _trusting(api, observed)
    # A fresh observation of the same objects (nothing in memory) plans the same next step.
    fresh = dataclasses.replace(observed, issued_secrets=Secrets(observed.issued_secrets).by_role())
    assert plan_next_action(fresh, POLICY) == plan_next_action(observed, POLICY)
    assert ca_rotation.rotation_of(fresh) == ca_rotation.rotation_of(observed)


# ---------------------------------------------------------------------------------------------
# A lost CA Secret under running members (issue 41, tls/lost_ca.py): through the rotation, or refused


def _garbage(secret: dict[str, Any]) -> dict[str, Any]:
    return {**secret, "data": {CA_CERT_KEY: "bm90IGEgY2VydGlmaWNhdGU="}}  # "not a certificate"


def _keyless(secret: dict[str, Any]) -> dict[str, Any]:
    return {**secret, "data": {CA_CERT_KEY: secret["data"][CA_CERT_KEY]}}


LOSSES = {"deleted": lambda secret: None, "unreadable": _garbage, "without its key": _keyless}


def _lost(how: str) -> tuple[ObservedCluster, Secrets, bytes]:
    """A running cluster whose CA Secret was lost `how`; the API holds the same Secrets."""
    observed = _running()
    old_ca = _file(observed.issued_secrets["ca"], CA_CERT_KEY)
    secrets = dict(observed.issued_secrets)
    secrets["ca"] = LOSSES[how](secrets["ca"])
    api = Secrets({role: secret for role, secret in secrets.items() if secret is not None})
    return dataclasses.replace(observed, issued_secrets=secrets), api, old_ca


@pytest.mark.parametrize("how", sorted(LOSSES))
def test_a_lost_ca_secret_comes_back_through_the_rotation_and_the_old_ca_stays_trusted(how: str) -> None:
    observed, api, old_ca = _lost(how)
    leaves = {role: copy.deepcopy(observed.issued_secrets[role]["data"]) for role in certs.LEAF_ROLES}
    action = _step(observed, api)
    # Never a new CA with new leaves at once: members read their trusted CAs only at start.
    assert isinstance(action, a.StartCARotation), action
    assert f"secret {NAMES['ca']}" in action.reason and "run trusting only its CA" in action.reason
    ca = api.by_name[NAMES["ca"]]
    assert certs.same_certificates(_file(ca, CA_CERT_KEY), old_ca) and "ca.key" not in ca["data"]
    assert _file(ca, NEXT_CA_CERT_KEY) and ca["metadata"]["annotations"][c.ANNOTATION_CA_ROTATION_STARTED_AT]
    assert {role: api.by_name[NAMES[role]]["data"] for role in certs.LEAF_ROLES} == leaves  # untouched
    observed = _seen(observed, api)
    assert compute_status(observed, None, now=T0)["tls"]["caRotation"]["phase"] == ca_rotation.PHASE_TRUSTING
    action = _step(observed, api)
    assert action == a.PublishCATrust(("peer", "server", "operator"), action.reason)
    observed = _seen(observed, api)
    new = _ca_serial(api.by_name[NAMES["ca"]], NEXT_CA_CERT_KEY)
    for role in certs.LEAF_ROLES:
        cert_key, _, ca_key = certs.LEAF_KEYS[role]
        assert _subjects(_file(api.by_name[NAMES[role]], ca_key)) == sorted([_subjects(old_ca)[0], new])
        assert api.by_name[NAMES[role]]["data"][cert_key] == leaves[role][cert_key]
    # The members roll to trust both, and only then does the new CA sign.
    roll = plan_next_action(observed, POLICY)
    assert isinstance(roll, a.AddMember) and "CA rotation" in roll.reason
    bundle = certs.trust_fingerprint(certs.trust_bundle(observed.issued_secrets["ca"]))
    later = _seen(observed, api, after_seconds=61, trusting=bundle)
    assert isinstance(_step(later, api), a.ReissueFromNewCA)
    signing = x509.load_pem_x509_certificate(_file(api.by_name[NAMES["ca"]], CA_CERT_KEY))
    assert certs.same_certificates(_file(api.by_name[NAMES["ca"]], PREVIOUS_CA_CERT_KEY), old_ca)
    for role in certs.LEAF_ROLES:
        cert_key = certs.LEAF_KEYS[role][0]
        assert certs.signed_by(x509.load_pem_x509_certificate(_file(api.by_name[NAMES[role]], cert_key)), signing)
    done = _seen(later, api, after_seconds=61)
    assert isinstance(_step(done, api), a.DropOldCA)
    assert isinstance(plan_next_action(_seen(done, api), POLICY), a.NoOp)


def test_a_recovered_ca_records_the_rotate_annotation_so_no_second_rotation_follows() -> None:
    observed, api, _ = _lost("deleted")
    observed = dataclasses.replace(observed, cluster=dataclasses.replace(observed.cluster, ca_rotation_request="7"))
    action = _step(observed, api)
    assert isinstance(action, a.StartCARotation) and action.request == "7"
    assert api.by_name[NAMES["ca"]]["metadata"]["annotations"][c.ANNOTATION_CA_ROTATION_REQUEST] == "7"


def _foreign_ca_files(secrets: dict[str, Any]) -> None:
    other = base64.b64encode(certs.issue_ca(certs.Identity("other", "default"), T0, 3600 * 24 * 365).cert_pem).decode()
    for role in certs.LEAF_ROLES:
        secrets[role] = {**secrets[role], "data": {**secrets[role]["data"], certs.LEAF_KEYS[role][2]: other}}


def _no_peer_secret(secrets: dict[str, Any]) -> None:
    secrets["peer"] = None


def _unreadable_server_certificate(secrets: dict[str, Any]) -> None:
    secrets["server"] = {**secrets["server"], "data": {**secrets["server"]["data"], c.SERVER_CERT_FILE: "eA=="}}


@pytest.mark.parametrize("damage, why", [
    (_no_peer_secret, "secret example-tls-peer is gone too"),
    (_unreadable_server_certificate, "secret example-tls-server holds no readable server.crt"),
    (_foreign_ca_files, "no CA certificate in the leaf Secrets' CA files signed all of their certificates"),
])
def test_a_lost_ca_that_cannot_be_recovered_is_refused_with_a_reason_and_nothing_changes(damage: Any, why: str) -> None:
    observed, _, _ = _lost("deleted")
    secrets = dict(observed.issued_secrets)
    damage(secrets)
    observed = dataclasses.replace(observed, issued_secrets=secrets)
    action = plan_next_action(observed, POLICY)
    assert isinstance(action, a.ReportCertificateProblem) and action.reason == "CASecretLost"
    assert not action.has_effect and action.event_type == "Warning"
    assert why in action.message
    assert f"restore the Secret {NAMES['ca']} from a backup" in action.message
    status = compute_status(observed, action, now=T0)
    assert status["phase"] == "Running" and status["reason"] == "CASecretLost"
    degraded = next(cond for cond in status["conditions"] if cond["type"] == "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "CASecretLost"


def test_a_ca_lost_before_any_member_ran_or_after_it_expired_is_issued_again_with_everything() -> None:
    observed, _, _ = _lost("deleted")
    never_ran = tuple(dataclasses.replace(pod, unschedulable_message="0/3 nodes available", phase="Pending", restart_count=0) for pod in observed.pods)
    action = plan_next_action(dataclasses.replace(observed, pods=never_ran), POLICY)
    assert isinstance(action, a.IssueCertificates) and action.roles == ("ca", "peer", "server", "operator")
    expired, _, _ = _lost("without its key")
    validity = expired.cluster.require_spec().issued_tls.ca_validity_seconds  # type: ignore[union-attr]
    action = plan_next_action(dataclasses.replace(expired, observed_at=T0 + timedelta(seconds=validity + 1)), POLICY)
    assert isinstance(action, a.IssueCertificates) and action.roles == ("ca", "peer", "server", "operator")


def test_a_plaintext_cluster_moving_to_issued_tls_gets_a_new_ca_not_a_lost_one() -> None:
    """Members that run on plaintext trust no CA: a cluster whose spec gains TLS.issued has every
    Secret issued, CA first (measured in the sandbox: its running plaintext members were taken for
    members trusting a lost CA, and the move to TLS never began)."""
    plaintext = healthy_cluster(3)
    assert all(not pod.secret_volumes for pod in plaintext.pods)
    moving = dataclasses.replace(plaintext, cluster=with_issued_certificates(plaintext).cluster, issued_secrets={})
    action = plan_next_action(moving, POLICY)
    assert isinstance(action, a.IssueCertificates) and action.roles == ("ca", "peer", "server", "operator"), action
