"""The decision: `plan_next_action(observed, policy) -> Action`, a pure function of one pass's
observation and the operator's settings (`PlanningPolicy`). The supervisor executes the action
and observes again; nothing is remembered between passes, so the operator may die at any instant
and the next pass finishes the job.

etcd has no "desired membership"; the goal is spec.size voting members, all healthy, all running
the spec's image and pod policy. Rules, first match wins (the order is the safety argument):

 1. spec.paused -> Pause.
 2. Spec problems the schema cannot catch -> RejectSpec: unsupported version, reserved labels,
    members running an etcd we neither run nor upgrade (a CoreOS cluster on 3.2/3.3: adoption.py),
    ... (spec.py); a version change etcd cannot take (versions.py: a minor-version downgrade, a
    skipped minor, 3.5 -> 3.6 from a 3.5 patch older than etcd's guide allows); a TLS mode
    change on a running cluster other than a move to peer and client TLS (tls_transition.py).
    Fixing the spec recovers: nothing was changed meanwhile.
 2b. A Service name it needs is someone else's (a Service it does not own, or an older
    EtcdCluster `x` next to this `x-client`) -> RefuseNames (ownership.py): nothing created.
 2c. spec.TLS switched between static and issued while member pods run with the other's
    secrets -> RejectSpec (the two CAs do not trust each other).
    spec.TLS.issued (certificates.py): a Secret it writes is someone else's -> RefuseNames; one
    missing, wrong (key names, not signed by the cluster CA, lacking a name or a member's host),
    expired or within renewBefore of its end -> IssueCertificates (the CA first; a new CA and all
    leaves at once); one whose only fault is its CA file -> PublishCATrust. Before rule 3: the
    seed pod mounts them. Then a CA rotation that is due -> StartCARotation (ca_rotation.py);
    member pods trusting only the old CA are then outdated (rule 16).
 3. Missing services -> CreateServices (idempotent; the seed needs the peer service's DNS).
    A peer service that hides members that are not ready (a CoreOS-made one) ->
    PublishNotReadyAddresses (adoption.py). A client service whose selector does not require the
    serving label (CoreOS-made, or older) -> SetServing(true) on each live member pod without it,
    then UpdateClientSelector (pods first, so no client loses its endpoints meanwhile).
 4. A pod where etcd never ran (its image never pulled, or no node fits it) and that the spec
    has changed for since (its image; for one no node fits, also spec.pod: a toleration, a
    nodeSelector) -> DeletePod (nothing to lose; it is recreated from the fixed spec).
 4b. A quorum-loss recovery recorded in status.recovery (quorum_recovery.py) -> its next step,
    before anything below: while it is in progress (phase Seeding) the observation asks only its
    seed, so the survivor (which may still answer) is never taken for the cluster. Drain the
    survivor, CreateRecoverySeed (snapshot of the survivor, or source Backup: the backup's object,
    restored as a one-member cluster with a new token), Wait until the seed serves (itself its
    only member, at least the survivor's or the backup's revision), then delete the old pods and
    PVCs and FinishQuorumRecovery; past RECOVERY_TIMEOUT_SECONDS -> FailQuorumRecovery, then the
    seed's pod and PVC go and the survivor serves again. Nothing of the old cluster is deleted before the seed serves.
 5. No member answered `member list` (bootstrap, or everything down):
    - bootstrapped cluster on PVCs: recreate the pod of each volume without one (the members
      restart on their data);
    - pods exist whose members answer but know no leader -> ReportQuorumLoss (etcd 3.5+ serves
      `member list` only with quorum, so this is how a quorum loss looks from here); or, when
      asked for (spec.recovery.quorumLoss: FromSurvivor, or the one-off annotation) and the
      members whose data exists cannot make a quorum of the voters the survivor lists locally
      even if all came back, and every one of them answers: StartQuorumRecovery (rule 8b);
    - pods exist -> Wait for them (never a second seed next to one that is starting);
    - nothing exists and never bootstrapped -> CreateSeedMember (state new, unique token); a
      restore with a claim staged per member (spec.restore.stagedClaims) -> CreateRestoredMembers:
      that many members (at most spec.size) at once, each restoring its own copy with all of them
      in --initial-cluster (etcd's disaster-recovery procedure: no learner waits for a raft
      snapshot and etcd's publish retry); pods of such a bootstrap exist but not all of them (the
      operator stopped between creates) -> CreateRestoredMembers for the missing ones;
    - nothing exists but the cluster was bootstrapped -> ReportMembersLost: its emptyDir data
      is gone; bootstrapping an empty cluster would hide that. Restore from a backup.
 With a member list:
 6. A member etcd lists whose pod is missing:
    - never started (added, crash before its pod) -> CreateMemberPod(state existing): finishes
      the interrupted add instead of leaving a ghost member (the CoreOS bug); but a learner that
      a pass has already seen without a pod (the MemberPodMissing condition is True: its create
      failed, say refused by admission or Pod Security) waits for rules 7-11b (rule 6b), so a
      failing create never blocks replacing a dead or stuck voter;
    - started, spec on PVCs and its volume exists -> CreateMemberPod on that volume, with only
      itself in --initial-cluster (as rule 5 restarts one): etcd ignores the list when it finds
      its data, and without it (a data directory gone, a volume recreated empty) it finds no peer
      to join through and refuses to start, rather than rejoin under its old member ID with no
      raft state (a vote it gave forgotten); member_start.py reports that, rule 11b replaces it;
    - otherwise its data is gone: a dead member, removed in rule 9.
    A started member whose emptyDir pod is being deleted is dead too (its data goes with the
    pod); one on a volume waits for its pod to go (rule 11), then restarts on the volume. But a
    pod that stays after deletion (a finalizer nobody removes, a node that never confirms) would
    block every later change, its name taken: once past its grace period (its deletionTimestamp)
    by STOP_MARGIN_SECONDS plus the policy's unhealthy-member timeout (STUCK_TERMINATING_SECONDS
    without one), its member is dead too and rule 9 removes it while the rest keeps quorum; the
    replacement gets a new name (rule 14), so the stuck name blocks nothing. Its volume is not
    touched while the pod stays (its etcd, should it run again, is a removed member and stops);
    once the pod is gone, rule 10 deletes the volume as a removed member's. member_start.py
    reports the stuck pod (StuckTerminating, with its finalizers) from its grace period on.
 7. A terminal (Failed/Succeeded) member pod with a volume -> DeletePod, recreated by rule 6.
 8. The health call itself failed (timeout) -> Wait: health unknown, never reported as quorum
    loss. No quorum (healthy voting members not a majority) -> ReportQuorumLoss, unless the
    cluster showed it has one while the operator reaches too few voters (a linearizable member
    list, or on etcd 3.4 its peers' view: `ObservedCluster.operator_cut_off`) -> Wait. Nothing
    destructive happens past this point without quorum; rules 5-7 only create pods or delete dead
    ones. A voter partitioned from its peers while its pod is Ready is only reported (status.py).
 8b. (rules 5 and 8) Quorum lost for good and recovery asked for -> StartQuorumRecovery from the
    answering voter with the highest raft index (then revision): only when the voters whose data
    exists (emptyDir: a pod neither absent, terminal nor being deleted; PVC: its claim, or a
    pod) are fewer than a quorum, and every one of them answers `endpoint status` (one that does
    not may come back ahead: report and wait). The seed restores the newest succeeded EtcdBackup
    of the cluster instead when its revision is above the survivor's (source Backup); refused
    when the data does not fit the seed's volume. It only records status.recovery; rule 4b acts.
 9. Dead member -> RemoveMember(purpose replace) if the rest keeps quorum; the replacement is
    added by rule 14. A dead member the others still report as leader: MoveLeader first if it
    answers, else removed at once (see "Removing the leader" below). A terminal member pod
    without a volume -> DeletePod (then it is dead).
10. Pods and PVCs of no member -> DeletePod / DeletePVC: leftovers of removed members. Pods
    younger than ORPHAN_POD_GRACE_SECONDS are spared: a member list read from a lagging member
    may not show a member added a moment ago.
11. A member pod still terminating -> Wait (its message says, for one past its grace period, what
    holds it and when its member counts as dead: rule 6).
11b. A learner that never answered within the bound (the policy's unhealthy-member timeout,
    --unhealthy-member-timeout-seconds), or a voting member unhealthy for longer -> RemoveMember(replace)
    while quorum allows (MoveLeader first, see "Removing the leader"); rule 14 adds its replacement.
 6b. A never-started learner whose pod a pass already failed to create (rule 6) ->
    CreateMemberPod again; without a pod for longer than the policy's
    unhealthy-member timeout -> RemoveMember(replace), quoting the create's error (rule 14 adds
    its replacement). etcd's member list has no add time and nothing may be remembered between
    passes, so "since when" is the lastTransitionTime of the status condition MemberPodMissing,
    True while a listed, never-started member has no pod (one clock for all such members; etcd
    allows one learner, so there is one).
12. Learners: remove one no longer needed (spec.size shrank); promote one that serves clients
    and caught up while every voting member is healthy (etcd's own in-sync check decides; a
    refused promote is retried); else Wait (etcd allows one learner; nothing else changes
    meanwhile).
13. Unhealthy voting member -> remove it if over spec.size and quorum allows; otherwise Wait for
    it (its pod restarts in place; membership changes wait for a fully healthy cluster).
14. Fewer voting members than spec.size -> AddMember (as learner), one at a time.
15. More -> remove one: unhealthy, then outdated, then non-leader, then newest. A healthy one,
    when the others keep a quorum while it is down, is stopped first (StopMember: its pod goes,
    etcd shuts down gracefully, a leader handing leadership over itself; then member remove);
    otherwise the leader is never removed while it leads: MoveLeader first.
16. Outdated members (image or pod policy, which includes the compaction and quota flags,
    differs from the spec; or a pod behind the step of a move to TLS, tls_transition.py: on a
    volume, UpgradeMember then carries the https peer URL `member update` sets), oldest first,
    leader last, while the others keep a quorum (3 or more voters): only the image differs ->
    UpgradeMember in place (the etcd container's image changes in the running pod: same member,
    address and data, emptyDir included); else on a PVC -> UpgradeMember (restart on the
    volume, same member). No MoveLeader before: a leader hands over itself as it stops. On
    emptyDir with a pod-policy change, or with 1 or 2 voters (whose restart would stop writes)
    -> AddMember(purpose upgrade) at the new spec, and rule 15 then removes the outdated one.
    Adding before removing keeps the fault tolerance.
 11c. A member restarted in place that the kubelet has not restarted yet (its restart count has
    not grown; at most RESTART_WAIT_SECONDS) -> Wait: its pod shows the new image, its old etcd may
    still answer.
17. Otherwise -> SetServing(true) on a member pod left drained (a removal that no longer
    happens), else the next step of a CA rotation (ca_rotation.py: ReissueFromNewCA, DropOldCA,
    or Wait while Secrets propagate), else NoOp (converged).

Draining (after rules 5-16 chose): before RemoveMember (scale, upgrade), StopMember or
UpgradeMember takes a member away, before Defragment blocks one, and before MoveLeader moves
leadership off one (a leader drops the proposals it receives while it hands over), its pod leaves
the client service: SetServing(false) first, then Wait until the client service's EndpointSlices
no longer list it as ready (at most DRAIN_TIMEOUT_SECONDS after the drain, recorded on the pod),
and for a member that goes away until DRAIN_SETTLE_SECONDS have passed since the drain (proxies
and address caches), then the action. Before that, the other healthy voters serve: one drained for
an earlier step gets its label back, one that has just (re)started is waited for until the service
lists it (SERVE_WAIT_SECONDS at most). Clients of the service then never have a write caught on a
member as it goes. A learner's pod starts without the label (etcd refuses a learner's clients, yet
its health check passes) and gets it once its member is a healthy voter, before any other step but
one that takes that member away. Dead and stuck members (purpose
replace) are not drained: they serve no client already, and waiting must not block replacing them.

Removing the leader (rules 9, 11b, 13, 15, 16): a voting member that leads is never removed while
it can hand leadership over: MoveLeader to a healthy voter (up to date first, then the oldest)
comes first, so clients see no election. A stuck leader (it still heads raft, so the others elect
no one else, but it fails the health check) that answers `endpoint status` can still serve
move-leader and is moved off too. One that answers nothing cannot hand over (etcd serves
move-leader on the leader only): it is removed as leader, while the rest keeps quorum, and etcd
elects a new leader when the removal applies; waiting for a handover that cannot happen would
block every later change.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import ClusterSpec, EtcdCluster
from etcd_common.api.versions import EtcdVersion
from etcd_common.etcd.types import Member
from etcd_operator import versions
from etcd_operator.actions import (
    Action,
    AddMember,
    CreateMemberPod,
    CreateRestoredMembers,
    CreateSeedMember,
    CreateServices,
    Defragment,
    DeletePod,
    DeletePVC,
    MoveLeader,
    NoOp,
    Pause,
    PromoteMember,
    PublishNotReadyAddresses,
    Purpose,
    RefuseNames,
    RejectSpec,
    RemoveMember,
    ReportMembersLost,
    ReportQuorumLoss,
    SetServing,
    StopMember,
    UpdateClientSelector,
    UpgradeMember,
    Wait,
)
from etcd_operator.adoption import unsupported_running_version_problem
from etcd_operator.ca_rotation import (
    DEFAULT_TRUST_PROPAGATION_SECONDS,
    plan_rotation_start,
    plan_rotation_steps,
    trust_outdated,
)
from etcd_operator.cert_manager import plan_cert_manager
from etcd_operator.certificates import plan_certificates
from etcd_operator.maintenance import near_quota, plan_alarms, plan_defragmentation
from etcd_operator.manifests import (
    client_service_name,
    derived_name_suffix,
    member_name,
    member_peer_url,
    pod_policy_hash,
    service_names,
)
from etcd_operator.observed import (
    STOP_MARGIN_SECONDS,
    TLS_MODE_PLAIN,
    ObservedCluster,
    ObservedPod,
    as_utc,
    format_timestamp,
    parse_timestamp,
    seconds_since,
    stuck_terminating_seconds,
    what_holds,
)
from etcd_operator.quorum_recovery import plan_recovery_start, plan_recovery_steps
from etcd_operator.tls_transition import (
    interrupted_peer_change,
    moves_to_tls,
    off_tls_problem,
    peer_url_change,
    restart_bridge,
    tls_outdated,
    without_tls,
)

ORPHAN_POD_GRACE_SECONDS = 10.0
# The longest wait for a drained member's endpoint to leave the client service (the EndpointSlice
# controller takes milliseconds; a stuck one must not block the removal forever).
DRAIN_TIMEOUT_SECONDS = 30.0
# After its endpoint left the client service, a drained member still gets new connections for a
# moment: kube-proxy reprograms each node, DNS answers are cached (Go caches /etc/hosts for 5 s).
# A member that goes away (removed, stopped, restarted) goes only this long after it was drained;
# one drained to be defragmented or to hand leadership over stays up, and serves late comers.
DRAIN_SETTLE_SECONDS = 5.0
# Without an unhealthy-member timeout, how long a deleted member pod on a volume may stay past its
# grace period (and STOP_MARGIN_SECONDS) before its member counts as dead (rule 6).
STUCK_TERMINATING_SECONDS = 300.0
# The longest wait for the kubelet to restart a member whose image was changed in place.
RESTART_WAIT_SECONDS = 60.0
# Before another member is drained, one that restarted or was created this recently and should
# serve is waited for until the client service lists it (readiness probes run every few seconds).
SERVE_WAIT_SECONDS = 60.0
# A learner whose pod is younger than this (creationTimestamp has whole seconds) and runs is
# expected to serve and catch up any moment: its wait is `imminent` (see `_just_started`).
LEARNER_START_SECONDS = 3.0
MEMBERS_LOST_REASON = "all members lost; restore from backup"
# True while a member etcd lists never started and has no pod (rule 6b times it by this condition).
CONDITION_MEMBER_POD_MISSING = "MemberPodMissing"


@dataclass(frozen=True)
class PlanningPolicy:
    """What the operator's settings ask of the planner (flags, not observations)."""

    # How long a member may stay unhealthy (a learner: not answer) before it is replaced; None: forever.
    unhealthy_member_timeout_seconds: float | None = None
    # spec.TLS.issued CA rotation: how long a changed Secret takes to reach every mounted volume
    # and every operator's client (ca_rotation.py).
    trust_propagation_seconds: float = DEFAULT_TRUST_PROPAGATION_SECONDS


