"""The decision: `plan_next_action(observed) -> Action`, a pure function of one pass's observation
(`observed.py`); the actions are in `actions.py`.

Rules, first match wins (the order is the safety argument: nothing touches the cluster before the
snapshot is verified, and a cluster carrying this restore's uid is never deleted):

 1. A finished restore (Completed, or Failed for this generation) -> RemoveStaging while any
    staging pod or claim it owns is there (not being deleted already), then ReleaseRestore while it
    holds its finalizer, else Done. A restore runs once.
    The EtcdRestore deleted before it finished: without its finalizer (set by ReplaceCluster
    before the delete) -> Done, it deleted nothing; with it, but the cluster to replace still
    there untouched -> ReleaseRestore; otherwise the rules below go on, so that the restored
    cluster is created and serves before the restore lets go (never no cluster at all).
 2. Spec unreadable, or a storage type other than S3 -> Fail (nothing touched).
 3. No awsSecret -> Fail: the seed pod could not fetch the snapshot (`preflight.py`).
    No verified snapshot recorded -> VerifySnapshot (download, sha256, etcd's integrity checks);
    its failure fails the restore and leaves any cluster untouched.
 4. The EtcdCluster exists and carries this restore's uid (we created it):
    - being deleted (by someone else) -> Wait;
    - Running with spec.size ready members serving at least the snapshot's revision -> Succeed;
    - otherwise -> Wait (the etcd operator is seeding and growing it).
 5. The EtcdCluster exists and is not ours -> the preflight (`preflight.py`: the seed's
    credentials, the spec, version and images of the cluster to create, room for the snapshot on
    the seed's volume: InsufficientSpace) fails the restore, or
    the staging step (below), then
    ReplaceCluster: its spec is recorded in status
    first (so a restart after the delete can still recreate it), then it is deleted (foreground,
    uid precondition). Destructive by design, as in CoreOS; it happens only after rule 3.
    Already being deleted, or another EtcdRestore still restoring it -> Wait (two restores of
    one cluster never replace each other's cluster in turn).
 6. The cluster this restore created (uid recorded) is gone or replaced by another object ->
    Fail: someone deleted it before the restore completed; restoring again would be a second
    restore nobody asked for.
 7. No EtcdCluster, but pods of that name still exist -> Wait (a new seed must not meet them).
 8. No EtcdCluster -> Fail when none was ever there to replace and the restore gives no
    `clusterSpec` (a restore names a cluster that exists, or says how to make a new one); else
    the preflight, the staging step, then CreateCluster from the recorded spec (the replaced
    cluster's), else the template; with `spec.restore` (the revision bump the version's tool can
    take, the staged claim and, for two or more members, all the staged claims: every member
    restores its own copy and they bootstrap at once) and this restore's uid.

The staging step (`staging.py`), between the preflight and any delete or create, for the cluster
to be created (`new_cluster_spec`): one staging claim per member of it (`staging_claims_for`), and
for each a staging pod of its name, placed like the members, that fetches the verified object
onto its claim exactly as the seed would and checks it with the target version's etcdutl. Any of
its pods or claims taken by another object -> Fail (StagingNameTaken, naming them); any being
deleted -> Wait; a claim gone that a pod staged on (or any, once status.staging.staged) ->
Fail(StagedClaimLost); a pod failed, or waiting for something waiting does not cure (an image not
pulled) -> Fail(StagingFailed) naming it, with its own words (for ENOSPC, with what the claim asked
for); a pod or claim missing -> Stage (the missing ones); pods still going -> Wait (Staging: how
many are staged, and where each other is, e.g. not scheduled and why); every claim there and
every pod Succeeded (or status says so: status.staging.staged) -> on to the delete or create.

Over all of them: a VerifySnapshot or Wait in a phase that has lasted past its time bound
(`status.py`: Verifying, Staging, Replacing, Restoring) -> Fail(RestoreTimedOut) with the reason the Wait
gave (why the restored cluster does not serve yet: the EtcdCluster's MemberStartBlocked condition,
else the seed pod's failing init container) and how to clean up or retry. Nothing is deleted or
changed by it: the failing cluster is left for inspection.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from etcd_common.api.constants import RESTORE_FINALIZER
from restore_operator import reasons
from restore_operator.actions import (
    Action,
    CreateCluster,
    Done,
    Fail,
    ReleaseRestore,
    RemoveStaging,
    ReplaceCluster,
    Stage,
    Succeed,
    VerifySnapshot,
    Wait,
)
from restore_operator.observed import ObservedRestore, TargetCluster
from restore_operator.preflight import (
    NOTHING_TOUCHED,
    RestorePolicy,
    cluster_not_found,
    preflight,
    seed_credentials_problem,
)
from restore_operator.staging import no_space_hint, staging_claim_names
from restore_operator.status import (
    PHASE_COMPLETED,
    PHASE_FAILED,
    PHASE_REPLACING,
    PHASE_RESTORING,
    PHASE_STAGING,
    PHASE_VERIFYING,
    phase_timeout_seconds,
)

DEFAULT_CLUSTER_SIZE = 3
MAX_CLUSTER_SIZE = 7  # spec.size's maximum (crds/etcdclusters.yaml)



DEFAULT_POLICY = RestorePolicy()


def plan_next_action(observed: ObservedRestore, policy: RestorePolicy = DEFAULT_POLICY) -> Action:
    return _bounded(observed, _plan(observed, policy))


def _plan(observed: ObservedRestore, policy: RestorePolicy) -> Action:
    restore = observed.restore
    recorded = observed.recorded
    if recorded.phase == PHASE_COMPLETED or (
            recorded.phase == PHASE_FAILED and recorded.observed_generation == restore.generation):
        return _finished(observed)
    if restore.deleting:
        deleted = _deleted_midway(observed)
        if deleted is not None:
            return deleted
    if restore.spec is None:
        return Fail(reasons.INVALID_SPEC, restore.spec_error or "spec is invalid")
    no_credentials = seed_credentials_problem(restore)
    if no_credentials is not None:
        return no_credentials
    if recorded.snapshot is None:
        return VerifySnapshot()
    cluster = observed.cluster
    if cluster is not None and observed.cluster_is_ours():
        if cluster.deleting:
            return Wait("the restored EtcdCluster is being deleted", PHASE_RESTORING)
        if not observed.cluster_serves_all_members():
            return _not_serving_yet(observed, cluster)
        served = observed.served_revision
        if served is None or served < recorded.snapshot.revision:
            detail = observed.served_revision_error or f"serves revision {served}"
            return Wait(f"the restored cluster is Running but does not serve the snapshot's revision "
                        f"{recorded.snapshot.revision} yet ({detail})", PHASE_RESTORING)
        return Succeed(served)
    return _plan_replacement(observed, policy)


def _not_serving_yet(observed: ObservedRestore, cluster: TargetCluster) -> Wait:
    """Rule 4's Wait while the restored cluster is not up: why, in the etcd operator's words (its
    MemberStartBlocked condition), else the seed pod's failing init container."""
    summary = (f"waiting for the restored cluster: phase {cluster.phase or '(none)'}, "
               f"{cluster.ready}/{cluster.size} members ready")
    if cluster.start_blocked:
        return Wait(f"{summary}; {cluster.start_blocked}", PHASE_RESTORING,
                    reason=cluster.start_blocked_reason or reasons.MEMBER_START_BLOCKED)
    if observed.seed_problem:
        return Wait(f"{summary}; {observed.seed_problem}", PHASE_RESTORING, reason=reasons.SEED_FAILING)
    return Wait(summary, PHASE_RESTORING)


