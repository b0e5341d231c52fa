"""What the planner and the status both read from an observation: why a spec change cannot be
rolled out, why a member is outdated, which listed members have no pod, and since when."""
from __future__ import annotations

from datetime import UTC, datetime

from etcd_common.api.versions import EtcdVersion
from etcd_common.etcd.types import Member
from etcd_operator import versions
from etcd_operator.adoption import unsupported_running_version_problem
from etcd_operator.manifests import (
    pod_policy_hash,
)
from etcd_operator.observed import (
    TLS_MODE_PLAIN,
    ObservedCluster,
    as_utc,
    parse_timestamp,
)
from etcd_operator.tls.ca_rotation import trust_outdated
from etcd_operator.tls.transition import (
    moves_to_tls,
    off_tls_problem,
    tls_outdated,
    without_tls,
)

MEMBERS_LOST_REASON = "all members lost; restore from backup"
# True while an alarm is raised (planning/maintenance.py times its steps from this condition's transition).
CONDITION_ALARM_RAISED = "AlarmRaised"


# True while a member etcd lists never started and has no pod (member_pods.retry_pod_creates times it
# by this condition).
CONDITION_MEMBER_POD_MISSING = "MemberPodMissing"


def version_change_problem(observed: ObservedCluster) -> str | None:
    """Why spec.version cannot be rolled out to the members running now, if it cannot (the
    policy is in versions.py)."""
    spec = observed.cluster.require_spec()
    running = running_member_versions(observed)
    return unsupported_running_version_problem(running) or versions.version_change_problem(running, spec.version)


def running_member_versions(observed: ObservedCluster) -> list[EtcdVersion]:
    """Versions of the member pods whose etcd ran (pods of members etcd no longer lists aside)."""
    names = observed.member_names
    return [
        pod.etcd_version
        for pod in observed.live_pods
        if pod.etcd_version is not None and not pod.never_ran
        and (observed.members is None or pod.member_name in names)
    ]


def tls_change_problem(observed: ObservedCluster) -> str | None:
    """Switching a running cluster between http and https is not a rolling change, but for a move
    to or off TLS for peers and clients (tls/transition.py)."""
    spec = observed.cluster.require_spec()
    if moves_to_tls(spec) or spec.tls_off:
        return None
    for member in observed.members or ():
        if not member.started:
            continue
        if any(url.startswith("https://") != spec.tls.peer_tls for url in member.peer_urls):
            return (
                "spec.TLS.static.member.peerSecret cannot be added or removed on a running "
                f"cluster{_tls_move_hint(observed)} "
                f"(member {member.member_name} has peer URLs {', '.join(member.peer_urls)})"
            )
        if any(url.startswith("https://") != spec.tls.client_tls for url in member.client_urls):
            pod = observed.pod(member.member_name)
            if without_tls(spec) and (pod is None or pod.tls_mode != TLS_MODE_PLAIN):
                # Moving off TLS: its pod is a bridge, or gone to be restarted plain; etcd
                # publishes the member's client URLs again when its new pod starts.
                continue
            return (
                "spec.TLS.static.member.serverSecret/operatorSecret cannot be added or removed on a "
                f"running cluster{_tls_move_hint(observed)} "
                f"(member {member.member_name} has client URLs {', '.join(member.client_urls)})"
            )
    return None


def _tls_move_hint(observed: ObservedCluster) -> str:
    spec = observed.cluster.require_spec()
    if without_tls(spec):
        return f": TLS cannot be turned off here, {off_tls_problem(observed.cluster)}; put spec.TLS back"
    return " (a move to or off TLS needs peer and client TLS together, etcd 3.5 or later)"


def outdated_reason(observed: ObservedCluster, member: Member) -> str | None:
    """Why the member's pod does not match the spec (image or pod policy), if it does not."""
    spec = observed.cluster.require_spec()
    pod = observed.pod(member.member_name)
    if pod is None:
        return None
    moving = tls_outdated(observed, pod)
    if moving is not None:
        return moving
    if pod.image != spec.image:
        if pod.etcd_version is not None and pod.etcd_version != spec.version:
            return f"runs etcd {pod.etcd_version}, spec.version is {spec.version}"
        return f"runs image {pod.image}, spec asks for {spec.image}"
    # Pods without the annotation (e.g. made by the CoreOS operator) are left alone.
    if pod.pod_policy_hash is not None and pod.pod_policy_hash != pod_policy_hash(spec):
        return "spec.pod, spec.TLS, spec.compaction or spec.backendQuota changed since its pod was created"
    return trust_outdated(observed, pod)


def members_without_pods(observed: ObservedCluster) -> tuple[Member, ...]:
    """Members etcd lists that never started and have no pod (what MemberPodMissing is about)."""
    return tuple(m for m in sorted(observed.members or (), key=lambda m: m.member_name)
                 if not m.started and observed.pod(m.member_name) is None)


def pod_missing_since(observed: ObservedCluster) -> datetime | None:
    """Since when the recorded status says a never-started member has had no pod (None: it does not)."""
    condition = observed.cluster.recorded.condition(CONDITION_MEMBER_POD_MISSING)
    if condition is None or condition.status != "True":
        return None
    return parse_timestamp(condition.last_transition_time)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def member_created_at(observed: ObservedCluster, member: Member) -> datetime:
    """When the member's pod was created (the epoch without a pod): the age the rules order members by."""
    pod = observed.pod(member.member_name)
    created = pod.created_at if pod is not None else None
    if created is None:
        return _EPOCH
    return as_utc(created)
