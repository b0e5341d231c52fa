"""The `.status` of an EtcdRestore: CoreOS's `succeeded` and `reason`, plus phase, message,
conditions, observedGeneration, the verified snapshot, the restored cluster and timestamps; the
phases and condition types it uses, and each phase's time bound.

Time bounds (measured from status.phaseStartTime, written when a phase is entered, so a restarted
operator computes the same; past one, the restore fails with RestoreTimedOut and the last reason
seen, and deletes or changes nothing):

- Verifying: S3_UNREACHABLE_TIMEOUT_SECONDS of S3 failing; VERIFYING_TIMEOUT_SECONDS in all (the
  check itself failing, e.g. etcdutl; a download in progress is not cut short).
- Staging: `staging_timeout_seconds(size)`, STAGING_BASE_TIMEOUT_SECONDS plus the verified object's
  size at RESTORING_SLOWEST_BYTES_PER_SECOND (each staging pod is scheduled, pulls its images,
  downloads the object, checks it; the pods of a restore do so in parallel); each staging pod
  carries it as activeDeadlineSeconds too.
- Replacing: REPLACING_TIMEOUT_SECONDS (the old cluster's deletion, its pods going away, another
  restore of the same cluster finishing).
- Restoring: `restoring_timeout_seconds(size)`, RESTORING_BASE_TIMEOUT_SECONDS plus the verified
  snapshot's size at RESTORING_SLOWEST_BYTES_PER_SECOND (the seed copies it from the staging
  claim, restores it, etcd starts, the members join one at a time).
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from operator_runtime.kube_time import as_utc, condition, format_timestamp, parse_timestamp
from restore_operator.observed import SnapshotFacts

PHASE_VERIFYING = "Verifying"
PHASE_STAGING = "Staging"
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
    if facts.snapshot_size:
        result["snapshotSize"] = facts.snapshot_size
    if facts.etag:
        result["etag"] = facts.etag
    if facts.version_id:
        result["versionId"] = facts.version_id
    if facts.compression:
        result["compression"] = facts.compression
    if facts.key_id:
        result["encryptionKeyId"] = facts.key_id
    return result


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
    status.setdefault("startTime", format_timestamp(now))
    if current.get("phase") != phase or not isinstance(status.get("phaseStartTime"), str):
        status["phaseStartTime"] = format_timestamp(now)  # when this phase began: what its time bound counts from
    if phase in TERMINAL_PHASES:
        status.setdefault("completionTime", format_timestamp(now))
    merged = {str(c.get("type")): dict(c) for c in current.get("conditions") or [] if isinstance(c, Mapping)}
    for kind, (state, why, text) in conditions.items():
        merged[kind] = condition(kind, state, why, text, now=now, previous=merged.get(kind))
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
    seen = format_timestamp(now)
    return {"message": message, "since": since if isinstance(since, str) else seen, "seen": seen}


def failing_seconds(last_error: Mapping[str, Any], now: datetime) -> float:
    """How long the errors of `last_error` have been going on (0 when its `since` is unreadable)."""
    since = parse_timestamp(last_error.get("since"))
    if since is None:
        return 0.0
    return max(0.0, (as_utc(now) - since).total_seconds())


# Time bounds of the phases (see the module docstring).
VERIFYING_TIMEOUT_SECONDS = 1800.0
REPLACING_TIMEOUT_SECONDS = 900.0
STAGING_BASE_TIMEOUT_SECONDS = 300.0
RESTORING_BASE_TIMEOUT_SECONDS = 900.0
# A slow link's rate for the seed's download: a 8 GiB snapshot (etcd's largest quota) adds 68 min.
RESTORING_SLOWEST_BYTES_PER_SECOND = 2 * 1024 * 1024


def restoring_timeout_seconds(snapshot_size: int) -> float:
    """The Restoring bound for a snapshot of `snapshot_size` bytes (as verification recorded it)."""
    return RESTORING_BASE_TIMEOUT_SECONDS + max(0, snapshot_size) / RESTORING_SLOWEST_BYTES_PER_SECOND


def staging_timeout_seconds(snapshot_size: int) -> float:
    """The Staging bound for an object of `snapshot_size` bytes (as verification recorded it)."""
    return STAGING_BASE_TIMEOUT_SECONDS + max(0, snapshot_size) / RESTORING_SLOWEST_BYTES_PER_SECOND


def phase_timeout_seconds(phase: str, snapshot_size: int) -> float | None:
    """The bound of `phase` (None: a phase without one, a terminal phase)."""
    if phase == PHASE_VERIFYING:
        return VERIFYING_TIMEOUT_SECONDS
    if phase == PHASE_STAGING:
        return staging_timeout_seconds(snapshot_size)
    if phase == PHASE_REPLACING:
        return REPLACING_TIMEOUT_SECONDS
    if phase == PHASE_RESTORING:
        return restoring_timeout_seconds(snapshot_size)
    return None
