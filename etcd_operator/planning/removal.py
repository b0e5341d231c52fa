"""Removing members: nothing while health is unknown or quorum is lost (reported, or recovered only
when asked), dead members first, then stuck and unhealthy ones, and how a member leaves: stopped
first when the others keep a quorum, leadership moved off it first, never below a quorum.

Removing the leader: a voting member that leads is never removed while it can hand leadership
over: MoveLeader to a healthy voter (up to date first, then the oldest) comes first, so clients see
no election. A stuck leader (it still heads raft, so the others elect no one else, but it fails the
health check) that answers `endpoint status` can still serve move-leader and is moved off too. One
that answers nothing cannot hand over (etcd serves move-leader on the leader only): it is removed
as leader, while the rest keeps quorum, and etcd elects a new leader when the removal applies;
waiting for a handover that cannot happen would block every later change."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from etcd_common.api.etcd_cluster import ClusterSpec
from etcd_common.etcd.alarms import CORRUPT
from etcd_common.etcd.types import Member
from etcd_operator.actions import (
    Action,
    DeletePod,
    MoveLeader,
    Purpose,
    RemoveMember,
    ReportQuorumLoss,
    StopMember,
    UpgradeMember,
    Wait,
)
from etcd_operator.observed import (
    STOP_MARGIN_SECONDS,
    ObservedCluster,
    ObservedPod,
    seconds_since,
    stuck_terminating_seconds,
    what_holds,
)
from etcd_operator.planning.findings import MEMBERS_LOST_REASON, member_created_at
from etcd_operator.planning.member_pods import stuck_terminating_bound
from etcd_operator.planning.recovery import plan_recovery_start, request_under_quorum
from etcd_operator.tls.transition import (
    interrupted_peer_change,
)

if TYPE_CHECKING:
    from etcd_operator.planning.context import Context


def health_unknown(context: Context) -> Action | None:
    """The health call itself failed (a timeout) -> Wait: health unknown, never a quorum loss."""
    return _health_unknown(context.observed)


def no_quorum(context: Context) -> Action | None:
    """Healthy voting members not a majority -> ReportQuorumLoss (or, when asked for, a recovery from
    the survivor: recovery.py), unless the cluster showed it has quorum while the operator reaches
    too few voters (`operator_cut_off`) -> Wait. Nothing destructive happens past this rule without
    quorum. With quorum, a new recovery annotation -> RefuseQuorumRecovery (nothing changes while
    it stands)."""
    return _no_quorum(context.observed, context.spec, context.without_pods.dead)


def dead_members(context: Context) -> Action | None:
    """A dead member (its data gone, or its pod stuck terminating past the bound) ->
    RemoveMember(replace) while the rest keeps quorum (leadership moved off it first if it answers);
    a terminal member pod without a volume -> DeletePod (its member is then dead)."""
    without_pods = context.without_pods
    return _dead_members(context.observed, without_pods.dead, context.terminal, without_pods.stuck,
                         context.stuck_bound)


def stuck_members(context: Context) -> Action | None:
    """A learner that never answered within the unhealthy-member timeout, or a voter unhealthy for
    longer -> RemoveMember(replace) while quorum allows; its replacement is added by `membership`."""
    return _stuck_members(context.observed, context.outdated, context.policy.unhealthy_member_timeout_seconds)


def unhealthy_voters(context: Context) -> Action | None:
    """An unhealthy voting member -> removed if over spec.size and quorum allows; otherwise Wait for
    it (its pod restarts in place; membership changes wait for a fully healthy cluster)."""
    return _unhealthy_voters(context.observed, context.spec, context.outdated)


def _health_unknown(observed: ObservedCluster) -> Action | None:
    """A failed health call says nothing about the members: change nothing until one answers."""
    if observed.health_error is not None:
        return Wait(f"member health unknown (the health check failed: {observed.health_error}); "
                    f"changing nothing until it is known")
    return None


def _no_quorum(observed: ObservedCluster, spec: ClusterSpec, dead: tuple[Member, ...]) -> Action | None:
    """Nothing destructive without quorum (but an opt-in recovery from the survivor: recovery.py)."""
    if observed.operator_cut_off:
        unreachable = ", ".join(_unhealthy_detail(observed, m) for m in observed.unhealthy_voters)
        return request_under_quorum(observed) or Wait(
            f"the operator cannot reach {unreachable}, but the cluster has quorum "
            f"({observed.quorum_evidence}): nothing changes until they answer here")
    if not observed.has_quorum:
        return plan_recovery_start(observed, spec, observed.voting_members, _quorum_loss(observed, list(dead)))
    return request_under_quorum(observed)


def _dead_members(
    observed: ObservedCluster, dead: tuple[Member, ...], terminal: tuple[ObservedPod, ...],
    stuck: tuple[str, ...] = (), stuck_bound: float = stuck_terminating_bound(None),
) -> Action | None:
    """Dead members, then terminal pods without volumes."""
    for member in dead:
        if removal_keeps_quorum(observed, member):
            if observed.alarmed(CORRUPT):
                # Its data may still be there (a pod stuck terminating, or gone from the API while its
                # node is cut off), and sound as far as anyone knows; its replacement would copy the
                # leader's, which may be the corrupt copy: the alarm is resolved first (maintenance.py).
                return Wait(f"{member.member_name} is dead, but etcd raised CORRUPT: it is not replaced by a "
                            f"copy of the leader's data until the members' keyspace hashes say whose data is sound")
            if member.member_name in stuck:
                why = _stuck_reason(observed, member, stuck_bound)
            else:
                why = ("its pod is gone and its data with it (or it was stopped to be removed)" if member.started
                       else "it never started and its peer URL is not one this operator creates")
            if member.id == observed.leader_id and _answers(observed, member):
                handover = _hand_over_leadership(
                    observed, member, {}, f"{member.member_name} is dead ({why}) and must not lead when it is removed")
                if handover is not None:
                    return handover
            return RemoveMember(member.member_name, member.id, "replace",
                                f"{why}; a new member replaces it if the cluster is then below spec.size")
    if dead:
        return _quorum_loss(observed, list(dead))
    for pod in terminal:
        return DeletePod(pod.name, f"its phase is {pod.phase}; its member is then replaced", pod.uid)
    return None


def _stuck_reason(observed: ObservedCluster, member: Member, bound: float) -> str:
    pod = observed.pod(member.member_name)
    if pod is None:
        return "its pod was stuck terminating"
    past = stuck_terminating_seconds(pod, observed) or 0.0
    volume = observed.volume(member.member_name)
    kept = (f"; volume {volume.name} is kept while the pod stays, and deleted with the removed member's leftovers "
            f"once it is gone" if volume is not None else "")
    return (f"its pod {pod.name} is stuck terminating, {past + STOP_MARGIN_SECONDS:.0f}s past its grace period "
            f"(bound {bound + STOP_MARGIN_SECONDS:.0f}s), {what_holds(pod)}{kept}")


def _stuck_members(observed: ObservedCluster, outdated: dict[str, str], limit: float | None) -> Action | None:
    """A learner that never answered within the bound (a pod started with a stale
    --initial-cluster, a crash loop), or a voter unhealthy for longer, is replaced while quorum
    allows (leadership moved off it first): waiting for it would block every later change.
    `limit`: the policy's unhealthy-member timeout (None: wait forever)."""
    if limit is None or observed.observed_at is None:
        return None
    for learner in sorted(observed.learners, key=lambda m: m.member_name):
        pod = observed.pod(learner.member_name)
        age = observed.pod_age_seconds(pod) if pod is not None else None
        if learner.member_name not in observed.endpoint_status and age is not None and age >= limit:
            detail = f" ({pod.problem})" if pod is not None and pod.problem else ""
            return RemoveMember(
                learner.member_name, learner.id, "replace",
                f"learner did not answer within {limit:.0f}s of its pod's start{detail}; a new member replaces it",
            )
    for member in sorted(observed.unhealthy_voters, key=lambda m: m.member_name):
        unhealthy_for = _unhealthy_seconds(observed, member)
        if unhealthy_for is None or unhealthy_for < limit or not removal_keeps_quorum(observed, member):
            continue
        reason = (f"unhealthy for {unhealthy_for:.0f}s (bound {limit:.0f}s): {_unhealthy_detail(observed, member)}; "
                  f"a new member replaces it")
        return remove_or_move_leader(observed, member, "replace", reason, outdated)
    return None


