"""Does a snapshot fit where a seed member restores it (pure)? Checked before a restore deletes
anything (restore_operator/preflight.py) and before a quorum-loss recovery starts
(etcd_operator/planning/recovery.py).

The rule: a seed's data volume holds the snapshot file and the data directory restored from it
(about the snapshot's size again) at the same time, and etcd then preallocates its first WAL
segment (64 MiB) beside them. So it needs 2 x the snapshot + SEED_SPACE_MARGIN_BYTES. For a
compressed or encrypted object the fetch step holds the object and the decoded snapshot at once
(then the restore the snapshot and the data), so the larger of the two sizes counts twice.

The volume: on PVCs, the claim's `resources.requests.storage`; on emptyDir (which this operator
creates without a sizeLimit), the etcd container's `resources.limits.ephemeral-storage`, which
the kubelet enforces on the pod's emptyDir (and logs) together; with neither, no check.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import ClusterSpec
from etcd_common.api.maintenance import format_bytes, parse_quantity_bytes

# etcd's first WAL segment (64 MiB, preallocated) plus room for its member snapshot and the WAL's
# growth while the seed starts.
SEED_SPACE_MARGIN_BYTES: Final = 128 * c.MIB
PVC_STORAGE_FIELD: Final = "spec.pod.persistentVolumeClaimSpec.resources.requests.storage"
EPHEMERAL_STORAGE_FIELD: Final = "spec.pod.resources.limits.ephemeral-storage"


@dataclass(frozen=True)
class SeedVolume:
    """The room a seed member's data volume has: the field that says so, as written, in bytes."""

    field: str
    written: str
    size_bytes: int


def seed_volume(spec: ClusterSpec) -> SeedVolume | None:
    """The seed's data volume size; None when nothing limits it (or the quantity is unreadable:
    the API server judges it)."""
    claim = spec.pod.persistent_volume_claim_spec
    if claim is not None:
        return _volume(PVC_STORAGE_FIELD, _get(claim, "resources", "requests", "storage"))
    if spec.pod.resources is not None:
        return _volume(EPHEMERAL_STORAGE_FIELD, _get(spec.pod.resources, "limits", "ephemeral-storage"))
    return None


def seed_space_needed_bytes(snapshot_bytes: int) -> int:
    """What a seed's volume must hold to restore a snapshot of `snapshot_bytes` (module docstring)."""
    return 2 * max(0, snapshot_bytes) + SEED_SPACE_MARGIN_BYTES


def seed_space_problem(spec: ClusterSpec, snapshot_bytes: int, what: str) -> str | None:
    """Why `what` (a snapshot of `snapshot_bytes`) does not fit the seed's volume; None when it
    fits or nothing limits the volume."""
    volume = seed_volume(spec)
    if volume is None:
        return None
    needed = seed_space_needed_bytes(snapshot_bytes)
    if volume.size_bytes >= needed:
        return None
    return (f"{what} is {snapshot_bytes} bytes; the seed member's volume ({volume.field} {volume.written}, "
            f"{volume.size_bytes} bytes) must hold 2 x the snapshot + {format_bytes(SEED_SPACE_MARGIN_BYTES)} = "
            f"{needed} bytes (the snapshot file and the data restored from it, and etcd's first WAL segment); "
            f"set {volume.field} to at least {_round_up_mib(needed)}")


def _round_up_mib(size: int) -> str:
    return format_bytes(-(-size // c.MIB) * c.MIB)


def _get(raw: Mapping[str, Any], *keys: str) -> Any:
    value: Any = raw
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _volume(field: str, written: Any) -> SeedVolume | None:
    size = parse_quantity_bytes(written)
    return None if written is None or size is None else SeedVolume(field, str(written), size)
