"""What one pass over an EtcdRestore saw: its recorded status, the EtcdCluster it names and what
that cluster serves (`observing.py` gathers it; `planning.py` decides from it). Pure types."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from etcd_common.api.etcd_restore import EtcdRestore
from restore_operator.staging import StagingClaim, StagingPod


@dataclass(frozen=True)
class SnapshotFacts:
    """What verification found out about the snapshot (recorded in status.snapshot)."""

    sha256: str
    size: int
    revision: int
    total_keys: int = 0
    hash: int = 0
    # The S3 object verified: its ETag, and its version id in a versioned bucket ("" when none);
    # the seed fetches that object and no other.
    etag: str = ""
    version_id: str = ""
    # How the object was encoded (etcd_common.storage.codec): "Gzip" or "" (plain), and the id
    # of the key it was encrypted with ("" = not encrypted). sha256 and size are of the decoded
    # snapshot then; etag names the object.
    compression: str = ""
    key_id: str = ""
    # Bytes of the snapshot file itself (decoded: `size` is the object's); 0 when not recorded.
    snapshot_size: int = 0

    @property
    def largest_size(self) -> int:
        """The larger of the object's and the decoded snapshot's size (what a seed's volume holds twice)."""
        return max(self.size, self.snapshot_size)


@dataclass(frozen=True)
class RecordedRestore:
    """What earlier passes recorded in the restore's status."""

    phase: str = ""
    observed_generation: int = 0
    snapshot: SnapshotFacts | None = None
    message: str = ""  # the last status message (what the last pass said)
    # The spec of the replaced EtcdCluster, captured before it was deleted.
    cluster_spec: Mapping[str, Any] | None = None
    # uid of the EtcdCluster this restore created ("" until known).
    restored_cluster_uid: str = ""
    # When the recorded phase began (status.phaseStartTime): what the phase's time bound counts from.
    phase_started: datetime | None = None
    # status.staging: the (first) claim the snapshot is staged on ("" before staging began), and
    # whether its staging pods were all seen Succeeded (recorded before anything is deleted).
    staged_claim: str = ""
    staged: bool = False


@dataclass(frozen=True)
class TargetCluster:
    """The EtcdCluster named by the restore, as found (a summary of it; not the etcd operator's
    `ObservedCluster`, which is one pass's full view of a cluster it runs)."""

    uid: str
    restore_uid: str  # the restore annotation's value, "" when absent
    deleting: bool
    spec: Mapping[str, Any]
    phase: str = ""
    ready: int = 0
    members: int = 0
    # The cluster's MemberStartBlocked condition while True (the etcd operator's words, with the
    # pod's own reason, e.g. CrashLoopBackOff); "" otherwise.
    start_blocked_reason: str = ""
    start_blocked: str = ""

    @property
    def size(self) -> int:
        size = self.spec.get("size")
        return size if isinstance(size, int) else 0


@dataclass(frozen=True)
class ObservedRestore:
    restore: EtcdRestore
    recorded: RecordedRestore = field(default_factory=RecordedRestore)
    cluster: TargetCluster | None = None
    # Pods labelled with the cluster's name (left over from a deleted cluster).
    cluster_pods: int = 0
    # The revision the cluster's client service serves; observed only once it could be done.
    served_revision: int | None = None
    served_revision_error: str = ""
    # Another EtcdRestore, not finished, whose uid the existing cluster carries.
    other_restore_in_progress: str = ""
    # Why the restored cluster's seed pod does not get going (a failing init container), if so.
    seed_problem: str = ""
    # The staging claims and pods (one per claim, of the claim's name) of this restore found, by
    # name (those it expects, and any others labelled with its name; absent: not there, or not
    # looked for).
    staging_claims: Mapping[str, StagingClaim] = field(default_factory=dict)
    staging_pods: Mapping[str, StagingPod] = field(default_factory=dict)
    # When this pass observed (None: unknown; then no phase's time bound is applied).
    now: datetime | None = None

    def phase_seconds(self) -> float | None:
        """How long the recorded phase has lasted, if known."""
        started = self.recorded.phase_started
        if started is None or self.now is None:
            return None
        return max(0.0, (self.now - started).total_seconds())

    def cluster_is_ours(self) -> bool:
        return self.cluster is not None and bool(self.restore.uid) and self.cluster.restore_uid == self.restore.uid

    def cluster_serves_all_members(self) -> bool:
        cluster = self.cluster
        return (cluster is not None and cluster.phase == "Running" and cluster.size > 0
                and cluster.ready == cluster.size and cluster.members == cluster.size)