def plan_next_action(observed: ObservedCluster, policy: PlanningPolicy = PlanningPolicy()) -> Action:
    """The one action this pass takes (`policy` defaults to waiting for unhealthy members forever)."""
    cluster = observed.cluster
    if cluster.paused:
        return Pause()
    if cluster.spec is None:
        return RejectSpec(cluster.spec_error or "spec is invalid")
    if observed.name_problem is not None:
        return RefuseNames(observed.name_problem.reason, observed.name_problem.message)
    problem = version_change_problem(observed) or tls_change_problem(observed)
    if problem:
        return RejectSpec(problem)
    certificates = plan_certificates(observed) or plan_cert_manager(observed) or plan_rotation_start(observed)
    if certificates is not None:
        return certificates
    missing = tuple(name for name in service_names(cluster.name) if name not in observed.services)
    if missing:
        return CreateServices(missing)
    if observed.services_to_fix:
        return PublishNotReadyAddresses(min(observed.services_to_fix))
    if observed.client_selector_outdated:
        return _migrate_client_selector(observed)
    stuck = _pod_that_never_ran_under_an_old_spec(observed, cluster.spec)
    if stuck is not None:
        return stuck
    recovering = plan_recovery_steps(observed, cluster.spec)
    if recovering is not None:
        return recovering
    if observed.members is None:
        return _plan_without_member_list(observed, cluster.spec)
    action = _drain_first(observed, _plan_with_member_list(observed, cluster.spec, observed.members, policy))
    if isinstance(action, NoOp):
        # Converged: the next step of a CA rotation (ca_rotation.py), if one is in progress.
        return plan_rotation_steps(observed, policy.trust_propagation_seconds) or action
    return action