def _unhealthy_seconds(observed: ObservedCluster, member: Member) -> float | None:
    """How long the member's pod has been unready (its readiness is etcd's own health)."""
    pod = observed.pod(member.member_name)
    if pod is None or pod.ready or observed.observed_at is None:
        return None
    return seconds_since(observed, pod.unready_since or pod.created_at)


def _unhealthy_voters(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    unhealthy = observed.unhealthy_voters
    if not unhealthy:
        return None
    voters = observed.voting_members
    if len(voters) > spec.size:
        victim = pick_removal(observed, unhealthy, outdated)
        if removal_keeps_quorum(observed, victim):
            return remove_or_move_leader(
                observed, victim, "scale",
                f"{len(voters)} members, spec.size is {spec.size}; removing an unhealthy one first",
                outdated,
            )
    for member in unhealthy:
        pod = observed.pod(member.member_name)
        if pod is not None and observed.volume(member.member_name) is not None and \
                interrupted_peer_change(spec, pod, member):
            return UpgradeMember(member.member_name, pod.name,
                                 f"moving {'off' if spec.tls_off else 'to'} TLS: its peer URL has the new scheme "
                                 "already, its pod still listens on the old one (an interrupted restart); "
                                 "restarting it on its volume", pod.uid)
    details = "; ".join(_unhealthy_detail(observed, member) for member in unhealthy)
    return Wait(f"waiting for unhealthy member(s) to recover before changing membership: {details}")


def removal_keeps_quorum(observed: ObservedCluster, member: Member) -> bool:
    """After removing `member`, do the remaining healthy voters still form a majority?"""
    if member.is_learner:
        return True
    voters_after = len(observed.voting_members) - 1
    healthy_after = len(observed.healthy_voters) - (1 if observed.is_healthy(member) else 0)
    return voters_after >= 1 and healthy_after >= voters_after // 2 + 1


def pick_removal(
    observed: ObservedCluster, candidates: Iterable[Member], outdated: dict[str, str]
) -> Member:
    """Unhealthy first, then outdated, then non-leader, then newest."""
    leader_id = observed.leader_id
    return min(
        candidates,
        key=lambda m: (
            observed.is_healthy(m),
            m.member_name not in outdated,
            m.id == leader_id,
            -member_created_at(observed, m).timestamp(),
            m.member_name,
        ),
    )


def remove_or_move_leader(
    observed: ObservedCluster, victim: Member, purpose: Purpose, reason: str, outdated: dict[str, str]
) -> Action:
    leader_id = observed.leader_id
    if leader_id is None:
        return Wait(f"leader not known yet; {victim.member_name} is removed once it is")
    stop = _stop_first(observed, victim, purpose, reason)
    if stop is not None:
        return stop
    if victim.id == leader_id:
        if not _answers(observed, victim):
            if not removal_keeps_quorum(observed, victim):
                return Wait(f"removing {victim.member_name} now would lose quorum")
            return RemoveMember(
                victim.member_name, victim.id, purpose,
                f"{reason}; it leads but answers no client, so it cannot hand leadership over: it is removed "
                f"as leader and etcd elects a new one",
            )
        handover = _hand_over_leadership(observed, victim, outdated, f"{victim.member_name} is to be removed and must not lead")
        return handover or Wait(f"{victim.member_name} leads and no healthy member can take over yet")
    if not removal_keeps_quorum(observed, victim):
        return Wait(f"removing {victim.member_name} now would lose quorum")
    return RemoveMember(victim.member_name, victim.id, purpose, reason)


def _stop_first(observed: ObservedCluster, victim: Member, purpose: Purpose, reason: str) -> StopMember | None:
    """A healthy member leaving by choice (scale, upgrade) is stopped before it is removed (see
    StopMember), when the others keep a quorum of the voters while it is down (it still counts
    until removed: with two voters it cannot be stopped first). A leader needs no MoveLeader
    first: etcd hands leadership over when it stops gracefully, once its clients are gone."""
    pod = observed.pod(victim.member_name)
    if purpose == "replace" or victim.is_learner or pod is None or pod.deleting or not observed.is_healthy(victim):
        return None
    voters = len(observed.voting_members)
    if len(observed.healthy_voters) - 1 < voters // 2 + 1:
        return None
    volume = observed.volume(victim.member_name)
    return StopMember(victim.member_name, victim.id, pod.name, reason, pod.uid, volume.name if volume is not None else "")


def _answers(observed: ObservedCluster, member: Member) -> bool:
    """Whether the member serves clients at all (its health check passed, or it answered
    `endpoint status`): only then can it serve move-leader."""
    return observed.is_healthy(member) or member.member_name in observed.endpoint_status


def _hand_over_leadership(
    observed: ObservedCluster, leader: Member, outdated: dict[str, str], reason: str
) -> MoveLeader | None:
    """MoveLeader from `leader` to the best healthy voter, or None if there is none."""
    target = _leadership_target(observed, exclude=leader, outdated=outdated)
    if target is None:
        return None
    return MoveLeader(leader.member_name, leader.id, target.member_name, target.id, reason)


def _leadership_target(
    observed: ObservedCluster, *, exclude: Member, outdated: dict[str, str]
) -> Member | None:
    """A healthy voting member to lead instead: up to date first, then the oldest."""
    candidates = [m for m in observed.healthy_voters if m.id != exclude.id]
    if not candidates:
        return None
    return min(candidates, key=lambda m: (m.member_name in outdated, member_created_at(observed, m), m.member_name))


def _quorum_loss(observed: ObservedCluster, dead: list[Member]) -> ReportQuorumLoss:
    unhealthy = tuple(m.member_name for m in observed.unhealthy_voters)
    detail = ""
    if dead:
        detail = (
            f"member(s) {', '.join(m.member_name for m in dead)} lost their pod and data; "
            f"if too few members come back, {MEMBERS_LOST_REASON}"
        )
    return ReportQuorumLoss(
        healthy_voters=len(observed.healthy_voters),
        voters=len(observed.voting_members),
        unhealthy=unhealthy,
        detail=detail,
    )


def _unhealthy_detail(observed: ObservedCluster, member: Member) -> str:
    pod = observed.pod(member.member_name)
    health = observed.health.get(member.member_name)
    if pod is not None and pod.problem:
        return f"{member.member_name} ({pod.problem})"
    if health is not None and health.error:
        return f"{member.member_name} ({health.error})"
    return f"{member.member_name} (not answering)"
