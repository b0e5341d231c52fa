"""Quorum-loss recovery from the surviving member furthest ahead (pure planning; opt-in through
spec.recovery.quorumLoss: FromSurvivor, or once through the annotation
ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR). The planner calls `plan_recovery_start` where it
reports a quorum loss (`bootstrap.without_member_list`, `removal.no_quorum`) and takes the steps of
one in progress (`recovery_in_progress`) before anything that reads the member list.

When: quorum is lost, the members whose data still exists cannot make a quorum even if all came
back (on emptyDir a member's data is gone with its pod: absent, terminal or being deleted; on
PVCs with its claim; or a person named the member in the annotation), every member whose data
exists answers `endpoint status` (one that does not, say a pod pending on a dead node, might
come back ahead of the others: wait for it), and every lost member is known gone (`gone_proof`:
named in the annotation, its pod terminal, or its pod's Node deleted), never merely terminating
or on a NotReady or tainted node: a majority behind a partition may still be serving, and taint
eviction marks its pods deleted all the same. The survivor is the answering voter with the
highest raft index, then revision. Refused (RefuseQuorumRecovery, nothing changed): a new
annotation value on a cluster that has quorum (`request_under_quorum`, from removal.no_quorum),
or naming members that answer.

What from: the survivor, unless the newest succeeded EtcdBackup of the cluster (same namespace,
`etcdCluster.name` or an endpoint on its client service; recovery_inputs.py lists them only then)
of the survivor's incarnation (the etcd cluster ID and EtcdCluster UID the backup recorded) has a
higher revision: then the seed restores that backup (source Backup) with spec.restore's init
containers (fetch with the backup's secret, sha256 checked, restore, install) instead of taking a
snapshot of the survivor. A backup of another incarnation, or of none recorded, is never
compared: ahead of the survivor by revision, it refuses the recovery (a person decides). Refused
(reported) when the data (the survivor's dbSize, or the backup's object) does not fit the seed's
volume (etcd_common/seed/space.py), when the newer backup has no secret the seed could fetch it
with, and held (reported) while the EtcdBackups cannot be listed. Either way the seed restores
with `--bump-revision` (DEFAULT_BUMP_REVISION) and `--mark-compacted` where the tool has them, so
no revision the lost majority may have used is reused.

How: StartQuorumRecovery records the recovery in status.recovery (phase Seeding) before anything
changes; the survivor is drained; a seed member with a new name and a new cluster token takes a
snapshot from the survivor (client TLS: with the operator's client certificate, mounted in that
init container only) or restores the backup, and starts as a one-member cluster on it. While
the recovery is in progress, the seed alone is asked (observing.py): the survivor may still
answer. Once the seed serves (its member list is itself, its revision at least the survivor's or
the backup's),
the old pods and PVCs are deleted and the recovery is Recovered; the ordinary rules then grow the
cluster back one member at a time. A seed that does not serve within RECOVERY_TIMEOUT_SECONDS is
Failed: its pod and PVC are deleted, the survivor is left as it was (and serves again).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from etcd_common.api import constants as c
from etcd_common.api.etcd_backup import EtcdBackup
from etcd_common.api.etcd_cluster import (
    RECOVERY_FAILED,
    ClusterSpec,
    RecordedRecovery,
)
from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION, RestoreSource
from etcd_common.etcd.types import EndpointStatus, Member
from etcd_common.seed.space import seed_space_problem
from etcd_common.seed.tools import no_bump_warning, restore_tool
from etcd_operator.actions import (
    Action,
    CreateMemberPod,
    CreateRecoverySeed,
    DeletePod,
    DeletePVC,
    FailQuorumRecovery,
    FinishQuorumRecovery,
    RefuseQuorumRecovery,
    ReportQuorumLoss,
    SetServing,
    StartQuorumRecovery,
    Wait,
)
from etcd_operator.manifests import (
    member_client_url,
    member_name,
    member_peer_url,
    recovery_cluster_token,
)
from etcd_operator.observed import ObservedCluster, parse_timestamp, seconds_since

if TYPE_CHECKING:
    from etcd_operator.planning.context import Context

# The longest a recovery's seed may take to serve (snapshot, restore, start), from startedAt.
RECOVERY_TIMEOUT_SECONDS = 600.0


def recovery_in_progress(context: Context) -> Action | None:
    """A quorum-loss recovery recorded in status.recovery -> its next step, before anything below:
    while it is in progress the observation asks only its seed, so the survivor (which may still
    answer) is never taken for the cluster. Nothing of the old cluster is deleted before the seed serves."""
    return plan_recovery_steps(context.observed, context.spec)


# ---------------------------------------------------------------------------------------------
# Whether to start


def has_data(observed: ObservedCluster, spec: ClusterSpec, name: str) -> bool:
    """Does the member's data still exist? On PVCs: its claim exists, or its pod does; on
    emptyDir: its pod exists and is neither terminal nor being deleted."""
    pod = observed.pod(name)
    live_pod = pod is not None and not pod.deleting and not pod.terminal
    if spec.uses_persistent_volumes:
        return observed.volume(name) is not None or live_pod
    return live_pod


def new_request(observed: ObservedCluster) -> str:
    """The annotation's value when no recovery has acted on it yet ("": none, or acted on)."""
    cluster = observed.cluster
    recorded = cluster.recorded.recovery
    request = cluster.recovery_request
    return request if request and (recorded is None or recorded.request != request) else ""