def _bounded(observed: ObservedRestore, action: Action) -> Action:
    """`action`, or Fail(RestoreTimedOut) when it would go on waiting in a phase past its bound."""
    if isinstance(action, VerifySnapshot):
        phase, last_seen = PHASE_VERIFYING, observed.recorded.message or "the snapshot is not verified yet"
    elif isinstance(action, Stage):
        phase, last_seen = PHASE_STAGING, observed.recorded.message or "the staging pods are not there"
    elif isinstance(action, Wait):
        phase, last_seen = action.phase_name, action.message
    else:
        return action
    snapshot = observed.recorded.snapshot
    limit = phase_timeout_seconds(phase, snapshot.size if snapshot is not None else 0)
    seconds = observed.phase_seconds()
    if observed.recorded.phase != phase or limit is None or seconds is None or seconds < limit:
        return action
    scaled = f", {snapshot.size} bytes of snapshot included" if phase == PHASE_RESTORING and snapshot else ""
    return Fail(reasons.RESTORE_TIMED_OUT,
                f"{phase} for {seconds:.0f} s, past its bound of {limit:.0f} s{scaled}; last seen: {last_seen}. "
                f"{_after_timeout(observed, phase)}")


def _after_timeout(observed: ObservedRestore, phase: str) -> str:
    """What a timed-out restore left, and how to clean up or retry."""
    assert observed.restore.spec is not None
    name = observed.restore.spec.etcd_cluster_name
    if phase == PHASE_VERIFYING:
        return "Nothing was touched; fix the cause, then delete and apply this EtcdRestore again."
    if phase == PHASE_STAGING and observed.recorded.cluster_spec is None:
        return ("Nothing was deleted; the staging pods and claims are removed; fix the cause (see the staging "
                "pods' status), then delete and apply this EtcdRestore again.")
    kept = (" (the replaced cluster's spec is in this restore's status.clusterSpec: put it in spec.clusterSpec)"
            if observed.recorded.cluster_spec else "")
    if phase == PHASE_STAGING:
        return (f"The replaced EtcdCluster {name} was deleted already; the staging pods and claims are removed; "
                f"to retry, fix the cause (see the staging pods' status), then delete and apply this EtcdRestore "
                f"again{kept}.")
    if phase == PHASE_REPLACING:
        return (f"Nothing more is deleted; see `kubectl describe etcdcluster {name}` and its pods; to retry, "
                f"fix the cause, then delete and apply this EtcdRestore again{kept}.")
    return (f"The EtcdCluster {name} is left as it is for inspection (`kubectl describe etcdcluster {name}`, "
            f"the seed pod's logs); to retry, delete the EtcdCluster {name} and this EtcdRestore, fix the cause, "
            f"and apply the EtcdRestore again{kept}.")


