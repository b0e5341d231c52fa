"""Trial restores (spec.trialRestore), the pure part: when the next trial is due, and whether
what a trial restore found matches what was recorded when the backup was taken (status.lastBackup,
read by `observing.py`). The effects are `trial_restore.py`'s.

The backup verified is the newest one this EtcdBackup took (status.lastBackup.key): retention
never deletes it, and its record holds what the snapshot must contain. Compared:
 - the decoded snapshot's SHA-256 with lastBackup.sha256 (always recorded);
 - the snapshot's revision (etcdutl) with lastBackup.snapshotRevision, and the revision the
   throwaway etcd serves with it (older records: at least lastBackup.etcdRevision);
 - the keys at that revision with lastBackup.keyCount (when recorded);
 - the keyspace hash at that revision (`endpoint hashkv`) with lastBackup.hashKV, when the record
   has one taken at the same compact revision (etcd's hash covers the compaction too: a member
   that compacted between its snapshot and the hash cannot be compared that way).
"""
from __future__ import annotations

from datetime import datetime, timedelta

from backup_operator.actions import RestoreOnTrial, Wait
from backup_operator.observed import RecordedTrial, TrialFacts
from etcd_common.api.etcd_backup import LastBackup, TrialRestorePolicy


def next_trial_restore(policy: TrialRestorePolicy | None, last_backup: LastBackup | None, trial: RecordedTrial,
                       now: datetime) -> RestoreOnTrial | Wait | None:
    """The next trial restore: due now, due later, or None (not asked for, or no backup yet).
    The first comes as soon as there is a backup, the next `intervalInSecond` after the last
    attempt (a failed one too: the alert, not a tight retry loop, is what tells people)."""
    if policy is None or last_backup is None:
        return None
    if trial.last_attempt_time is None:
        return RestoreOnTrial("first trial restore", now)
    due = trial.last_attempt_time + timedelta(seconds=policy.interval_seconds)
    seconds = (due - now).total_seconds()
    if seconds <= 0:
        return RestoreOnTrial("next trial restore", due)
    return Wait(seconds, "next trial restore")


def mismatches(expected: LastBackup, found: TrialFacts) -> tuple[list[str], bool]:
    """What differs between the record and the trial (empty: verified), and whether the keyspace
    hash was compared."""
    problems: list[str] = []
    if expected.sha256 and found.sha256 != expected.sha256:
        problems.append(f"snapshot sha256 {found.sha256}, recorded {expected.sha256}")
    fingerprint = expected.fingerprint
    if fingerprint is not None and found.snapshot_revision != fingerprint.revision:
        problems.append(f"snapshot revision {found.snapshot_revision}, recorded {fingerprint.revision}")
    elif found.snapshot_revision < expected.etcd_revision:
        problems.append(f"snapshot revision {found.snapshot_revision} is older than the revision "
                        f"{expected.etcd_revision} the member had before the snapshot")
    if found.served_revision != found.snapshot_revision:
        problems.append(f"the restored etcd serves revision {found.served_revision}, "
                        f"the snapshot has {found.snapshot_revision}")
    if fingerprint is not None and fingerprint.key_count is not None and found.key_count != fingerprint.key_count:
        problems.append(f"{found.key_count} keys at revision {found.snapshot_revision}, recorded {fingerprint.key_count}")
    hash_compared = (fingerprint is not None and fingerprint.hash_kv is not None
                     and fingerprint.compact_revision == found.compact_revision)
    if hash_compared and fingerprint is not None and found.hash_kv != fingerprint.hash_kv:
        problems.append(f"keyspace hash {found.hash_kv} at revision {found.snapshot_revision}, "
                        f"recorded {fingerprint.hash_kv}")
    return problems, hash_compared
