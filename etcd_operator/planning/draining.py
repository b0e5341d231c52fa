"""Draining: a member leaves the client service before it is taken away, and serves again after.

Before RemoveMember (scale, upgrade), StopMember or UpgradeMember takes a member away, before
Defragment blocks one, and before MoveLeader moves leadership off one (a leader drops the proposals
it receives while it hands over), its pod leaves the client service: SetServing(false) first, then
Wait until the client service's EndpointSlices no longer list it as ready (at most
DRAIN_TIMEOUT_SECONDS after the drain, recorded on the pod), and for a member that goes away until
DRAIN_SETTLE_SECONDS have passed since the drain (proxies and address caches), then the action.
Before that, the other healthy voters serve: one drained for an earlier step gets its label back,
one that has just (re)started is waited for until the service lists it (SERVE_WAIT_SECONDS at
most). Clients of the service then never have a write caught on a member as it goes. A learner's
pod starts without the label (etcd refuses a learner's clients, yet its health check passes) and
gets it once its member is a healthy voter, before any other step but one that takes that member
away. Dead and stuck members (purpose replace) are not drained: they serve no client already, and
waiting must not block replacing them."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from etcd_operator.actions import (
    Action,
    Defragment,
    MoveLeader,
    NoOp,
    RemoveMember,
    SetServing,
    StopMember,
    UpdateClientSelector,
    UpgradeMember,
    Wait,
)
from etcd_operator.manifests import (
    client_service_name,
)
from etcd_operator.observed import (
    ObservedCluster,
    ObservedPod,
    format_timestamp,
    seconds_since,
)

Rule = Callable[['Context'], Action | None]
if TYPE_CHECKING:
    from etcd_operator.planning.context import Context


def client_selector_outdated(context: Context) -> Action | None:
    """A client service whose selector does not require the serving label (CoreOS-made, or older)
    -> SetServing(true) on each live member pod without it, then UpdateClientSelector (pods first,
    so no client loses its endpoints meanwhile)."""
    if context.observed.client_selector_outdated:
        return _migrate_client_selector(context.observed)
    return None


def drained(rule: Rule) -> Rule:
    """`rule`, its action preceded by the drain of the member it takes away (see the module)."""
    def drained_rule(context: Context) -> Action | None:
        action = rule(context)
        return drain_first(context.observed, action) if action is not None else None
    drained_rule.__name__ = drained_rule.__qualname__ = f"drained({rule.__name__})"
    return drained_rule


def serve_drained_again(context: Context) -> Action | None:
    """Converged: a member pod left drained (for a removal that no longer happens) serves again."""
    observed = context.observed
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if not pod.serving and pod.member_name in observed.member_names:
            return SetServing(pod.name, True, "it was drained for a removal that is no longer planned", pod.uid)
    return None


# The longest wait for a drained member's endpoint to leave the client service (the EndpointSlice
# controller takes milliseconds; a stuck one must not block the removal forever).
DRAIN_TIMEOUT_SECONDS = 30.0


# After its endpoint left the client service, a drained member still gets new connections for a
# moment: kube-proxy reprograms each node, DNS answers are cached (Go caches /etc/hosts for 5 s).
# A member that goes away (removed, stopped, restarted) goes only this long after it was drained;
# one drained to be defragmented or to hand leadership over stays up, and serves late comers.
DRAIN_SETTLE_SECONDS = 5.0


# Before another member is drained, one that restarted or was created this recently and should
# serve is waited for until the client service lists it (readiness probes run every few seconds).
SERVE_WAIT_SECONDS = 60.0


def _migrate_client_selector(observed: ObservedCluster) -> Action:
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if not pod.serving:
            return SetServing(pod.name, True, "the client service is about to select member pods by this label",
                              pod.uid)
    return UpdateClientSelector(client_service_name(observed.cluster.name))


def drain_first(observed: ObservedCluster, action: Action) -> Action:
    """A member about to be removed, stopped or restarted leaves the client service first (see
    Draining); one left drained while the cluster converged serves again."""
    if isinstance(action, NoOp):
        for pod in sorted(observed.live_pods, key=lambda p: p.name):
            if not pod.serving and pod.member_name in observed.member_names:
                return SetServing(pod.name, True, "it was drained for a removal that is no longer planned", pod.uid)
        return action
    promoted = _serve_promoted(observed, _member_taken_away(action))
    if promoted is not None:
        return promoted
    if isinstance(action, RemoveMember) and action.purpose != "replace":
        what = f"member {action.member_name} is removed next"
    elif isinstance(action, StopMember):
        what = f"member {action.member_name} is stopped and removed next"
    elif isinstance(action, UpgradeMember):
        what = f"member {action.member_name} is restarted next"
    elif isinstance(action, Defragment):
        if len(observed.voting_members) == 1:
            return action  # no other member to send its clients to
        what = f"member {action.member_name} is defragmented next (it serves nothing meanwhile)"
    elif isinstance(action, MoveLeader) and _healthy_member(observed, action.from_member_id):
        what = (f"leadership moves off {action.from_member_name} next (a leader drops the writes it receives "
                f"while it hands over: \"raft proposal dropped\")")
    else:
        return action
    target = observed.pod(action.from_member_name if isinstance(action, MoveLeader) else action.member_name)
    if target is None or target.deleting:
        return action
    others_first = _others_serve_first(observed, target)
    if others_first is not None:
        return others_first
    pod = target
    if pod.serving:
        at = format_timestamp(observed.observed_at) if observed.observed_at is not None else ""
        return SetServing(pod.name, False, f"{what}; clients must not be caught on it", pod.uid, at)
    drained_for = seconds_since(observed, pod.drained_at)
    if (observed.client_endpoints is not None and pod.name in observed.client_endpoints
            and (drained_for is None or drained_for < DRAIN_TIMEOUT_SECONDS)):
        return Wait(f"{pod.name} drained; waiting until service {client_service_name(observed.cluster.name)} "
                    f"no longer lists it before: {action.describe()}")
    goes_away = isinstance(action, (RemoveMember, StopMember, UpgradeMember))  # not a defragmented member
    if goes_away and drained_for is not None and drained_for < DRAIN_SETTLE_SECONDS:
        return Wait(f"{pod.name} drained {drained_for:.0f}s ago; new connections go elsewhere once proxies and "
                    f"clients' address caches let go of it ({DRAIN_SETTLE_SECONDS:.0f}s), then: {action.describe()}")
    return action


def _member_taken_away(action: Action) -> str | None:
    """The member a drained action takes out of service (see Draining), if any."""
    if isinstance(action, (RemoveMember, StopMember, UpgradeMember, Defragment)):
        return action.member_name
    if isinstance(action, MoveLeader):
        return action.from_member_name
    return None


def _serve_promoted(observed: ObservedCluster, taken_away: str | None) -> Action | None:
    """A pod created for a learner has no serving label (etcd refuses a learner's clients); once
    its member is a healthy voting member, and unless it is the one the next step takes away, it
    gets the label. A pod the operator drained (it has a drain time) is left to the drain rules."""
    healthy = {m.member_name for m in observed.healthy_voters}
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if (not pod.serving and pod.drained_at is None and pod.member_name in healthy
                and pod.member_name != taken_away):
            return SetServing(pod.name, True, f"member {pod.member_name} joined as a learner and votes now",
                              pod.uid)
    return None


def _others_serve_first(observed: ObservedCluster, target: ObservedPod) -> Action | None:
    """Before `target` leaves the client service, the other healthy voting members are in it: one
    drained for an earlier step serves again, and one that has just (re)started is waited for
    until the service lists it (bounded by SERVE_WAIT_SECONDS), so that the service never runs
    short of members while the operator takes one more away."""
    healthy = {m.member_name for m in observed.healthy_voters}
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if pod.name == target.name or pod.member_name not in healthy:
            continue
        if not pod.serving:
            return SetServing(pod.name, True, "it was drained for an earlier step", pod.uid)
        listed = pod.name in observed.client_endpoints if observed.client_endpoints is not None else pod.ready
        if listed:
            continue
        started = max((t for t in (pod.created_at, pod.restarted_at) if t is not None), default=None)
        waited = seconds_since(observed, started)
        if waited is not None and waited < SERVE_WAIT_SECONDS:
            return Wait(f"{pod.name} (re)started {waited:.0f}s ago and serves, but is not ready in service "
                        f"{client_service_name(observed.cluster.name)} yet (its readiness probe); "
                        f"{target.name} is drained once it is")
    return None


def _healthy_member(observed: ObservedCluster, member_id: int) -> bool:
    return any(m.id == member_id and observed.is_healthy(m) for m in observed.members or ())
