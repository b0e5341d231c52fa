"""Before and without a member list: the services a cluster needs (the seed needs the peer service's
DNS), and what to do when no member answered `member list` (bootstrap, or everything down).

Without a member list: a bootstrapped cluster on PVCs gets the pod of each volume without one back
(its member restarts on its data); pods whose members answer but know no leader are a quorum loss
(etcd 3.5+ serves `member list` only with quorum), reported or, when asked for, recovered from the
survivor (recovery.py); pods that exist are waited for (never a second seed next to one that is
starting); nothing and never bootstrapped -> CreateSeedMember (state new, unique token), or, for a
restore with a claim staged per member, CreateRestoredMembers (etcd's disaster-recovery procedure);
nothing but bootstrapped -> ReportMembersLost: the emptyDir data is gone, and bootstrapping an
empty cluster would hide that."""
from __future__ import annotations

from typing import TYPE_CHECKING

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import ClusterSpec
from etcd_operator.actions import (
    Action,
    CreateMemberPod,
    CreateRestoredMembers,
    CreateSeedMember,
    CreateServices,
    DeletePod,
    PublishNotReadyAddresses,
    ReportMembersLost,
    ReportQuorumLoss,
    Wait,
)
from etcd_operator.manifests import (
    derived_name_suffix,
    member_name,
    member_peer_url,
    service_names,
)
from etcd_operator.observed import (
    ObservedCluster,
)
from etcd_operator.planning.findings import MEMBERS_LOST_REASON
from etcd_operator.planning.recovery import plan_recovery_start

if TYPE_CHECKING:
    from etcd_operator.planning.context import Context


def services_missing(context: Context) -> Action | None:
    """Missing services -> CreateServices (idempotent)."""
    observed = context.observed
    missing = tuple(name for name in service_names(observed.cluster.name) if name not in observed.services)
    return CreateServices(missing) if missing else None


def peer_service_hides_unready(context: Context) -> Action | None:
    """A peer service that hides members that are not ready (a CoreOS-made one) -> PublishNotReadyAddresses."""
    fix = context.observed.services_to_fix
    return PublishNotReadyAddresses(min(fix)) if fix else None


def without_member_list(context: Context) -> Action | None:
    """No member answered `member list` (see the module). None once etcd listed its members."""
    if context.observed.members is not None:
        return None
    return _plan_without_member_list(context.observed, context.spec)


def _plan_without_member_list(observed: ObservedCluster, spec: ClusterSpec) -> Action:
    cluster = observed.cluster
    bootstrapped = cluster.recorded.bootstrapped
    if bootstrapped and spec.uses_persistent_volumes:
        for pvc in sorted(observed.pvcs, key=lambda v: v.name):
            if not pvc.deleting and observed.pod(pvc.member_name) is None:
                name = pvc.member_name
                return CreateMemberPod(
                    name,
                    ((name, member_peer_url(cluster, name)),),
                    "no member answers and its pod is gone; restarting it on its volume",
                )
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if pod.terminal and (spec.uses_persistent_volumes or not bootstrapped):
            return DeletePod(pod.name, f"its phase is {pod.phase} and its containers will not run again", pod.uid)
    live = observed.live_pods
    leaderless = observed.leaderless_answers
    if live and bootstrapped and leaderless:
        report = ReportQuorumLoss(
            healthy_voters=0,
            voters=len(live),
            unhealthy=tuple(sorted(pod.member_name for pod in live)),
            detail=(
                f"member(s) {', '.join(leaderless)} answer but know no leader, so etcd serves no member "
                f"list (members counted from their pods)"
            ),
        )
        local = observed.local_members
        voters = tuple(m for m in local if not m.is_learner) if local is not None else None
        return plan_recovery_start(observed, spec, voters, report)
    if live:
        interrupted = None if bootstrapped else _interrupted_restored_bootstrap(observed, spec)
        if interrupted is not None:
            return interrupted
        problems = [f"{pod.name}: {pod.problem}" for pod in live if pod.problem]
        detail = f"; {'; '.join(problems)}" if problems else ""
        why = observed.member_list_error or "no member answered"
        return Wait(f"etcd not reachable yet ({why}); {len(live)} member pod(s) exist{detail}")
    if observed.pods:
        return Wait(f"{len(observed.pods)} pod(s) still terminating")
    if bootstrapped:
        return ReportMembersLost(
            f"{MEMBERS_LOST_REASON}: every member pod is gone and with it the data "
            f"(emptyDir); not bootstrapping an empty cluster in its place"
        )
    return _bootstrap(observed, spec)


def _bootstrap(observed: ObservedCluster, spec: ClusterSpec) -> Action:
    """Nothing exists and the cluster never bootstrapped: its seed, or a restored cluster's members."""
    cluster = observed.cluster
    leftover = next((pvc for pvc in sorted(observed.pvcs, key=lambda v: v.name) if not pvc.deleting), None)
    if leftover is not None and spec.uses_persistent_volumes:
        name = leftover.member_name  # a bootstrap interrupted after its volume was created
    else:
        name = member_name(cluster.name, observed.name_suffix)
        if any(pvc.member_name == name for pvc in observed.pvcs):
            return Wait(f"generated member name {name} is taken; retrying with another")
    together = _members_restored_together(spec)
    if together > 1:
        names = [name, *(member_name(cluster.name, derived_name_suffix(observed.name_suffix, index))
                         for index in range(1, together))]
        if len(set(names)) < together or any(pvc.member_name in names[1:] for pvc in observed.pvcs):
            return Wait(f"generated member names {', '.join(names)} collide; retrying with others")
        initial = tuple((member, member_peer_url(cluster, member)) for member in names)
        return CreateRestoredMembers(initial, tuple(names))
    return CreateSeedMember(name, member_peer_url(cluster, name))


def _members_restored_together(spec: ClusterSpec) -> int:
    """How many members a restored cluster bootstraps with at once: one per staged claim
    (spec.restore.stagedClaims), at most spec.size; 1 (the seed alone) without them."""
    claims = spec.restore.staged_claims if spec.restore is not None else ()
    return min(len(claims), spec.size) if len(claims) > 1 else 1


def _interrupted_restored_bootstrap(observed: ObservedCluster, spec: ClusterSpec) -> Action | None:
    """A restored cluster bootstrapping all at once whose pods were not all created (the operator
    stopped between them): the missing ones, with the same --initial-cluster, so each restores
    its own staged copy. Without them the pods created may be too few for a quorum and wait forever."""
    if _members_restored_together(spec) < 2:
        return None
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        names = list(dict.fromkeys(name for name, _ in pod.initial_cluster))
        if pod.initial_cluster_state != c.INITIAL_CLUSTER_STATE_NEW or len(names) < 2:
            continue
        missing = tuple(name for name in names if observed.pod(name) is None)
        return CreateRestoredMembers(pod.initial_cluster, missing) if missing else None
    return None
