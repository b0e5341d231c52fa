"""Quorum-loss recovery actions (etcd_operator/planning/recovery.py plans these)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from etcd_common.api.restore_source import RestoreSource
from etcd_operator import reasons
from etcd_operator.actions.base import _Action
from etcd_operator.actions.objects import _SeedMemberAction


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
        return reasons.QUORUM_RECOVERY_FROM_BACKUP if self.backup else reasons.QUORUM_RECOVERY_STARTED

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
    event_reason: ClassVar[str | None] = reasons.QUORUM_RECOVERED
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
    event_reason: ClassVar[str | None] = reasons.QUORUM_RECOVERY_FAILED
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return f"quorum-loss recovery from {self.survivor} failed: {self.reason}; {self.survivor} left as it was"


@dataclass(frozen=True)
class RefuseQuorumRecovery(_Action):
    """A quorum-loss recovery asked for that the operator will not do (the annotation on a cluster
    that has quorum, or naming members that answer; a survivor behind a backup that is not of its
    incarnation): nothing is changed; status (reason QuorumRecoveryRefused) and one Warning event
    say why and what a person can do."""

    message: str
    reason: str = reasons.QUORUM_RECOVERY_REFUSED  # the status reason (as ReportCertificateProblem's)

    KIND: ClassVar[str] = "quorum-recovery"
    event_reason: ClassVar[str | None] = reasons.QUORUM_RECOVERY_REFUSED
    event_type: ClassVar[str] = "Warning"
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return f"quorum-loss recovery refused, nothing changed: {self.message}"
