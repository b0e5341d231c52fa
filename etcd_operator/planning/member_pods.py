"""Member pods: a pod that never ran under an old spec, members etcd lists without a pod (an
interrupted add, a member restarting on its volume, a dead one), terminal pods, leftovers of removed
members, pods still terminating, and members the kubelet has not restarted in place yet."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from etcd_common.api.etcd_cluster import ClusterSpec, EtcdCluster
from etcd_common.etcd.types import Member
from etcd_operator.actions import (
    Action,
    ClearLeavingMark,
    CreateMemberPod,
    DeletePod,
    DeletePVC,
    RemoveMember,
    Wait,
)
from etcd_operator.manifests import (
    member_peer_url,
    pod_policy_hash,
)
from etcd_operator.observed import (
    STOP_MARGIN_SECONDS,
    ObservedCluster,
    ObservedPod,
    format_timestamp,
    seconds_since,
    stuck_terminating_seconds,
    what_holds,
)
from etcd_operator.planning.findings import CONDITION_MEMBER_POD_MISSING, pod_missing_since
from etcd_operator.tls.transition import (
    restart_bridge,
)

if TYPE_CHECKING:
    from etcd_operator.planning.context import Context


def pod_never_ran_under_old_spec(context: Context) -> Action | None:
    """A pod where etcd never ran (its image never pulled, or no node fits it) and that the spec
    has changed for since -> DeletePod: nothing to lose, it is recreated from the fixed spec."""
    return _pod_that_never_ran_under_an_old_spec(context.observed, context.spec)


def restart_members_without_pods(context: Context) -> Action | None:
    """A member etcd lists whose pod is missing: never started (an interrupted add) ->
    CreateMemberPod(state existing), so no ghost member is left (the CoreOS bug); started, on a
    volume that exists -> CreateMemberPod on it, with only itself in --initial-cluster (etcd then
    starts only on the data it finds). Otherwise its data is gone: it is dead (`removal.dead_members`)."""
    return context.without_pods.action


def terminal_pod_on_volume(context: Context) -> Action | None:
    """A Failed/Succeeded member pod with a volume -> DeletePod; it is recreated on the volume."""
    return _terminal_pod_on_volume(context.observed, context.spec, context.terminal)


def leftovers(context: Context) -> Action | None:
    """Pods and PVCs of no member (removed members') -> DeletePod / DeletePVC; pods younger than
    ORPHAN_POD_GRACE_SECONDS are spared (a lagging member's list may not show a member just added)."""
    return _leftovers(context.observed)


def stale_leaving_marks(context: Context) -> Action | None:
    """A member's PVC marked leaving (StopMember) while its pod runs and is not being deleted ->
    ClearLeavingMark: the stop never happened or the scale-down was reverted. A member that is to
    go still is stopped again later (marked again), after this pass."""
    observed = context.observed
    listed = {m.member_name for m in observed.members or ()}
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        volume = observed.volume(pod.member_name)
        if volume is not None and volume.leaving and not volume.deleting and pod.member_name in listed:
            return ClearLeavingMark(volume.name, pod.member_name)
    return None


def pods_terminating(context: Context) -> Action | None:
    """A member pod still terminating -> Wait (saying, for one past its grace period, what holds it
    and when its member counts as dead)."""
    return _terminating(context.observed, context.without_pods.terminating, context.stuck_bound)


def restarting_in_place(context: Context) -> Action | None:
    """A member restarted in place that the kubelet has not restarted yet (its restart count has not
    grown; at most RESTART_WAIT_SECONDS) -> Wait: its pod shows the new image, its old etcd may answer."""
    return _restarting(context.observed)


def retry_pod_creates(context: Context) -> Action | None:
    """A never-started learner whose pod create failed before (MemberPodMissing is True) ->
    CreateMemberPod again; without a pod for longer than the unhealthy-member timeout ->
    RemoveMember(replace), quoting the create's error. Runs after the dead and stuck members, so a
    failing create never blocks replacing them."""
    return _pods_not_created(context.observed, context.without_pods.unstarted,
                             context.policy.unhealthy_member_timeout_seconds)


def find_members_without_pods(observed: ObservedCluster, spec: ClusterSpec, stuck_bound: float) -> MembersWithoutPods:
    """Members etcd lists whose pod is missing or being deleted: the first pod to create, if any;
    else the members that are dead, the pods still terminating, the learners whose create failed."""
    found = _members_without_pods(observed, spec, observed.members or (), stuck_bound)
    if isinstance(found, MembersWithoutPods):
        return found
    return MembersWithoutPods((), (), (), (), action=found)


ORPHAN_POD_GRACE_SECONDS = 10.0


# Without an unhealthy-member timeout, how long a deleted member pod on a volume may stay past its
# grace period (and STOP_MARGIN_SECONDS) before its member counts as dead.
STUCK_TERMINATING_SECONDS = 300.0


# The longest wait for the kubelet to restart a member whose image was changed in place.
RESTART_WAIT_SECONDS = 60.0


def _pod_that_never_ran_under_an_old_spec(observed: ObservedCluster, spec: ClusterSpec) -> Action | None:
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if not pod.never_ran:
            continue
        if pod.unschedulable and (pod.image != spec.image or pod.pod_policy_hash not in (None, pod_policy_hash(spec))):
            return DeletePod(
                pod.name,
                f"no node fits it ({pod.unschedulable_message}) and the spec changed since it was "
                "created; it is recreated with the spec as it is now",
                pod.uid,
            )
        if pod.image_pull_failed and pod.image != spec.image:
            return DeletePod(
                pod.name,
                f"its image {pod.image} cannot be pulled ({pod.waiting_reason}) and the spec now "
                f"asks for {spec.image}; it is recreated with that",
                pod.uid,
            )
    return None


@dataclass(frozen=True)
class MembersWithoutPods:
    """Members etcd lists whose pod is missing or being deleted: the first pod to create (`action`),
    else the members that are dead (their data gone) and the pods still terminating (waited for)."""

    dead: tuple[Member, ...]
    terminating: tuple[str, ...]
    # Never-started learners without a pod, already seen so: their create waits for the dead and
    # stuck members to be handled first (`retry_pod_creates`).
    unstarted: tuple[Member, ...] = ()
    # Dead because their pod stays terminating past the bound (a subset of `dead`, by name).
    stuck: tuple[str, ...] = ()
    # A pod to create first: an interrupted add, or a member restarting on its volume.
    action: Action | None = None


def _members_without_pods(
    observed: ObservedCluster, spec: ClusterSpec, members: tuple[Member, ...], stuck_bound: float
) -> Action | MembersWithoutPods:
    cluster = observed.cluster
    dead: list[Member] = []
    terminating: list[str] = []
    unstarted: list[Member] = []
    stuck: list[str] = []
    for member in sorted(members, key=lambda m: m.member_name):
        pod = observed.pod(member.member_name)
        on_volume = spec.uses_persistent_volumes and observed.volume(member.member_name) is not None
        if pod is not None:
            if not pod.deleting:
                continue
            fate = _deleting_pod_fate(observed, member, pod, on_volume, stuck_bound)
            if fate == "terminating":
                terminating.append(pod.name)
                continue
            dead.append(member)
            if fate == "stuck":
                stuck.append(member.member_name)
            continue
        if not member.started:
            if member_peer_url(cluster, member.member_name) in member.peer_urls:
                if member.is_learner and pod_missing_since(observed) is not None:
                    # Its create failed before: the dead and stuck members first (`retry_pod_creates`). Not a voter: without its
                    # pod a quorum may be lost that only its start restores.
                    unstarted.append(member)
                    continue
                return CreateMemberPod(
                    member.member_name,
                    observed.initial_cluster(),
                    "the member was added but its pod was never created (interrupted add)",
                )
            dead.append(member)  # not a peer URL this operator gives out: cannot start it
            continue
        volume = observed.volume(member.member_name)
        if on_volume and volume is not None and not volume.leaving:
            return CreateMemberPod(
                member.member_name,
                _rejoin_on_data(cluster, member),
                "its pod is gone; restarting the member on its volume",
                tls_bridge=restart_bridge(cluster.require_spec(), member),
            )
        dead.append(member)  # its data is gone, or it was stopped to be removed (StopMember)
    return MembersWithoutPods(tuple(dead), tuple(terminating), tuple(unstarted), tuple(stuck))


def stuck_terminating_bound(limit: float | None) -> float:
    """Seconds past its grace period (and STOP_MARGIN_SECONDS) a deleted member pod may stay
    before its member counts as dead."""
    return limit if limit is not None else STUCK_TERMINATING_SECONDS


def _rejoin_on_data(cluster: EtcdCluster, member: Member) -> tuple[tuple[str, str], ...]:
    """`--initial-cluster` of a started member restarting on its volume: itself alone,
    so that etcd can start only on the data it finds there."""
    urls = member.peer_urls or (member_peer_url(cluster, member.member_name),)
    return tuple((member.member_name, url) for url in urls)


def _still_stopping(observed: ObservedCluster, pod: ObservedPod) -> bool:
    """A pod being deleted whose grace period (and a margin for the kubelet) has not run out."""
    since_deadline = seconds_since(observed, pod.deletion_deadline)
    return since_deadline is None or since_deadline < STOP_MARGIN_SECONDS


def _pods_not_created(observed: ObservedCluster, unstarted: tuple[Member, ...],
                              limit: float | None) -> Action | None:
    """Retry the create of a never-started learner's pod that failed before; remove the learner
    if its pod could not be created within `limit` (None: retry forever)."""
    if not unstarted:
        return None
    condition = observed.cluster.recorded.condition(CONDITION_MEMBER_POD_MISSING)
    missing_for = seconds_since(observed, pod_missing_since(observed))
    if limit is not None and missing_for is not None and missing_for >= limit:
        learner = unstarted[0]
        detail = f" ({condition.message})" if condition is not None and condition.message else ""
        return RemoveMember(
            learner.member_name, learner.id, "replace",
            f"learner's pod could not be created within {limit:.0f}s{detail}; a new member replaces it",
        )
    member = unstarted[0]
    return CreateMemberPod(member.member_name, observed.initial_cluster(),
                           "the member was added but its pod was never created (retrying a failed create)")


def _terminal_pod_on_volume(
    observed: ObservedCluster, spec: ClusterSpec, terminal: tuple[ObservedPod, ...]
) -> Action | None:
    for pod in terminal:
        if spec.uses_persistent_volumes and observed.volume(pod.member_name) is not None:
            return DeletePod(
                pod.name, f"its phase is {pod.phase}; it is recreated on its volume with the same member", pod.uid
            )
    return None


def _leftovers(observed: ObservedCluster) -> Action | None:
    """Pods and PVCs of removed members."""
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if pod.member_name not in observed.member_names:
            age = observed.pod_age_seconds(pod)
            if age is None or age >= ORPHAN_POD_GRACE_SECONDS:
                return DeletePod(pod.name, "it is not a member of the etcd cluster (left over from a removed member)",
                                 pod.uid)
    for pvc in sorted(observed.pvcs, key=lambda v: v.name):
        if (
            not pvc.deleting
            and pvc.member_name not in observed.member_names
            and observed.pod(pvc.member_name) is None
        ):
            return DeletePVC(pvc.name, "its member is no longer in the etcd cluster", pvc.uid)
    return None


def _terminating(observed: ObservedCluster, terminating: tuple[str, ...], bound: float) -> Action | None:
    if not terminating:
        return None
    details = []
    for name in terminating:
        pod = observed.pod(name)
        if pod is None or pod.deletion_deadline is None or stuck_terminating_seconds(pod, observed) is None:
            details.append(name)
            continue
        member = next((m for m in observed.members or () if m.member_name == pod.member_name), None)
        if member is not None and _serves(observed, member):
            details.append(f"{name} (its grace period ended at {format_timestamp(pod.deletion_deadline)}, "
                           f"{what_holds(pod)}; its member still serves, so its node is cut off rather than "
                           f"gone: it is not replaced while it serves)")
            continue
        # Times, not durations: the same wait reads the same pass after pass (rechecking.py backs off).
        replaced_at = pod.deletion_deadline + timedelta(seconds=STOP_MARGIN_SECONDS + bound)
        details.append(f"{name} (its grace period ended at {format_timestamp(pod.deletion_deadline)}, "
                       f"{what_holds(pod)}; its member is replaced at {format_timestamp(replaced_at)} if it stays)")
    return Wait(f"pod(s) {', '.join(details)} still terminating")


def _deleting_pod_fate(observed: ObservedCluster, member: Member, pod: ObservedPod, on_volume: bool,
                       stuck_bound: float) -> str:
    """A listed member whose pod is being deleted: "stuck" (dead: its pod stays past the bound),
    "terminating" (waited for) or "dead" (its emptyDir data goes with the pod)."""
    past = stuck_terminating_seconds(pod, observed)
    if member.started and _serves(observed, member) and not _still_stopping(observed, pod):
        # Past its grace period, yet it serves: the operator reaches it, or a healthy voter has an
        # active peer stream to it. Its node is cut off from the control plane (a NotReady node's
        # taint eviction marks its pods deleted), not shown gone: no proof that it is dead, so it
        # is waited for, never replaced while its peers see it serve (on a volume or not).
        return "terminating"
    if (on_volume or not member.started) and past is not None and past >= stuck_bound:
        # It would come back only when its pod goes, which nothing here can make happen.
        return "stuck"
    if on_volume or not member.started or _still_stopping(observed, pod):
        # Restarts on its volume / its add completes / it is shutting down gracefully: its
        # clients move to other members with their requests finished. Removing it meanwhile
        # would cut them ("raft: stopped"): it is removed once its pod is gone.
        return "terminating"
    # Past its grace period and serving no one (its node is gone, say): the pod never comes back,
    # and its emptyDir data goes with it. The member is dead.
    return "dead"


def _serves(observed: ObservedCluster, member: Member) -> bool:
    """Proof of life: the operator's health check passed, or a healthy voter has an active peer
    stream to it (the peers' view, asked while voters fail the operator's check)."""
    return observed.is_healthy(member) or observed.seen_connected(member)


def _restarting(observed: ObservedCluster) -> Action | None:
    """A member whose image the operator changed in place, not yet restarted by the kubelet: its
    pod shows the new image already, but the old etcd may still run and answer."""
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        waited = seconds_since(observed, pod.restarted_at)
        if pod.restart_pending and (waited is None or waited < RESTART_WAIT_SECONDS):
            return Wait(f"member {pod.member_name} restarts on its new image (restart count still {pod.restart_count})")
    return None
