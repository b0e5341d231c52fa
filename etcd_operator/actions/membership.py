"""Actions on etcd's membership: add, promote, remove, move leadership, upgrade, stop."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from etcd_operator import reasons
from etcd_operator.actions.base import InitialCluster, Purpose, _Action


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

    event_reason: ClassVar[str | None] = reasons.MEMBER_ADDED

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
    event_reason: ClassVar[str | None] = reasons.MEMBER_PROMOTED

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

    event_reason: ClassVar[str | None] = reasons.MEMBER_REMOVED

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
    event_reason: ClassVar[str | None] = reasons.LEADER_MOVED

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
    # On its volume, moving to or off TLS (tls/transition.py): the peer URL `member update` gives
    # the member right before its pod is deleted ("": unchanged).
    member_id: int = 0
    peer_url: str = ""

    KIND: ClassVar[str] = "upgrade"
    event_reason: ClassVar[str | None] = reasons.MEMBER_UPGRADING

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
    short only for that long. Should the wait run out, a later pass removes it (`removal.dead_members`). On a PVC
    cluster the claim is marked leaving first, so the pod is not recreated on it."""

    member_name: str
    member_id: int
    pod_name: str
    reason: str
    pod_uid: str = ""
    pvc_name: str = ""

    KIND: ClassVar[str] = "stop"
    event_reason: ClassVar[str | None] = reasons.MEMBER_REMOVED  # the same action removes it

    def describe(self) -> str:
        return f"stop member {self.member_name} ({self.member_id:x}), then remove it: {self.reason}"
