"""Membership toward spec.size: learners removed or promoted, members added (as learners) one at a
time, extra members removed (unhealthy, then outdated, then non-leader, then newest), and outdated
members upgraded: in place when only the image differs, on their volume, or by adding an
up-to-date member first (followers oldest first, the leader last, while the others keep a quorum)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import ClusterSpec
from etcd_common.etcd.types import Member
from etcd_operator.actions import (
    Action,
    AddMember,
    NoOp,
    PromoteMember,
    Purpose,
    RemoveMember,
    UpgradeMember,
    Wait,
)
from etcd_operator.manifests import (
    member_name,
    member_peer_url,
    pod_policy_hash,
)
from etcd_operator.observed import (
    ObservedCluster,
    ObservedPod,
)
from etcd_operator.planning.findings import member_created_at
from etcd_operator.planning.maintenance import near_quota
from etcd_operator.planning.removal import pick_removal, remove_or_move_leader
from etcd_operator.tls.ca_rotation import trust_outdated
from etcd_operator.tls.transition import (
    peer_url_change,
)

if TYPE_CHECKING:
    from etcd_operator.planning.context import Context


def learners(context: Context) -> Action | None:
    """Learners: remove one no longer needed (spec.size shrank); promote one that serves clients and
    caught up while every voting member is healthy (etcd's own in-sync check decides; a refused
    promote is retried); else Wait (etcd allows one learner; nothing else changes meanwhile)."""
    return _learners(context.observed, context.spec, context.outdated)


def scale_to_size(context: Context) -> Action | None:
    """Fewer voting members than spec.size -> AddMember (as learner), one at a time; more -> remove
    one: unhealthy, then outdated, then non-leader, then newest (a healthy one stopped first)."""
    return _size(context.observed, context.spec, context.outdated)


def upgrade_outdated(context: Context) -> Action | None:
    """Outdated members (image, pod policy, a TLS move's step, a CA rotation's trust), oldest first,
    leader last, while the others keep a quorum: only the image differs -> UpgradeMember in place;
    on a PVC -> UpgradeMember on the volume; else AddMember(upgrade) first, then removal by size."""
    return _upgrade(context.observed, context.spec, context.outdated)


def converged(context: Context) -> Action:
    """Nothing to change: NoOp (saying whether the database nears its quota)."""
    observed, spec = context.observed, context.spec
    return NoOp(f"{len(observed.voting_members)} healthy member(s) running etcd {spec.version}",
                near_quota=near_quota(observed, spec))


# A learner whose pod is younger than this (creationTimestamp has whole seconds) and runs is
# expected to serve and catch up any moment: its wait is `imminent` (see `_just_started`).
LEARNER_START_SECONDS = 3.0


def _learners(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    if observed.learners:
        return _plan_learners(observed, spec, needed_voters=spec.size + (1 if outdated else 0))
    return None


def _size(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    voters = observed.voting_members
    if len(voters) < spec.size:
        return _add_member(observed, spec, "scale", f"{len(voters)} of {spec.size} members")
    if len(voters) > spec.size:
        victim = pick_removal(observed, voters, outdated)
        if victim.member_name in outdated:
            return remove_or_move_leader(
                observed, victim, "upgrade", f"replaced by an up-to-date member ({outdated[victim.member_name]})", outdated
            )
        return remove_or_move_leader(
            observed, victim, "scale", f"{len(voters)} members, spec.size is {spec.size}", outdated
        )
    return None


def _upgrade(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    if outdated:
        return _plan_upgrade(observed, spec, outdated)
    return None


def _plan_learners(observed: ObservedCluster, spec: ClusterSpec, *, needed_voters: int) -> Action:
    """Remove a learner no longer needed; else promote one that serves clients and reports a
    raft index near the leader's, while every voting member is healthy (etcd's own in-sync check
    at `member promote` has the last word; the supervisor asks again shortly when it refuses).

    Not before the learner serves clients: a voter that serves none counts as unhealthy, so in a
    two-voter cluster it would read as a quorum loss, and every further change waits for it
    anyway. A new etcd 3.6 member may serve no client for etcd's 7 s request timeout: its first
    attempt to publish itself is lost when the leader's snapshot resets its peer connections,
    though etcd may already list its name (a member list cannot tell)."""
    voters = len(observed.voting_members)
    waiting: list[str] = []
    imminent = False
    for learner in sorted(observed.learners, key=lambda m: m.member_name):
        if voters >= needed_voters:
            return RemoveMember(
                learner.member_name, learner.id, "scale",
                f"learner no longer needed: {voters} voting members, spec.size is {spec.size}",
            )
        progress = _learner_progress(observed, learner)
        if observed.unhealthy_voters:
            names = ", ".join(m.member_name for m in observed.unhealthy_voters)
            waiting.append(f"{learner.member_name} is promoted once unhealthy member(s) {names} recover")
        elif progress is None:
            waiting.append(f"{learner.member_name} is starting (it serves no client yet)")
            imminent = imminent or _just_started(observed, learner)
        elif progress[0] < progress[1] * c.LEARNER_CATCH_UP_RATIO:
            waiting.append(f"{learner.member_name} is catching up (raft index {progress[0]} of {progress[1]})")
            imminent = imminent or _just_started(observed, learner)
        else:
            return PromoteMember(learner.member_name, learner.id)
    return Wait("learner " + "; ".join(waiting), imminent=imminent)


def _just_started(observed: ObservedCluster, learner: Member) -> bool:
    """Is the learner's pod running and younger than LEARNER_START_SECONDS? Its etcd then
    usually serves clients and catches up within a fraction of a second, which no Kubernetes event
    announces (a learner's pod turns Ready only once promoted): worth observing again sooner than
    any other wait. Older learners (etcd's 7 s publish retry, a large database to catch up on) are
    waited for at the ordinary pace. A pod still Pending is not polled for: its start is an event."""
    pod = observed.pod(learner.member_name)
    if pod is None or pod.phase != "Running" or pod.deleting:
        return False
    age = observed.pod_age_seconds(pod)
    return age is not None and age < LEARNER_START_SECONDS


def _learner_progress(observed: ObservedCluster, learner: Member) -> tuple[int, int] | None:
    """(learner's raft index, leader's raft index), or None while the learner does not answer."""
    status = observed.endpoint_status.get(learner.member_name)
    if status is None:
        return None
    leader = observed.leader
    leader_status = observed.endpoint_status.get(leader.member_name) if leader is not None else None
    if leader_status is not None:
        return status.raft_index, leader_status.raft_index
    voter_indexes = [
        s.raft_index for name, s in observed.endpoint_status.items()
        if any(v.member_name == name for v in observed.voting_members)
    ]
    return status.raft_index, max(voter_indexes, default=0)


def _plan_upgrade(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action:
    """Followers first (oldest first), the leader last. A restart needs no MoveLeader first:
    the kubelet stops etcd gracefully and etcd hands leadership over itself once its clients are
    gone (a MoveLeader beforehand drops the writes its clients still have in flight)."""
    leader_id = observed.leader_id
    if leader_id is None:
        return Wait("leader not known yet; the upgrade continues once it is")
    candidates = [m for m in observed.voting_members if m.member_name in outdated]
    followers = sorted(
        (m for m in candidates if m.id != leader_id),
        key=lambda m: (member_created_at(observed, m), m.member_name),
    )
    member = followers[0] if followers else candidates[0]
    reason = outdated[member.member_name]
    pod = observed.pod(member.member_name)
    voters = len(observed.voting_members)
    restart_keeps_quorum = voters - 1 >= voters // 2 + 1
    if pod is not None and restart_keeps_quorum and _image_change_only(observed, spec, pod):
        return UpgradeMember(
            member.member_name, pod.name, reason, pod.uid, in_place=True, image=spec.image,
            etcd_version=str(spec.version), container_index=pod.etcd_container_index, restart_count=pod.restart_count,
        )
    if (spec.uses_persistent_volumes and observed.volume(member.member_name) is not None and pod is not None
            and restart_keeps_quorum):
        # A move to TLS (step 2): etcd takes its peer URL from the member list, not its flags.
        peer_url = peer_url_change(member_peer_url(observed.cluster, member.member_name), member)
        return UpgradeMember(member.member_name, pod.name, reason, pod.uid, member_id=member.id, peer_url=peer_url)
    why = ("its data is not on a volume" if not spec.uses_persistent_volumes
           else f"restarting it would leave {voters - 1} of {voters} voting members, less than a quorum")
    return _add_member(
        observed, spec, "upgrade",
        f"replaces {member.member_name} ({reason}); {why}, so a new member "
        f"joins first and the outdated one is removed after",
    )


def _image_change_only(observed: ObservedCluster, spec: ClusterSpec, pod: ObservedPod) -> bool:
    """Only the image differs from the spec (Kubernetes lets a running pod change its images;
    nothing else of a member pod): the member can be restarted in its pod, keeping its name,
    address and data, emptyDir included. Pods without the operator's pod-policy hash (made by the
    CoreOS operator) are replaced by pods of the operator's own making instead."""
    if pod.image == spec.image or pod.image_pull_failed or trust_outdated(observed, pod):
        return False
    return pod.pod_policy_hash is not None and pod.pod_policy_hash == pod_policy_hash(spec)


def _add_member(observed: ObservedCluster, spec: ClusterSpec, purpose: Purpose, reason: str) -> AddMember | Wait:
    cluster = observed.cluster
    name = member_name(cluster.name, observed.name_suffix)
    taken = observed.member_names | {pod.member_name for pod in observed.pods} | {pvc.member_name for pvc in observed.pvcs}
    if name in taken:
        return Wait(f"generated member name {name} is taken; retrying with another")
    peer_url = member_peer_url(cluster, name)
    running_minors = {
        pod.etcd_version.minor_version for pod in observed.live_pods if pod.etcd_version is not None
    }
    as_learner = (running_minors | {spec.version.minor_version}) <= c.LEARNER_MINOR_VERSIONS
    return AddMember(
        member_name=name,
        peer_url=peer_url,
        as_learner=as_learner,
        initial_cluster=(*observed.initial_cluster(), (name, peer_url)),
        purpose=purpose,
        reason=reason,
    )
