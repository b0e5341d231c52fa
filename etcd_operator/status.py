"""The EtcdCluster `.status` computed from one pass (observation, planned action, error): pure,
so the same observation always yields the same status, and `kubectl get`/`describe` answers "is
my cluster OK, and if not, why".

Phase is derived from what was observed, never from operator memory: `Running` only while a
quorum is healthy (never while the cluster is dead), `Creating` until the first member ran,
`Failed` for an invalid spec, lost members or lost quorum, and back to `Running` by itself when
quorum returns. An operator restart therefore cannot mark a cluster Failed. Field names follow
the CoreOS v1beta2 ClusterStatus (phase, reason, controlPaused, conditions, size, serviceName,
clientPort, members.ready/unready, currentVersion, targetVersion) plus a few additions
(message, readyCount, leader, observedGeneration, lastError, bootstrapped, warnings).
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import (
    CONDITION_MEMBER_START_BLOCKED,
    RECOVERY_FAILED,
    RECOVERY_RECOVERED,
    RECOVERY_SEEDING,
    RECOVERY_SOURCE_BACKUP,
    RECOVERY_SOURCE_SURVIVOR,
    Condition,
)
from etcd_common.api.restore_source import restore_source_to_api
from etcd_common.api.versions import EtcdVersion
from etcd_common.etcd.alarms import CORRUPT, NOSPACE
from etcd_operator import versions
from etcd_operator.actions import (
    Action,
    AddMember,
    CreateMemberPod,
    FailQuorumRecovery,
    FinishQuorumRecovery,
    NoOp,
    RefuseNames,
    RefuseQuorumRecovery,
    RejectSpec,
    RemoveMember,
    ReportCertificateProblem,
    ReportMembersLost,
    StartQuorumRecovery,
)
from etcd_operator.manifests import client_service_name
from etcd_operator.member_start import StartProblem, start_problems
from etcd_operator.observed import ObservedCluster, format_timestamp
from etcd_operator.planning.findings import (
    CONDITION_ALARM_RAISED,
    CONDITION_MEMBER_POD_MISSING,
    members_without_pods,
    outdated_reason,
    running_member_versions,
    version_change_problem,
)
from etcd_operator.tls import ca_rotation, certificates, lost_ca, static
from etcd_operator.tls.transition import moving_off_tls, transition_step

PHASE_CREATING = "Creating"
PHASE_RUNNING = "Running"
PHASE_FAILED = "Failed"
# A quorum-loss recovery is in progress (status.recovery, planning/recovery.py).
REASON_QUORUM_RECOVERING = "QuorumRecovering"

CONDITION_AVAILABLE = "Available"
# Upgrading's reason while a running plaintext cluster moves to TLS, or a TLS one off it
# (tls/transition.py).
REASON_MOVING_TO_TLS = "MovingToTLS"
REASON_MOVING_OFF_TLS = "MovingOffTLS"
CONDITION_SCALING = "Scaling"
CONDITION_UPGRADING = "Upgrading"
CONDITION_RECOVERING = "Recovering"
CONDITION_DEGRADED = "Degraded"
# Is the etcd version run and asked for one this operator supports? Reasons in versions.py.
CONDITION_VERSION_SUPPORTED = "VersionSupported"
# Failed phases that say nothing about etcd's health (the spec or the names are the problem).
FAILED_WITHOUT_ETCD_REASONS = ("InvalidSpec", "MembersLost", "ServiceNameTaken", "NameConflict",
                               "DisruptionBudgetNameTaken")
CONDITION_TYPES = (
    CONDITION_AVAILABLE,
    CONDITION_SCALING,
    CONDITION_UPGRADING,
    CONDITION_RECOVERING,
    CONDITION_DEGRADED,
    CONDITION_VERSION_SUPPORTED,
    CONDITION_MEMBER_START_BLOCKED,
    # Does etcd list a member that never started and has no pod (its create failed, e.g. refused by
    # admission)? Its lastTransitionTime bounds the wait (planning/member_pods.py, `retry_pod_creates`).
    CONDITION_MEMBER_POD_MISSING,
    # Does etcd have an alarm raised (NOSPACE: writes refused; CORRUPT: a member's data disagrees)?
    # Reasons: NoSpaceAlarm, CorruptAlarm, NoAlarm.
    CONDITION_ALARM_RAISED,
)


def compute_status(
    observed: ObservedCluster,
    action: Action | None,
    *,
    now: datetime,
    last_error: str | None = None,
) -> dict[str, Any]:
    """The whole `.status` to write through the status subresource."""
    cluster = observed.cluster
    spec = cluster.spec
    ready, unready = member_readiness(observed)
    leader = observed.leader
    bootstrapped = cluster.recorded.bootstrapped or any(m.started for m in observed.members or ())
    versions = running_versions(observed)
    current_version = str(min(versions)) if versions else ""
    upgrading_to = ""
    if spec is not None and any(version != spec.version for version in versions):
        upgrading_to = str(spec.version)

    alarm = _alarm(observed)
    availability = _writes_refused(observed, _availability(observed, bootstrapped), alarm)
    recovery = recovery_record(observed, action)
    phase, reason, summary = _phase(observed, action, availability, bootstrapped, alarm, recovery)
    problems = start_problems(observed)
    message = _message(summary, problems, action, last_error)
    conditions = [
        _condition(observed, CONDITION_AVAILABLE, *availability, now=now),
        _condition(observed, CONDITION_SCALING, *_scaling(observed, bootstrapped), now=now),
        _condition(observed, CONDITION_UPGRADING, *_upgrading(observed), now=now),
        _condition(observed, CONDITION_RECOVERING, *_recovering(observed, action, recovery), now=now),
        _condition(observed, CONDITION_DEGRADED, *_degraded(observed, availability, reason, summary, alarm), now=now),
        _condition(observed, CONDITION_VERSION_SUPPORTED, *_version_supported(observed), now=now),
        _condition(observed, CONDITION_MEMBER_START_BLOCKED, *_start_blocked(problems), now=now),
        _condition(observed, CONDITION_MEMBER_POD_MISSING, *_pod_missing(observed, action, last_error), now=now),
        _condition(observed, CONDITION_ALARM_RAISED, *alarm, now=now),
    ]
    return {
        "observedGeneration": cluster.generation,
        "phase": phase,
        "reason": reason,
        "message": message,
        "controlPaused": cluster.paused,
        "bootstrapped": bootstrapped,
        "size": len(observed.members) if observed.members is not None else len(observed.live_pods),
        "readyCount": len(ready),
        "members": {"ready": ready, "unready": unready},
        "leader": leader.member_name if leader is not None else "",
        "currentVersion": current_version,
        "targetVersion": upgrading_to,
        "serviceName": client_service_name(cluster.name),
        "clientPort": c.CLIENT_PORT,
        "lastError": last_error or "",
        "warnings": list(spec.warnings) if spec is not None else [],
        "conditions": conditions,
        "maintenance": maintenance_status(observed),
        **tls_status(observed),
        **({"recovery": recovery} if recovery is not None else {}),
    }


def tls_status(observed: ObservedCluster) -> dict[str, Any]:
    """spec.TLS.issued or static: `tls` with each certificate's Secret, end (notAfter) and what is
    wrong with it, if anything (tls/certificates.py); nothing for clusters without TLS."""
    if observed.cluster.spec is None:
        return {}
    issued = certificates.check_observed(observed)
    checked_all = issued.checked if issued is not None else static.check_static(observed)
    if not checked_all:
        return {}
    tls: dict[str, Any] = {}
    for checked in checked_all:
        entry = {"secret": checked.secret}
        if checked.not_after is not None:
            entry["notAfter"] = format_timestamp(checked.not_after)
        if checked.problem:
            entry["problem"] = checked.problem
        tls[checked.role] = entry
    rotation = ca_rotation.rotation_of(observed)
    if rotation is not None:
        tls["caRotation"] = rotation.to_status()
    return {"tls": tls}


def _message(summary: str, problems: tuple[StartProblem, ...], action: Action | None, last_error: str | None) -> str:
    """The one-line `message`: the phase's summary, what keeps members from starting, what this
    pass does, and the last error."""
    message = summary
    if problems:
        message = f"{message}; {'; '.join(p.describe() for p in problems)}"
    if action is not None and not isinstance(action, (NoOp, RejectSpec, ReportMembersLost, RefuseNames,
                                                      ReportCertificateProblem, RefuseQuorumRecovery)):
        message = f"{message}; {action.describe()}"
    if last_error:
        message = f"{message}; last error: {last_error}"
    return message


def maintenance_status(observed: ObservedCluster) -> dict[str, Any]:
    """Storage as the members report it: quota, raised alarms, and per member the database size,
    the size in use, and when the operator last defragmented it (or failed to)."""
    spec = observed.cluster.spec
    members = []
    for member in sorted(observed.members or (), key=lambda m: m.member_name):
        entry: dict[str, Any] = {"name": member.member_name}
        status = observed.endpoint_status.get(member.member_name)
        if status is not None:
            entry["dbSize"] = status.db_size
            entry["dbSizeInUse"] = status.db_size_in_use
        pod = observed.pod(member.member_name)
        if pod is not None and pod.defragmented_at is not None:
            entry["lastDefragmented"] = format_time(pod.defragmented_at)
        if pod is not None and pod.defragment_failed_at is not None:
            entry["lastDefragmentFailed"] = format_time(pod.defragment_failed_at)
        members.append(entry)
    return {
        "backendQuota": spec.effective_quota_bytes if spec is not None else 0,
        "alarms": [alarm.describe() for alarm in observed.alarms],
        "members": members,
    }

def member_readiness(observed: ObservedCluster) -> tuple[list[str], list[str]]:
    """(ready, unready) member names: a healthy voting member is ready; learners, unstarted and
    unhealthy members are not. Without a member list, pod readiness is all we know."""
    if observed.members is None:
        pods = observed.live_pods
        return sorted(p.member_name for p in pods if p.ready), sorted(p.member_name for p in pods if not p.ready)
    ready = sorted(m.member_name for m in observed.healthy_voters)
    unready = sorted(m.member_name for m in observed.members if m.member_name not in ready)
    return ready, unready


def running_versions(observed: ObservedCluster) -> list[EtcdVersion]:
    """etcd versions of the members (their own report, else their pod's), or of the pods when
    no member answered."""
    versions: list[EtcdVersion] = []
    if observed.members is None:
        return [p.etcd_version for p in observed.live_pods if p.etcd_version is not None and not p.never_ran]
    for member in observed.members:
        status = observed.endpoint_status.get(member.member_name)
        version = EtcdVersion.parse(status.version) if status is not None and status.version else None
        if version is None:
            pod = observed.pod(member.member_name)
            version = pod.etcd_version if pod is not None and not pod.never_ran else None
        if version is not None:
            versions.append(version)
    return versions


# ---------------------------------------------------------------------------------------------
# Phase and conditions; each condition is (status, reason, message)

Verdict = tuple[str, str, str]
# Available, but the operator cannot reach every voter its peers serve with (a partition around it).
REASON_MEMBERS_UNREACHABLE = "MembersUnreachableFromOperator"
# Degraded: a voter whose pod the kubelet reports Ready is connected to none of its healthy peers.
REASON_MEMBER_PARTITIONED = "MemberPartitioned"
# Degraded reasons that say whose view of a member differs: one Warning event per change.
PEER_VIEW_REASONS = (REASON_MEMBERS_UNREACHABLE, REASON_MEMBER_PARTITIONED)


def _availability(observed: ObservedCluster, bootstrapped: bool) -> Verdict:
    if observed.members is not None and observed.health_error is not None:
        return "Unknown", "HealthUnknown", f"the members' health check failed: {observed.health_error}"
    if observed.members is not None:
        voters, healthy = len(observed.voting_members), len(observed.healthy_voters)
        leader = observed.leader
        if observed.has_quorum:
            led = f", leader {leader.member_name}" if leader is not None else ""
            return "True", "QuorumAvailable", f"{healthy} of {voters} voting members healthy{led}"
        if observed.operator_cut_off:
            unreachable = ", ".join(m.member_name for m in observed.unhealthy_voters)
            return ("True", REASON_MEMBERS_UNREACHABLE,
                    f"the operator reaches only {healthy} of {voters} voting members (not {unreachable}), but the "
                    f"cluster has quorum: {observed.quorum_evidence}{_seen_connected(observed)}")
        return "False", "QuorumLost", f"only {healthy} of {voters} voting members healthy; {observed.quorum} needed"
    pods = observed.live_pods
    ready = [pod for pod in pods if pod.ready]
    why = observed.member_list_error or "no member answered"
    leaderless = observed.leaderless_answers
    if bootstrapped and pods and leaderless:
        return (
            "False", "QuorumLost",
            f"no leader: {len(leaderless)} of {len(pods)} member(s) answer but none knows a leader; "
            f"etcd serves nothing without quorum",
        )
    if bootstrapped and pods and len(ready) > len(pods) // 2:
        # The pods' own /health checks pass; only the operator cannot reach etcd.
        return "True", "PodsReady", f"{len(ready)} of {len(pods)} member pods ready; etcd not reachable from the operator: {why}"
    if not bootstrapped:
        return "False", "Bootstrapping", f"the first member is not up yet ({why})"
    if not pods:
        return "False", "MembersLost", "no member pod exists"
    return "False", "EtcdUnreachable", f"{len(ready)} of {len(pods)} member pods ready; {why}"


def _seen_connected(observed: ObservedCluster) -> str:
    """"; seen connected by peers: <members>" for voters the operator cannot check that a healthy
    voter has a peer stream to (empty while there are none, or the peers' view is unknown)."""
    seen = observed.voters_seen_connected
    return f"; seen connected by peers: {', '.join(m.member_name for m in seen)}" if seen else ""


def _peer_view_verdict(observed: ObservedCluster, cut_off: bool) -> Verdict | None:
    """Degraded because witnesses disagree: voters alive by their pod's readiness but connected to
    none of their healthy peers (MemberPartitioned), or voters the operator cannot check while the
    cluster serves with them (MembersUnreachableFromOperator: cut off, or every unhealthy voter
    seen connected by a peer). None otherwise."""
    partitioned = observed.partitioned_voters
    if partitioned:
        names = ", ".join(m.member_name for m in partitioned)
        return ("True", REASON_MEMBER_PARTITIONED,
                f"member(s) {names} not connected to their peers (none of {', '.join(sorted(observed.peer_views))} "
                f"has a peer stream to them), while the kubelet reports their pods Ready")
    unhealthy, seen = observed.unhealthy_voters, observed.voters_seen_connected
    if unhealthy and (cut_off or len(seen) == len(unhealthy)):
        return ("True", REASON_MEMBERS_UNREACHABLE,
                f"the operator cannot reach {', '.join(m.member_name for m in unhealthy)}{_seen_connected(observed)}")
    return None


def peer_view_event(observed: ObservedCluster, status: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of the Warning event due when `status` newly reports members partitioned
    from their peers or cut off from the operator only (once per change, not every pass), else None."""
    new = next((cond for cond in status.get("conditions") or () if cond.get("type") == CONDITION_DEGRADED), None)
    if new is None or new.get("reason") not in PEER_VIEW_REASONS:
        return None
    old = observed.cluster.recorded.condition(CONDITION_DEGRADED)
    if old is not None and (old.reason, old.message) == (new.get("reason"), new.get("message")):
        return None
    return str(new.get("reason")), str(new.get("message") or "")


# Warning event: a spec.TLS.static certificate newly has a problem (status.tls names it).
REASON_CERTIFICATE_PROBLEM = "CertificateProblem"


def static_tls_event(observed: ObservedCluster, previous: Mapping[str, Any] | None,
                     status: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of the Warning event due when `status` reports a problem with a static
    certificate that the `previous` status did not (once per new problem, not every pass), else
    None. Issued and cert-manager clusters get none: their certificates are fixed by the operator
    or by cert-manager (whose own problems have their events, tls/certificates.py)."""
    spec = observed.cluster.spec
    if spec is None or spec.issued_tls is not None or spec.cert_manager_tls is not None:
        return None
    before = {(role, entry.get("problem")) for role, entry in ((previous or {}).get("tls") or {}).items()}
    new = [f"secret {entry.get('secret')} ({role}): {entry['problem']}"
           for role, entry in sorted((status.get("tls") or {}).items())
           if entry.get("problem") and (role, entry["problem"]) not in before]
    return (REASON_CERTIFICATE_PROBLEM, "; ".join(new)) if new else None


def _writes_refused(observed: ObservedCluster, availability: Verdict, alarm: Verdict) -> Verdict:
    """Not Available while etcd refuses every write: CORRUPT (for a member, or member ID 0, the
    whole cluster) switches every member to refusing writes; the members' /health fails, so every
    pod turns unready. (NOSPACE refuses writes too, but reads go on and the operator clears it.)"""
    if availability[0] == "True" and observed.alarmed(CORRUPT):
        return "False", alarm[1], f"{alarm[2]} ({availability[2]})"
    return availability


def _alarm(observed: ObservedCluster) -> Verdict:
    if any(a.cluster_wide for a in observed.alarmed(CORRUPT)):
        return ("True", "CorruptAlarm", "etcd raised CORRUPT for member ID 0 (the whole cluster: its corruption "
                                        "check found the members' data disagreeing and singled out no member): every "
                                        "write is refused and every member pod is unready until a person compares the "
                                        "members' data and disarms it; the operator never disarms it")
    if observed.alarmed(CORRUPT):
        members = ", ".join(_member_name(observed, a.member_id) for a in observed.alarmed(CORRUPT))
        return "True", "CorruptAlarm", f"etcd raised CORRUPT for {members}: it refuses every write until it is cleared"
    if observed.alarmed(NOSPACE):
        spec = observed.cluster.spec
        quota = f" of {spec.effective_quota_bytes} bytes" if spec is not None else ""
        return ("True", "NoSpaceAlarm", f"etcd raised NOSPACE: the database reached its quota{quota}; writes are "
                                        f"refused, reads are served")
    return "False", "NoAlarm", "no etcd alarm raised"


def _member_name(observed: ObservedCluster, member_id: int) -> str:
    return next((m.member_name for m in observed.members or () if m.id == member_id), f"member {member_id:x}")


def alarm_event(observed: ObservedCluster, status: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of the Warning event due when `status` newly reports an alarm (once
    per alarm raised, not every pass), else None."""
    new = next((cond for cond in status.get("conditions") or () if cond.get("type") == CONDITION_ALARM_RAISED), None)
    if new is None or new.get("status") != "True":
        return None
    old = observed.cluster.recorded.condition(CONDITION_ALARM_RAISED)
    if old is not None and old.status == "True" and old.reason == new.get("reason"):
        return None
    return str(new.get("reason")), str(new.get("message") or "")


def _phase(
    observed: ObservedCluster, action: Action | None, availability: Verdict, bootstrapped: bool, alarm: Verdict,
    recovery: dict[str, Any] | None = None,
) -> tuple[str, str, str]:
    """(phase, reason, one-line summary)."""
    cluster = observed.cluster
    if cluster.spec is None:
        return PHASE_FAILED, "InvalidSpec", cluster.spec_error or "spec is invalid"
    if isinstance(action, RejectSpec):
        return PHASE_FAILED, "InvalidSpec", action.reason
    if isinstance(action, RefuseNames):
        return PHASE_FAILED, action.reason, action.message
    if isinstance(action, (ReportCertificateProblem, RefuseQuorumRecovery)):
        # Nothing is changed: a running cluster runs on (and says so), a new one cannot start.
        running = availability[0] == "True"
        return (PHASE_RUNNING if running else PHASE_FAILED), action.reason, \
            f"{action.message}{f' ({availability[2]})' if running else ''}"
    if isinstance(action, ReportMembersLost):
        return PHASE_FAILED, "MembersLost", action.reason
    available, reason, message = availability
    if recovery is not None and recovery.get("phase") == RECOVERY_SEEDING and available != "True":
        return (PHASE_FAILED, REASON_QUORUM_RECOVERING,
                f"quorum lost; rebuilding from {recorded_source(recovery)} as seed member {recovery.get('seedMember')}")
    if available == "True" and alarm[0] == "True":
        return PHASE_RUNNING, alarm[1], f"{alarm[2]} ({message})"
    if available == "True":
        return PHASE_RUNNING, reason, message
    if available == "Unknown":
        # Not knowing is no news: the phase stays what it was.
        return cluster.recorded.phase or (PHASE_RUNNING if bootstrapped else PHASE_CREATING), reason, message
    if not bootstrapped:
        return PHASE_CREATING, reason, message
    return PHASE_FAILED, reason, message


def _scaling(observed: ObservedCluster, bootstrapped: bool) -> Verdict:
    spec = observed.cluster.spec
    if spec is None or observed.members is None:
        return "Unknown", "MembersUnknown", "the member list could not be read"
    voters, learners = len(observed.voting_members), len(observed.learners)
    joining = f" ({learners} learner(s) joining)" if learners else ""
    if voters < spec.size:
        return "True", "ScalingUp", f"{voters} of {spec.size} voting members{joining}"
    if voters > spec.size:
        return "True", "ScalingDown", f"{voters} voting members, spec.size is {spec.size}{joining}"
    if learners:
        return "True", "AddingMember", f"{voters} voting members{joining}"
    return "False", "AtSize", f"{voters} of {spec.size} voting members"


def _upgrading(observed: ObservedCluster) -> Verdict:
    spec = observed.cluster.spec
    if spec is None or observed.members is None:
        return "Unknown", "MembersUnknown", "the member list could not be read"
    outdated = [
        (member.member_name, reason)
        for member in observed.members
        if (reason := outdated_reason(observed, member)) is not None
    ]
    if outdated:
        name, reason = sorted(outdated)[0]
        step = transition_step(observed)
        if step is not None:
            way = "off" if moving_off_tls(observed) else "to"
            moving = sorted(name for name, reason in outdated if reason.startswith(f"moving {way} TLS"))
            return ("True", REASON_MOVING_OFF_TLS if way == "off" else REASON_MOVING_TO_TLS,
                    f"moving {way} TLS, step {step}: {len(moving)} of {len(observed.members)} members to roll "
                    f"({', '.join(moving)})")
        return (
            "True", "RollingUpdate",
            f"{len(outdated)} of {len(observed.members)} members outdated (e.g. {name}: {reason})",
        )
    return "False", "UpToDate", f"every member runs {spec.image}"


def _recovering(observed: ObservedCluster, action: Action | None, recovery: dict[str, Any] | None = None) -> Verdict:
    if recovery is not None and recovery.get("phase") == RECOVERY_SEEDING:
        return ("True", REASON_QUORUM_RECOVERING,
                f"quorum-loss recovery from {recorded_source(recovery)} "
                f"into seed member {recovery.get('seedMember')}; lost: {', '.join(recovery.get('lostMembers') or [])}")
    if isinstance(action, CreateMemberPod):
        return "True", "RecreatingMemberPod", action.describe()
    if isinstance(action, (RemoveMember, AddMember)) and action.purpose == "replace":
        return "True", "ReplacingMember", action.describe()
    missing = sorted(
        m.member_name for m in observed.members or () if m.started and observed.pod(m.member_name) is None
    )
    if missing:
        return "True", "MemberPodMissing", f"member(s) without a pod: {', '.join(missing)}"
    return "False", "NoFailedMembers", "every member has its pod"


def _degraded(observed: ObservedCluster, availability: Verdict, phase_reason: str, summary: str,
              alarm: Verdict) -> Verdict:
    if observed.cluster.spec is None or phase_reason in (*FAILED_WITHOUT_ETCD_REASONS, lost_ca.REASON_CA_LOST):
        return "True", phase_reason, summary  # CASecretLost: serving, but no certificate can be renewed
    available, reason, message = availability
    if available == "Unknown":
        return "Unknown", reason, message
    if available == "True" and alarm[0] == "True":
        return "True", alarm[1], alarm[2]
    if available != "True" or reason == "PodsReady":
        return "True", "EtcdUnreachable" if reason == "PodsReady" else reason, message
    peer_view = _peer_view_verdict(observed, cut_off=reason == REASON_MEMBERS_UNREACHABLE)
    if peer_view is not None:
        return peer_view
    unhealthy = sorted(m.member_name for m in observed.unhealthy_voters)
    if unhealthy:
        return "True", "MembersUnhealthy", f"unhealthy voting member(s): {', '.join(unhealthy)}{_seen_connected(observed)}"
    return "False", "AllMembersHealthy", "every voting member is healthy"


def _start_blocked(problems: tuple[StartProblem, ...]) -> Verdict:
    if not problems:
        return "False", "MembersStarting", "no member pod is kept from starting"
    return "True", problems[0].reason, "; ".join(p.describe() for p in problems)


def _pod_missing(observed: ObservedCluster, action: Action | None, last_error: str | None) -> Verdict:
    """Members etcd lists that never started and have no pod, with the error of the last failed
    create (kept while the condition holds, so a later pass's status still names it)."""
    missing = members_without_pods(observed)
    if not missing:
        return "False", "MemberPodsPresent", "every member that never started has a pod"
    message = f"member(s) {', '.join(m.member_name for m in missing)} added to etcd but without a pod"
    previous = observed.cluster.recorded.condition(CONDITION_MEMBER_POD_MISSING)
    if last_error and isinstance(action, CreateMemberPod):
        message = f"{message}; creating it failed: {last_error}"
    elif previous is not None and previous.status == "True" and previous.message.startswith(f"{message};"):
        message = previous.message
    return "True", "MemberPodNotCreated", message


def _version_supported(observed: ObservedCluster) -> Verdict:
    cluster = observed.cluster
    spec = cluster.spec
    if spec is None:
        if cluster.unsupported_version:
            return "False", versions.REASON_UNSUPPORTED_VERSION, cluster.spec_error or "spec.version is not supported"
        return "Unknown", "InvalidSpec", "spec.version is not checked while the spec is invalid"
    problem = version_change_problem(observed)
    if problem:
        return "False", versions.REASON_UPGRADE_REFUSED, problem
    running = running_member_versions(observed)
    sources = sorted(v for v in {*running, spec.version} if versions.support_of(v) == "upgrade-source")
    if sources:
        oldest = sources[0]
        if spec.version == oldest:
            return "False", versions.REASON_UPGRADE_SOURCE_ONLY, versions.upgrade_source_warning(oldest)
        return (
            "False", versions.REASON_UPGRADE_SOURCE_ONLY,
            f"members still run etcd {oldest}, supported only as an upgrade source; "
            f"the upgrade to {spec.version} is rolling",
        )
    return "True", versions.REASON_SUPPORTED, f"etcd {spec.version} is supported"


def upgrade_source_event(observed: ObservedCluster, status: dict[str, Any]) -> str | None:
    """The message of the Warning event due when `status` newly reports an upgrade-source
    version (once per transition, not every pass), else None."""
    new = next((cond for cond in status.get("conditions") or () if cond.get("type") == CONDITION_VERSION_SUPPORTED), None)
    if new is None or new.get("reason") != versions.REASON_UPGRADE_SOURCE_ONLY:
        return None
    old = observed.cluster.recorded.condition(CONDITION_VERSION_SUPPORTED)
    if old is not None and old.reason == versions.REASON_UPGRADE_SOURCE_ONLY:
        return None
    return str(new.get("message") or "")


def _condition(
    observed: ObservedCluster, condition_type: str, status: str, reason: str, message: str, *, now: datetime
) -> dict[str, str]:
    previous: Condition | None = observed.cluster.recorded.condition(condition_type)
    if previous is not None and previous.status == status and previous.last_transition_time:
        since = previous.last_transition_time
    else:
        since = format_time(now)
    return {
        "type": condition_type,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with seconds, as Kubernetes writes times."""
    return format_timestamp(moment)


# ---------------------------------------------------------------------------------------------
# status.recovery


def recovery_record(observed: ObservedCluster, action: Action | None) -> dict[str, Any] | None:
    """status.recovery after this pass's action: a new record (StartQuorumRecovery), the recorded
    one with its outcome (Finish/Fail), or the recorded one unchanged (None: there is none)."""
    at = format_timestamp(observed.observed_at) if observed.observed_at is not None else ""
    recorded = observed.cluster.recorded.recovery
    if isinstance(action, StartQuorumRecovery):
        return _without_empty({
            "phase": RECOVERY_SEEDING, "survivor": action.survivor, "survivorRevision": action.survivor_revision,
            "survivorRaftIndex": action.survivor_raft_index, "lostMembers": list(action.lost_members),
            "seedMember": action.seed_member, "startedAt": at, "request": action.request,
            "reason": action.reason, **_source_record(action),
        })
    if recorded is None:
        return None
    record: dict[str, Any] = {
        "phase": recorded.phase, "survivor": recorded.survivor, "survivorRevision": recorded.survivor_revision,
        "survivorRaftIndex": recorded.survivor_raft_index, "lostMembers": list(recorded.lost_members),
        "seedMember": recorded.seed_member, "startedAt": recorded.started_at, "finishedAt": recorded.finished_at,
        "request": recorded.request, "reason": recorded.reason, "source": recorded.source,
    }
    if recorded.from_backup:
        record.update(backup=recorded.backup, backupRevision=recorded.backup_revision)
        if recorded.restore is not None:
            record["restore"] = restore_source_to_api(recorded.restore)
    if recorded.recovered_revision:
        record["recoveredRevision"] = recorded.recovered_revision
    if isinstance(action, FinishQuorumRecovery) and recorded.in_progress:
        record.update(phase=RECOVERY_RECOVERED, finishedAt=at, recoveredRevision=action.revision,
                      reason=action.describe())
    elif isinstance(action, FailQuorumRecovery) and recorded.in_progress:
        record.update(phase=RECOVERY_FAILED, finishedAt=at, reason=action.reason)
    return _without_empty(record)


def recorded_source(record: dict[str, Any]) -> str:
    """What a status.recovery record restores, for status messages."""
    if record.get("source") == RECOVERY_SOURCE_BACKUP:
        return (f"EtcdBackup {record.get('backup')} (revision {record.get('backupRevision')}; surviving member "
                f"{record.get('survivor')} was behind it at revision {record.get('survivorRevision')})")
    return f"surviving member {record.get('survivor')} (revision {record.get('survivorRevision')})"


def _source_record(action: StartQuorumRecovery) -> dict[str, Any]:
    """status.recovery's source fields: Survivor, or Backup with the backup, its revision and its
    object (as spec.restore names one: what the seed fetches)."""
    if not action.backup or action.restore is None:
        return {"source": RECOVERY_SOURCE_SURVIVOR}
    return {"source": RECOVERY_SOURCE_BACKUP, "backup": action.backup, "backupRevision": action.backup_revision,
            "restore": restore_source_to_api(action.restore)}


def _without_empty(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if value != ""}
