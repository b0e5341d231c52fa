"""The decision: `plan_next_step(observed) -> Step`, a pure function of one pass's observation.

Rules, first match wins (the order is the safety argument: nothing touches the cluster before the
snapshot is verified, and a cluster carrying this restore's uid is never deleted):

 1. A finished restore (Completed, or Failed for this generation) -> Done. A restore runs once.
 2. Spec unreadable, or a storage type other than S3 -> Fail (nothing touched).
 3. No verified snapshot recorded -> VerifySnapshot (download, sha256, etcd's integrity checks);
    its failure fails the restore and leaves any cluster untouched.
 4. The EtcdCluster exists and carries this restore's uid (we created it):
    - being deleted (by someone else) -> Wait;
    - Running with spec.size ready members serving at least the snapshot's revision -> Succeed;
    - otherwise -> Wait (the etcd operator is seeding and growing it).
 5. The EtcdCluster exists and is not ours -> ReplaceCluster: its spec is recorded in status
    first (so a restart after the delete can still recreate it), then it is deleted (foreground,
    uid precondition). Destructive by design, as in CoreOS; it happens only after rule 3.
    Already being deleted, or another EtcdRestore still restoring it -> Wait (two restores of
    one cluster never replace each other's cluster in turn).
 6. The cluster this restore created (uid recorded) is gone or replaced by another object ->
    Fail: someone deleted it before the restore completed; restoring again would be a second
    restore nobody asked for.
 7. No EtcdCluster, but pods of that name still exist -> Wait (a new seed must not meet them).
 8. No EtcdCluster -> CreateCluster from the recorded spec (the replaced cluster's), else the
    restore's `clusterSpec` template, else the defaults; with `spec.restore` and this restore's uid.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from etcd_common.api.etcd_restore import EtcdRestore
from etcd_common.api.storage_locations import STORAGE_TYPE_S3

PHASE_VERIFYING = "Verifying"
PHASE_REPLACING = "Replacing"
PHASE_RESTORING = "Restoring"
PHASE_COMPLETED = "Completed"
PHASE_FAILED = "Failed"
TERMINAL_PHASES = (PHASE_COMPLETED, PHASE_FAILED)
DEFAULT_CLUSTER_SIZE = 3


@dataclass(frozen=True)
class SnapshotFacts:
    """What verification found out about the snapshot (recorded in status.snapshot)."""

    sha256: str
    size: int
    revision: int
    total_keys: int = 0
    hash: int = 0


@dataclass(frozen=True)
class Recorded:
    """What earlier passes recorded in the restore's status."""

    phase: str = ""
    observed_generation: int = 0
    snapshot: SnapshotFacts | None = None
    # The spec of the replaced EtcdCluster, captured before it was deleted.
    cluster_spec: Mapping[str, Any] | None = None
    # uid of the EtcdCluster this restore created ("" until known).
    restored_cluster_uid: str = ""


@dataclass(frozen=True)
class ObservedCluster:
    """The EtcdCluster named by the restore, as found."""

    uid: str
    restore_uid: str  # the restore annotation's value, "" when absent
    deleting: bool
    spec: Mapping[str, Any]
    phase: str = ""
    ready: int = 0
    members: int = 0

    @property
    def size(self) -> int:
        size = self.spec.get("size")
        return size if isinstance(size, int) else 0


@dataclass(frozen=True)
class ObservedRestore:
    restore: EtcdRestore
    recorded: Recorded = field(default_factory=Recorded)
    cluster: ObservedCluster | None = None
    # Pods labelled with the cluster's name (left over from a deleted cluster).
    cluster_pods: int = 0
    # The revision the cluster's client service serves; observed only once it could be done.
    served_revision: int | None = None
    served_revision_error: str = ""
    # Another EtcdRestore, not finished, whose uid the existing cluster carries.
    other_restore_in_progress: str = ""
    # Why the restored cluster's seed pod does not get going (a failing init container), if so.
    seed_problem: str = ""

    def cluster_is_ours(self) -> bool:
        return self.cluster is not None and bool(self.restore.uid) and self.cluster.restore_uid == self.restore.uid

    def cluster_serves_all_members(self) -> bool:
        cluster = self.cluster
        return (cluster is not None and cluster.phase == "Running" and cluster.size > 0
                and cluster.ready == cluster.size and cluster.members == cluster.size)


# ---------------------------------------------------------------------------------------------
# Steps


@dataclass(frozen=True)
class Step:
    has_effect: ClassVar[bool] = True
    phase: ClassVar[str] = ""

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Done(Step):
    has_effect: ClassVar[bool] = False


