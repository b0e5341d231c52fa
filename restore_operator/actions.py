"""The actions `planning.plan_next_action` chooses from; `acting.ActionExecutor` carries them
out. `phase` is the status phase an action works in."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from operator_runtime import actions as runtime
from restore_operator import reasons
from restore_operator.status import (
    PHASE_COMPLETED,
    PHASE_FAILED,
    PHASE_REPLACING,
    PHASE_RESTORING,
    PHASE_STAGING,
    PHASE_VERIFYING,
)


@dataclass(frozen=True)
class Action(runtime.Action):
    """The runtime's Action with the status phase it works in ("": none of its own)."""

    phase: ClassVar[str] = ""


@dataclass(frozen=True)
class Done(Action):
    has_effect: ClassVar[bool] = False


@dataclass(frozen=True)
class Fail(Action):
    reason: str
    message: str
    phase: ClassVar[str] = PHASE_FAILED

    def describe(self) -> str:
        return f"restore failed ({self.reason}): {self.message}"


@dataclass(frozen=True)
class VerifySnapshot(Action):
    phase: ClassVar[str] = PHASE_VERIFYING

    def describe(self) -> str:
        return "fetch and verify the snapshot before touching any cluster"


@dataclass(frozen=True)
class Stage(Action):
    """Create the staging claims `claims` (one per member of the restored cluster) and a staging
    pod for each, of its name (`staging.py`), those absent, for the EtcdCluster spec
    `cluster_spec` (its etcd image, version, pod security, placement and storage class)."""

    cluster_spec: Mapping[str, Any]
    claims: tuple[str, ...]
    phase: ClassVar[str] = PHASE_STAGING

    def describe(self) -> str:
        return (f"stage the verified snapshot on {len(self.claims)} claim(s), a pod for each with the seed's own "
                "fetch and check steps")


@dataclass(frozen=True)
class RemoveStaging(Action):
    """Delete the staging pods `pods`, then the staging claims `claims` (the restore finished, or
    failed)."""

    pods: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()

    def describe(self) -> str:
        what = [f"{kind} {', '.join(names)}" for kind, names in (("pod(s)", self.pods), ("claim(s)", self.claims))
                if names]
        return f"remove the staging {' and '.join(what)}"


@dataclass(frozen=True)
class ReleaseRestore(Action):
    """Remove the restore's finalizer (RESTORE_FINALIZER): it finished, or it is deleted before it
    deleted anything, so nothing is left for it to finish."""

    why: str

    def describe(self) -> str:
        return f"let the EtcdRestore go: {self.why}"


@dataclass(frozen=True)
class ReplaceCluster(Action):
    cluster_uid: str
    cluster_spec: Mapping[str, Any]
    phase: ClassVar[str] = PHASE_REPLACING

    def describe(self) -> str:
        return f"delete the existing EtcdCluster (uid {self.cluster_uid}) to recreate it from the snapshot"


@dataclass(frozen=True)
class CreateCluster(Action):
    cluster_spec: Mapping[str, Any]
    # What the seed bumps the restored revisions by (0 when the version's tool cannot, see `warning`).
    bump_revision: int = 0
    warning: str = ""
    # The claim the snapshot is staged on (spec.restore.stagedClaim), and, for a cluster of two or
    # more members, one claim per member, the first being `staged_claim` (spec.restore.stagedClaims).
    staged_claim: str = ""
    staged_claims: tuple[str, ...] = ()
    phase: ClassVar[str] = PHASE_RESTORING

    def describe(self) -> str:
        return f"create the EtcdCluster (size {self.cluster_spec.get('size')}) seeded from the snapshot"


@dataclass(frozen=True)
class Wait(Action):
    message: str
    phase_name: str
    # Why, in a word (the ClusterRestored condition's reason while Restoring), e.g. the pod's own
    # reason a member does not start with.
    reason: str = reasons.WAITING
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return self.message


@dataclass(frozen=True)
class Succeed(Action):
    served_revision: int
    phase: ClassVar[str] = PHASE_COMPLETED

    def describe(self) -> str:
        return f"the restored cluster is Running with all members and serves revision {self.served_revision}"