# ---------------------------------------------------------------------------------------------
# Draining (rule 3's selector migration, rule 17's restore, and the drain before a removal)


def _migrate_client_selector(observed: ObservedCluster) -> Action:
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if not pod.serving:
            return SetServing(pod.name, True, "the client service is about to select member pods by this label",
                              pod.uid)
    return UpdateClientSelector(client_service_name(observed.cluster.name))


def _drain_first(observed: ObservedCluster, action: Action) -> Action:
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


# ---------------------------------------------------------------------------------------------
# Checks shared with status


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
    to or off TLS for peers and clients (tls_transition.py)."""
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


# ---------------------------------------------------------------------------------------------
# Rules 4-5


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


# ---------------------------------------------------------------------------------------------
# Rules 6-17


@dataclass(frozen=True)
class _MembersWithoutPods:
    """What rule 6 found when it had nothing to start: members that are dead (their data gone),
    and pods still terminating (rule 11 waits for them)."""

    dead: tuple[Member, ...]
    terminating: tuple[str, ...]
    # Never-started learners without a pod, already seen so: their create waits for rules 7-11b (6b).
    unstarted: tuple[Member, ...] = ()
    # Dead because their pod stays terminating past the bound (a subset of `dead`, by name).
    stuck: tuple[str, ...] = ()


def _plan_with_member_list(
    observed: ObservedCluster, spec: ClusterSpec, members: tuple[Member, ...], policy: PlanningPolicy
) -> Action:
    found = _rule_6_members_without_pods(observed, spec, members, _stuck_terminating_bound(policy))
    if not isinstance(found, _MembersWithoutPods):
        return found
    terminal = tuple(
        pod for pod in sorted(observed.live_pods, key=lambda p: p.name)
        if pod.terminal and pod.member_name in observed.member_names
    )
    return (
        _rule_7_terminal_pod_on_volume(observed, spec, terminal)
        or _rule_8_health_unknown(observed)
        or _rule_8_no_quorum(observed, spec, found.dead)
        or _rule_9_dead_members(observed, found.dead, terminal, found.stuck, _stuck_terminating_bound(policy))
        or _rule_10_leftovers(observed)
        or _rule_11_terminating(observed, found.terminating, _stuck_terminating_bound(policy))
        or _rule_11_restarting(observed)
        or _plan_membership(observed, spec, policy, found.unstarted)
    )


def _rule_6_members_without_pods(
    observed: ObservedCluster, spec: ClusterSpec, members: tuple[Member, ...], stuck_bound: float
) -> Action | _MembersWithoutPods:
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
            past = stuck_terminating_seconds(pod, observed)
            if (on_volume or not member.started) and past is not None and past >= stuck_bound:
                # It would come back only when its pod goes, which nothing here can make happen.
                dead.append(member)
                stuck.append(member.member_name)
                continue
            if on_volume or not member.started or _still_stopping(observed, pod):
                # Restarts on its volume / its add completes / it is shutting down gracefully:
                # its clients move to other members with their requests finished. Removing it
                # meanwhile would cut them ("raft: stopped"): it is removed once its pod is gone.
                terminating.append(pod.name)
                continue
            # Past its grace period (its node is gone, say): the pod never comes back, and its
            # emptyDir data goes with it. The member is dead.
            dead.append(member)
            continue
        if not member.started:
            if member_peer_url(cluster, member.member_name) in member.peer_urls:
                if member.is_learner and pod_missing_since(observed) is not None:
                    # Its create failed before: rules 7-9 first (6b). Not a voter: without its
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
    return _MembersWithoutPods(tuple(dead), tuple(terminating), tuple(unstarted), tuple(stuck))


def _stuck_terminating_bound(policy: PlanningPolicy) -> float:
    """Seconds past its grace period (and STOP_MARGIN_SECONDS) a deleted member pod may stay
    before its member counts as dead (rule 6)."""
    limit = policy.unhealthy_member_timeout_seconds
    return limit if limit is not None else STUCK_TERMINATING_SECONDS


def _rejoin_on_data(cluster: EtcdCluster, member: Member) -> tuple[tuple[str, str], ...]:
    """`--initial-cluster` of a started member restarting on its volume: itself alone (rule 6),
    so that etcd can start only on the data it finds there."""
    urls = member.peer_urls or (member_peer_url(cluster, member.member_name),)
    return tuple((member.member_name, url) for url in urls)


def _still_stopping(observed: ObservedCluster, pod: ObservedPod) -> bool:
    """A pod being deleted whose grace period (and a margin for the kubelet) has not run out."""
    since_deadline = seconds_since(observed, pod.deletion_deadline)
    return since_deadline is None or since_deadline < STOP_MARGIN_SECONDS


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


def _rule_6b_pods_not_created(observed: ObservedCluster, unstarted: tuple[Member, ...],
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


def _rule_7_terminal_pod_on_volume(
    observed: ObservedCluster, spec: ClusterSpec, terminal: tuple[ObservedPod, ...]
) -> Action | None:
    for pod in terminal:
        if spec.uses_persistent_volumes and observed.volume(pod.member_name) is not None:
            return DeletePod(
                pod.name, f"its phase is {pod.phase}; it is recreated on its volume with the same member", pod.uid
            )
    return None


def _rule_8_health_unknown(observed: ObservedCluster) -> Action | None:
    """A failed health call says nothing about the members: change nothing until one answers."""
    if observed.health_error is not None:
        return Wait(f"member health unknown (the health check failed: {observed.health_error}); "
                    f"changing nothing until it is known")
    return None


def _rule_8_no_quorum(observed: ObservedCluster, spec: ClusterSpec, dead: tuple[Member, ...]) -> Action | None:
    """Nothing destructive without quorum (but an opt-in recovery from the survivor, rule 8b)."""
    if observed.operator_cut_off:
        unreachable = ", ".join(_unhealthy_detail(observed, m) for m in observed.unhealthy_voters)
        return Wait(f"the operator cannot reach {unreachable}, but the cluster has quorum "
                    f"({observed.quorum_evidence}): nothing changes until they answer here")
    if not observed.has_quorum:
        return plan_recovery_start(observed, spec, observed.voting_members, _quorum_loss(observed, list(dead)))
    return None


def _rule_9_dead_members(
    observed: ObservedCluster, dead: tuple[Member, ...], terminal: tuple[ObservedPod, ...],
    stuck: tuple[str, ...] = (), stuck_bound: float = STUCK_TERMINATING_SECONDS,
) -> Action | None:
    """Dead members, then terminal pods without volumes."""
    for member in dead:
        if _removal_keeps_quorum(observed, member):
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


def _rule_10_leftovers(observed: ObservedCluster) -> Action | None:
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


def _rule_11_terminating(observed: ObservedCluster, terminating: tuple[str, ...], bound: float) -> Action | None:
    if not terminating:
        return None
    details = []
    for name in terminating:
        pod = observed.pod(name)
        if pod is None or pod.deletion_deadline is None or stuck_terminating_seconds(pod, observed) is None:
            details.append(name)
            continue
        # Times, not durations: the same wait reads the same pass after pass (rechecking.py backs off).
        replaced_at = pod.deletion_deadline + timedelta(seconds=STOP_MARGIN_SECONDS + bound)
        details.append(f"{name} (its grace period ended at {format_timestamp(pod.deletion_deadline)}, "
                       f"{what_holds(pod)}; its member is replaced at {format_timestamp(replaced_at)} if it stays)")
    return Wait(f"pod(s) {', '.join(details)} still terminating")


def _rule_11_restarting(observed: ObservedCluster) -> Action | None:
    """A member whose image the operator changed in place, not yet restarted by the kubelet: its
    pod shows the new image already, but the old etcd may still run and answer."""
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        waited = seconds_since(observed, pod.restarted_at)
        if pod.restart_pending and (waited is None or waited < RESTART_WAIT_SECONDS):
            return Wait(f"member {pod.member_name} restarts on its new image (restart count still {pod.restart_count})")
    return None


def _plan_membership(observed: ObservedCluster, spec: ClusterSpec, policy: PlanningPolicy,
                     unstarted: tuple[Member, ...]) -> Action:
    """Rules 12-17: quorum, no dead member, nothing terminating."""
    voters = observed.voting_members
    outdated = {m.member_name: reason for m in voters if (reason := outdated_reason(observed, m))}
    return (
        plan_alarms(observed, spec, outdated)  # 11c
        or _rule_11b_stuck_members(observed, outdated, policy.unhealthy_member_timeout_seconds)
        or _rule_6b_pods_not_created(observed, unstarted, policy.unhealthy_member_timeout_seconds)
        or _rule_12_learners(observed, spec, outdated)
        or _rule_13_unhealthy_voters(observed, spec, outdated)
        or _rules_14_15_size(observed, spec, outdated)
        or _rule_16_upgrade(observed, spec, outdated)
        or plan_defragmentation(observed, spec, outdated)  # 16b
        or NoOp(f"{len(voters)} healthy member(s) running etcd {spec.version}",
                near_quota=near_quota(observed, spec))  # 17
    )


def _rule_11b_stuck_members(observed: ObservedCluster, outdated: dict[str, str], limit: float | None) -> Action | None:
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
        if unhealthy_for is None or unhealthy_for < limit or not _removal_keeps_quorum(observed, member):
            continue
        reason = (f"unhealthy for {unhealthy_for:.0f}s (bound {limit:.0f}s): {_unhealthy_detail(observed, member)}; "
                  f"a new member replaces it")
        return _remove_or_move_leader(observed, member, "replace", reason, outdated)
    return None


def _unhealthy_seconds(observed: ObservedCluster, member: Member) -> float | None:
    """How long the member's pod has been unready (its readiness is etcd's own health)."""
    pod = observed.pod(member.member_name)
    if pod is None or pod.ready or observed.observed_at is None:
        return None
    return seconds_since(observed, pod.unready_since or pod.created_at)


def _rule_12_learners(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    if observed.learners:
        return _plan_learners(observed, spec, needed_voters=spec.size + (1 if outdated else 0))
    return None


def _rule_13_unhealthy_voters(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    unhealthy = observed.unhealthy_voters
    if not unhealthy:
        return None
    voters = observed.voting_members
    if len(voters) > spec.size:
        victim = _pick_removal(observed, unhealthy, outdated)
        if _removal_keeps_quorum(observed, victim):
            return _remove_or_move_leader(
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


def _rules_14_15_size(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    voters = observed.voting_members
    if len(voters) < spec.size:
        return _add_member(observed, spec, "scale", f"{len(voters)} of {spec.size} members")
    if len(voters) > spec.size:
        victim = _pick_removal(observed, voters, outdated)
        if victim.member_name in outdated:
            return _remove_or_move_leader(
                observed, victim, "upgrade", f"replaced by an up-to-date member ({outdated[victim.member_name]})", outdated
            )
        return _remove_or_move_leader(
            observed, victim, "scale", f"{len(voters)} members, spec.size is {spec.size}", outdated
        )
    return None


def _rule_16_upgrade(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
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
        key=lambda m: (_created(observed, m), m.member_name),
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


# ---------------------------------------------------------------------------------------------
# Helpers


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


def _removal_keeps_quorum(observed: ObservedCluster, member: Member) -> bool:
    """After removing `member`, do the remaining healthy voters still form a majority?"""
    if member.is_learner:
        return True
    voters_after = len(observed.voting_members) - 1
    healthy_after = len(observed.healthy_voters) - (1 if observed.is_healthy(member) else 0)
    return voters_after >= 1 and healthy_after >= voters_after // 2 + 1


def _pick_removal(
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
            -_created(observed, m).timestamp(),
            m.member_name,
        ),
    )


def _remove_or_move_leader(
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
            if not _removal_keeps_quorum(observed, victim):
                return Wait(f"removing {victim.member_name} now would lose quorum")
            return RemoveMember(
                victim.member_name, victim.id, purpose,
                f"{reason}; it leads but answers no client, so it cannot hand leadership over: it is removed "
                f"as leader and etcd elects a new one",
            )
        handover = _hand_over_leadership(observed, victim, outdated, f"{victim.member_name} is to be removed and must not lead")
        return handover or Wait(f"{victim.member_name} leads and no healthy member can take over yet")
    if not _removal_keeps_quorum(observed, victim):
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
    return min(candidates, key=lambda m: (m.member_name in outdated, _created(observed, m), m.member_name))


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


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _created(observed: ObservedCluster, member: Member) -> datetime:
    pod = observed.pod(member.member_name)
    created = pod.created_at if pod is not None else None
    if created is None:
        return _EPOCH
    return as_utc(created)
