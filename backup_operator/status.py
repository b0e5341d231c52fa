"""The EtcdBackup `.status` a success or a failure writes (read back by `observing.py` for the
schedule). Pure.

CoreOS's fields stay (`succeeded`, `Reason` with its capital R, `etcdVersion`, `etcdRevision`,
`lastSuccessDate`); a failure sets `succeeded: false`, `Reason`, `lastResult` and the `Succeeded`
condition, so it shows even after earlier successes (CoreOS kept the old success fields). The
last success's fields (`lastSuccessDate`, `lastBackup`, `etcdRevision`, `etcdVersion`) keep
describing that success.
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from backup_operator import reasons
from backup_operator.observed import BackupResult, RecordedBackup, TrialFacts
from etcd_common.api.etcd_backup import LastBackup, SnapshotFingerprint
from operator_runtime.kube_time import condition, find_condition, format_timestamp

CONDITION_SUCCEEDED: Final = "Succeeded"
RESULT_SUCCEEDED: Final = "Succeeded"
# True while a due backup waits for one of the operator's --max-concurrent-backups slots (slots.py);
# removed by the attempt's own status.
CONDITION_QUEUED: Final = "Queued"
# True while backupIntervalInSecond is below the operator's --min-backup-interval-seconds (raised to it).
CONDITION_INTERVAL_RAISED: Final = "IntervalRaised"
# spec.trialRestore: True when the last trial restore verified the newest backup, False with the reason.
CONDITION_VERIFIED: Final = "Verified"


def _condition(current: Mapping[str, Any], status: str, reason: str, message: str, now: datetime) -> dict[str, Any]:
    """The Succeeded condition; lastTransitionTime moves only when its status flips."""
    return condition(CONDITION_SUCCEEDED, status, reason, message[:1024], now=now,
                     previous=find_condition(current, CONDITION_SUCCEEDED))


def _other_conditions(current: Mapping[str, Any], *types: str) -> list[dict[str, Any]]:
    """The conditions of `current` but the Succeeded one, Queued and `types`."""
    dropped = {CONDITION_SUCCEEDED, CONDITION_QUEUED, *types}
    return [dict(c) for c in current.get("conditions") or [] if isinstance(c, Mapping) and c.get("type") not in dropped]


def has_condition(current: Mapping[str, Any], type_: str, message: str | None = None) -> bool:
    """Whether `current` has a True `type_` condition (with `message`, if given)."""
    return any(isinstance(c, Mapping) and c.get("type") == type_ and c.get("status") == "True"
               and (message is None or c.get("message") == message) for c in current.get("conditions") or [])


def queued_status(current: Mapping[str, Any], message: str, now: datetime) -> dict[str, Any]:
    """The status of a due backup waiting for a slot: only a Queued condition added (what the
    schedule reads, lastAttemptTime and the failures, stays: waiting is not an attempt)."""
    queued = condition(CONDITION_QUEUED, "True", reasons.WAITING_FOR_SLOT, message[:1024], now=now)
    return {"conditions": [*_succeeded(current), *_other_conditions(current), queued]}


def interval_status(current: Mapping[str, Any], message: str | None, now: datetime) -> dict[str, Any]:
    """The IntervalRaised condition set (`message`) or removed (None)."""
    conditions = [*_succeeded(current), *_other_conditions(current, CONDITION_INTERVAL_RAISED)]
    if message is not None:
        conditions.append(condition(CONDITION_INTERVAL_RAISED, "True", reasons.INTERVAL_BELOW_MINIMUM, message[:1024],
                                    now=now))
    queued = [dict(c) for c in current.get("conditions") or []
              if isinstance(c, Mapping) and c.get("type") == CONDITION_QUEUED]
    return {"conditions": [*conditions, *queued]}


def without_queued(current: Mapping[str, Any]) -> dict[str, Any]:
    """The status's conditions without Queued (a backup that waited and is no longer due)."""
    return {"conditions": [dict(c) for c in current.get("conditions") or []
                           if isinstance(c, Mapping) and c.get("type") != CONDITION_QUEUED]}


def _succeeded(current: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in current.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == CONDITION_SUCCEEDED]


def _kept(current: Mapping[str, Any], *names: str) -> dict[str, Any]:
    return {name: current[name] for name in names if current.get(name) not in (None, "")}


def fingerprint_fields(fingerprint: SnapshotFingerprint) -> dict[str, int]:
    """status.lastBackup's snapshotRevision, keyCount, hashKV and hashKVCompactRevision (those known)."""
    fields = {"snapshotRevision": fingerprint.revision, "keyCount": fingerprint.key_count,
              "hashKV": fingerprint.hash_kv, "hashKVCompactRevision": fingerprint.compact_revision}
    return {name: value for name, value in fields.items() if value is not None}