def recovery_requested(observed: ObservedCluster, spec: ClusterSpec) -> bool:
    """spec.recovery.quorumLoss is FromSurvivor, or the annotation carries a value no recovery
    has acted on yet."""
    return spec.quorum_loss == c.QUORUM_LOSS_FROM_SURVIVOR or bool(new_request(observed))


def named_members(observed: ObservedCluster) -> frozenset[str]:
    """The words of a new annotation value (comma- or space-separated): a person's word that the
    members of those names are gone (other words, "please" say, name no one)."""
    return frozenset(word for word in re.split(r"[\s,]+", new_request(observed)) if word)


def gone_proof(observed: ObservedCluster, name: str, named: frozenset[str]) -> str | None:
    """Why member `name` is known to be gone, not merely silent or cut off, or None: a person
    named it in the annotation; its pod is terminal (the kubelet, or the control plane for a
    node deleted or declared out of service, stopped its containers for good); or its pod is being
    deleted on a node whose Node object is deleted; or its pod object is gone (the kubelet removes
    it only once its containers stopped, the pod garbage collector only once its Node is deleted,
    and otherwise a person force-deleted it: their word that it is gone). A pod being deleted on a
    node that exists (NotReady, tainted, partitioned) is no proof: a majority may be serving behind
    a partition, and taint eviction marks its pods deleted all the same."""
    if name in named:
        return f"named in {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR}"
    pod = observed.pod(name)
    if pod is None:
        return "its pod is gone (its containers stopped, its node deleted, or a person force-deleted it)"
    if pod.terminal:
        return f"its pod is {pod.phase}"
    if pod.deleting and pod.node_name is not None and pod.node_name in observed.nodes_gone:
        return f"its node {pod.node_name} is deleted"
    return None


def request_under_quorum(observed: ObservedCluster) -> RefuseQuorumRecovery | None:
    """A new annotation value on a cluster that has quorum -> refused: rebuilding it from one
    member would drop the others' writes. None without one."""
    request = new_request(observed)
    if not request:
        return None
    evidence = (observed.quorum_evidence if observed.operator_cut_off else
                f"{len(observed.healthy_voters)} of {len(observed.voting_members)} voting members are healthy")
    return RefuseQuorumRecovery(
        f"the cluster has quorum ({evidence}), yet {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR}={request} asks "
        f"to rebuild it from one member, which would drop the others' data; remove the annotation (the operator "
        f"changes nothing while it stands)")


