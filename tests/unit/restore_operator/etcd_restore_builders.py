"""EtcdRestore objects and what the restore operator observes around them (the target cluster, the
staging claims and pods, what status recorded), as the restore operator's tests build them."""
from __future__ import annotations

from typing import Any

from etcd_common.api.etcd_restore import EtcdRestore, parse_etcd_restore
from restore_operator.observed import RecordedRestore, SnapshotFacts, TargetCluster
from restore_operator.staging import StagingClaim, StagingPod, staging_claim_names

UID = "restore-uid-1"
FACTS = SnapshotFacts(sha256="a" * 64, size=4096, revision=42, total_keys=7)


def s3_spec(*, path: str = "bucket/key", aws_secret: str = "aws", template: dict[str, Any] | None = None,
            **fields: Any) -> dict[str, Any]:
    """An EtcdRestore spec restoring cluster "c" from S3 (no awsSecret when `aws_secret` is empty),
    with `template` as its clusterSpec and any other spec fields."""
    s3 = {"path": path, **({"awsSecret": aws_secret} if aws_secret else {})}
    spec: dict[str, Any] = {"etcdCluster": {"name": "c"}, "backupStorageType": "S3", "s3": s3, **fields}
    if template is not None:
        spec["clusterSpec"] = template
    return spec


def raw_restore(spec: dict[str, Any] | None = None, *, generation: int = 1, uid: str = UID) -> dict[str, Any]:
    """EtcdRestore "ns/r" as the API returns it (`s3_spec()` unless `spec` is given)."""
    return {"metadata": {"name": "r", "namespace": "ns", "uid": uid, "generation": generation},
            "spec": spec if spec is not None else s3_spec()}


def restore(spec: dict[str, Any] | None = None, generation: int = 1) -> EtcdRestore:
    """`raw_restore(spec)` parsed."""
    return parse_etcd_restore(raw_restore(spec, generation=generation))


def cluster(*, ours: bool = False, deleting: bool = False, phase: str = "Running", ready: int = 3,
            members: int = 3, size: int = 3) -> TargetCluster:
    return TargetCluster(uid="cluster-uid", restore_uid=UID if ours else "", deleting=deleting,
                         spec={"size": size, "version": "3.6.16"}, phase=phase, ready=ready, members=members)


STAGED_CLAIM = StagingClaim(owned=True, phase="Bound")
STAGED_POD = StagingPod(phase="Succeeded", owned=True)


def all_claims(claim: StagingClaim | None = STAGED_CLAIM, size: int = 7) -> dict[str, StagingClaim]:
    """`claim` as each staging claim of restore "r" for a cluster of `size` members (the largest by
    default: whatever the cluster's size, all its claims are there)."""
    return {} if claim is None else dict.fromkeys(staging_claim_names("r", size), claim)


def all_pods(pod: StagingPod | None = STAGED_POD, size: int = 7) -> dict[str, StagingPod]:
    """`pod` as each staging pod of restore "r" (named as its claim), as `all_claims`."""
    return {} if pod is None else dict.fromkeys(staging_claim_names("r", size), pod)


REPLACED = RecordedRestore(phase="Replacing", snapshot=FACTS, cluster_spec={"size": 3, "version": "3.6.16"})
