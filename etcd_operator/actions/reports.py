"""Actions without an effect: the supervisor only writes status (and maybe an event)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from etcd_operator import reasons
from etcd_operator.actions.base import _Action


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
    event_reason: ClassVar[str | None] = reasons.INVALID_SPEC
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
    event_reason: ClassVar[str | None] = reasons.QUORUM_LOST
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
    event_reason: ClassVar[str | None] = reasons.MEMBERS_LOST
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
