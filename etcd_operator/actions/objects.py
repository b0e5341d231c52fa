"""Actions on Kubernetes objects: services, the serving label, the disruption budget, member pods and volumes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from etcd_operator import reasons
from etcd_operator.actions.base import InitialCluster, _Action


@dataclass(frozen=True)
class CreateServices(_Action):
    """Create the missing ones of `<cluster>` (headless, peers) and `<cluster>-client`."""

    names: tuple[str, ...]

    KIND: ClassVar[str] = "services"
    event_reason: ClassVar[str | None] = reasons.SERVICES_CREATED

    def describe(self) -> str:
        return f"create services {', '.join(self.names)}"


@dataclass(frozen=True)
class PublishNotReadyAddresses(_Action):
    """Set `publishNotReadyAddresses: true` on the peer service `<cluster>`, which a CoreOS-made
    cluster has without (it relied on an annotation Kubernetes no longer reads): without it a
    member that is not ready yet, a joining learner, has no DNS name and cannot be reached."""

    service_name: str

    KIND: ClassVar[str] = "services"
    event_reason: ClassVar[str | None] = reasons.SERVICE_UPDATED

    def describe(self) -> str:
        return f"set publishNotReadyAddresses on service {self.service_name}, so members resolve before they are ready"


@dataclass(frozen=True)
class UpdateClientSelector(_Action):
    """Make the client service select only member pods labelled serving (a CoreOS-made client
    service, or one made before draining existed); every live member pod is labelled first."""

    service_name: str

    KIND: ClassVar[str] = "services"
    event_reason: ClassVar[str | None] = reasons.SERVICE_UPDATED

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
        return reasons.MEMBER_SERVING if self.serving else reasons.MEMBER_DRAINING

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
        return reasons.DISRUPTION_BUDGET_CREATED if self.create else reasons.DISRUPTION_BUDGET_UPDATED

    def describe(self) -> str:
        verb = "create" if self.create else "update"
        return f"{verb} PodDisruptionBudget {self.name} with minAvailable {self.min_available}: {self.reason}"


@dataclass(frozen=True)
class _SeedMemberAction(_Action):
    """A (PVC and) pod of a member that starts a cluster alone: its initial cluster is itself."""

    member_name: str
    peer_url: str

    KIND: ClassVar[str] = "seed"
    event_reason: ClassVar[str | None] = reasons.SEED_MEMBER_CREATED

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
    event_reason: ClassVar[str | None] = reasons.RESTORED_MEMBERS_CREATED

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
    # A move to or off TLS (tls/transition.py `restart_bridge`): True, a bridge pod, for a member
    # whose peer URL is still http in step 2 to TLS; False, a TLS pod, for one whose peer URL is
    # still https in step 1 off TLS; None: the pod the step builds.
    tls_bridge: bool | None = None

    KIND: ClassVar[str] = "recreate"
    event_reason: ClassVar[str | None] = reasons.MEMBER_POD_CREATED

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
    event_reason: ClassVar[str | None] = reasons.POD_DELETED

    def describe(self) -> str:
        return f"delete pod {self.pod_name}: {self.reason}"


@dataclass(frozen=True)
class ClearLeavingMark(_Action):
    """Remove StopMember's leaving mark from the PVC of a member whose pod runs and is not being
    deleted: the stop never happened (the operator stopped between the mark and the delete), or the
    scale-down was reverted. Left there, the mark would have the member taken for dead the next
    time its pod goes, instead of restarted on its data."""

    pvc_name: str
    member_name: str

    KIND: ClassVar[str] = "clear-leaving-mark"
    event_reason: ClassVar[str | None] = reasons.LEAVING_MARK_CLEARED

    def describe(self) -> str:
        return (f"clear the leaving mark of PVC {self.pvc_name}: the pod of member {self.member_name} runs "
                f"and it is not being removed")


@dataclass(frozen=True)
class DeletePVC(_Action):
    """Delete the PVC of a member that is no longer in the cluster."""

    pvc_name: str
    reason: str
    pvc_uid: str = ""

    KIND: ClassVar[str] = "delete-pvc"
    event_reason: ClassVar[str | None] = reasons.PVC_DELETED

    def describe(self) -> str:
        return f"delete PVC {self.pvc_name}: {self.reason}"