@dataclass(frozen=True)
class Fail(Step):
    reason: str
    message: str
    phase: ClassVar[str] = PHASE_FAILED

    def describe(self) -> str:
        return f"restore failed ({self.reason}): {self.message}"


@dataclass(frozen=True)
class VerifySnapshot(Step):
    phase: ClassVar[str] = PHASE_VERIFYING

    def describe(self) -> str:
        return "fetch and verify the snapshot before touching any cluster"


@dataclass(frozen=True)
class ReplaceCluster(Step):
    cluster_uid: str
    cluster_spec: Mapping[str, Any]
    phase: ClassVar[str] = PHASE_REPLACING

    def describe(self) -> str:
        return f"delete the existing EtcdCluster (uid {self.cluster_uid}) to recreate it from the snapshot"


@dataclass(frozen=True)
class CreateCluster(Step):
    cluster_spec: Mapping[str, Any]
    phase: ClassVar[str] = PHASE_RESTORING

    def describe(self) -> str:
        return f"create the EtcdCluster (size {self.cluster_spec.get('size')}) seeded from the snapshot"


@dataclass(frozen=True)
class Wait(Step):
    message: str
    phase_name: str
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return self.message


@dataclass(frozen=True)
class Succeed(Step):
    served_revision: int
    phase: ClassVar[str] = PHASE_COMPLETED

    def describe(self) -> str:
        return f"the restored cluster is Running with all members and serves revision {self.served_revision}"


REASON_INVALID_SPEC = "InvalidSpec"
REASON_UNSUPPORTED_STORAGE = "UnsupportedStorageType"
REASON_CLUSTER_DELETED = "RestoredClusterDeleted"


def plan_next_step(observed: ObservedRestore) -> Step:
    restore = observed.restore
    recorded = observed.recorded
    if recorded.phase == PHASE_COMPLETED or (
            recorded.phase == PHASE_FAILED and recorded.observed_generation == restore.generation):
        return Done()
    if restore.spec is None:
        return Fail(REASON_INVALID_SPEC, restore.spec_error or "spec is invalid")
    if restore.spec.storage_type != STORAGE_TYPE_S3 or restore.spec.storage.s3 is None:
        return Fail(REASON_UNSUPPORTED_STORAGE,
                    f"spec.backupStorageType {restore.spec.storage_type} is not supported; only S3 is")
    if recorded.snapshot is None:
        return VerifySnapshot()
    cluster = observed.cluster
    if cluster is not None and observed.cluster_is_ours():
        if cluster.deleting:
            return Wait("the restored EtcdCluster is being deleted", PHASE_RESTORING)
        if not observed.cluster_serves_all_members():
            problem = f"; {observed.seed_problem}" if observed.seed_problem else ""
            return Wait(f"waiting for the restored cluster: phase {cluster.phase or '(none)'}, "
                        f"{cluster.ready}/{cluster.size} members ready{problem}", PHASE_RESTORING)
        served = observed.served_revision
        if served is None or served < recorded.snapshot.revision:
            detail = observed.served_revision_error or f"serves revision {served}"
            return Wait(f"the restored cluster is Running but does not serve the snapshot's revision "
                        f"{recorded.snapshot.revision} yet ({detail})", PHASE_RESTORING)
        return Succeed(served)
    created = recorded.restored_cluster_uid
    if created and (cluster is None or cluster.uid != created):
        return Fail(REASON_CLUSTER_DELETED,
                    f"the EtcdCluster this restore created (uid {created}) was deleted before the restore "
                    "completed; not restoring again (create a new EtcdRestore to restore once more)")
    if cluster is not None:
        if cluster.deleting:
            return Wait("the existing EtcdCluster is being deleted", PHASE_REPLACING)
        if observed.other_restore_in_progress:
            return Wait(f"EtcdRestore {observed.other_restore_in_progress} is restoring this cluster; "
                        "waiting for it to finish before replacing it", PHASE_REPLACING)
        return ReplaceCluster(cluster.uid, recorded.cluster_spec or cluster.spec)
    if observed.cluster_pods:
        return Wait(f"{observed.cluster_pods} pod(s) of the deleted cluster still exist", PHASE_REPLACING)
    return CreateCluster(new_cluster_spec(observed))


def new_cluster_spec(observed: ObservedRestore) -> dict[str, Any]:
    """The spec to create: the replaced cluster's, else the template, else the defaults (without
    any earlier `restore`, which the executor sets)."""
    spec = observed.restore.spec
    base = observed.recorded.cluster_spec or (spec.cluster_spec if spec is not None else None) or {}
    result = {key: value for key, value in base.items() if key != "restore"}
    result.setdefault("size", DEFAULT_CLUSTER_SIZE)
    return result