def _plan_replacement(observed: ObservedRestore, policy: RestorePolicy) -> Action:
    """Rules 5-8: the snapshot is verified and no cluster of ours exists (yet)."""
    restore, recorded, cluster = observed.restore, observed.recorded, observed.cluster
    assert restore.spec is not None
    created = recorded.restored_cluster_uid
    if created and (cluster is None or cluster.uid != created):
        return Fail(reasons.CLUSTER_DELETED,
                    f"the EtcdCluster this restore created (uid {created}) was deleted before the restore "
                    "completed; not restoring again (create a new EtcdRestore to restore once more)")
    if cluster is not None:
        if cluster.deleting:
            return Wait("the existing EtcdCluster is being deleted", PHASE_REPLACING)
        if observed.other_restore_in_progress:
            return Wait(f"EtcdRestore {observed.other_restore_in_progress} is restoring this cluster; "
                        "waiting for it to finish before replacing it", PHASE_REPLACING)
        spec = recorded.cluster_spec or cluster.spec
        checked = preflight(restore, new_cluster_spec(observed), policy, recorded.snapshot)
        if isinstance(checked, Fail):
            return checked
        return _staging_step(observed, new_cluster_spec(observed)) or ReplaceCluster(cluster.uid, spec)
    if recorded.cluster_spec is None and restore.spec.cluster_spec is None:
        return cluster_not_found(restore)
    if observed.cluster_pods:
        return Wait(f"{observed.cluster_pods} pod(s) of the deleted cluster still exist", PHASE_REPLACING)
    new_spec = new_cluster_spec(observed)
    checked = preflight(restore, new_spec, policy, recorded.snapshot)
    if isinstance(checked, Fail):
        return checked
    claims = staging_claims_for(restore.name, new_spec)
    return _staging_step(observed, new_spec) or CreateCluster(
        new_spec, bump_revision=checked.bump_revision, warning=checked.warning,
        staged_claim=claims[0], staged_claims=claims if len(claims) >= 2 else ())