def plan_recovery_start(observed: ObservedCluster, spec: ClusterSpec,
                        voters: tuple[Member, ...] | None, report: ReportQuorumLoss) -> Action:
    """Under a quorum loss (`report`, what the planner would report): StartQuorumRecovery when
    it is asked for, safe and every lost member is known gone (`gone_proof`); a request naming
    members that answer -> RefuseQuorumRecovery; else `report`, its detail saying why not and
    what proof is missing."""
    if voters is None or not voters:
        return report
    named = named_members(observed)
    answering_named = sorted(m.member_name for m in voters if m.member_name in named
                             and (m.member_name in observed.endpoint_status or observed.is_healthy(m)))
    if answering_named:
        return _refused(report, f"{c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR}={new_request(observed)} names "
                                f"member(s) {', '.join(answering_named)}, which answer: a member that answers is "
                                f"not gone; name only the members that are, or remove the annotation")
    lost = tuple(sorted(m.member_name for m in voters
                        if m.member_name in named or not has_data(observed, spec, m.member_name)))
    with_data = [m for m in voters if m.member_name not in lost]
    quorum = len(voters) // 2 + 1
    if len(with_data) >= quorum:
        return report  # they can come back: a quorum of them still has its data
    how = (f"set spec.recovery.quorumLoss: {c.QUORUM_LOSS_FROM_SURVIVOR} or annotate the cluster with "
           f"{c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR}={','.join(lost)} (the members gone) to rebuild from the "
           f"surviving member furthest ahead, or restore from a backup")
    gone = (f"member(s) {', '.join(lost)} lost their data: the {len(with_data)} of {len(voters)} voting "
            f"member(s) with data cannot make a quorum of {quorum}")
    if not recovery_requested(observed, spec):
        return _with_detail(report, f"{gone}; {how}")
    silent = [m.member_name for m in with_data if m.member_name not in observed.endpoint_status]
    if silent:
        return _with_detail(report, f"{gone}; quorum-loss recovery waits: member(s) {', '.join(sorted(silent))} "
                                    f"have data but do not answer (they may be ahead of the others)")
    unproven = [name for name in lost if gone_proof(observed, name, named) is None]
    if unproven:
        return _with_detail(report, f"{gone}; {_proof_missing(observed, unproven, lost)}")
    proofs = "; ".join(f"{name}: {gone_proof(observed, name, named)}" for name in lost)
    return _start(observed, spec, voters, lost, report, f"{gone} (gone: {proofs})")


def _proof_missing(observed: ObservedCluster, unproven: list[str], lost: tuple[str, ...]) -> str:
    """What the report says while a lost member is not known gone, and how a person proves it."""
    states = []
    for name in unproven:
        pod = observed.pod(name)
        where = f" on node {pod.node_name}, which exists or cannot be read" if pod and pod.node_name else ""
        states.append(f"{name} (its pod is being deleted{where})")
    return (f"quorum-loss recovery waits for proof that {', '.join(states)} is gone, not cut off (a majority "
            f"behind a partition may be serving; a pod being deleted, or a NotReady or tainted node, is no "
            f"proof): a terminal pod, or its Node deleted (kubectl delete node, once the machine is dead), or "
            f"a person's word: annotate the cluster with {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR}="
            f"{','.join(lost)} once you know these members are gone")


def _start(observed: ObservedCluster, spec: ClusterSpec, voters: tuple[Member, ...], lost: tuple[str, ...],
           report: ReportQuorumLoss, gone: str) -> Action:
    """Every lost member is known gone and the others answer: StartQuorumRecovery from the voter
    furthest ahead (or the newest backup of its incarnation ahead of it), unless something refuses it."""
    with_data = [m for m in voters if m.member_name not in lost]
    if not with_data:
        return _with_detail(report, f"{gone}; no member with data answers: nothing to recover from")
    tool = restore_tool(spec.version)
    if tool is None:
        return _with_detail(report, f"{gone}; etcd {spec.version} has no snapshot restore tool this operator knows")
    survivor = max(with_data, key=lambda m: (observed.endpoint_status[m.member_name].raft_index,
                                             observed.endpoint_status[m.member_name].revision, m.member_name))
    status = observed.endpoint_status[survivor.member_name]
    recorded = observed.cluster.recorded.recovery
    if (recorded is not None and recorded.phase == RECOVERY_FAILED and recorded.survivor == survivor.member_name
            and not new_request(observed)):
        return _with_detail(report, f"{gone}; the recovery from {survivor.member_name} failed ({recorded.reason}); "
                                    f"annotate the cluster with {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR}=<a new "
                                    f"value> to try again")
    source = _recovery_source(observed, spec, survivor.member_name, status)
    if isinstance(source, RefuseQuorumRecovery):
        return _refused(report, source.message)
    if isinstance(source, str):
        return _with_detail(report, f"{gone}; {source}")
    cluster = observed.cluster
    seed = member_name(cluster.name, observed.name_suffix)
    taken = {m.member_name for m in voters} | {p.member_name for p in observed.pods} | {v.member_name for v in observed.pvcs}
    if seed in taken:
        return Wait(f"generated member name {seed} is taken; retrying with another")
    request = new_request(observed)
    why = (f"requested by annotation {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR}={request}" if request
           else f"spec.recovery.quorumLoss is {c.QUORUM_LOSS_FROM_SURVIVOR}")
    unbumped = "" if source is not None or tool.can_bump_revision else f"; {no_bump_warning(spec.version, tool)}"
    return StartQuorumRecovery(
        survivor=survivor.member_name, survivor_revision=status.revision, survivor_raft_index=status.raft_index,
        lost_members=lost, seed_member=seed, request=cluster.recovery_request, reason=f"{gone}; {why}{unbumped}",
        backup=source.backup.name if source is not None else "",
        backup_revision=source.revision if source is not None else 0,
        restore=source.restore if source is not None else None,
    )


