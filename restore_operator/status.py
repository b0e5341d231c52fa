"""The `.status` of an EtcdRestore: CoreOS's `succeeded` and `reason`, plus phase, message,
conditions, observedGeneration, the verified snapshot, the restored cluster and timestamps; the
phases and condition types it uses."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from restore_operator.observed import SnapshotFacts

PHASE_VERIFYING = "Verifying"
PHASE_REPLACING = "Replacing"
PHASE_RESTORING = "Restoring"
PHASE_COMPLETED = "Completed"
PHASE_FAILED = "Failed"
TERMINAL_PHASES = (PHASE_COMPLETED, PHASE_FAILED)

CONDITION_SNAPSHOT_VERIFIED = "SnapshotVerified"
CONDITION_CLUSTER_RESTORED = "ClusterRestored"


def snapshot_to_api(facts: SnapshotFacts) -> dict[str, Any]:
    return {"sha256": facts.sha256, "size": facts.size, "revision": facts.revision,
            "totalKeys": facts.total_keys, "hash": facts.hash}


def timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def next_status(current: Mapping[str, Any], *, generation: int, now: datetime, phase: str, message: str,
                reason: str = "", succeeded: bool = False, updates: Mapping[str, Any] | None = None,
                conditions: Mapping[str, tuple[str, str, str]] = {}) -> dict[str, Any]:
    """`current` with the fields of this pass; `conditions` maps type -> (status, reason,
    message); a condition keeps its lastTransitionTime while its status does not change."""
    status = dict(current)
    status.update(updates or {})
    status["phase"] = phase
    status["message"] = message
    status["reason"] = reason
    if not reason:
        del status["reason"]  # omitted when empty, as CoreOS did
    status["succeeded"] = succeeded
    status["observedGeneration"] = generation
    status.setdefault("startTime", timestamp(now))
    if phase in TERMINAL_PHASES:
        status.setdefault("completionTime", timestamp(now))
    merged = {str(c.get("type")): dict(c) for c in current.get("conditions") or [] if isinstance(c, Mapping)}
    for kind, (state, why, text) in conditions.items():
        old = merged.get(kind)
        changed = old is None or old.get("status") != state
        merged[kind] = {"type": kind, "status": state, "reason": why, "message": text,
                        "lastTransitionTime": timestamp(now) if changed or old is None
                        else old.get("lastTransitionTime", timestamp(now))}
    status["conditions"] = [merged[k] for k in sorted(merged)]
    return status