def _staging_step(observed: ObservedRestore, spec: dict[str, Any]) -> Action | None:
    """The staging step (module docstring) for a restored cluster of spec `spec`: None once the
    snapshot is staged on all its claims, else what to do."""
    recorded = observed.recorded
    expected = staging_claims_for(observed.restore.name, spec)
    claims = {name: observed.staging_claims.get(name) for name in expected}
    pods = {name: observed.staging_pods.get(name) for name in expected}  # each claim's pod, of its name
    # Staged for this generation: a failed restore retried after a spec edit (its staging objects
    # removed when it failed) stages again.
    staged = recorded.staged and recorded.observed_generation == observed.restore.generation
    consequence = ("the replaced cluster was deleted already (its spec is in status.clusterSpec)"
                   if recorded.cluster_spec is not None and observed.cluster is None else NOTHING_TOUCHED)
    taken = [*(f"Pod {name}" for name, pod in pods.items() if pod is not None and not pod.owned),
             *(f"PersistentVolumeClaim {name}" for name, claim in claims.items()
               if claim is not None and not claim.owned)]
    if taken:
        verbs = "exists and is" if len(taken) == 1 else "exist and are"
        return Fail(reasons.STAGING_NAME_TAKEN,
                    f"{' and '.join(taken)} {verbs} not this restore's: it cannot stage the snapshot there; "
                    f"{consequence}; delete or rename {'it' if len(taken) == 1 else 'them'}, then apply this "
                    "EtcdRestore again")
    deleting = [name for name in expected if any(found is not None and found.deleting
                                                 for found in (pods[name], claims[name]))]
    if deleting:
        return Wait(f"the staging objects {', '.join(deleting)} are being deleted", PHASE_STAGING)
    missing = [name for name, claim in claims.items() if claim is None]
    done = [name for name, pod in pods.items() if pod is not None and pod.succeeded]
    if not missing and (staged or len(done) == len(expected)):
        return None
    # A claim a pod staged on (or all, once status says so) gone: recreated, it would be empty.
    lost = [name for name in missing if staged or name in done]
    if lost:
        return Fail(reasons.STAGED_CLAIM_LOST,
                    f"the claim(s) {', '.join(lost)} the snapshot was staged on were deleted before the restore "
                    f"used them; {consequence}; apply a new EtcdRestore")
    failing = [(name, pod) for name, pod in pods.items() if pod is not None and pod.problem]
    if failing:
        name, pod = failing[0]
        facts = recorded.snapshot
        hint = no_space_hint(pod.problem, None if facts is None else facts.largest_size)
        return Fail(reasons.STAGING_FAILED,
                    f"the staging pod {name} could not fetch and check the snapshot as the seed would: {pod.problem}; "
                    f"{f'{hint}; ' if hint else ''}{consequence}; see `kubectl describe pod {name}` (removed shortly)")
    if missing or any(pod is None for pod in pods.values()):
        return Stage(spec, claims=expected)
    going = "; ".join(f"{name}: {pod.progress}" for name, pod in pods.items() if pod is not None and not pod.succeeded)
    return Wait(f"staging the verified snapshot on claim(s) {', '.join(expected)}, a pod for each: "
                f"{len(done)} of {len(expected)} staged; {going}", PHASE_STAGING)


def staging_claims_for(restore_name: str, spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The staging claims of a restored cluster of spec `spec` (as `without_restore` gives it): one
    per member (a size the preflight would refuse counts as one)."""
    size = spec.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_CLUSTER_SIZE:
        size = 1
    return staging_claim_names(restore_name, size)


def _finished(observed: ObservedRestore) -> Action:
    """A finished restore's staging objects go, all it owns (a claim a member still mounts stays
    Terminating until the member's pod goes); then its finalizer."""
    pods = tuple(sorted(name for name, pod in observed.staging_pods.items() if pod.owned and not pod.deleting))
    claims = tuple(sorted(name for name, claim in observed.staging_claims.items()
                          if claim.owned and not claim.deleting))
    if pods or claims:
        return RemoveStaging(pods=pods, claims=claims)
    if RESTORE_FINALIZER in observed.restore.finalizers:
        return ReleaseRestore(f"the restore {observed.recorded.phase.lower()}")
    return Done()


def _deleted_midway(observed: ObservedRestore) -> Action | None:
    """The EtcdRestore is being deleted before it finished. Without its finalizer it deleted
    nothing: Done (its staging objects go with it, their owner). With it, the cluster it replaces
    was (or is being) deleted: the restore goes on to create the restored cluster and see it serve
    (None: plan as usual), and only then lets go; but if that cluster still stands untouched (the
    operator stopped between setting the finalizer and the delete), it lets go at once."""
    restore, cluster = observed.restore, observed.cluster
    if RESTORE_FINALIZER not in restore.finalizers:
        return Done()
    if cluster is not None and not observed.cluster_is_ours() and not cluster.deleting:
        return ReleaseRestore("it was deleted before it deleted the EtcdCluster it would replace, which serves on")
    return None


def new_cluster_spec(observed: ObservedRestore) -> dict[str, Any]:
    """The spec to create (and to stage for): the replaced cluster's (as recorded, else the
    existing cluster to be replaced), else the template, else the defaults (without any earlier
    `restore`, which the executor sets)."""
    spec = observed.restore.spec
    existing = observed.cluster.spec if observed.cluster is not None and not observed.cluster_is_ours() else None
    return without_restore(observed.recorded.cluster_spec or existing
                           or (spec.cluster_spec if spec is not None else None) or {})


def expected_staging_claims(observed: ObservedRestore) -> tuple[str, ...]:
    """The staging claims the planner expects for `observed` (what `observing.py` looks for by name)."""
    return staging_claims_for(observed.restore.name, new_cluster_spec(observed))


def without_restore(spec: Mapping[str, Any]) -> dict[str, Any]:
    """`spec` without an earlier `restore`, with the default size when it names none."""
    result = {key: value for key, value in spec.items() if key != "restore"}
    result.setdefault("size", DEFAULT_CLUSTER_SIZE)
    return result