@dataclass(frozen=True)
class BackupSource:
    """The EtcdBackup a recovery restores instead of the survivor, its revision and its object."""

    backup: EtcdBackup
    revision: int
    restore: RestoreSource


def backup_revision(backup: EtcdBackup) -> int:
    last = backup.status.last_backup
    return (last.etcd_revision if last is not None else 0) or backup.status.etcd_revision


def _succeeded_backups(observed: ObservedCluster) -> list[EtcdBackup]:
    """The succeeded EtcdBackups of this cluster (by name or client service) with a last backup."""
    name = observed.cluster.name
    return [b for b in observed.backups if b.targets(name) and b.status.succeeded and b.status.last_backup is not None]


def _of_incarnation(backup: EtcdBackup, observed: ObservedCluster, etcd_cluster_id: int) -> bool:
    last = backup.status.last_backup
    return last is not None and last.of_incarnation(etcd_cluster_id, observed.cluster.uid)


def newest_backup(observed: ObservedCluster, etcd_cluster_id: int) -> EtcdBackup | None:
    """The newest succeeded EtcdBackup (by revision) of this cluster's incarnation: of the etcd
    cluster `etcd_cluster_id` run by this EtcdCluster (its UID), as the backup recorded them. A
    backup whose last attempt failed does not count, nor one of another cluster or incarnation
    (a cluster deleted and recreated under its name, an earlier recovery's), nor one that
    recorded none: their revisions are not comparable with this cluster's."""
    ours = [b for b in _succeeded_backups(observed) if _of_incarnation(b, observed, etcd_cluster_id)]
    return max(ours, key=lambda b: (backup_revision(b), b.name), default=None)


def _incomparable_ahead(observed: ObservedCluster, survivor: str, status: EndpointStatus) -> RefuseQuorumRecovery | None:
    """A backup of this cluster ahead of the survivor by revision, but not of its incarnation ->
    refused: such a backup never replaces the survivor's data, and whether the survivor holds
    the newest data is then not known (a person decides)."""
    ahead = sorted((b for b in _succeeded_backups(observed) if not _of_incarnation(b, observed, status.cluster_id)
                    and backup_revision(b) > status.revision), key=lambda b: (-backup_revision(b), b.name))
    if not ahead:
        return None
    backup = ahead[0]
    last = backup.status.last_backup
    assert last is not None
    this = f"{survivor}'s: etcd cluster {status.cluster_id:x}, EtcdCluster UID {observed.cluster.uid}"
    uid = f", EtcdCluster UID {last.etcd_cluster_uid}" if last.etcd_cluster_uid else ""
    which = (f"of another incarnation (etcd cluster {last.etcd_cluster_id:x}{uid}; {this})" if last.etcd_cluster_id
             else f"of no recorded incarnation (taken before backups recorded one; {this})")
    return RefuseQuorumRecovery(
        f"{survivor} (revision {status.revision}) is behind EtcdBackup {backup.name} (revision "
        f"{backup_revision(backup)}), which is {which}: revisions are compared only within one incarnation, so that "
        f"backup never replaces the survivor's data, and whether the survivor holds the newest data is not known. "
        f"To keep the survivor's data, delete EtcdBackup {backup.name} (its snapshot stays in the bucket); to "
        f"take the backup's, restore it with an EtcdRestore")


