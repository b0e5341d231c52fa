"""The actions the planner can choose: one frozen dataclass each, carrying everything the
executor needs and nothing it must look up again. One action per pass; the next pass observes
afresh, so an action never assumes a previous one finished.

Every action has `kind` (small fixed set, a metrics label), `describe()` (events and logs),
`event_reason`/`event_type` (None: no event) and `has_effect` (False: nothing to execute).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Union

from etcd_common.api.restore_source import RestoreSource
from etcd_common.etcd.alarms import NOSPACE, Alarm

Purpose = Literal["scale", "replace", "upgrade"]
InitialCluster = tuple[tuple[str, str], ...]  # (member name, peer URL) pairs


@dataclass(frozen=True)
class _Action:
    KIND: ClassVar[str] = ""
    event_reason: ClassVar[str | None] = None
    event_type: ClassVar[str] = "Normal"
    has_effect: ClassVar[bool] = True

    @property
    def kind(self) -> str:
        return self.KIND

    def describe(self) -> str:
        raise NotImplementedError


# --- no effect: the supervisor only writes status (and maybe an event)


@dataclass(frozen=True)
class Pause(_Action):
    """spec.paused: the operator keeps observing and reporting, but changes nothing."""

    KIND: ClassVar[str] = "pause"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return "control paused (spec.paused); not changing anything"


@dataclass(frozen=True)
class RejectSpec(_Action):
    reason: str

    KIND: ClassVar[str] = "reject"
    event_reason: ClassVar[str | None] = "InvalidSpec"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return f"spec rejected: {self.reason}"


@dataclass(frozen=True)
class ReportQuorumLoss(_Action):
    """A majority of voting members is unhealthy: nothing is safe to change; a human (or a
    restore from backup) decides. Pods keep restarting in place on their own."""

    healthy_voters: int
    voters: int
    unhealthy: tuple[str, ...]
    detail: str = ""

    KIND: ClassVar[str] = "quorum-lost"
    event_reason: ClassVar[str | None] = "QuorumLost"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        text = (
            f"quorum lost: {self.healthy_voters} of {self.voters} voting members healthy "
            f"(unhealthy: {', '.join(self.unhealthy) or 'none'}); waiting, changing nothing"
        )
        return f"{text}; {self.detail}" if self.detail else text


@dataclass(frozen=True)
class ReportMembersLost(_Action):
    """Every member and its data is gone (emptyDir pods deleted): bootstrapping an empty cluster
    would silently lose the data, so we stop and say so."""

    reason: str

    KIND: ClassVar[str] = "members-lost"
    event_reason: ClassVar[str | None] = "MembersLost"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return self.reason


@dataclass(frozen=True)
class RefuseNames(_Action):
    """A name the cluster needs belongs to someone else (a Service it does not own, or another
    EtcdCluster whose service names collide with its own): nothing is created or taken over.
    `reason` is ownership.REASON_SERVICE_NAME_TAKEN or REASON_NAME_CONFLICT."""

    reason: str
    message: str

    KIND: ClassVar[str] = "refuse-names"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    @property
    def event_reason(self) -> str:  # type: ignore[override]
        return self.reason

    def describe(self) -> str:
        return self.message


@dataclass(frozen=True)
class Wait(_Action):
    """Something is in progress (a pod starting, a learner catching up); observe again soon.

    `imminent`: what is awaited is due within moments and no Kubernetes event announces it (a
    learner whose pod just started begins serving clients and catches up within a fraction of a
    second): the supervisor then observes again sooner, for a bounded number of passes."""

    reason: str
    imminent: bool = False

    KIND: ClassVar[str] = "wait"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return f"waiting: {self.reason}"


@dataclass(frozen=True)
class NoOp(_Action):
    """Converged: spec.size healthy members, all at spec.version."""

    reason: str = "converged"
    # A member's database is close to the quota: NOSPACE may come with no Kubernetes event to
    # announce it, so the cluster is re-checked sooner (rechecking.NEAR_QUOTA_RECHECK_SECONDS).
    near_quota: bool = False

    KIND: ClassVar[str] = "noop"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return self.reason


# --- Kubernetes objects


@dataclass(frozen=True)
class CreateServices(_Action):
    """Create the missing ones of `<cluster>` (headless, peers) and `<cluster>-client`."""

    names: tuple[str, ...]

    KIND: ClassVar[str] = "services"
    event_reason: ClassVar[str | None] = "ServicesCreated"

    def describe(self) -> str:
        return f"create services {', '.join(self.names)}"


@dataclass(frozen=True)
class PublishNotReadyAddresses(_Action):
    """Set `publishNotReadyAddresses: true` on the peer service `<cluster>`, which a CoreOS-made
    cluster has without (it relied on an annotation Kubernetes no longer reads): without it a
    member that is not ready yet, a joining learner, has no DNS name and cannot be reached."""

    service_name: str

    KIND: ClassVar[str] = "services"
    event_reason: ClassVar[str | None] = "ServiceUpdated"

    def describe(self) -> str:
        return f"set publishNotReadyAddresses on service {self.service_name}, so members resolve before they are ready"


@dataclass(frozen=True)
class UpdateClientSelector(_Action):
    """Make the client service select only member pods labelled serving (a CoreOS-made client
    service, or one made before draining existed); every live member pod is labelled first."""

    service_name: str

    KIND: ClassVar[str] = "services"
    event_reason: ClassVar[str | None] = "ServiceUpdated"

    def describe(self) -> str:
        return (f"make service {self.service_name} select only member pods labelled serving, so a member "
                f"is drained of clients before it is removed or restarted")


@dataclass(frozen=True)
class SetServing(_Action):
    """Add (`serving`) or remove the serving label of a member pod: the client service sends
    clients only to labelled pods. Removed to drain a member before it is removed or restarted."""

    pod_name: str
    serving: bool
    reason: str
    pod_uid: str = ""
    at: str = ""  # when drained (RFC 3339, from the observation): recorded on the pod

    KIND: ClassVar[str] = "serving"

    @property
    def event_reason(self) -> str:  # type: ignore[override]
        return "MemberServing" if self.serving else "MemberDraining"

    def describe(self) -> str:
        verb = "send clients to" if self.serving else "drain clients from"
        return f"{verb} {self.pod_name}: {self.reason}"


@dataclass(frozen=True)
class SetDisruptionBudget(_Action):
    """Create (`create`) or update the cluster's PodDisruptionBudget to `min_available` ready
    members: a quorum, so no voluntary disruption (drain, eviction) ever takes it away."""

    name: str
    min_available: int
    create: bool
    reason: str

    KIND: ClassVar[str] = "disruption-budget"

    @property
    def event_reason(self) -> str:  # type: ignore[override]
        return "DisruptionBudgetCreated" if self.create else "DisruptionBudgetUpdated"

    def describe(self) -> str:
        verb = "create" if self.create else "update"
        return f"{verb} PodDisruptionBudget {self.name} with minAvailable {self.min_available}: {self.reason}"


@dataclass(frozen=True)
class _SeedMemberAction(_Action):
    """A (PVC and) pod of a member that starts a cluster alone: its initial cluster is itself."""

    member_name: str
    peer_url: str

    KIND: ClassVar[str] = "seed"
    event_reason: ClassVar[str | None] = "SeedMemberCreated"

    @property
    def initial_cluster(self) -> InitialCluster:
        return ((self.member_name, self.peer_url),)


@dataclass(frozen=True)
class CreateSeedMember(_SeedMemberAction):
    """Bootstrap: (PVC and) pod of the first member, `--initial-cluster-state=new`."""

    def describe(self) -> str:
        return f"bootstrap the cluster with seed member {self.member_name} ({self.peer_url})"


@dataclass(frozen=True)
class CreateRestoredMembers(_Action):
    """Bootstrap from `spec.restore.stagedClaims` (etcd's disaster-recovery procedure): the pods
    of the members in `create`, `--initial-cluster-state=new` with every member of
    `initial_cluster` in `--initial-cluster`; member i restores the copy staged on claim i. They
    start together and elect a leader among themselves: none joins by a raft snapshot (a learner
    of a restored seed waits etcd's publish retry, 7 s, for that)."""

    initial_cluster: InitialCluster
    create: tuple[str, ...]

    KIND: ClassVar[str] = "seed"
    event_reason: ClassVar[str | None] = "RestoredMembersCreated"

    def describe(self) -> str:
        members = ", ".join(name for name, _ in self.initial_cluster)
        if len(self.create) == len(self.initial_cluster):
            return f"bootstrap the restored cluster with all {len(self.create)} members at once ({members})"
        return (f"create the pods of restored member(s) {', '.join(self.create)}: the bootstrap of "
                f"{members} was interrupted before they were created")


@dataclass(frozen=True)
class CreateMemberPod(_Action):
    """(PVC and) pod for a member etcd already lists, `--initial-cluster-state=existing`: finishes
    an add interrupted after `member add`, or restarts a member on its persistent volume."""

    member_name: str
    initial_cluster: InitialCluster
    reason: str
    # A move to or off TLS (tls_transition.py `restart_bridge`): True, a bridge pod, for a member
    # whose peer URL is still http in step 2 to TLS; False, a TLS pod, for one whose peer URL is
    # still https in step 1 off TLS; None: the pod the step builds.
    tls_bridge: bool | None = None

    KIND: ClassVar[str] = "recreate"
    event_reason: ClassVar[str | None] = "MemberPodCreated"

    def describe(self) -> str:
        return f"create pod for member {self.member_name}: {self.reason}"


@dataclass(frozen=True)
class DeletePod(_Action):
    """Deleted with a UID precondition when `pod_uid` is known: a newer pod that took the
    name is never deleted in its place."""

    pod_name: str
    reason: str
    pod_uid: str = ""

    KIND: ClassVar[str] = "delete-pod"
    event_reason: ClassVar[str | None] = "PodDeleted"

    def describe(self) -> str:
        return f"delete pod {self.pod_name}: {self.reason}"


@dataclass(frozen=True)
class DeletePVC(_Action):
    """Delete the PVC of a member that is no longer in the cluster."""

    pvc_name: str
    reason: str
    pvc_uid: str = ""

    KIND: ClassVar[str] = "delete-pvc"
    event_reason: ClassVar[str | None] = "PVCDeleted"

    def describe(self) -> str:
        return f"delete PVC {self.pvc_name}: {self.reason}"


# --- etcd membership


@dataclass(frozen=True)
class AddMember(_Action):
    """`etcdctl member add <name> --peer-urls=<url> [--learner]`, then (PVC and) pod with
    `--initial-cluster-state=existing` and `initial_cluster` (all members plus this one).
    A crash between the two steps is finished by a later `CreateMemberPod`."""

    member_name: str
    peer_url: str
    as_learner: bool
    initial_cluster: InitialCluster
    purpose: Purpose = "scale"
    reason: str = ""

    event_reason: ClassVar[str | None] = "MemberAdded"

    @property
    def kind(self) -> str:
        return {"scale": "add", "replace": "replace", "upgrade": "upgrade"}[self.purpose]

    def describe(self) -> str:
        role = "learner" if self.as_learner else "voting member"
        text = f"add {role} {self.member_name} ({self.peer_url})"
        return f"{text}: {self.reason}" if self.reason else text


@dataclass(frozen=True)
class PromoteMember(_Action):
    member_name: str
    member_id: int

    KIND: ClassVar[str] = "promote"
    event_reason: ClassVar[str | None] = "MemberPromoted"

    def describe(self) -> str:
        return f"promote learner {self.member_name} ({self.member_id:x}) to voting member"


@dataclass(frozen=True)
class RemoveMember(_Action):
    """`etcdctl member remove`, then delete the member's pod at once (a removed etcd exits);
    its PVC becomes an orphan deleted by a later pass. "member not found" means it is already done."""

    member_name: str
    member_id: int
    purpose: Purpose
    reason: str

    event_reason: ClassVar[str | None] = "MemberRemoved"

    @property
    def kind(self) -> str:
        return {"scale": "remove", "replace": "replace", "upgrade": "upgrade"}[self.purpose]

    def describe(self) -> str:
        return f"remove member {self.member_name} ({self.member_id:x}): {self.reason}"


@dataclass(frozen=True)
class MoveLeader(_Action):
    """`etcdctl move-leader <to_id>` against the current leader, before that member is
    removed or restarted."""

    from_member_name: str
    from_member_id: int
    to_member_name: str
    to_member_id: int
    reason: str

    KIND: ClassVar[str] = "move-leader"
    event_reason: ClassVar[str | None] = "LeaderMoved"

    def describe(self) -> str:
        return f"move leadership from {self.from_member_name} to {self.to_member_name}: {self.reason}"


@dataclass(frozen=True)
class UpgradeMember(_Action):
    """Restart the member with the new spec, keeping the member (its name, ID, address, data).

    `in_place` (only the image differs): the etcd container's image is changed in the running
    pod, which Kubernetes allows; the kubelet stops etcd gracefully and starts the new image in
    the same pod, on the same emptyDir or volume (as CoreOS upgraded). The pod is annotated with
    the restart count before the change, so later passes know until when it is restarting.
    Otherwise: delete the member's pod; its data stays on its PVC and a later pass recreates the
    pod (same member name) from the current spec via `CreateMemberPod`."""

    member_name: str
    pod_name: str
    reason: str
    pod_uid: str = ""
    in_place: bool = False
    image: str = ""  # in place: the new image, and the etcd version it runs
    etcd_version: str = ""
    container_index: int = 0
    restart_count: int = 0  # in place: the etcd container's restart count before the change
    # On its volume, moving to or off TLS (tls_transition.py): the peer URL `member update` gives
    # the member right before its pod is deleted ("": unchanged).
    member_id: int = 0
    peer_url: str = ""

    KIND: ClassVar[str] = "upgrade"
    event_reason: ClassVar[str | None] = "MemberUpgrading"

    def describe(self) -> str:
        if self.in_place:
            return f"restart member {self.member_name} in its pod on image {self.image}: {self.reason}"
        if self.peer_url:
            return (f"restart member {self.member_name} on its volume with the new pod spec and peer URL "
                    f"{self.peer_url}: {self.reason}")
        return f"restart member {self.member_name} on its volume with the new pod spec: {self.reason}"


@dataclass(frozen=True)
class StopMember(_Action):
    """Remove a healthy member (scale-down, or the outdated member an upgrade replaced) by
    stopping it first: its pod is deleted, so etcd shuts down gracefully (its clients are sent away
    with their requests finished, and a leader hands leadership over itself), instead of exiting at
    once when it applies its own removal, which cuts every request in flight on it ("raft:
    stopped", "connection reset by peer"). Once the pod is gone (at most STOP_WAIT_SECONDS, about a
    second in practice) the member is removed in the same action, so the cluster runs a member
    short only for that long. Should the wait run out, a later pass removes it (rule 9). On a PVC
    cluster the claim is marked leaving first, so the pod is not recreated on it."""

    member_name: str
    member_id: int
    pod_name: str
    reason: str
    pod_uid: str = ""
    pvc_name: str = ""

    KIND: ClassVar[str] = "stop"
    event_reason: ClassVar[str | None] = "MemberRemoved"  # the same action removes it

    def describe(self) -> str:
        return f"stop member {self.member_name} ({self.member_id:x}), then remove it: {self.reason}"


# --- quorum-loss recovery (etcd_operator/quorum_recovery.py plans these)


@dataclass(frozen=True)
class StartQuorumRecovery(_Action):
    """Record a recovery from `survivor` in status.recovery (phase Seeding): no other effect.
    Every later step (drain the survivor, the seed pod, deleting the old members) is decided from
    that record and the pods, so the record is written before anything changes. With `backup`
    (source Backup): the survivor is behind that EtcdBackup's snapshot (`restore`), which the
    seed restores instead (event QuorumRecoveryFromBackup)."""

    survivor: str
    survivor_revision: int
    survivor_raft_index: int
    lost_members: tuple[str, ...]
    seed_member: str
    request: str
    reason: str
    backup: str = ""
    backup_revision: int = 0
    restore: RestoreSource | None = None

    KIND: ClassVar[str] = "quorum-recovery"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    @property
    def event_reason(self) -> str:  # type: ignore[override]
        return "QuorumRecoveryFromBackup" if self.backup else "QuorumRecoveryStarted"

    def describe(self) -> str:
        lost = f"member(s) lost with their data: {', '.join(self.lost_members) or 'none'}"
        if self.backup:
            return (f"quorum-loss recovery started from EtcdBackup {self.backup} (revision {self.backup_revision}): "
                    f"the surviving member furthest ahead, {self.survivor}, is behind it (revision "
                    f"{self.survivor_revision}); seed member {self.seed_member} restores the backup's snapshot; "
                    f"{lost}; {self.reason}")
        return (f"quorum-loss recovery started: rebuilding from surviving member {self.survivor} (revision "
                f"{self.survivor_revision}, raft index {self.survivor_raft_index}) as seed member "
                f"{self.seed_member}; {lost}; {self.reason}")


@dataclass(frozen=True)
class CreateRecoverySeed(_SeedMemberAction):
    """(PVC and) pod of the recovery's seed member: its init containers take a snapshot from the
    survivor's client URL and restore it (a one-member cluster with a new token), then etcd
    starts on it (etcd_common/seed/pod.py, `recovery_seed_init_containers`)."""

    survivor_client_url: str
    cluster_token: str
    reason: str
    # source Backup: the backup's snapshot, restored by spec.restore's init containers instead.
    restore: RestoreSource | None = None

    def describe(self) -> str:
        source = self.restore.location.path if self.restore is not None else self.survivor_client_url
        return f"create recovery seed member {self.member_name} from {source}: {self.reason}"


@dataclass(frozen=True)
class FinishQuorumRecovery(_Action):
    """The seed serves the survivor's data and the old members are gone: status.recovery phase
    Recovered; the ordinary rules grow the cluster back to spec.size."""

    seed_member: str
    survivor: str
    revision: int
    lost_members: tuple[str, ...]
    backup: str = ""  # source Backup: the EtcdBackup whose snapshot the seed serves

    KIND: ClassVar[str] = "quorum-recovery"
    event_reason: ClassVar[str | None] = "QuorumRecovered"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        kept = f"EtcdBackup {self.backup}" if self.backup else self.survivor
        return (f"quorum recovered: seed member {self.seed_member} serves the data of {kept} "
                f"(revision {self.revision}); member(s) lost: {', '.join(self.lost_members) or 'none'}; "
                f"growing back to spec.size one member at a time")


@dataclass(frozen=True)
class FailQuorumRecovery(_Action):
    """The seed did not serve in time (its pod is gone by now): status.recovery phase Failed with
    the reason; the survivor was left as it was."""

    seed_member: str
    survivor: str
    reason: str

    KIND: ClassVar[str] = "quorum-recovery"
    event_reason: ClassVar[str | None] = "QuorumRecoveryFailed"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return f"quorum-loss recovery from {self.survivor} failed: {self.reason}; {self.survivor} left as it was"


# --- maintenance (etcd_operator/maintenance.py plans these)

MaintenanceReason = Literal["fragmented", "no-space"]


@dataclass(frozen=True)
class Defragment(_Action):
    """Defragment one member (drained from the client service first: it serves nothing while
    its database file is rewritten); its pod records when (or that it failed)."""

    member_name: str
    member_id: int
    pod_name: str
    db_size: int
    db_size_in_use: int
    purpose: MaintenanceReason
    reason: str
    pod_uid: str = ""

    KIND: ClassVar[str] = "defragment"
    event_reason: ClassVar[str | None] = "MemberDefragmenting"

    @property
    def reclaimable_bytes(self) -> int:
        return max(self.db_size - self.db_size_in_use, 0)

    def describe(self) -> str:
        return f"defragment member {self.member_name}: {self.reason}"


@dataclass(frozen=True)
class CompactHistory(_Action):
    """Compact the key history up to `revision` (under NOSPACE: the first step of the recovery)."""

    revision: int
    reason: str

    KIND: ClassVar[str] = "compact"
    event_reason: ClassVar[str | None] = "HistoryCompacted"

    def describe(self) -> str:
        return f"compact history up to revision {self.revision}: {self.reason}"


@dataclass(frozen=True)
class DisarmAlarm(_Action):
    """Deactivate one raised alarm (a recovered NOSPACE, or a CORRUPT of a member since removed)."""

    alarm: Alarm
    reason: str
    # Since the alarm was first reported in status (the recovery's duration), if known.
    raised_for_seconds: float | None = None

    KIND: ClassVar[str] = "disarm"
    event_reason: ClassVar[str | None] = "AlarmDisarmed"

    def describe(self) -> str:
        return f"disarm alarm {self.alarm.describe()}: {self.reason}"


@dataclass(frozen=True)
class ReportAlarm(_Action):
    """An alarm the operator cannot (or may not) clear by itself: status and one Warning event
    say what it is and what a person must do; nothing is changed."""

    alarm_kind: str
    reason: str

    KIND: ClassVar[str] = "alarm"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    @property
    def event_reason(self) -> str:  # type: ignore[override]
        return "NoSpaceAlarm" if self.alarm_kind == NOSPACE else "CorruptAlarm"

    def describe(self) -> str:
        return f"alarm {self.alarm_kind}: {self.reason}"


@dataclass(frozen=True)
class IssueCertificates(_Action):
    """spec.TLS.issued: write the Secrets of `roles` ("ca", "peer", "server", "operator"; with
    "ca", every role) with new certificates, because of `reason` (certificates.py)."""

    roles: tuple[str, ...]
    reason: str

    KIND: ClassVar[str] = "issue-certificates"
    event_reason: ClassVar[str | None] = "CertificatesIssued"

    def describe(self) -> str:
        return f"issue certificates ({', '.join(self.roles)}): {self.reason}"


@dataclass(frozen=True)
class PublishCATrust(_Action):
    """spec.TLS.issued: write again only the CA file of the leaf Secrets of `roles`, with the CAs
    the cluster trusts now (certificates.trust_bundle; a CA rotation adds or drops one)."""

    roles: tuple[str, ...]
    reason: str

    KIND: ClassVar[str] = "publish-ca-trust"
    event_reason: ClassVar[str | None] = "CATrustPublished"

    def describe(self) -> str:
        return f"publish the trusted CAs ({', '.join(self.roles)}): {self.reason}"


@dataclass(frozen=True)
class AdoptCA(_Action):
    """spec.TLS.issued: the CA Secret `<cluster>-tls-ca` exists with no owner and the cluster's
    labels: the CA of the cluster this one replaced, kept by the restore operator so clients keep
    trusting the restored cluster. It becomes this cluster's (owner reference); the leaves are
    then issued from it."""

    secret_name: str

    KIND: ClassVar[str] = "issue-certificates"
    event_reason: ClassVar[str | None] = "CAAdopted"

    def describe(self) -> str:
        return (f"adopt secret {self.secret_name}: the CA of the cluster this one replaced, so its clients "
                f"keep trusting it")


@dataclass(frozen=True)
class StartCARotation(_Action):
    """spec.TLS.issued: a new CA goes into the CA Secret beside the one that signs (it signs
    nothing yet); `request` is the rotate-ca annotation's value acted on ("" when the CA is near
    its end) (ca_rotation.py)."""

    reason: str
    request: str = ""

    KIND: ClassVar[str] = "start-ca-rotation"
    event_reason: ClassVar[str | None] = "CARotationStarted"

    def describe(self) -> str:
        return f"start a CA rotation: {self.reason}"


@dataclass(frozen=True)
class ReissueFromNewCA(_Action):
    """spec.TLS.issued, CA rotation: every member trusts the new CA; it now signs (the old one is
    kept as previous, still trusted) and every leaf is issued again from it."""

    reason: str

    KIND: ClassVar[str] = "reissue-from-new-ca"
    event_reason: ClassVar[str | None] = "CALeavesReissued"

    def describe(self) -> str:
        return f"issue every certificate from the new CA: {self.reason}"


@dataclass(frozen=True)
class DropOldCA(_Action):
    """spec.TLS.issued, CA rotation: every member serves a certificate of the new CA; the old CA
    leaves the CA Secret, then the leaf Secrets' CA files."""

    reason: str

    KIND: ClassVar[str] = "drop-old-ca"
    event_reason: ClassVar[str | None] = "OldCADropped"

    def describe(self) -> str:
        return f"drop the old CA: {self.reason}"


@dataclass(frozen=True)
class ApplyCertManagerCertificates(_Action):
    """spec.TLS.certManager: create the cert-manager Certificates of `roles` ("peer", "server",
    "operator"), owned by the cluster, or patch their spec to what it should be (cert_manager.py)."""

    roles: tuple[str, ...]
    reason: str

    KIND: ClassVar[str] = "apply-certificates"
    event_reason: ClassVar[str | None] = "CertificatesRequested"

    def describe(self) -> str:
        return f"request certificates from cert-manager ({', '.join(self.roles)}): {self.reason}"


@dataclass(frozen=True)
class ReportCertificateProblem(_Action):
    """spec.TLS.certManager cannot get certificates (its issuer does not exist, or a Certificate
    of its name is someone else's): nothing is changed; `reason` goes into status and one Warning
    event (cert_manager.REASON_*)."""

    reason: str
    message: str

    KIND: ClassVar[str] = "certificate-problem"
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    @property
    def event_reason(self) -> str:  # type: ignore[override]
        return self.reason

    def describe(self) -> str:
        return self.message


Action = Union[
    Pause,
    RejectSpec,
    ReportCertificateProblem,
    ApplyCertManagerCertificates,
    ReportQuorumLoss,
    ReportMembersLost,
    RefuseNames,
    Wait,
    NoOp,
    CreateServices,
    PublishNotReadyAddresses,
    UpdateClientSelector,
    SetServing,
    SetDisruptionBudget,
    CreateSeedMember,
    CreateRestoredMembers,
    CreateMemberPod,
    DeletePod,
    DeletePVC,
    AddMember,
    PromoteMember,
    RemoveMember,
    MoveLeader,
    UpgradeMember,
    StopMember,
    Defragment,
    CompactHistory,
    DisarmAlarm,
    ReportAlarm,
    IssueCertificates,
    PublishCATrust,
    AdoptCA,
    StartCARotation,
    ReissueFromNewCA,
    DropOldCA,
    StartQuorumRecovery,
    CreateRecoverySeed,
    FinishQuorumRecovery,
    FailQuorumRecovery,
]