def success_status(current: Mapping[str, Any], generation: int, result: BackupResult, now: datetime) -> dict[str, Any]:
    """The status after `result`; `current` is the status before."""
    message = f"backup {result.key} ({result.size} bytes, etcd revision {result.etcd_revision}) taken"
    if result.retention_error:
        message += f"; retention failed: {result.retention_error}"
    last_backup: dict[str, Any] = {
        "key": result.key, "size": result.size, "sha256": result.sha256,
        "durationSeconds": round(result.duration_seconds, 3), "time": format_timestamp(result.started),
        "etcdRevision": result.etcd_revision,
    }
    if result.endpoint:
        last_backup["endpoint"] = result.endpoint
    if result.fingerprint is not None:
        last_backup.update(fingerprint_fields(result.fingerprint))
    if result.compression:
        last_backup["compression"] = result.compression
    if result.key_id:
        last_backup["encryptionKeyId"] = result.key_id
    # The incarnation (hex: uint64 IDs do not fit the API's int64): etcd_common/api/etcd_backup.py.
    # The EtcdCluster's UID is known only for a backup by spec.etcdCluster.name.
    if result.etcd_cluster_id:
        last_backup["etcdClusterID"] = f"{result.etcd_cluster_id:x}"
    if result.etcd_cluster_id and result.etcd_cluster_uid:
        last_backup["etcdClusterUID"] = result.etcd_cluster_uid
    status: dict[str, Any] = {
        "succeeded": True,
        "etcdVersion": result.etcd_version,
        "etcdRevision": result.etcd_revision,
        "lastSuccessDate": format_timestamp(result.started),
        "observedGeneration": generation,
        "lastResult": RESULT_SUCCEEDED,
        "lastAttemptTime": format_timestamp(result.started),
        "consecutiveFailures": 0,
        "lastBackup": last_backup,
        "conditions": [_condition(current, "True", reasons.SUCCEEDED, message, now), *_other_conditions(current)],
    }
    if result.retained is not None:
        status["backupsRetained"] = result.retained
    status.update(_kept(current, "trialRestore"))
    return status


def attempt_started_status(current: Mapping[str, Any], generation: int, started: datetime) -> dict[str, Any]:
    """`current` with `attemptStarted` set, written before a backup starts: the attempt's outcome
    removes it; if none ever does (a crash, an eviction), `observing.parse_recorded` reads it as
    a failed attempt."""
    return {**current, "attemptStarted": {"time": format_timestamp(started), "observedGeneration": generation}}


def failure_status(current: Mapping[str, Any], generation: int, recorded: RecordedBackup, reason: str,
                   message: str, attempt_started: datetime, now: datetime) -> dict[str, Any]:
    """The status after a failed attempt (or a spec that cannot be acted on)."""
    same_run = recorded.observed_generation == generation and recorded.consecutive_failures > 0
    failures = recorded.consecutive_failures + 1 if same_run else 1
    first = (recorded.first_attempt_time or attempt_started) if same_run else attempt_started
    status = _kept(current, "etcdVersion", "etcdRevision", "lastSuccessDate", "lastBackup", "backupsRetained",
                   "trialRestore")
    status.update({
        "succeeded": False,
        "Reason": f"{reason}: {message}"[:1024],
        "observedGeneration": generation,
        "lastResult": reason,
        "lastAttemptTime": format_timestamp(attempt_started),
        "firstAttemptTime": format_timestamp(first),
        "consecutiveFailures": failures,
        "conditions": [_condition(current, "False", reason, message, now), *_other_conditions(current)],
    })
    return status


def _verified_condition(current: Mapping[str, Any], status: str, reason: str, message: str,
                        now: datetime) -> dict[str, Any]:
    """The Verified condition; lastTransitionTime moves only when its status flips."""
    return condition(CONDITION_VERIFIED, status, reason, message[:1024], now=now,
                     previous=find_condition(current, CONDITION_VERIFIED))

def _with_verified(current: Mapping[str, Any], verified: dict[str, Any]) -> list[dict[str, Any]]:
    """`current`'s conditions, Verified replaced and Queued dropped (the trial that waited ran)."""
    return [*_succeeded(current), *_other_conditions(current, CONDITION_VERIFIED), verified]


def trial_verified_status(current: Mapping[str, Any], started: datetime, last_backup: LastBackup, facts: TrialFacts,
                          hash_compared: bool, now: datetime) -> dict[str, Any]:
    """The status after a trial restore that verified `last_backup`: only status.trialRestore
    and the Verified condition change."""
    taken = last_backup.taken
    assert taken is not None, "a trial restores only a backup whose time is recorded (parse_last_backup)"
    compared = "revision, keys and keyspace hash" if hash_compared else "revision and keys (keyspace hash not comparable)"
    message = (f"backup {facts.key} (taken {format_timestamp(taken)}) restored into a throwaway etcd in "
               f"{facts.restore_seconds:.1f}s: {compared} as recorded, revision {facts.snapshot_revision}, "
               f"{facts.key_count} keys")
    trial = {
        "lastAttemptTime": format_timestamp(started), "lastResult": reasons.VERIFIED, "message": message[:1024],
        "lastVerifiedTime": format_timestamp(now), "verifiedObject": facts.key,
        "verifiedBackupTime": format_timestamp(taken), "verifiedRevision": facts.snapshot_revision,
        "keyCount": facts.key_count, "hashCompared": hash_compared,
        "restoreSeconds": round(facts.restore_seconds, 3),
    }
    return {**current, "trialRestore": trial,
            "conditions": _with_verified(current, _verified_condition(current, "True", reasons.VERIFIED, message, now))}


def trial_failed_status(current: Mapping[str, Any], started: datetime, key: str, reason: str, message: str,
                        now: datetime) -> dict[str, Any]:
    """The status after a failed trial restore of `key`: the last verification's fields stay."""
    previous = current.get("trialRestore")
    kept = _kept(previous, "lastVerifiedTime", "verifiedObject", "verifiedBackupTime", "verifiedRevision",
                 "keyCount", "hashCompared", "restoreSeconds") if isinstance(previous, Mapping) else {}
    text = f"trial restore of {key} failed: {message}"
    trial = {**kept, "lastAttemptTime": format_timestamp(started), "lastResult": reason, "message": text[:1024]}
    return {**current, "trialRestore": trial,
            "conditions": _with_verified(current, _verified_condition(current, "False", reason, text, now))}
