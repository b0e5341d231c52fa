"""TLS rules: certificates to issue, adopt or publish (spec.TLS.issued), cert-manager Certificates to
apply (spec.TLS.certManager), and the steps of a CA rotation. The certificate material and what is
wrong with it live in etcd_operator/tls/; these rules only choose the next action."""
from __future__ import annotations

from etcd_common.api.constants import SECRET_REFRESH_SECONDS
from etcd_operator.actions import (
    Action,
    AdoptCA,
    ApplyCertManagerCertificates,
    DropOldCA,
    IssueCertificates,
    PublishCATrust,
    RefuseNames,
    ReissueFromNewCA,
    RejectSpec,
    ReportCertificateProblem,
    StartCARotation,
    Wait,
)
from etcd_operator.observed import ObservedCluster, seconds_since
from etcd_operator.ownership import is_owned_by
from etcd_operator.planning.context import Context
from etcd_operator.tls.ca_rotation import (
    PHASE_DROPPING,
    PHASE_TRUSTING,
    newest_leaf_start,
    newest_publication,
    rotation_due,
    rotation_of,
    trust_outdated,
)
from etcd_operator.tls.cert_manager import (
    REASON_CERTIFICATE_NAME_TAKEN,
    REASON_ISSUER_NOT_FOUND,
    certificate_name,
    certificate_spec,
    outdated_fields,
    ready_message,
    secret_issued,
)
from etcd_operator.tls.certificates import (
    LEAF_ROLES,
    REASON_SECRET_NAME_TAKEN,
    IssuanceCheck,
    Role,
    check_observed,
    identity_of,
    kept_ca,
    source_switch_problem,
)
from etcd_operator.tls.lost_ca import REASON_CA_LOST, lost_ca


def certificates_due(context: Context) -> Action | None:
    """Before the seed pod (it mounts them): static or issued certificates to issue, adopt or
    publish; cert-manager Certificates to apply; a CA rotation to start."""
    observed = context.observed
    return plan_certificates(observed) or plan_cert_manager(observed) or plan_rotation_start(observed)


def next_rotation_step(context: Context) -> Action | None:
    """Once the cluster is otherwise converged: the next step of a CA rotation in progress."""
    return plan_rotation_steps(context.observed, context.policy.trust_propagation_seconds)


def plan_certificates(observed: ObservedCluster) -> Action | None:
    """A running cluster switched between static and issued -> RejectSpec. With
    spec.TLS.issued, a CA Secret a restore kept for this cluster (`kept_ca`) -> AdoptCA; a Secret
    of ours that is someone else's -> RefuseNames
    (nothing is overwritten); one missing, wrong, expired or within renewBefore of its end ->
    IssueCertificates (before anything else: the seed pod mounts them); the CA Secret lost under
    running members -> `plan_lost_ca`, never a new CA at once. None: nothing to do."""
    switch = source_switch_problem(observed)
    if switch is not None:
        return RejectSpec(switch)
    check = check_observed(observed)
    if check is None:
        return None
    cluster = observed.cluster
    kept = kept_ca(observed)
    if kept is not None:
        return AdoptCA(kept)
    taken = sorted(str((secret.get("metadata") or {}).get("name"))
                   for secret in observed.issued_secrets.values()
                   if secret is not None and not is_owned_by(secret, cluster.uid))
    if taken:
        return RefuseNames(REASON_SECRET_NAME_TAKEN,
                           f"secret {', '.join(taken)} exists and is not owned by EtcdCluster {cluster.name}: "
                           f"spec.TLS.issued writes its certificates there; delete or rename it")
    if check.ca_lost:
        return plan_lost_ca(observed, check)
    if check.to_issue:
        return IssueCertificates(check.to_issue, check.describe())
    if check.to_publish:
        return PublishCATrust(check.to_publish, check.describe())
    return None


def plan_lost_ca(observed: ObservedCluster, check: IssuanceCheck) -> Action:
    """The CA Secret lost under members that trust only its CA (tls/lost_ca.py): its certificate
    found in the leaf Secrets -> StartCARotation that keeps it trusted until every member trusts
    a new one; not found -> ReportCertificateProblem (CASecretLost), nothing changed."""
    lost = lost_ca(observed, check)
    assert lost is not None, "plan_lost_ca without a lost CA"
    if not lost.old_ca_pem:
        return ReportCertificateProblem(REASON_CA_LOST, lost.refusal())
    return StartCARotation(lost.recovery_reason(), observed.cluster.ca_rotation_request or "",
                           recovered_ca=lost.old_ca_pem.decode())