def _recovery_source(observed: ObservedCluster, spec: ClusterSpec, survivor: str,
                     status: EndpointStatus) -> BackupSource | None | str | RefuseQuorumRecovery:
    """What the seed restores: None (the survivor), the newest backup of its incarnation when it
    is ahead of the survivor, or why the recovery cannot start now (a str), or is refused."""
    refused = "quorum-loss recovery refused"
    if observed.backups_error:
        return (f"quorum-loss recovery waits: whether a backup is ahead of {survivor} is not known "
                f"({observed.backups_error})")
    backup = newest_backup(observed, status.cluster_id)
    revision = backup_revision(backup) if backup is not None else 0
    if backup is None or revision <= status.revision:
        incomparable = _incomparable_ahead(observed, survivor, status)
        if incomparable is not None:
            return incomparable
        no_room = seed_space_problem(spec, status.db_size, f"member {survivor}'s database (dbSize)")
        return f"{refused}: {no_room}" if no_room else None
    location = backup.snapshot_location
    last = backup.status.last_backup
    assert backup.spec is not None and location is not None and last is not None
    behind = f"{survivor} (revision {status.revision}) is behind EtcdBackup {backup.name} (revision {revision})"
    if not location.secret:
        return (f"{refused}: {behind}, whose {location.section}.{location.secret_field} is empty: a seed pod could not "
                f"fetch it; restore it with an EtcdRestore naming a secret")
    no_room = seed_space_problem(spec, max(last.size, status.db_size), f"EtcdBackup {backup.name}'s snapshot")
    if no_room:
        return f"{refused}: {behind}; {no_room}"
    tool = restore_tool(spec.version)
    bump = DEFAULT_BUMP_REVISION if tool is not None and tool.can_bump_revision else 0
    return BackupSource(backup, revision, RestoreSource.at(
        location, sha256=last.sha256, revision=revision, bump_revision=bump, encryption=backup.spec.encryption))


def _with_detail(report: ReportQuorumLoss, detail: str) -> ReportQuorumLoss:
    return ReportQuorumLoss(report.healthy_voters, report.voters, report.unhealthy,
                            f"{report.detail}; {detail}" if report.detail else detail)


def _refused(report: ReportQuorumLoss, why: str) -> RefuseQuorumRecovery:
    """A refusal under a quorum loss: why, and the loss as `report` describes it."""
    return RefuseQuorumRecovery(f"{why} ({report.describe()})")


# ---------------------------------------------------------------------------------------------
# The steps of a recovery in progress (and the clean-up of a failed one)


def plan_recovery_steps(observed: ObservedCluster, spec: ClusterSpec) -> Action | None:
    """The next step of the recorded recovery, or None when none is in progress and nothing of a
    failed one is left."""
    recovery = observed.cluster.recorded.recovery
    if recovery is None:
        return None
    if recovery.phase == RECOVERY_FAILED:
        return _clean_up_failed(observed, recovery)
    if not recovery.in_progress:
        return None
    seed = recovery.seed_member
    if seed_serves(observed, recovery):
        return _retire_old_members(observed, recovery)
    cluster = observed.cluster
    seed_pod = observed.pod(seed)
    survivor_pod = observed.pod(recovery.survivor)
    survivor_live = survivor_pod is not None and not survivor_pod.deleting
    elapsed = seconds_since(observed, parse_timestamp(recovery.started_at))
    if elapsed is not None and elapsed >= RECOVERY_TIMEOUT_SECONDS:
        problem = _seed_problem(observed, seed)
        return FailQuorumRecovery(seed, recovery.survivor,
                                  f"seed member {seed} did not serve within {RECOVERY_TIMEOUT_SECONDS:.0f}s ({problem})")
    if survivor_pod is not None and survivor_live and survivor_pod.serving:
        return SetServing(survivor_pod.name, False, "quorum-loss recovery: the seed member takes its data", survivor_pod.uid)
    if seed_pod is not None and seed_pod.deleting:
        return Wait(f"recovery seed pod {seed} is terminating")
    if seed_pod is None:
        if recovery.from_backup and recovery.restore is None:
            return FailQuorumRecovery(seed, recovery.survivor, f"status.recovery.restore (EtcdBackup {recovery.backup}'s "
                                                               "object) is missing or unreadable")
        if not survivor_live and not recovery.from_backup:
            if spec.uses_persistent_volumes and observed.volume(seed) is not None:
                return CreateMemberPod(seed, ((seed, member_peer_url(cluster, seed)),),
                                       "quorum-loss recovery: its pod is gone; restarting the seed on its volume")
            return FailQuorumRecovery(seed, recovery.survivor,
                                      f"the survivor's pod {recovery.survivor} is gone before the seed held its data")
        earlier = observed.volume(seed) if spec.uses_persistent_volumes else None
        if earlier is not None:
            # An earlier seed pod went before it served: its restore step refuses a data directory
            # that exists, so the seed starts afresh from the survivor.
            return DeletePVC(earlier.name, "quorum-loss recovery: the seed pod went before it served; its volume "
                                           "goes and a new seed takes the survivor's data again", earlier.uid)
        return CreateRecoverySeed(
            seed, member_peer_url(cluster, seed), member_client_url(cluster, recovery.survivor),
            recovery_cluster_token(cluster, seed), f"quorum-loss recovery from {_kept(recovery)}",
            restore=recovery.restore if recovery.from_backup else None,
        )
    return Wait(f"quorum-loss recovery: seed member {seed} is taking {_kept(recovery)}'s data and starting "
                f"({_seed_problem(observed, seed)}); at most {RECOVERY_TIMEOUT_SECONDS:.0f}s from "
                f"{recovery.started_at}")


