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
    result: dict[str, Any] = {"sha256": facts.sha256, "size": facts.size, "revision": facts.revision,
                              "totalKeys": facts.total_keys, "hash": facts.hash}
    if facts.etag:
        result["etag"] = facts.etag
    if facts.version_id:
        result["versionId"] = facts.version_id
    return result


TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def timestamp(now: datetime) -> str:
    return now.strftime(TIMESTAMP_FORMAT)


def next_status(current: Mapping[str, Any], *, generation: int, now: datetime, phase: str, message: str,
                reason: str = "", succeeded: bool = False, updates: Mapping[str, Any] | None = None,
                conditions: Mapping[str, tuple[str, str, str]] = {}) -> dict[str, Any]:
    """`current` with the fields of this pass (`updates`; None removes one); `conditions` maps
    type -> (status, reason, message); a condition keeps its lastTransitionTime while its status does not change."""
    status = dict(current)
    status.update(updates or {})
    for key in [key for key, value in status.items() if value is None]:
        del status[key]  # an update of None removes the field
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


# How long S3 may keep failing (unreachable, 5xx, throttled) while a snapshot is verified or
# re-checked before a delete, before the restore fails (S3Unreachable; nothing deleted). Until then
# the restore retries, with the last error and since when in status.lastError.
S3_UNREACHABLE_TIMEOUT_SECONDS = 600.0


def track_error(last_error: Any, message: str, now: datetime) -> dict[str, Any]:
    """status.lastError after another failure: the newest message, `since` kept from the first
    failure of the run (a success in between removes lastError), `seen` now."""
    since = last_error.get("since") if isinstance(last_error, Mapping) else None
    return {"message": message, "since": since if isinstance(since, str) else timestamp(now), "seen": timestamp(now)}


def failing_seconds(last_error: Mapping[str, Any], now: datetime) -> float:
    """How long the errors of `last_error` have been going on (0 when its `since` is unreadable)."""
    try:
        since = datetime.strptime(str(last_error.get("since")), TIMESTAMP_FORMAT).replace(tzinfo=now.tzinfo)
    except ValueError:
        return 0.0
    return max(0.0, (now - since).total_seconds())