def plan_cert_manager(observed: ObservedCluster) -> Action | None:
    """spec.TLS.certManager: its issuer missing or a Certificate name taken ->
    ReportCertificateProblem (nothing changes, a running cluster runs on); a Certificate missing
    or outdated -> ApplyCertManagerCertificates; a Secret cert-manager has not written yet ->
    Wait (member pods mount them). None: every certificate is there."""
    spec = observed.cluster.require_spec()
    seen = observed.cert_manager
    if spec.cert_manager_tls is None or seen is None:
        return None
    cluster, issuer = observed.cluster, spec.cert_manager_tls.issuer
    if seen.issuer_exists is False:
        return ReportCertificateProblem(REASON_ISSUER_NOT_FOUND, (
            f"spec.TLS.certManager.issuerRef: {issuer.kind} {issuer.name} not found"
            f"{f' in namespace {cluster.namespace}' if issuer.kind == 'Issuer' else ''}: cert-manager cannot issue "
            f"the cluster's certificates; create it or name an existing one (nothing was changed)"))
    if seen.error:
        return Wait(f"cert-manager: {seen.error}")
    taken = sorted(certificate_name(cluster.name, role) for role in LEAF_ROLES
                   if (cert := seen.certificates.get(role)) is not None and not is_owned_by(cert, cluster.uid))
    if taken:
        return ReportCertificateProblem(REASON_CERTIFICATE_NAME_TAKEN, (
            f"cert-manager Certificate {', '.join(taken)} exists and is not owned by EtcdCluster {cluster.name}: "
            f"spec.TLS.certManager needs that name; delete or rename it"))
    identity = identity_of(observed)
    outdated: dict[Role, list[str]] = {}
    for role in LEAF_ROLES:
        cert = seen.certificates.get(role)
        fields = ["missing"] if cert is None else outdated_fields(cert, certificate_spec(identity, role, spec.cert_manager_tls))
        if fields:
            outdated[role] = fields
    if outdated:
        return ApplyCertManagerCertificates(
            tuple(outdated), "; ".join(f"{certificate_name(cluster.name, role)}: {', '.join(fields)}"
                                       for role, fields in outdated.items()))
    waiting = [role for role in LEAF_ROLES if not secret_issued(observed.static_secrets.get(role))]
    if waiting:
        return Wait("waiting for cert-manager to issue " + "; ".join(
            f"{certificate_name(cluster.name, role)} ({ready_message(seen.certificates.get(role))})" for role in waiting))
    return None


def plan_rotation_start(observed: ObservedCluster) -> StartCARotation | None:
    """After the Secrets are found fine: start a rotation that is due."""
    if rotation_of(observed) is not None:
        return None
    due = rotation_due(observed)
    if due is None:
        return None
    return StartCARotation(due[0], due[1])


def plan_rotation_steps(observed: ObservedCluster, propagation_seconds: float) -> Action | None:
    """Once the cluster is otherwise converged (the planner's NoOp): the rotation's next step,
    or how long it waits for the Secrets to propagate (None: no rotation step is due)."""
    rotation = rotation_of(observed)
    if rotation is None:
        return None
    bound = max(propagation_seconds, SECRET_REFRESH_SECONDS)
    if rotation.phase == PHASE_TRUSTING:
        untrusting = sorted(pod.name for pod in observed.live_pods if trust_outdated(observed, pod))
        if untrusting:
            return Wait(f"CA rotation: member pod(s) {', '.join(untrusting)} do not trust the new CA yet")
        published = newest_publication(observed)
        waited = seconds_since(observed, published)
        if waited is None or waited < bound:
            return Wait(_propagation(waited, bound, "the CA bundle (old and new CA)"))
        return ReissueFromNewCA(f"every member trusts the new CA, and the CA bundle was published "
                                f"{waited:.0f}s ago")
    if rotation.phase == PHASE_DROPPING:
        issued = newest_leaf_start(observed)
        waited = seconds_since(observed, issued)
        if waited is None or waited < bound:
            return Wait(_propagation(waited, bound, "the certificates of the new CA"))
        return DropOldCA(f"every certificate is the new CA's, issued {waited:.0f}s ago")
    return None


def _propagation(waited: float | None, bound: float, what: str) -> str:
    so_far = f"{waited:.0f}s" if waited is not None else "an unknown time"
    return (f"CA rotation: {what} reach every mounted Secret and every operator's client within {bound:.0f}s "
            f"(--trust-propagation-seconds); published {so_far} ago")