def _kept(recovery: RecordedRecovery) -> str:
    """What the recovery keeps: the survivor, or the EtcdBackup (source Backup)."""
    if recovery.from_backup:
        return f"EtcdBackup {recovery.backup} (revision {recovery.backup_revision})"
    return f"{recovery.survivor} (revision {recovery.survivor_revision})"


def seed_serves(observed: ObservedCluster, recovery: RecordedRecovery) -> bool:
    """The seed answers as a one-member cluster of itself, healthy, with the survivor's revision
    (source Backup: the backup's), or newer."""
    members = observed.members
    if members is None or [m.member_name for m in members] != [recovery.seed_member]:
        return False
    status = observed.endpoint_status.get(recovery.seed_member)
    return (observed.is_healthy(members[0]) and status is not None
            and status.revision >= recovery.target_revision)


def _retire_old_members(observed: ObservedCluster, recovery: RecordedRecovery) -> Action:
    seed = recovery.seed_member
    why = f"quorum-loss recovery: seed member {seed} serves the data of {_kept(recovery)}"
    for pod in sorted(observed.live_pods, key=lambda p: p.name):
        if pod.member_name != seed:
            return DeletePod(pod.name, f"{why}; the old member's pod goes", pod.uid)
    for pvc in sorted(observed.pvcs, key=lambda v: v.name):
        if pvc.member_name != seed and not pvc.deleting:
            return DeletePVC(pvc.name, f"{why}; the old member's data goes", pvc.uid)
    status = observed.endpoint_status.get(seed)
    return FinishQuorumRecovery(seed, recovery.survivor, status.revision if status is not None else 0,
                                recovery.lost_members, backup=recovery.backup if recovery.from_backup else "")


def _clean_up_failed(observed: ObservedCluster, recovery: RecordedRecovery) -> Action | None:
    """A failed recovery's seed goes (pod, then PVC); the survivor serves again."""
    seed = recovery.seed_member
    pod = observed.pod(seed)
    if pod is not None and not pod.deleting:
        return DeletePod(pod.name, f"the quorum-loss recovery failed ({recovery.reason}); its seed goes", pod.uid)
    volume = observed.volume(seed)
    if volume is not None and pod is None:
        return DeletePVC(volume.name, "the quorum-loss recovery failed; its seed's data goes", volume.uid)
    survivor = observed.pod(recovery.survivor)
    if survivor is not None and not survivor.deleting and not survivor.serving:
        return SetServing(survivor.name, True, "the quorum-loss recovery failed; it is left as it was", survivor.uid)
    return None


def _seed_problem(observed: ObservedCluster, seed: str) -> str:
    pod = observed.pod(seed)
    if pod is None:
        return "no pod"
    if pod.waiting_init is not None:
        waiting = pod.waiting_init
        detail = waiting.last_termination_message or waiting.message
        return f"init container {waiting.name}: {waiting.reason}{': ' + detail.strip() if detail else ''}"
    return pod.problem or f"pod {pod.phase}{', ready' if pod.ready else ''}"


